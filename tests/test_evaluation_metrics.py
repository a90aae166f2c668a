"""ir-measures metrics on a small run checked by hand."""

from __future__ import annotations

import math

import ir_measures
import pytest

from taser_lib.evaluation.metrics import evaluate, per_query, qrels_scorer

QRELS = {"q1": {"d1": 2, "d2": 1, "d5": 1, "d7": 0}, "q2": {"d3": 1}, "q3": {"d8": 1}}
RUN = {
    "q1": {"d4": 0.9, "d1": 0.8, "d7": 0.7, "d2": 0.6},  # ranks: d4 (0), d1 (2), d7 (0), d2 (1); d5 not retrieved
    "q2": {"d3": 5.0, "d9": 1.0},
    "q9": {"d1": 1.0},  # not judged: ignored
}  # q3 is judged but not retrieved: it scores 0

# By hand. nDCG@10 (trec_eval: gain = grade, discount log2(rank + 1)):
DCG_Q1 = 2 / math.log2(3) + 1 / math.log2(5)
IDCG_Q1 = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
NDCG = {"q1": DCG_Q1 / IDCG_Q1, "q2": 1.0, "q3": 0.0}
RR = {"q1": 1 / 2, "q2": 1.0, "q3": 0.0}  # first relevant at rank 2 / 1 / none
RECALL = {"q1": 2 / 3, "q2": 1.0, "q3": 0.0}  # relevant = grade >= 1


def test_per_query_by_hand():
    values = per_query(RUN, QRELS, ["nDCG@10", "MRR@10", "R@100"])
    assert values["nDCG@10"] == pytest.approx(NDCG)
    assert values["MRR@10"] == pytest.approx(RR)  # the MRR@10 alias of RR@10
    assert values["R@100"] == pytest.approx(RECALL)


def test_aggregates_by_hand_and_equal_to_ir_measures():
    scores = evaluate(RUN, QRELS)
    expected = {"nDCG@10": sum(NDCG.values()) / 3, "RR@10": sum(RR.values()) / 3, "R@100": sum(RECALL.values()) / 3}
    assert scores == pytest.approx(expected)
    direct = ir_measures.calc_aggregate([ir_measures.nDCG @ 10, ir_measures.RR @ 10, ir_measures.R @ 100], QRELS, RUN)
    assert scores == pytest.approx({str(m): v for m, v in direct.items()})


def test_cutoff_counts():
    # nDCG@1 of q1: top document d4 is not relevant.
    assert per_query(RUN, QRELS, ["nDCG@1"])["nDCG@1"]["q1"] == 0.0
    assert qrels_scorer(QRELS, "R@2")(RUN) == pytest.approx({"q1": 1 / 3, "q2": 1.0, "q3": 0.0})


def test_bad_measures():
    with pytest.raises(ValueError, match="cannot parse"):
        evaluate(RUN, QRELS, ["nDCG@@10"])
    with pytest.raises(ValueError, match="same measure twice"):
        evaluate(RUN, QRELS, ["RR@10", "MRR@10"])
    with pytest.raises(TypeError):
        evaluate(RUN, QRELS, "nDCG@10")
