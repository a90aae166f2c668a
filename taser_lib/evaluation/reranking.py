"""Re-ranking metrics ("In defense of dual-encoders" §5): each query's candidate list ordered by a model's scores,
scored by ir-measures (MRR@10, nDCG@10) against the relevant candidates, over the queries that have one.

A set is anything with `candidates` ({query id: [doc id, ...]}), `qrels()` (the relevant candidates; queries
without one left out), `name` and `split`, as `training.reranking.RerankingSet`; scores are aligned with the
candidate lists ({query id: float array}).

    >>> rerank_metrics(rset, scores)                       # {"MRR@10": ..., "nDCG@10": ...}
    >>> rerank_per_query(rset, scores)["nDCG@10"]["q1"]    # one query's value
    >>> record_test_metrics("runs/ca/test_metrics.json", rset, scores, model="cross-encoder")
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..data.types import Candidates, Qrels, Run
from .metrics import evaluate, per_query
from .records import PerQuery, record_evaluation

logger = logging.getLogger(__name__)

RERANK_MEASURES: tuple[str, ...] = ("MRR@10", "nDCG@10")


class RerankingCandidates(Protocol):
    """What the re-ranking metrics read of a re-ranking set."""

    candidates: Candidates
    name: str
    split: str

    def qrels(self) -> Qrels: ...


def scores_to_run(rset: RerankingCandidates, scores: Mapping[str, np.ndarray]) -> Run:
    """{query id: {candidate: score}} (the candidates of a query in list order, each with its score)."""
    missing = [q for q in rset.candidates if q not in scores]
    if missing:
        raise ValueError(f"no scores for {len(missing)} queries, e.g. {missing[:3]}")
    bad = [q for q, docs in rset.candidates.items() if len(scores[q]) != len(docs)]
    if bad:
        raise ValueError(f"scores do not align with the candidate lists of {len(bad)} queries, e.g. {bad[:3]}")
    return {q: {d: float(s) for d, s in zip(docs, scores[q])} for q, docs in rset.candidates.items()}


def rerank_metrics(rset: RerankingCandidates, scores: Mapping[str, np.ndarray],
                   measures: Sequence[str] = RERANK_MEASURES) -> dict[str, float]:
    """MRR@10 / nDCG@10 (ir-measures) of the candidates re-ranked by `scores`, over the judged queries."""
    return evaluate(scores_to_run(rset, scores), rset.qrels(), measures)


def rerank_per_query(rset: RerankingCandidates, scores: Mapping[str, np.ndarray],
                     measures: Sequence[str] = RERANK_MEASURES) -> PerQuery:
    """{measure: {query id: value}} for every judged query; each measure's mean is `rerank_metrics`' value."""
    return per_query(scores_to_run(rset, scores), rset.qrels(), measures)


def record_test_metrics(path: str | Path, rset: RerankingCandidates, scores: Mapping[str, np.ndarray],
                        measures: Sequence[str] = RERANK_MEASURES, **extra: Any) -> dict[str, float]:
    """Re-ranking metrics of `scores` on `rset`, written atomically to `path` (JSON: split, dataset, queries,
    metrics, `extra`, run metadata) with every judged query's values beside it (`test_per_query.csv` beside
    `test_metrics.json`; see `evaluation.records`). Returns the aggregates."""
    run, qrels = scores_to_run(rset, scores), rset.qrels()
    metrics = evaluate(run, qrels, measures)
    record_evaluation(path, metrics, per_query(run, qrels, measures), split=rset.split, dataset=rset.name,
                      queries=len(qrels), **extra)
    logger.info("%s/%s test: %s", rset.name, rset.split, metrics)
    return metrics
