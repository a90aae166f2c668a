"""TREC run files: round trip, ranking order, malformed lines."""

from __future__ import annotations

import pytest

from taser_lib.errors import FormatError
from taser_lib.retrieval.runs import ranked, ranked_ids, read_run, truncate, write_run


def test_ranked_orders_by_score_then_doc_id():
    assert ranked({"b": 1.0, "a": 1.0, "c": 2.0, "d": -1.0}) == [("c", 2.0), ("a", 1.0), ("b", 1.0), ("d", -1.0)]
    assert ranked_ids({"b": 1.0, "a": 1.0, "c": 2.0}, k=2) == ["c", "a"]
    assert truncate({"q": {"x": 0.1, "y": 0.3, "z": 0.2}}, 2) == {"q": {"y": 0.3, "z": 0.2}}


def test_round_trip(tmp_path):
    run = {"q1": {"d1": 0.5, "d2": 1.25, "d3": -3.0e-7}, "q2": {"d9": 12.0}}
    path = tmp_path / "run.trec"
    write_run(path, run, tag="bm25")
    lines = path.read_text().splitlines()
    assert lines[:3] == ["q1 Q0 d2 1 1.25 bm25", "q1 Q0 d1 2 0.5 bm25", "q1 Q0 d3 3 -3e-07 bm25"]
    assert read_run(path) == run  # scores survive exactly (repr of a float round-trips)


def test_write_top_k_only(tmp_path):
    path = tmp_path / "run.trec"
    write_run(path, {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, k=2)
    assert read_run(path) == {"q": {"a": 3.0, "b": 2.0}}


def test_write_refuses_unwritable_ids_and_keeps_old_file(tmp_path):
    path = tmp_path / "run.trec"
    write_run(path, {"q": {"a": 1.0}})
    with pytest.raises(ValueError, match="whitespace"):
        write_run(path, {"q": {"a b": 1.0}})
    with pytest.raises(ValueError, match="not finite"):
        write_run(path, {"q": {"a": float("nan")}})
    assert read_run(path) == {"q": {"a": 1.0}}  # atomic: the failed writes left the old file
    assert [p.name for p in tmp_path.iterdir()] == ["run.trec"]


@pytest.mark.parametrize("line,field,message", [
    ("q1 Q0 d1 1 0.5", None, "expected 6 fields"),
    ("q1 Q0 d1 1 0.5 tag extra", None, "expected 6 fields"),
    ("q1 Q0 d1 first 0.5 tag", "rank", "not an integer"),
    ("q1 Q0 d1 1 high tag", "score", "not a number"),
    ("q1 Q0 d1 1 nan tag", "score", "not finite"),
    ("q1 Q0 d0 1 0.9 tag", "docid", "appears twice"),
])
def test_malformed_lines_name_file_line_field(tmp_path, line, field, message):
    path = tmp_path / "bad.trec"
    path.write_text(f"q1 Q0 d0 1 1.0 tag\n\n{line}\n")
    with pytest.raises(FormatError, match=message) as err:
        read_run(path)
    assert err.value.path == str(path) and err.value.line == 3 and err.value.field == field
    assert f"{path}:3" in str(err.value)
