"""Top-K retrieval accuracy (R@K), per query and macro / micro over EntityQuestions-style relations."""

from __future__ import annotations

import pytest

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Document, Query
from taser_lib.evaluation.answer_recall import (answer_hits, answer_recall, hits_at_k, hits_scorer,
                                                macro_micro_accuracy, top_k_accuracy)

CORPUS = {f"p{i}": Document(f"p{i}", t) for i, t in enumerate(
    ["nothing here", "Ada Lovelace wrote notes", "more nothing", "born in London", "the Nile is long", "filler"])}
QUERIES = {
    "q1": Query("q1", "who wrote notes?", ("Ada Lovelace",), meta={"relation": "P50"}),
    "q2": Query("q2", "where born?", ("London",), meta={"relation": "P19"}),
    "q3": Query("q3", "which river?", ("Nile",), meta={"relation": "P50"}),
    "q4": Query("q4", "unretrieved", ("Paris",), meta={"relation": "P50"}),
}
RUN = {  # answer positions: q1 rank 2, q2 rank 1, q3 rank 6 (beyond 5), q4 not in the run
    "q1": {"p0": 0.9, "p1": 0.8, "p2": 0.1},
    "q2": {"p3": 3.0, "p0": 2.0},
    "q3": {"p0": 6.0, "p1": 5.0, "p2": 4.0, "p3": 3.0, "p5": 2.0, "p4": 1.0},
}


def test_hits_and_r_at_k_by_hand():
    hits = answer_hits(AnswerMatcher(CORPUS), QUERIES, RUN, k=100, progress=False)
    assert hits == {"q1": [False, True, False], "q2": [True, False], "q3": [False] * 5 + [True], "q4": []}
    assert hits_at_k(hits, 1) == {"q1": 0.0, "q2": 1.0, "q3": 0.0, "q4": 0.0}
    # R@1: q2 / 4; R@5: q1, q2 / 4; R@20: q1, q2, q3 / 4. q4 counts as a miss, not dropped.
    assert top_k_accuracy(hits, (1, 5, 20)) == {"R@1": 0.25, "R@5": 0.5, "R@20": 0.75}
    assert answer_recall(AnswerMatcher(CORPUS), QUERIES, RUN, ks=(1, 5, 20), progress=False) == \
        {"R@1": 0.25, "R@5": 0.5, "R@20": 0.75}
    assert hits_scorer(AnswerMatcher(CORPUS), QUERIES, 5)(RUN) == {"q1": 1.0, "q2": 1.0, "q3": 0.0, "q4": 0.0}


def test_macro_and_micro():
    hits = answer_hits(AnswerMatcher(CORPUS), QUERIES, RUN, progress=False)
    scores = macro_micro_accuracy(hits, QUERIES, ks=(5, 20))
    # P50: q1, q3, q4 -> R@5 1/3, R@20 2/3; P19: q2 -> 1, 1.
    assert scores["P50 R@5"] == pytest.approx(1 / 3) and scores["P19 R@20"] == 1.0
    assert scores["micro R@5"] == pytest.approx(2 / 4) and scores["micro R@20"] == pytest.approx(3 / 4)
    assert scores["macro R@5"] == pytest.approx((1 / 3 + 1) / 2)
    assert scores["macro R@20"] == pytest.approx((2 / 3 + 1) / 2)
    with pytest.raises(ValueError, match="no meta"):
        macro_micro_accuracy(hits, {**QUERIES, "q1": Query("q1", "?", ("x",))}, ks=(5,))


def test_run_for_unknown_query_is_an_error():
    with pytest.raises(ValueError, match="not in the query set"):
        answer_hits(AnswerMatcher(CORPUS), QUERIES, {"q99": {"p0": 1.0}}, progress=False)
