"""Top-K retrieval accuracy R@K (TASER Sec. 4.1, DPR's metric): the fraction of questions with at least one gold
answer in the top K passages, by DPR's answer matching (`taser_lib.data.answers`). Values are fractions in [0, 1]."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from ..data.answers import AnswerMatcher
from ..data.types import Queries, Run
from ..retrieval.runs import ranked_ids

KS: tuple[int, ...] = (1, 5, 20, 100)

Hits = dict[str, list[bool]]  # query id -> has-answer of each ranked passage, best first


def answer_hits(matcher: AnswerMatcher, queries: Queries, run: Run, k: int = max(KS),
                progress: bool = True) -> Hits:
    """Has-answer flags of every query's top k passages (a query missing from the run gets no flags)."""
    return matcher.top_k_hits(queries, {qid: ranked_ids(scores, k) for qid, scores in run.items()}, k,
                              progress=progress)


def hits_at_k(hits: Hits, k: int) -> dict[str, float]:
    """Per query: 1.0 if an answer is in its top k, else 0.0 (for significance tests and plots)."""
    return {qid: float(any(flags[:k])) for qid, flags in hits.items()}


def top_k_accuracy(hits: Hits, ks: Sequence[int] = KS) -> dict[str, float]:
    """{"R@1": ..., "R@5": ...}: mean over all queries of `hits_at_k`."""
    if not hits:
        raise ValueError("no queries to evaluate")
    return {f"R@{k}": float(np.mean(list(hits_at_k(hits, k).values()))) for k in ks}


def answer_recall(matcher: AnswerMatcher, queries: Queries, run: Run, ks: Sequence[int] = KS,
                  progress: bool = True) -> dict[str, float]:
    return top_k_accuracy(answer_hits(matcher, queries, run, max(ks), progress), ks)


def macro_micro_accuracy(hits: Hits, queries: Queries, ks: Sequence[int] = KS,
                         group_key: str = "relation") -> dict[str, float]:
    """EntityQuestions-style R@K (TASER Table A4): micro = over all questions; macro = mean over groups
    (`Query.meta[group_key]`, the relation) of each group's R@K. Also returns each group's R@K."""
    groups: dict[str, Hits] = defaultdict(dict)
    for qid, flags in hits.items():
        if group_key not in queries[qid].meta:
            raise ValueError(f"query {qid!r} has no meta[{group_key!r}]")
        groups[queries[qid].meta[group_key]][qid] = flags
    per_group = {g: top_k_accuracy(h, ks) for g, h in sorted(groups.items())}
    out = {f"micro {name}": value for name, value in top_k_accuracy(hits, ks).items()}
    for k in ks:
        out[f"macro R@{k}"] = float(np.mean([acc[f"R@{k}"] for acc in per_group.values()]))
    for g, acc in per_group.items():
        out.update({f"{g} {name}": value for name, value in acc.items()})
    return out


def hits_scorer(matcher: AnswerMatcher, queries: Queries, k: int) -> Callable[[Run], dict[str, float]]:
    """Run -> per-query R@k, e.g. the `score` of a `retrieval.hybrid.DevSet` for choosing alpha."""
    return lambda run: hits_at_k(answer_hits(matcher, queries, run, k, progress=False), k)
