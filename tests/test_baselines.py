"""Dataset slicing for small profiles and the baseline scoring helpers the baselines notebook calls."""

from __future__ import annotations

import pytest

from taser_lib.datasets.registry import load_dataset
from taser_lib.datasets.slicing import slice_dataset
from taser_lib.data.types import Dataset, Document, Query
from taser_book.analyses.baselines import (first_stage_runs, is_qa, query_length, score_run, score_runs,
                                            score_runs_per_query, truncated_queries)


def test_slice_keeps_every_judged_document(shared_data, tmp_path):
    full = load_dataset("cranfield", data_dir=tmp_path, mirror=shared_data)
    part = slice_dataset(full, n_queries=15, n_docs=250, seed=3)
    assert len(part.queries) == 15 and len(part.corpus) == 250
    for qid in part.queries:
        assert set(part.qrels[qid]) == set(full.qrels[qid])  # nothing judged was cut
        assert set(part.qrels[qid]) <= set(part.corpus)
    again = slice_dataset(full, n_queries=15, n_docs=250, seed=3)
    assert list(again.queries) == list(part.queries) and list(again.corpus) == list(part.corpus)
    assert list(slice_dataset(full, 15, 250, seed=4).queries) != list(part.queries)
    with pytest.raises(ValueError, match="judge"):
        slice_dataset(full, n_queries=200, n_docs=50, seed=3)


def _toy_qa() -> Dataset:
    corpus = {"a": Document("a", "Paris is the capital of France."), "b": Document("b", "Berlin is in Germany."),
              "c": Document("c", "The Seine flows through Paris.")}
    queries = {"q1": Query("q1", "capital of France", ("Paris",)), "q2": Query("q2", "where is Berlin", ("Germany",))}
    return Dataset("toy", "test", corpus, queries)


def test_score_run_answer_recall_by_hand():
    toy = _toy_qa()
    assert is_qa(toy)
    run = {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}, "q2": {"b": 5.0, "a": 1.0}}
    scores = score_run(toy, run, ks=(1, 2))
    # q1's answer first appears at rank 2, q2's at rank 1: R@1 = 1/2, R@2 = 2/2 (in percent)
    assert scores == {"R@1": 50.0, "R@2": 100.0}
    rows = score_runs(toy, {"mine": run}, ks=(1,))
    assert rows == [{"model": "mine", "dataset": "toy", "split": "test", "metric": "R@1", "value": 50.0}]


def test_per_query_rows_pair_every_query_and_average_to_the_aggregate():
    toy = _toy_qa()
    runs = {"good": {"q1": {"a": 2.0, "b": 1.0}, "q2": {"b": 1.0}}, "partial": {"q1": {"b": 2.0}}}
    rows = score_runs_per_query(toy, runs)
    by_model = {m: {r["query_id"]: r["value"] for r in rows if r["model"] == m} for m in runs}
    assert by_model == {"good": {"q1": 100.0, "q2": 100.0}, "partial": {"q1": 0.0, "q2": 0.0}}  # q2 absent: 0
    assert {r["metric"] for r in rows} == {"R@20"}
    for model, run in runs.items():  # the mean of the per-query rows is the aggregate
        assert sum(by_model[model].values()) / 2 == score_run(toy, run, ks=(20,))["R@20"]


def test_per_query_rows_at_several_depths_average_to_each_aggregate():
    toy = _toy_qa()
    run = {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}, "q2": {"b": 5.0, "a": 1.0}}  # q1's answer at rank 2, q2's at 1
    rows = score_runs_per_query(toy, {"mine": run}, recall_at=(1, 2))
    by_metric = {m: {r["query_id"]: r["value"] for r in rows if r["metric"] == m} for m in ("R@1", "R@2")}
    assert by_metric == {"R@1": {"q1": 0.0, "q2": 100.0}, "R@2": {"q1": 100.0, "q2": 100.0}}
    for k in (1, 2):
        assert sum(by_metric[f"R@{k}"].values()) / 2 == score_run(toy, run, ks=(k,))[f"R@{k}"]


def test_per_query_rows_of_a_qrels_set_average_to_ndcg(shared_data, tmp_path):
    full = load_dataset("cranfield", data_dir=tmp_path, mirror=shared_data)
    part = slice_dataset(full, n_queries=10, n_docs=200, seed=3)
    runs = first_stage_runs(part, encoder=None, k=100)
    rows = score_runs_per_query(part, runs)
    assert {r["metric"] for r in rows} == {"nDCG@10"}
    mean = sum(r["value"] for r in rows) / len(rows)
    assert mean == pytest.approx(score_run(part, runs["bm25"])["nDCG@10"])


def test_bm25_run_finds_lexical_match():
    toy = _toy_qa()
    runs = first_stage_runs(toy, encoder=None, k=3)
    assert set(runs) == {"bm25"}
    assert next(iter(sorted(runs["bm25"]["q2"].items(), key=lambda x: -x[1])))[0] == "b"


@pytest.fixture(scope="module")
def default_encoder():
    from taser_lib.models import load_encoder

    return load_encoder("default", device="cpu", max_query_length=8, show_progress=False)


def test_query_length_cuts_no_query_of_a_qrels_set_and_caps_qa_sets(shared_data, tmp_path, default_encoder):
    cranfield = load_dataset("cranfield", data_dir=tmp_path, mirror=shared_data)
    n = query_length(cranfield, default_encoder, qa_cap=32)  # not a QA set: the cap does not apply
    assert truncated_queries(cranfield, default_encoder, n) == 0 < truncated_queries(cranfield, default_encoder, n - 1)
    assert n > 32 and truncated_queries(cranfield, default_encoder, 32) > 0  # 32 would cut Cranfield's queries
    toy = _toy_qa()
    longest = query_length(toy, default_encoder)
    assert truncated_queries(toy, default_encoder, longest) == 0 < truncated_queries(toy, default_encoder, longest - 1)
    assert query_length(toy, default_encoder, qa_cap=4) == 4  # QA sets keep the papers' length as a cap
    assert query_length(toy, default_encoder, qa_cap=32) == longest


def test_first_stage_runs_encode_queries_at_the_given_length(default_encoder):
    toy = _toy_qa()
    toy.queries["q3"] = Query("q3", "which river flows through the capital city of France, Paris", ("Seine",))
    cut = first_stage_runs(toy, default_encoder, k=3)["dense"]  # the encoder's own 8 tokens
    whole = first_stage_runs(toy, default_encoder, k=3, query_length=query_length(toy, default_encoder))["dense"]
    assert default_encoder.max_query_length == 8  # restored afterwards
    assert cut["q1"] == pytest.approx(whole["q1"])  # short queries: the same
    assert cut["q3"] != pytest.approx(whole["q3"])   # the long one: no longer cut
