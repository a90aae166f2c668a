"""Effect Ratio and Delta Relative Improvement (Breuer et al., SIGIR 2020): hand-computed answers, and agreement with
the reference implementation repro_eval (its measure functions on per-topic score dicts, and its RpdEvaluator on
TREC run and qrels files)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from taser_book.analyses.reproducibility import (Reproduction, delta_relative_improvement, effect_ratio,
                                                  reproduction)

# the paper: baseline 0.30, advanced 0.36 (improvement 0.06, RI 0.2)
OURS_B = np.array([0.20, 0.40, 0.30, 0.30])     # mean 0.30
OURS_A = np.array([0.25, 0.41, 0.33, 0.33])     # per-topic improvements .05 .01 .03 .03, mean 0.03, mean 0.33


def test_effect_ratio_by_hand():
    assert effect_ratio(OURS_B, OURS_A, 0.30, 0.36) == pytest.approx(0.5)        # half the effect
    assert effect_ratio(OURS_B, OURS_B + 0.06, 0.30, 0.36) == pytest.approx(1.0)  # all of it
    assert effect_ratio(OURS_B, OURS_B + 0.09, 0.30, 0.36) == pytest.approx(1.5)  # more
    assert effect_ratio(OURS_A, OURS_B, 0.30, 0.36) == pytest.approx(-0.5)       # reversed
    assert effect_ratio(OURS_B, OURS_B, 0.30, 0.36) == 0.0                       # none
    # the paper's per-topic scores, when known, give the same denominator as their means
    assert effect_ratio(OURS_B, OURS_A, OURS_B, OURS_B + 0.06) == pytest.approx(0.5)
    # scalars on our side too; a scalar is broadcast against the other side's topics
    assert effect_ratio(0.30, 0.33, 0.30, 0.36) == pytest.approx(0.5)
    assert effect_ratio(0.30, OURS_A, 0.30, 0.36) == pytest.approx(0.5)
    # per-query mappings are paired by key, whatever their order
    b = {"q1": 0.2, "q2": 0.4}
    a = {"q2": 0.42, "q1": 0.24}
    assert effect_ratio(b, a, 0.30, 0.36) == pytest.approx(0.5)


def test_effect_ratio_nan_when_paper_has_no_effect():
    assert math.isnan(effect_ratio(OURS_B, OURS_A, 0.30, 0.30))
    assert math.isnan(effect_ratio(OURS_B, OURS_B, 0.30, 0.30))
    assert math.isnan(effect_ratio(OURS_B, OURS_A, np.array([0.1, 0.2]), np.array([0.2, 0.1])))


def test_delta_relative_improvement_by_hand():
    # RI_paper = .06 / .30 = .2; RI_ours = .03 / .30 = .1; ΔRI = RI_paper − RI_ours
    assert delta_relative_improvement(OURS_B, OURS_A, 0.30, 0.36) == pytest.approx(0.1)   # ours smaller: > 0
    assert delta_relative_improvement(OURS_B, OURS_B * 1.2, 0.30, 0.36) == pytest.approx(0.0)
    assert delta_relative_improvement(OURS_B, OURS_B * 1.5, 0.30, 0.36) == pytest.approx(-0.3)  # ours larger: < 0
    assert delta_relative_improvement(OURS_A, OURS_B, 0.30, 0.36) == pytest.approx(0.2 + 0.03 / 0.33)
    # ER can be 1 while ΔRI is not 0: the same absolute gain over a weaker baseline is relatively larger
    assert effect_ratio(0.20, 0.26, 0.30, 0.36) == pytest.approx(1.0)
    assert delta_relative_improvement(0.20, 0.26, 0.30, 0.36) == pytest.approx(0.2 - 0.3)


def test_delta_relative_improvement_nan_on_zero_baseline():
    assert math.isnan(delta_relative_improvement(np.zeros(3), np.full(3, 0.1), 0.30, 0.36))
    assert math.isnan(delta_relative_improvement(OURS_B, OURS_A, 0.0, 0.36))


def test_reproduction_bundles_both():
    r = reproduction(OURS_B, OURS_A, 0.30, 0.36)
    assert isinstance(r, Reproduction)
    assert r.er == pytest.approx(0.5) and r.delta_ri == pytest.approx(0.1)
    with pytest.raises(AttributeError):
        r.er = 1.0  # frozen


def test_bad_inputs():
    with pytest.raises(ValueError, match="same length"):
        effect_ratio([0.1, 0.2], [0.1, 0.2, 0.3], 0.3, 0.36)
    with pytest.raises(ValueError, match="no topics"):
        effect_ratio([], [], 0.3, 0.36)
    with pytest.raises(ValueError, match="1-d"):
        effect_ratio(np.zeros((2, 2)), np.zeros((2, 2)), 0.3, 0.36)
    with pytest.raises(ValueError, match="same topics"):
        delta_relative_improvement({"q1": 0.1}, {"q2": 0.2}, 0.3, 0.36)
    with pytest.raises(TypeError):
        effect_ratio({"q1": 0.1}, [0.2], 0.3, 0.36)


# --- against repro_eval -----------------------------------------------------------------------------------------

def _scores(rng: np.random.Generator, topics: list[str], measures: list[str], shift: float = 0.0) -> dict:
    """repro_eval's per-topic score layout: {topic: {measure: value}}."""
    return {t: {m: float(np.clip(rng.uniform(0.1, 0.8) + shift, 0, 1)) for m in measures} for t in topics}


