"""Re-ranking tables over seeds (taser_book.tables.rerank_tables): per-query rows, seed summaries, per-query means,
paired tests between chosen models, first-stage scores and full-retrieval MRR@10 by answer matching."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taser_lib.data.types import Dataset, Document, Query
from taser_lib.evaluation import rerank_per_query
from taser_book.tables.rerank_tables import (answer_reciprocal_ranks, first_stage_scores, paired_tests,
                                                per_query_rows, query_means, retrieval_per_query, seed_summary)
from taser_lib.training.reranking import RerankingSet


def rows_for(model, seeds, values_by_seed, dataset="d"):
    rows = []
    for seed, values in zip(seeds, values_by_seed):
        rows += per_query_rows(model, {"MRR@10": values}, seed=seed, dataset=dataset, split="test")
    return rows


def test_per_query_rows_carry_every_value_and_column():
    rows = per_query_rows("de", {"MRR@10": {"q1": 1.0, "q2": 0.5}, "nDCG@10": {"q1": 1.0}}, seed=13,
                          dataset="squad-open", split="test", size="6-128")
    assert len(rows) == 3
    assert {r["metric"] for r in rows} == {"MRR@10", "nDCG@10"}
    assert all(r["model"] == "de" and r["seed"] == 13 and r["size"] == "6-128" for r in rows)
    with pytest.raises(ValueError, match="no per-query values"):
        per_query_rows("de", {})


def test_seed_summary_is_the_mean_and_spread_of_per_seed_means():
    a = {"q1": 1.0, "q2": 0.0}          # seed mean 0.5
    b = {"q1": 1.0, "q2": 0.5}          # seed mean 0.75
    frame = pd.DataFrame(rows_for("de", [13, 14], [a, b]) + rows_for("bm25", [None], [a]))
    out = seed_summary(frame).set_index("model")
    assert out.loc["de", "value"] == pytest.approx(0.625)
    assert out.loc["de", "std"] == pytest.approx(np.std([0.5, 0.75], ddof=1))
    assert out.loc["de", "n"] == 2
    assert out.loc["bm25", "n"] == 1 and np.isnan(out.loc["bm25", "std"])
    assert out.loc["de", "mean ± std"] == "0.625 ± 0.177"


def test_query_means_average_the_seeds_of_each_query():
    frame = pd.DataFrame(rows_for("de", [13, 14], [{"q1": 1.0, "q2": 0.0}, {"q1": 0.5, "q2": 0.0}]))
    out = query_means(frame).set_index("query_id")
    assert out.loc["q1", "value"] == pytest.approx(0.75)
    assert out.loc["q1", "seeds"] == 2
    assert set(out.columns) >= {"model", "dataset", "split", "metric", "value"}


def test_paired_tests_find_a_consistent_difference_and_skip_absent_models():
    rng = np.random.default_rng(0)
    qids = [f"q{i}" for i in range(40)]
    base = {q: float(rng.uniform(0.2, 0.6)) for q in qids}
    better = {q: v + 0.3 + float(rng.normal(0, 0.01)) for q, v in base.items()}
    frame = pd.DataFrame(rows_for("good", [13, 14], [better, better]) + rows_for("base", [13, 14], [base, base]))
    out = paired_tests(frame, "MRR@10", [("good", "base"), ("good", "absent")], labels={"good": "Good"},
                       n_resamples=2000)
    assert len(out) == 1
    row = out.iloc[0]
    assert row["a"] == "Good" and row["b"] == "base"
    assert row["a − b"] == pytest.approx(0.3, abs=0.01)
    assert row["p (holm)"] < 0.01 and row["queries"] == 40
    assert row["CI low"] <= row["a − b"] <= row["CI high"] and row["CI low"] > 0.2
    assert paired_tests(frame, "MRR@10", [("x", "y")]).empty


def test_paired_tests_refuse_two_values_per_query_and_seed():
    frame = pd.DataFrame(rows_for("a", [13], [{"q1": 1.0, "q2": 0.0}], dataset="x")
                         + rows_for("a", [13], [{"q1": 0.0, "q2": 0.0}], dataset="y")
                         + rows_for("b", [13], [{"q1": 1.0, "q2": 0.0}]))
    with pytest.raises(ValueError, match="several MRR@10 values"):
        paired_tests(frame, "MRR@10", [("a", "b")])


def small_set():
    corpus = {d: Document(d, f"text {d}") for d in ["d1", "d2", "d3", "d4"]}
    queries = {"q1": Query("q1", "first"), "q2": Query("q2", "second")}
    return RerankingSet(queries, corpus, {"q1": ["d1", "d2", "d3"], "q2": ["d4", "d1"]},
                        {"q1": [0, 0, 1], "q2": [1, 0]}, "toy", "test")


def test_first_stage_scores_keep_the_stored_order():
    rset = small_set()
    values = rerank_per_query(rset, first_stage_scores(rset), ["MRR@10"])["MRR@10"]
    assert values == {"q1": pytest.approx(1 / 3), "q2": 1.0}


def test_answer_reciprocal_ranks_take_the_first_hit_within_k():
    hits = {"a": [False, True, True], "b": [False] * 12 + [True], "c": []}
    assert answer_reciprocal_ranks(hits, k=10) == {"a": 0.5, "b": 0.0, "c": 0.0}
    assert answer_reciprocal_ranks(hits, k=13)["b"] == pytest.approx(1 / 13)


def test_retrieval_per_query_scores_answers_on_qa_sets_and_qrels_otherwise():
    corpus = {"p1": Document("p1", "Paris is the capital of France."), "p2": Document("p2", "Berlin is in Germany."),
              "p3": Document("p3", "Nothing here.")}
    qa = Dataset("qa", "test", corpus, {"q1": Query("q1", "capital of france?", answers=("Paris",)),
                                        "q2": Query("q2", "capital of germany?", answers=("Berlin",))})
    runs = {("de", 13): {"q1": {"p3": 2.0, "p1": 1.0}, "q2": {"p2": 3.0}},
            ("de", 14): {"q1": {"p1": 2.0}}}                 # q2 missing: scores 0
    rows = pd.DataFrame(retrieval_per_query(qa, runs, k=10, recall_at=(1,)))
    got = rows.set_index(["seed", "metric", "query_id"])["value"]
    assert got[(13, "MRR@10", "q1")] == 0.5 and got[(13, "MRR@10", "q2")] == 1.0
    assert got[(14, "MRR@10", "q2")] == 0.0 and got[(13, "R@1", "q1")] == 0.0
    assert set(rows["dataset"]) == {"qa"} and set(rows["split"]) == {"test"}

    judged = Dataset("ir", "test", corpus, {"q1": Query("q1", "x")}, qrels={"q1": {"p1": 1}})
    rows = pd.DataFrame(retrieval_per_query(judged, {("bm25", None): {"q1": {"p3": 2.0, "p1": 1.0}}},
                                            recall_at=(1,)))
    got = rows.set_index(["metric", "query_id"])["value"]
    assert got[("MRR@10", "q1")] == 0.5 and got[("R@1", "q1")] == 0.0
