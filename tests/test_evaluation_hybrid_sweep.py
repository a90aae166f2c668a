"""tables.hybrid_sweep: Eq. 6's dev curve per (model, seed), one alpha per model from the seed-mean curve, and the
test runs fused at each model's alpha."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taser_lib.data.types import Dataset, Document, Query
from taser_book.analyses.baselines import choose_hybrid_alpha, score_run
from taser_book.tables.hybrid_sweep import DENSE_ALONE, alpha_sweep, best_alphas, fused_runs, seed_curves
from taser_lib.retrieval.hybrid import ALPHAS, fuse


def _qa_set(n=12, seed=0):
    """n questions, each with one answer passage among 6 distractors; dense and BM25 runs that disagree: dense puts
    the answer at rank 1 for even questions and rank 25 for odd ones, BM25 the other way round."""
    rng = np.random.default_rng(seed)
    corpus, queries, dense, sparse = {}, {}, {}, {}
    for i in range(n):
        queries[f"q{i}"] = Query(f"q{i}", f"question {i}?", (f"answer{i}",))
        corpus[f"a{i}"] = Document(f"a{i}", f"this passage holds answer{i} for you")
        for j in range(30):
            corpus[f"x{i}_{j}"] = Document(f"x{i}_{j}", f"distractor {j} of question {i}")
        ranked_dense = [f"x{i}_{j}" for j in range(30)]
        ranked_sparse = list(ranked_dense[::-1])
        ranked_dense.insert(0 if i % 2 == 0 else 24, f"a{i}")
        ranked_sparse.insert(24 if i % 2 == 0 else 0, f"a{i}")
        dense[f"q{i}"] = {d: float(100 - r + rng.uniform(0, 0.1)) for r, d in enumerate(ranked_dense)}
        sparse[f"q{i}"] = {d: float(40 - r) for r, d in enumerate(ranked_sparse)}
    return Dataset("qa", "dev", corpus=corpus, queries=queries), {"dense": dense, "bm25": sparse}


def test_sweep_matches_choose_hybrid_alpha_and_the_dense_run_alone():
    dataset, runs = _qa_set()
    sweep = alpha_sweep({("m", 1): [(dataset, runs)]}, qa_ks=(5, 20))
    r20 = sweep[sweep["metric"] == "R@20"].set_index("alpha")["value"]
    choice = choose_hybrid_alpha([(dataset, runs)])  # the baselines' alpha selection, tested on its own
    assert list(r20.index) == [DENSE_ALONE, *ALPHAS]
    for alpha, value in choice.scores.items():
        assert r20[alpha] == pytest.approx(100 * value)
    # alpha 0: the dense run itself, as the baselines score it
    alone = score_run(dataset, runs["dense"], ks=(5, 20))
    assert r20[DENSE_ALONE] == pytest.approx(alone["R@20"]) == pytest.approx(100 * 6 / 12)
    r5 = sweep[sweep["metric"] == "R@5"].set_index("alpha")["value"]
    assert r5[DENSE_ALONE] == pytest.approx(alone["R@5"])
    assert set(sweep.columns) == {"model", "seed", "alpha", "metric", "value"}


def test_dev_sets_of_a_model_are_pooled():
    a, runs_a = _qa_set(8, seed=1)
    b, runs_b = _qa_set(4, seed=2)
    pooled = alpha_sweep({("m", 1): [(a, runs_a), (b, runs_b)]})
    alone = [alpha_sweep({("m", 1): [(d, r)]}) for d, r in ((a, runs_a), (b, runs_b))]
    for alpha in (DENSE_ALONE, 1.0, 2.0):
        values = [s.loc[s["alpha"] == alpha, "value"].item() for s in alone]
        assert pooled.loc[pooled["alpha"] == alpha, "value"].item() == pytest.approx((8 * values[0] + 4 * values[1]) / 12)


def test_qrels_sets_sweep_ndcg_and_kinds_do_not_mix():
    dataset, runs = _qa_set(4)
    qrels_set = Dataset("ir", "dev", corpus=dataset.corpus, queries={q: Query(q, "x") for q in dataset.queries},
                        qrels={q: {f"a{q[1:]}": 1} for q in dataset.queries})
    sweep = alpha_sweep({("m", None): [(qrels_set, runs)]})
    assert set(sweep["metric"]) == {"nDCG@10"}
    with pytest.raises(ValueError, match="different metrics"):
        alpha_sweep({("m", None): [(dataset, runs), (qrels_set, runs)]})
    with pytest.raises(ValueError, match="no dev sets"):
        alpha_sweep({("m", None): []})


def test_one_alpha_per_model_from_the_seed_mean_curve():
    rows = []
    # seed 1 peaks at 0.6, seed 2 at 1.5; their mean peaks at 1.0 (where both are good)
    curves = {1: {0.5: 50, 0.6: 80, 1.0: 78, 1.5: 40, 2.0: 40}, 2: {0.5: 50, 0.6: 40, 1.0: 78, 1.5: 80, 2.0: 40}}
    for seed, curve in curves.items():
        rows += [{"model": "m", "seed": seed, "alpha": a, "metric": "R@20", "value": v} for a, v in curve.items()]
        rows.append({"model": "m", "seed": seed, "alpha": DENSE_ALONE, "metric": "R@20", "value": 99.0})
        rows.append({"model": "m", "seed": seed, "alpha": 2.0, "metric": "R@5", "value": 99.0})
    # a model whose curve is flat: the smallest alpha
    rows += [{"model": "flat", "seed": None, "alpha": a, "metric": "R@20", "value": 60.0} for a in (0.5, 1.0, 2.0)]
    sweep = pd.DataFrame(rows)
    assert best_alphas(sweep) == {"m": 1.0, "flat": 0.5}  # alpha 0 (dense alone) and R@5 never choose
    assert best_alphas(sweep, metric="R@5") == {"m": 2.0}
    curve = seed_curves(sweep)
    at = curve[(curve["model"] == "m") & (curve["alpha"] == 0.6) & (curve["metric"] == "R@20")].iloc[0]
    assert at["mean"] == 60.0 and at["std"] == pytest.approx(np.std([80, 40], ddof=1)) and at["seeds"] == 2
    with pytest.raises(ValueError, match="no alpha"):
        best_alphas(sweep, among=(0.7,))


def test_fused_runs_use_each_models_alpha():
    _, runs = _qa_set(4)
    dense = {("a", 1): runs["dense"], ("b", 1): runs["dense"]}
    fused = fused_runs(dense, runs["bm25"], {"a": 0.5, "b": 2.0}, k=10)
    assert set(fused) == {("a+bm25", 1), ("b+bm25", 1)}
    assert fused[("a+bm25", 1)] == fuse(runs["dense"], runs["bm25"], 0.5, k=10)
    assert fused[("b+bm25", 1)] == fuse(runs["dense"], runs["bm25"], 2.0, k=10)
    with pytest.raises(KeyError, match="no alpha"):
        fused_runs(dense, runs["bm25"], {"a": 1.0})
