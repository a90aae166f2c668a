"""Hard negatives: ranked passages without an answer (DPR rule) and outside the excluded positives."""

from __future__ import annotations

import pytest

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Document, Query
from taser_lib.retrieval.negatives import mine_hard_negatives

CORPUS = {d: Document(d, t) for d, t in {
    "p1": "Paris is the capital of France.",
    "p2": "Lyon is a city in France.",
    "p3": "The Seine flows through paris.",
    "p4": "Marseille has a port.",
    "p5": "France borders Spain.",
}.items()}
QUERIES = {"q1": Query("q1", "capital of France?", ("Paris",)), "q2": Query("q2", "port city?", ("Marseille",)),
           "q3": Query("q3", "not retrieved", ("x",))}
RUN = {"q1": {"p1": 9.0, "p3": 8.0, "p2": 7.0, "p5": 6.0, "p4": 5.0}, "q2": {"p4": 3.0, "p2": 2.0, "p1": 1.0}}


def test_top_passages_without_answers_in_rank_order():
    matcher = AnswerMatcher(CORPUS)
    negs = mine_hard_negatives(RUN, QUERIES, matcher, n=2)
    assert negs == {"q1": ["p2", "p5"], "q2": ["p2", "p1"], "q3": []}  # p1, p3 hold "Paris" (case-insensitive)
    assert mine_hard_negatives(RUN, QUERIES, matcher, n=1) == {"q1": ["p2"], "q2": ["p2"], "q3": []}


def test_exclude_and_depth():
    matcher = AnswerMatcher(CORPUS)
    negs = mine_hard_negatives(RUN, QUERIES, matcher, n=3, exclude={"q1": {"p2"}}, depth=4)
    assert negs["q1"] == ["p5"]  # p2 excluded, p4 beyond depth 4
    # Qrels datasets: no answers, the positives alone decide.
    assert mine_hard_negatives(RUN, QUERIES, None, n=2, exclude={"q1": {"p1", "p3"}})["q1"] == ["p2", "p5"]


def test_errors():
    with pytest.raises(ValueError, match="matcher, an exclude set"):
        mine_hard_negatives(RUN, QUERIES, None)
    with pytest.raises(ValueError, match="not in the query set"):
        mine_hard_negatives({"q9": {"p1": 1.0}}, QUERIES, AnswerMatcher(CORPUS))
