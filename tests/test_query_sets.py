"""Per-query rows brought to the queries every model shares (taser_lib.evaluation.query_sets)."""

from __future__ import annotations

import pandas as pd
import pytest

from taser_lib.evaluation.query_sets import shared_queries, shared_query_counts
from taser_book.tables.rerank_tables import paired_tests


def _rows(model, queries, seed=None, metric="MRR@10", value=1.0):
    return [{"model": model, "seed": seed, "dataset": "squad-open", "split": "test", "metric": metric,
             "query_id": q, "value": value} for q in queries]


def test_models_scored_on_different_queries_pair_on_those_they_share():
    teacher = _rows("ca", ["q1", "q2", "q3", "q4"], value=1.0)  # the teacher: every test question
    students = _rows("de", ["q2", "q3"], seed=13, value=0.5) + _rows("de", ["q2", "q3"], seed=14, value=0.0)
    frame = pd.DataFrame(teacher + students)
    with pytest.raises(ValueError, match="same queries"):
        paired_tests(frame, "MRR@10", [("ca", "de")])
    kept = shared_queries(frame)
    assert set(kept.loc[kept["model"] == "ca", "query_id"]) == {"q2", "q3"}
    assert len(kept[kept["model"] == "de"]) == 4  # both seeds' rows of the shared queries
    tests = paired_tests(kept, "MRR@10", [("ca", "de")])
    assert tests.iloc[0]["queries"] == 2
    counts = shared_query_counts(frame, kept).set_index("model")
    assert counts.loc["ca", "scored"] == 4 and counts.loc["ca", "shared"] == 2 and counts.loc["de", "shared"] == 2


def test_each_metric_and_dataset_is_its_own_group():
    frame = pd.DataFrame(_rows("ca", ["q1", "q2"]) + _rows("de", ["q2"], seed=13)
                         + _rows("ca", ["q1", "q2"], metric="nDCG@10") + _rows("de", ["q1", "q2"], seed=13,
                                                                             metric="nDCG@10"))
    kept = shared_queries(frame)
    assert set(kept.loc[kept["metric"] == "MRR@10", "query_id"]) == {"q2"}
    assert set(kept.loc[kept["metric"] == "nDCG@10", "query_id"]) == {"q1", "q2"}
    assert shared_queries(frame.iloc[:0]).empty
    with pytest.raises(ValueError, match="query_id"):
        shared_queries(frame.drop(columns="query_id"))
