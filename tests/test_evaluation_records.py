"""Per-query files beside aggregates (`evaluation.records`): names, round trip, errors that name file, line and
field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taser_lib.errors import FormatError
from taser_lib.evaluation.records import (COLUMNS, flatten, per_query_path, read_per_query, record_evaluation,
                                          select_metric, write_per_query)

VALUES = {"nDCG@10": {"q2": 0.1 + 0.2, "q1": 1.0, "q10": 0.0}, "MRR@10": {"q1": 1 / 3, "q2": 0.5, "q10": 0.0}}


def test_per_query_path_beside_the_aggregates():
    assert per_query_path("runs/ca/test_metrics.json") == Path("runs/ca/test_per_query.csv")
    assert per_query_path("bm25.trec.eval.json") == Path("bm25.trec.per_query.csv")
    assert per_query_path("/x/scores.json") == Path("/x/scores.per_query.csv")


def test_round_trip_is_exact_and_the_file_is_long_csv(tmp_path):
    path = write_per_query(tmp_path / "p.csv", VALUES)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 1 + 6
    assert lines[1:4] == ["q1,nDCG@10,1.0", "q10,nDCG@10,0.0", f"q2,nDCG@10,{0.1 + 0.2!r}"]  # metrics in order,
    back = read_per_query(path)                                                               # queries sorted
    assert back == VALUES and list(back) == list(VALUES)  # full precision: 0.30000000000000004 survives


def test_record_evaluation_writes_both_and_links_them(tmp_path):
    aggregates = {m: sum(v.values()) / len(v) for m, v in VALUES.items()}
    csv_path = record_evaluation(tmp_path / "test_metrics.json", aggregates, VALUES, split="test", queries=3)
    assert csv_path == tmp_path / "test_per_query.csv"
    report = json.loads((tmp_path / "test_metrics.json").read_text())
    assert report["metrics"] == aggregates and report["per_query"] == "test_per_query.csv"
    assert report["split"] == "test" and "versions" in report["metadata"]
    # a run folder, the JSON and the CSV all lead to the same values
    assert read_per_query(tmp_path) == read_per_query(tmp_path / "test_metrics.json") == read_per_query(csv_path)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_select_metric_by_exact_or_unambiguous_bare_name():
    values = flatten({"answer_recall": {"R@20": {"q": 1.0}, "R@100": {"q": 1.0}},
                      "ir_measures": {"R@100": {"q": 0.5}, "nDCG@10": {"q": 0.3}}})
    assert set(values) == {"answer_recall/R@20", "answer_recall/R@100", "ir_measures/R@100", "ir_measures/nDCG@10"}
    assert select_metric(values, "R@20") == {"q": 1.0}
    assert select_metric(values, "ir_measures/R@100") == {"q": 0.5}
    with pytest.raises(ValueError, match="ambiguous"):
        select_metric(values, "R@100")
    with pytest.raises(KeyError, match="MRR@10"):
        select_metric(values, "MRR@10")


@pytest.mark.parametrize("text, line, field", [
    ("query,metric,value\nq1,m,1\n", 1, None),
    ("query_id,metric,value\nq1,m,1\nq2,m\n", 3, None),
    ("query_id,metric,value\nq1,m,1\nq2,m,high\n", 3, "value"),
    ("query_id,metric,value\nq1,m,nan\n", 2, "value"),
    ("query_id,metric,value\n,m,1\n", 2, "query_id"),
    ("query_id,metric,value\nq1,,1\n", 2, "metric"),
    ("query_id,metric,value\nq1,m,1\nq2,m,0\nq1,m,0\n", 4, "query_id"),
])
def test_malformed_rows_name_file_line_and_field(tmp_path, text, line, field):
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as err:
        read_per_query(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)
    assert f"{path}:{line}:" in str(err.value)


def test_missing_files_say_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="test_per_query.csv"):
        read_per_query(tmp_path)
    (tmp_path / "x.eval.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="x.per_query.csv"):
        read_per_query(tmp_path / "x.eval.json")
