"""First-stage retrieval baselines in a few calls: BM25, a dense encoder, and their Eq. 6 hybrid, scored the way
the TASER tables score them (R@K in percent for QA sets with answers; nDCG@10 in percent for qrels sets).

    >>> n = query_length(dataset, encoder, qa_cap=32)                 # cuts none of its queries (BEIR practice)
    >>> runs = first_stage_runs(dataset, encoder, query_length=n)    # {"bm25": Run, "dense": Run}
    >>> alpha = choose_hybrid_alpha([(dev_dataset, dev_runs)]).alpha  # one alpha for every dataset (App. D)
    >>> runs["hybrid"] = fuse(runs["dense"], runs["bm25"], alpha)
    >>> rows = score_runs(dataset, runs)                              # long rows: model, dataset, metric, value

A question set retrieving from a corpus too large to load (the full profile's dpr-wiki) passes
`corpus=StreamedCorpus("dpr-wiki")` (`datasets.streamed`) to `first_stage_runs`: dense from on-disk shards, and
answer matching on just the retrieved passages.

Query length. A dense encoder cuts queries at `max_query_length`; 32 tokens (the papers' setting) holds QA
questions but truncates the long queries of CISI, Cranfield or ArguAna (whole arguments), which understates dense
retrieval out of domain (the default model on CISI: nDCG@10 0.367 at 32 tokens, 0.416 at 256, issue 11). So every
dataset gets the smallest length that cuts none of its queries (BEIR encodes queries whole), at most the model's
max_position_embeddings (`query_length`); QA sets keep the papers' length as a cap (`qa_cap`; at 32 it cuts 10 of
SQuAD-open's 2,192 test questions). `truncated_queries` counts what a length cuts, for the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from contextlib import nullcontext

import numpy as np

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Dataset, Run
from taser_lib.retrieval.bm25 import BM25Index
from taser_lib.retrieval.dense import DenseIndex, Encoder, dense_search, encode_corpus
from taser_lib.retrieval.hybrid import AlphaChoice, DevSet, choose_alpha
from taser_lib.datasets.streamed import StreamedCorpus
from taser_lib.evaluation.answer_recall import KS, answer_hits, answer_recall, hits_at_k, hits_scorer
from taser_lib.evaluation.metrics import evaluate, per_query, qrels_scorer

# Encoded corpora, keyed by (encoder, document ids): SQuAD-open's dev and test retrieve from the same corpus.
_EMBEDDINGS: dict[tuple[int, str], tuple[list[str], np.ndarray]] = {}


def is_qa(dataset: Dataset) -> bool:
    """QA sets are scored by answer matching (DPR rule); the others by their qrels."""
    return bool(dataset.queries) and all(q.answers for q in dataset.queries.values())


def _corpus_key(encoder: Encoder, dataset: Dataset) -> tuple[int, str]:
    return id(encoder), hashlib.sha256("\n".join(dataset.corpus).encode()).hexdigest()


def dense_index(encoder: Encoder, dataset: Dataset) -> DenseIndex:
    key = _corpus_key(encoder, dataset)
    if key not in _EMBEDDINGS:
        _EMBEDDINGS[key] = encode_corpus(encoder, dataset.corpus)
    ids, emb = _EMBEDDINGS[key]
    return DenseIndex.from_embeddings(emb, ids)


def query_length(dataset: Dataset, encoder, qa_cap: int | None = None) -> int:
    """The query length (tokens, special ones included) that cuts none of `dataset`'s queries, at most the model's
    max_position_embeddings; for a QA set (`is_qa`) also at most `qa_cap` (the papers' 32 for questions). `encoder`
    is a `DenseEncoder` (its tokenizer and model config)."""
    texts = [q.text for q in dataset.queries.values()]
    if not texts:
        raise ValueError(f"{dataset.name}: no queries")
    return encoder.covering_query_length(texts, limit=qa_cap if is_qa(dataset) else None)


def truncated_queries(dataset: Dataset, encoder, length: int) -> int:
    """How many of `dataset`'s queries are longer than `length` tokens (special ones included)."""
    ids = encoder.tokenizer([q.text for q in dataset.queries.values()], return_attention_mask=False,
                            return_token_type_ids=False)["input_ids"]
    return sum(len(x) > length for x in ids)


def first_stage_runs(dataset: Dataset, encoder: Encoder | None = None, k: int = 100,
                     bm25: BM25Index | None = None, query_length: int | None = None,
                     corpus: StreamedCorpus | None = None) -> dict[str, Run]:
    """BM25 (and, given an encoder, dense) top-k runs for every query of `dataset`; `query_length` sets the
    encoder's query cut-off for this dataset (a `DenseEncoder`; None: the encoder's own).

    `corpus`: where a dataset without passages of its own (a question set) retrieves from when that corpus is too
    large to load (the full profile's dpr-wiki; `datasets.streamed`): dense from its on-disk shards, never loading
    it; BM25 from its index (built once from the loaded corpus). `dataset.corpus` then becomes just the retrieved
    passages, which is all that answer matching (`score_runs`, `choose_hybrid_alpha`) reads."""
    streamed = corpus is not None and not dataset.corpus
    if streamed:
        bm25 = bm25 or corpus.bm25()
    runs = {"bm25": (bm25 or BM25Index.build(dataset.corpus, progress=False)).search(dataset.queries, k=k,
                                                                                        progress=False)}
    if encoder is not None:
        index = corpus.dense(encoder) if streamed else dense_index(encoder, dataset)
        with (encoder.query_length(query_length) if query_length else nullcontext()):
            runs["dense"] = dense_search(encoder, index, dataset.queries, k=k)
    if streamed:
        dataset.corpus = corpus.passages({doc for run in runs.values() for scores in run.values() for doc in scores})
    return runs


def selection_metric(dataset: Dataset) -> str:
    return "R@20" if is_qa(dataset) else "nDCG@10"


def choose_hybrid_alpha(dev: Sequence[tuple[Dataset, Mapping[str, Run]]], k_prime: int = 100) -> AlphaChoice:
    """TASER App. D: one alpha in [0.5, 2.0] for all datasets, maximising R@20 (QA) or nDCG@10 on the pooled dev
    queries of every given (dataset, {"dense": run, "bm25": run})."""
    sets = []
    for dataset, runs in dev:
        score = (hits_scorer(AnswerMatcher(dataset.corpus), dataset.queries, 20) if is_qa(dataset)
                 else qrels_scorer(dataset.qrels, "nDCG@10"))
        sets.append(DevSet(dense=runs["dense"], sparse=runs["bm25"], score=score))
    return choose_alpha(sets, k_prime=k_prime)


def score_run(dataset: Dataset, run: Run, ks: Sequence[int] = KS) -> dict[str, float]:
    """The TASER tables' metrics in percent: R@K by answer matching for QA sets; nDCG@10 and R@100 otherwise
    (queries without a judgment are left out, as trec_eval does)."""
    if is_qa(dataset):
        return {m: 100 * v for m, v in answer_recall(AnswerMatcher(dataset.corpus), dataset.queries, run, ks,
                                                     progress=False).items()}
    judged = {q: d for q, d in dataset.qrels.items() if any(g > 0 for g in d.values())}
    return {m: 100 * v for m, v in evaluate(run, judged, ["nDCG@10", "R@100"]).items()}


def score_runs(dataset: Dataset, runs: Mapping[str, Run], ks: Sequence[int] = KS, label: str | None = None
               ) -> list[dict]:
    """Long rows (model, dataset, split, metric, value) for every run: the layout the scorecard reads."""
    name = label or dataset.name
    return [{"model": model, "dataset": name, "split": dataset.split, "metric": metric, "value": value}
            for model, run in runs.items() for metric, value in score_run(dataset, run, ks).items()]


def score_runs_per_query(dataset: Dataset, runs: Mapping[str, Run], label: str | None = None, *,
                         recall_at: Sequence[int] = (20,)) -> list[dict]:
    """Long per-query rows (model, dataset, split, metric, query_id, value) of the selection metric, in percent:
    R@K by answer matching for QA sets (one metric per K of `recall_at`; the selection metric is R@20), nDCG@10
    over the judged queries otherwise. Every query of the dataset (QA) or of its judgments gets a row for every
    run, so two runs pair query by query in a significance test."""
    name = label or dataset.name
    rows = []
    for model, run in runs.items():
        if is_qa(dataset):
            hits = answer_hits(AnswerMatcher(dataset.corpus), dataset.queries, run, max(recall_at), progress=False)
            by_metric = {}
            for k in recall_at:
                values = hits_at_k(hits, k)
                by_metric[f"R@{k}"] = {q: values.get(q, 0.0) for q in dataset.queries}  # missing from the run: 0
        else:
            metric = selection_metric(dataset)
            judged = {q: d for q, d in dataset.qrels.items() if any(g > 0 for g in d.values())}
            values = per_query(run, judged, [metric])[metric]
            by_metric = {metric: {q: values.get(q, 0.0) for q in judged}}
        for metric, values in by_metric.items():
            rows += [{"model": model, "dataset": name, "split": dataset.split, "metric": metric, "query_id": q,
                      "value": 100 * v} for q, v in sorted(values.items())]
    return rows
