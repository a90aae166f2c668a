"""Hard negatives from a run: the highest-ranked passages that are not answers.

Used for SQuAD-open's BM25 hard negatives (the top BM25 passage without the answer, as DPR built its training data)
and TASER Appendix B's second-round negatives from a dense model's top 100.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..data.answers import AnswerMatcher
from ..data.types import Queries, Run
from .runs import ranked_ids


def mine_hard_negatives(run: Run, queries: Queries, matcher: AnswerMatcher | None, n: int = 1,
                        exclude: Mapping[str, Collection[str]] | None = None,
                        depth: int | None = None) -> dict[str, list[str]]:
    """Per query, up to n doc ids from its ranking (best first, within the top `depth`) that are neither in
    `exclude[qid]` (e.g. the gold positives, or qrels' relevant docs) nor contain an answer by DPR's rule
    (`matcher`; None for qrels datasets, where `exclude` alone decides).

    Every query gets a list, possibly shorter than n (or empty when the query is absent from the run).
    """
    if matcher is None and exclude is None:
        raise ValueError("give an answer matcher, an exclude set, or both: otherwise every passage is a 'negative'")
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    unknown = set(run) - set(queries)
    if unknown:
        raise ValueError(f"run has {len(unknown)} queries not in the query set, e.g. {sorted(unknown)[:3]}")
    negatives: dict[str, list[str]] = {}
    for qid, query in queries.items():
        skip = exclude.get(qid, ()) if exclude is not None else ()
        found: list[str] = []
        for doc_id in ranked_ids(run.get(qid, {}), depth):
            if doc_id in skip or (matcher is not None and matcher.has_answer(query, doc_id)):
                continue
            found.append(doc_id)
            if len(found) == n:
                break
        negatives[qid] = found
    return negatives
