"""DPR retriever json: round trip (plain and gzip), DPR's own record shape, malformed records."""

from __future__ import annotations

import gzip
import json

import pytest

from taser_lib.data.formats._common import SkipReport
from taser_lib.data.training_examples import (TrainingExample, iter_dpr_retriever_json, read_dpr_retriever_json,
                                              write_dpr_retriever_json)
from taser_lib.data.types import Document, Query
from taser_lib.errors import FormatError

EXAMPLES = [
    TrainingExample(Query("q1", "who wrote it?", ("Ann",)), [Document("p1", "Ann wrote it.", "Book")],
                    [Document("p2", "random", "R")], [Document("p3", "Bob read it.", "Book")]),
    TrainingExample(Query("q2", "what is \"x\"? ünï", ("x", "y")), [Document("p4", "x is x", "")]),
]


@pytest.mark.parametrize("name", ["ex.json", "ex.json.gz"])
def test_round_trip(tmp_path, name):
    path = tmp_path / name
    assert write_dpr_retriever_json(iter(EXAMPLES), path, dataset="toy") == 2
    assert read_dpr_retriever_json(path) == EXAMPLES
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        records = json.load(f)  # plain JSON that DPR's loader reads
    assert records[0]["positive_ctxs"] == [{"title": "Book", "text": "Ann wrote it.", "passage_id": "p1"}]
    assert records[0]["dataset"] == "toy" and records[1]["hard_negative_ctxs"] == []
    assert [p.name for p in tmp_path.iterdir()] == [name]  # nothing left beside it


def test_reads_dpr_records_without_ids(tmp_path):
    # DPR's files have no question id and sometimes ctxs without passage_id: position and "" (unknown) stand in.
    path = tmp_path / "dpr.json"
    path.write_text(json.dumps([{"dataset": "nq", "question": "q?", "answers": ["a"],
                                 "positive_ctxs": [{"title": "T", "text": "a b", "score": 10, "title_score": 1,
                                                    "passage_id": 123}],
                                 "negative_ctxs": [], "hard_negative_ctxs": [{"title": "U", "text": "c"}]}]))
    (example,) = read_dpr_retriever_json(path)
    assert example.query == Query("0", "q?", ("a",)) and example.query.meta == {"dataset": "nq"}
    assert example.positives == [Document("123", "a b", "T")] and example.hard_negatives == [Document("", "c", "U")]


def test_malformed(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('[\n{"question": "ok?", "answers": ["a"], "positive_ctxs": [{"title": "T", "text": "a"}]},\n'
                    '{"answers": ["b"], "positive_ctxs": []},\n'
                    '{"question": "c?", "answers": ["c"], "positive_ctxs": [{"title": "T"}]}\n]\n')
    with pytest.raises(FormatError) as info:
        read_dpr_retriever_json(path)
    assert (info.value.line, info.value.field) == (3, "question")
    report = SkipReport()
    examples = list(iter_dpr_retriever_json(path, skip_bad=True, report=report))
    assert [e.query.id for e in examples] == ["0"]
    assert [(e.line, e.field) for e in report.skipped] == [(3, "question"), (4, "positive_ctxs[0].text")]
