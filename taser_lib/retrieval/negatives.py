"""Hard negatives from a run: the highest-ranked passages that are not answers.

Used for SQuAD-open's BM25 hard negatives (the top BM25 passages without the answer, as DPR built its training
data; `squad_open_miner` is what preparing it runs) and TASER Appendix B's second-round negatives from a dense model's
top 100.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import asdict
from typing import Any

from ..data.answers import AnswerMatcher
from ..data.types import Corpus, Queries, Run
from .bm25 import BM25Index, BM25Params
from .runs import ranked_ids


def mine_hard_negatives(run: Run, queries: Queries, matcher: AnswerMatcher | None, n: int = 1,
                        exclude: Mapping[str, Collection[str]] | None = None,
                        depth: int | None = None) -> dict[str, list[str]]:
    """Per query, up to n doc ids from its ranking (best first, within the top `depth`) that are neither in
    `exclude[qid]` (e.g. the gold positives, or qrels' relevant docs) nor contain an answer by DPR's rule
    (`matcher`; None for qrels datasets, where `exclude` alone decides, as it does for a query without answers).

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
            if doc_id in skip or (matcher is not None and query.answers and matcher.has_answer(query, doc_id)):
                continue
            found.append(doc_id)
            if len(found) == n:
                break
        negatives[qid] = found
    return negatives


BM25_DEPTH = 100  # DPR mined its BM25 negatives among each question's top 100


def bm25_hard_negatives(queries: Queries, corpus: Corpus, exclude: Mapping[str, Collection[str]], n: int,
                        depth: int = BM25_DEPTH, params: BM25Params | None = None, progress: bool = True,
                        index: BM25Index | None = None) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """DPR's hard negatives: per question the top-n BM25 passages (within `depth`) that are neither excluded (its
    positives) nor contain an answer. Returns the negatives and a record of how they were mined."""
    params = params or (index.params if index is not None else BM25Params())
    index = index or BM25Index.build(corpus, params, progress=progress)
    run = index.search(queries, k=depth, progress=progress)
    mined = mine_hard_negatives(run, queries, AnswerMatcher(corpus), n=n, exclude=exclude)
    return mined, {"method": "bm25", "bm25": asdict(params), "depth": depth, "per_question": n,
                   "rule": "highest-ranked BM25 passages that are not positives and contain no answer "
                           "(DPR's has-answer rule)"}


def squad_open_miner(per_question: int, progress: bool = True):
    """The miner `taser_lib.datasets.registry.prepare("squad-open", negatives=...)` takes: BM25 hard negatives of every
    split's questions (one index over the shared corpus), their positives excluded."""

    def mine(squad_open) -> tuple[dict[str, list[str]], dict[str, Any]]:
        index = BM25Index.build(squad_open.corpus, progress=progress)
        negatives: dict[str, list[str]] = {}
        meta: dict[str, Any] = {}
        for queries in squad_open.splits.values():
            mined, meta = bm25_hard_negatives(queries, squad_open.corpus, {q: squad_open.positives[q] for q in queries},
                                              per_question, index=index, progress=progress)
            negatives.update(mined)
        return negatives, meta
    return mine