def _column(scores: dict, measure: str) -> dict[str, float]:
    return {t: v[measure] for t, v in scores.items()}


def test_matches_repro_eval_measures():
    pytest.importorskip("repro_eval")
    from repro_eval.measure.overall_effects import DRI, ER

    rng = np.random.default_rng(0)
    topics = [str(i) for i in range(1, 26)]
    measures = ["map", "P_10", "ndcg", "recip_rank"]
    orig_b, orig_a = _scores(rng, topics, measures), _scores(rng, topics, measures, shift=0.1)
    rep_b, rep_a = _scores(rng, topics, measures), _scores(rng, topics, measures, shift=0.05)
    ref_er = ER(orig_score_a=orig_a, orig_score_b=orig_b, rep_score_a=rep_a, rep_score_b=rep_b)
    ref_dri = DRI(orig_score_a=orig_a, orig_score_b=orig_b, rep_score_a=rep_a, rep_score_b=rep_b)
    assert set(ref_er) == set(ref_dri) == set(measures)
    for m in measures:
        ours_b, ours_a = _column(rep_b, m), _column(rep_a, m)
        paper_b, paper_a = _column(orig_b, m), _column(orig_a, m)
        # the paper's per-topic scores ...
        assert effect_ratio(ours_b, ours_a, paper_b, paper_a) == pytest.approx(ref_er[m], abs=1e-9)
        assert delta_relative_improvement(ours_b, ours_a, paper_b, paper_a) == pytest.approx(ref_dri[m], abs=1e-9)
        # ... or only their means, as a paper prints them; ours as arrays in topic order
        pb, pa = float(np.mean(list(paper_b.values()))), float(np.mean(list(paper_a.values())))
        ob, oa = np.array([ours_b[t] for t in topics]), np.array([ours_a[t] for t in topics])
        r = reproduction(ob, oa, pb, pa)
        assert r.er == pytest.approx(ref_er[m], abs=1e-9)
        assert r.delta_ri == pytest.approx(ref_dri[m], abs=1e-9)


def _write_run(path, rng: np.random.Generator, topics: list[str], docs: list[str], tag: str) -> None:
    with open(path, "w") as f:
        for t in topics:
            scores = rng.permutation(len(docs)).astype(float)  # distinct scores: no tie-breaking differences
            order = np.argsort(-scores)
            for rank, i in enumerate(order, start=1):
                f.write(f"{t} Q0 {docs[i]} {rank} {scores[i]:.1f} {tag}\n")


def test_matches_repro_eval_rpd_evaluator(tmp_path):
    pytest.importorskip("repro_eval")
    from repro_eval import exclude
    from repro_eval.Evaluator import RpdEvaluator

    rng = np.random.default_rng(1)
    topics = [str(i) for i in range(1, 11)]
    docs = [f"d{i}" for i in range(30)]
    with open(tmp_path / "qrels", "w") as f:
        for t in topics:
            for d in rng.choice(docs, size=6, replace=False):
                f.write(f"{t} 0 {d} {int(rng.integers(1, 3))}\n")
    paths = {}
    for name in ["orig_b", "orig_a", "rep_b", "rep_a"]:
        paths[name] = tmp_path / f"{name}.run"
        _write_run(paths[name], rng, topics, docs, name)

    rpd = RpdEvaluator(qrels_orig_path=str(tmp_path / "qrels"),
                       run_b_orig_path=str(paths["orig_b"]), run_a_orig_path=str(paths["orig_a"]),
                       run_b_rep_path=str(paths["rep_b"]), run_a_rep_path=str(paths["rep_a"]))
    rpd.trim()
    rpd.evaluate()
    with np.errstate(divide="ignore", invalid="ignore"):
        ref_er, ref_dri = rpd.er(), rpd.dri()

    checked = 0
    for m in ref_er:
        if m in exclude:
            continue
        ours_b, ours_a = _column(rpd.run_b_rep_score, m), _column(rpd.run_a_rep_score, m)
        paper_b, paper_a = _column(rpd.run_b_orig_score, m), _column(rpd.run_a_orig_score, m)
        er = effect_ratio(ours_b, ours_a, paper_b, paper_a)
        dri = delta_relative_improvement(ours_b, ours_a, paper_b, paper_a)
        if math.isfinite(ref_er[m]):
            assert er == pytest.approx(ref_er[m], abs=1e-9), m
            checked += 1
        else:  # repro_eval divides by a zero mean improvement (inf or nan); we return NaN
            assert math.isnan(er), m
        if math.isfinite(ref_dri[m]):
            assert dri == pytest.approx(ref_dri[m], abs=1e-9), m
        else:
            assert math.isnan(dri), m
    assert checked >= 10
