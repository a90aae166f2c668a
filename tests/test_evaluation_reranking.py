"""Re-ranking metrics (`evaluation.reranking`): hand examples, per-query values against the aggregates, and the
test record a finished re-ranking run leaves."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest

from taser_lib.evaluation.records import read_per_query
from taser_lib.evaluation.reranking import (RERANK_MEASURES, record_test_metrics, rerank_metrics, rerank_per_query,
                                            scores_to_run)


@dataclass
class Lists:
    """The least a re-ranking set must offer (training.reranking.RerankingSet is one)."""

    candidates: dict[str, list[str]]
    labels: dict[str, list[int]]
    name: str = "toy"
    split: str = "test"

    def qrels(self):
        out = {q: {d: y for d, y in zip(docs, self.labels[q]) if y > 0} for q, docs in self.candidates.items()}
        return {q: rel for q, rel in out.items() if rel}


HAND = Lists({"q1": ["a", "b", "c"], "q2": ["c", "d"], "q3": ["a", "d"]},
             {"q1": [0, 1, 0], "q2": [1, 0], "q3": [0, 0]})  # q3 has no positive: left out
HAND_SCORES = {"q1": np.array([3.0, 2.0, 1.0]), "q2": np.array([0.5, -1.0]), "q3": np.array([1.0, 0.0])}


def random_lists(seed: int = 0, n: int = 60) -> tuple[Lists, dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    candidates, labels, scores = {}, {}, {}
    for i in range(n):
        k = int(rng.integers(3, 15))
        candidates[f"q{i}"] = [f"d{i}_{j}" for j in range(k)]
        labels[f"q{i}"] = [int(g) for g in rng.choice([0, 0, 0, 1, 2], size=k)] if i % 5 else [0] * k
        scores[f"q{i}"] = rng.standard_normal(k).astype(np.float32)
    return Lists(candidates, labels), scores


def test_hand_example():
    metrics = rerank_metrics(HAND, HAND_SCORES)
    assert list(metrics) == list(RERANK_MEASURES)
    assert metrics["MRR@10"] == pytest.approx((1 / 2 + 1) / 2)
    assert metrics["nDCG@10"] == pytest.approx((1 / math.log2(3) + 1) / 2)
    values = rerank_per_query(HAND, HAND_SCORES)
    assert values["MRR@10"] == pytest.approx({"q1": 0.5, "q2": 1.0})
    assert values["nDCG@10"] == pytest.approx({"q1": 1 / math.log2(3), "q2": 1.0})


def test_per_query_means_are_the_aggregates():
    rset, scores = random_lists()
    metrics = rerank_metrics(rset, scores)
    values = rerank_per_query(rset, scores)
    assert len(rset.qrels()) < len(rset.candidates)  # some queries have no positive: they are not scored
    for name in RERANK_MEASURES:
        assert set(values[name]) == set(rset.qrels())
        assert np.mean(list(values[name].values())) == pytest.approx(metrics[name], abs=1e-12)


def test_scores_must_align_with_the_lists():
    with pytest.raises(ValueError, match="no scores"):
        scores_to_run(HAND, {"q1": HAND_SCORES["q1"]})
    with pytest.raises(ValueError, match="do not align"):
        scores_to_run(HAND, {**HAND_SCORES, "q2": np.zeros(3)})


def test_test_record_holds_aggregates_and_per_query_values(tmp_path):
    rset, scores = random_lists(seed=1)
    metrics = record_test_metrics(tmp_path / "test_metrics.json", rset, scores, model="toy", best_step=7)
    report = json.loads((tmp_path / "test_metrics.json").read_text())
    assert report["metrics"] == metrics and report["queries"] == len(rset.qrels())
    assert (report["split"], report["dataset"], report["model"], report["best_step"]) == ("test", "toy", "toy", 7)
    assert report["per_query"] == "test_per_query.csv"
    values = read_per_query(tmp_path)
    for name in RERANK_MEASURES:
        assert np.mean(list(values[name].values())) == pytest.approx(report["metrics"][name], abs=1e-12)
