"""`taser evaluate` keeps every query's values beside its aggregates, and two evaluated runs compare in one call."""

from __future__ import annotations

import json

import numpy as np
import pytest

from taser_book.cli import main
from taser_lib.data.formats.beir import write_prepared
from taser_lib.data.types import Dataset, Document, Query
from taser_lib.evaluation.records import read_per_query
from taser_lib.evaluation.significance import compare_runs
from taser_lib.retrieval.runs import write_run

N = 12  # questions, each with its own passage "d{i}" holding its answer


@pytest.fixture
def qa_folder(tmp_path):
    corpus = {f"d{i}": Document(f"d{i}", f"fact number {i} says the answer is word{i}", title=f"T{i}")
              for i in range(N)}
    queries = {f"q{i}": Query(f"q{i}", f"question {i}", (f"word{i}",)) for i in range(N)}
    qrels = {f"q{i}": {f"d{i}": 1} for i in range(N)}
    return write_prepared(Dataset("toy-qa", "test", corpus, queries, qrels), tmp_path / "qa")


def ranked(order: list[str]) -> dict[str, float]:
    return {d: float(len(order) - r) for r, d in enumerate(order)}


def runs(tmp_path):
    """good: the answer passage first for every question; poor: third for every other question, absent for the
    rest."""
    good, poor = {}, {}
    for i in range(N):
        others = [f"d{j}" for j in range(N) if j != i][:4]
        good[f"q{i}"] = ranked([f"d{i}", *others])
        poor[f"q{i}"] = ranked([*others[:2], f"d{i}", *others[2:]] if i % 2 else others)
    paths = {}
    for name, run in (("good", good), ("poor", poor)):
        paths[name] = tmp_path / f"{name}.trec"
        write_run(paths[name], run, tag=name)
    return paths


def test_evaluate_writes_per_query_values_whose_means_are_the_scores(qa_folder, tmp_path, capsys):
    paths = runs(tmp_path)
    assert main(["evaluate", str(paths["poor"]), str(qa_folder), "--ks", "1", "3", "5"]) == 0
    assert "per-query values" in capsys.readouterr().out
    report = json.loads((tmp_path / "poor.trec.eval.json").read_text())
    assert report["per_query"] == "poor.trec.per_query.csv"
    values = read_per_query(tmp_path / "poor.trec.eval.json")
    assert values == read_per_query(tmp_path / "poor.trec.per_query.csv")
    for family in ("answer_recall", "ir_measures"):
        for name, aggregate in report[family].items():
            per_query = values[f"{family}/{name}"]
            assert len(per_query) == N
            assert np.mean(list(per_query.values())) == pytest.approx(aggregate, abs=1e-12)
    assert report["answer_recall"] == {"R@1": 0.0, "R@3": 0.5, "R@5": 0.5}
    assert values["answer_recall/R@3"] == {f"q{i}": float(i % 2) for i in range(N)}


def test_per_query_option_and_comparing_two_evaluated_runs(qa_folder, tmp_path):
    paths = runs(tmp_path)
    elsewhere = tmp_path / "scores"
    assert main(["evaluate", str(paths["good"]), str(qa_folder), "--out", str(elsewhere / "good.json"),
                 "--per-query", str(tmp_path / "good_per_query.csv")]) == 0
    report = json.loads((elsewhere / "good.json").read_text())
    assert report["per_query"] == str((tmp_path / "good_per_query.csv").resolve())  # not beside: a full path
    assert main(["evaluate", str(paths["poor"]), str(qa_folder)]) == 0

    result = compare_runs(elsewhere / "good.json", tmp_path / "poor.trec.eval.json", metric="R@1")
    assert (result.mean_a, result.mean_b, result.n_queries) == (1.0, 0.0, N)
    assert result.p_value < 0.05  # 12 queries, all in favour of a: exact p = 2 / 2**12
    with pytest.raises(ValueError, match="ambiguous"):  # answer recall and ir-measures both have R@100
        compare_runs(elsewhere / "good.json", tmp_path / "poor.trec.eval.json", metric="R@100")
    nd = compare_runs(elsewhere / "good.json", tmp_path / "poor.trec.eval.json", metric="ir_measures/nDCG@10")
    assert nd.difference > 0
