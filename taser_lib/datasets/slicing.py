"""Seeded slices of a dataset for small profiles: fewer queries, a smaller corpus that still holds every judged
(relevant) document of the kept queries, so scores on a slice stay meaningful."""

from __future__ import annotations

import random

from ..data.types import Dataset


def slice_dataset(dataset: Dataset, n_queries: int | None = None, n_docs: int | None = None,
                  seed: int = 0) -> Dataset:
    """Keep `n_queries` queries (a seeded sample; all if None) and at most `n_docs` documents: first every document
    judged for a kept query, then a seeded sample of the rest (all if None). Candidate lists are cut to the kept
    documents. Raises ValueError when the judged documents alone exceed `n_docs`."""
    rng = random.Random(seed)
    qids = sorted(dataset.queries)
    if n_queries is not None and n_queries < len(qids):
        qids = sorted(rng.sample(qids, n_queries))
    kept_q = set(qids)
    qrels = {q: dict(d) for q, d in dataset.qrels.items() if q in kept_q}
    judged = list(dict.fromkeys(d for q in qids for d in qrels.get(q, {}) if d in dataset.corpus))
    judged += [d for q in qids for d in dataset.candidates.get(q, []) if d in dataset.corpus and d not in judged]
    if n_docs is None:
        doc_ids = list(dataset.corpus)
    else:
        if len(judged) > n_docs:
            raise ValueError(f"{dataset.name}/{dataset.split}: the {len(qids)} kept queries judge {len(judged)} "
                             f"documents, more than n_docs={n_docs}")
        chosen = set(judged)
        rest = sorted(d for d in dataset.corpus if d not in chosen)
        chosen.update(rng.sample(rest, min(n_docs - len(judged), len(rest))))
        doc_ids = [d for d in dataset.corpus if d in chosen]  # keep corpus order
    kept_d = set(doc_ids)
    return Dataset(dataset.name, dataset.split,
                   corpus={d: dataset.corpus[d] for d in doc_ids},
                   queries={q: dataset.queries[q] for q in qids},
                   qrels={q: {d: g for d, g in docs.items() if d in kept_d} for q, docs in qrels.items()},
                   candidates={q: [d for d in dataset.candidates[q] if d in kept_d]
                               for q in qids if q in dataset.candidates})
