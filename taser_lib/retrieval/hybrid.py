"""Dense + BM25 hybrid retrieval, TASER Eq. 6:  score(q, p) = sim(q, p) + alpha * BM25(q, p).

Following TASER Appendix D and Ma et al. (2021, "A Replication Study of Dense Passage Retriever", arXiv:2104.05740),
as implemented in Pyserini's `HybridSearcher._hybrid_results` (castorini/pyserini, pyserini/search/hybrid/
_searcher.py), which their paper's hybrid runs used:

1. Each retriever contributes its top K' (= 100 in TASER) passages for the query; the candidates are their union.
2. A candidate missing from one retriever's list gets that list's *minimum* score for the query.
3. Normalisation (on by default, as TASER says it uses Ma et al.'s): each retriever's scores are centred on the
   midpoint of that list's [min, max] and divided by its range, s' = (s - (min + max) / 2) / (max - min), so each
   lies in [-0.5, 0.5] and a missing passage gets -0.5.
4. score = dense' + alpha * bm25'; candidates are ranked by it (then by doc id) and the top K kept.

Two edge cases Pyserini leaves undefined (it would divide by zero or use 0 / 1 defaults) are defined here, neither
changing any ranking: a list whose scores are all equal normalises to 0, and a retriever that returned nothing for
a query (e.g. BM25 for a query with no indexed term) contributes 0 to every candidate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..data.types import Run
from .runs import ranked

# TASER Appendix D: alpha searched in [0.5, 2.0] with an interval of 0.1.
ALPHAS: tuple[float, ...] = tuple(round(0.5 + 0.1 * i, 1) for i in range(16))


def _filled(scores: dict[str, float], candidates: list[str], normalise: bool) -> dict[str, float]:
    if not scores:
        return dict.fromkeys(candidates, 0.0)
    lo, hi = min(scores.values()), max(scores.values())
    filled = {d: scores.get(d, lo) for d in candidates}
    if not normalise:
        return filled
    if hi == lo:
        return dict.fromkeys(candidates, 0.0)
    mid, span = (lo + hi) / 2, hi - lo
    return {d: (s - mid) / span for d, s in filled.items()}


def fuse_query(dense: Mapping[str, float], sparse: Mapping[str, float], alpha: float, k_prime: int = 100,
               normalise: bool = True) -> dict[str, float]:
    """Eq. 6 hybrid scores of one query's candidates (union of each retriever's top k_prime)."""
    d_top, s_top = dict(ranked(dense, k_prime)), dict(ranked(sparse, k_prime))
    candidates = list(dict.fromkeys([*d_top, *s_top]))
    d_norm, s_norm = _filled(d_top, candidates, normalise), _filled(s_top, candidates, normalise)
    return {doc: d_norm[doc] + alpha * s_norm[doc] for doc in candidates}


def fuse(dense: Run, sparse: Run, alpha: float, k: int | None = None, k_prime: int = 100,
         normalise: bool = True) -> Run:
    """Eq. 6 hybrid run over every query of either run, each query's top k (all candidates if k is None)."""
    return {qid: dict(ranked(fuse_query(dense.get(qid, {}), sparse.get(qid, {}), alpha, k_prime, normalise), k))
            for qid in dict.fromkeys([*dense, *sparse])}


@dataclass(frozen=True)
class DevSet:
    """One dataset's dev runs and how to score a fused run per query (e.g. evaluation's `hits_scorer`)."""

    dense: Run
    sparse: Run
    score: Callable[[Run], Mapping[str, float]]


@dataclass(frozen=True)
class AlphaChoice:
    alpha: float
    # Mean per-query metric over the combined dev queries, for every alpha tried.
    scores: dict[float, float]


def choose_alpha(dev_sets: Sequence[DevSet], alphas: Sequence[float] = ALPHAS, k: int | None = None,
                 k_prime: int = 100, normalise: bool = True) -> AlphaChoice:
    """The alpha that maximises the metric on the *combined* dev set: per-query values of all datasets pooled
    (TASER App. D: one alpha for all datasets, chosen on the combined NQ + TriviaQA dev sets). Ties go to the
    smallest alpha."""
    if not dev_sets:
        raise ValueError("choose_alpha needs at least one dev set")
    scores: dict[float, float] = {}
    for alpha in alphas:
        values: list[float] = []
        for dev in dev_sets:
            values.extend(dev.score(fuse(dev.dense, dev.sparse, alpha, k, k_prime, normalise)).values())
        if not values:
            raise ValueError("the dev sets' scorers returned no per-query values")
        scores[alpha] = float(np.mean(values))
    best = max(scores.values())
    return AlphaChoice(alpha=min(a for a, v in scores.items() if v == best), scores=scores)
