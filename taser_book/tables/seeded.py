"""Trained models over seeds, evaluated like the baselines: one run per (model, seed), tables with a seed column,
per-query values averaged over seeds for the paired tests.

    >>> models = SeededModels({"dpr": {13: "runs/a/best", 14: ...}, "taser": {...}}, max_passage_length=192)
    >>> runs = models.runs(dataset, k=100, query_length=32)        # {(model, seed): Run}
    >>> runs.update(hybrid_runs(runs, bm25_run, alpha))            # {("dpr+bm25", seed): Run, ...}
    >>> rows = score_seeded_runs(dataset, runs)                    # model, seed, dataset, split, metric, value
    >>> per_query = score_seeded_runs_per_query(dataset, runs)     # one row per (model, query), seeds averaged

Why the per-query values are averaged over seeds: the claims' paired randomisation tests pair two systems query by
query; a system trained with three seeds is, per query, best estimated by the mean of its three runs, and the test's
unit stays the query (the seed spread is reported beside it, `summarise_seeds`). A model without seeds (BM25) has
seed None and enters as it is.

Each model is loaded once and kept for the object's life, with its corpus embeddings: SQuAD-open's dev and test
retrieve from one corpus, so its passages are encoded once per model. With `embeddings_dir` (default
$TASER_EMBEDDINGS_DIR, which `taser reproduce` sets to `<run cache>/embeddings`) the embeddings are also kept on
disk, so the pages that evaluate the same trained models over the same passages (in-domain, hybrid, routing) and a
page rerun after a change to the book's code encode each corpus once per model. An entry is keyed by everything that
makes its vectors: the model's weights and passage settings (`streamed.encoder_fingerprint`), the encoder's batch
size, torch's version and thread count, the passages, and the source of `taser_lib` (so a change to the library's
code never reuses vectors it made before); the vectors come back bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from taser_lib.data.types import Dataset, Run
from taser_lib.models import load_encoder
from taser_lib.retrieval.dense import DenseIndex, dense_search, encode_corpus
from taser_lib.retrieval.hybrid import fuse
from taser_lib.datasets.streamed import StreamedCorpus, encoder_fingerprint
from taser_lib.evaluation.answer_recall import KS
from taser_book.analyses.baselines import score_runs, score_runs_per_query

Key = tuple[str, Any]  # (model label, seed or None)
ENV_EMBEDDINGS_DIR = "TASER_EMBEDDINGS_DIR"
_LIBRARY_SOURCE: str | None = None


def library_source_digest() -> str:
    """sha256 of every .py file of `taser_lib` (path and bytes): the code that turns a model into vectors."""
    global _LIBRARY_SOURCE
    if _LIBRARY_SOURCE is None:
        import taser_lib

        root = Path(taser_lib.__file__).parent
        digest = hashlib.sha256()
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
        _LIBRARY_SOURCE = digest.hexdigest()
    return _LIBRARY_SOURCE


def passages_digest(corpus: Mapping[str, Any]) -> str:
    """sha256 of the corpus's ids, titles and texts in order."""
    return hashlib.sha256(json.dumps([[i, d.title, d.text] for i, d in corpus.items()]).encode()).hexdigest()


def corpus_embeddings(encoder, corpus: Mapping[str, Any], folder: str | os.PathLike | None
                      ) -> tuple[list[str], np.ndarray]:
    """`dense.encode_corpus(encoder, corpus)`, kept in `folder` (None: not kept) under a key of everything that makes
    the vectors (module docstring); a kept entry is read back instead of encoding again. Writes are atomic."""
    if folder is None:
        return encode_corpus(encoder, corpus)
    key = hashlib.sha256(json.dumps([encoder_fingerprint(encoder), getattr(encoder, "batch_size", None),
                                     torch.__version__, torch.get_num_threads(), passages_digest(corpus),
                                     library_source_digest()]).encode()).hexdigest()[:24]
    path = Path(folder) / f"{key}.npy"
    if path.is_file():
        vectors = np.load(path)
        if vectors.shape[0] == len(corpus):
            return list(corpus), vectors
    ids, vectors = encode_corpus(encoder, corpus)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy.tmp", delete=False) as tmp:
        np.save(tmp, vectors)
    os.replace(tmp.name, path)
    return ids, vectors


class SeededModels:
    """Dense encoders of trained models by label and seed; `encoder_options` go to `models.load_encoder`
    (device, precision, max_query_length, max_passage_length, batch_size). `embeddings_dir` keeps the corpus
    embeddings on disk (module docstring; default $TASER_EMBEDDINGS_DIR, unset: in memory only)."""

    def __init__(self, paths: Mapping[str, Mapping[Any, str | Path]], *,
                 embeddings_dir: str | os.PathLike | None = None, **encoder_options: Any):
        self.paths = {label: dict(by_seed) for label, by_seed in paths.items()}
        self.embeddings_dir = embeddings_dir if embeddings_dir is not None else os.environ.get(ENV_EMBEDDINGS_DIR)
        self.options = {"show_progress": False, **encoder_options}
        self._encoders: dict[Key, Any] = {}
        self._embeddings: dict[tuple[Key, str], tuple[list[str], Any]] = {}

    def keys(self) -> list[Key]:
        return [(label, seed) for label, by_seed in self.paths.items() for seed in by_seed]

    def encoder(self, label: str, seed: Any):
        key = (label, seed)
        if key not in self._encoders:
            self._encoders[key] = load_encoder(self.paths[label][seed], **self.options)
        return self._encoders[key]

    def index(self, label: str, seed: Any, dataset: Dataset) -> DenseIndex:
        key = ((label, seed), passages_digest(dataset.corpus))  # ids alone would take one corpus for another
        if key not in self._embeddings:
            self._embeddings[key] = corpus_embeddings(self.encoder(label, seed), dataset.corpus, self.embeddings_dir)
        ids, emb = self._embeddings[key]
        return DenseIndex.from_embeddings(emb, ids)

    def runs(self, dataset: Dataset, k: int = 100, query_length: int | None = None,
             labels: Sequence[str] | None = None, corpus: StreamedCorpus | None = None,
             keep_vectors: bool = True) -> dict[Key, Run]:
        """Top-k dense runs of every (model, seed) (or of `labels` only) over `dataset`'s corpus; `query_length`
        cuts the queries. A dataset without passages retrieves from `corpus` (a StreamedCorpus: its on-disk shards
        per encoder). `keep_vectors=False` encodes the passages one model at a time and lets the vectors go (large
        corpora) instead of keeping them for the next split with the same passages."""
        streamed = not dataset.corpus
        if streamed and corpus is None:
            raise ValueError(f"{dataset.name}: the dataset has no passages; pass corpus= (a StreamedCorpus) to "
                             f"retrieve from")
        out = {}
        for label, seed in self.keys():
            if labels is not None and label not in labels:
                continue
            encoder = self.encoder(label, seed)
            if streamed:
                index = corpus.dense(encoder)
            elif keep_vectors:
                index = self.index(label, seed, dataset)
            else:
                ids, vectors = corpus_embeddings(encoder, dataset.corpus, self.embeddings_dir)
                index = DenseIndex.from_embeddings(vectors, ids)
                del vectors
            with (encoder.query_length(query_length) if query_length else nullcontext()):
                out[(label, seed)] = dense_search(encoder, index, dataset.queries, k=k)
            del index
        return out


def hybrid_runs(runs: Mapping[Key, Run], sparse: Run, alpha: float, k: int = 100, suffix: str = "+bm25"
                ) -> dict[Key, Run]:
    """Eq. 6 of every dense run with one sparse run: {(label + suffix, seed): fused run}."""
    return {(label + suffix, seed): fuse(run, sparse, alpha, k=k) for (label, seed), run in runs.items()}


def score_seeded_runs(dataset: Dataset, runs: Mapping[Key, Run], ks=KS, label: str | None = None) -> list[dict]:
    """Long rows (model, seed, dataset, split, metric, value), the metrics of `baselines.score_run`."""
    rows = []
    for (model, seed), run in runs.items():
        for row in score_runs(dataset, {model: run}, ks, label=label):
            rows.append({**row, "seed": seed})
    return rows


def score_seeded_runs_per_query(dataset: Dataset, runs: Mapping[Key, Run], label: str | None = None, *,
                                average: bool = True, recall_at: Sequence[int] = (20,)) -> list[dict]:
    """Per-query rows (model, dataset, split, metric, query_id, value) of the selection metric (QA sets: R@K for
    each K of `recall_at`), the value being the mean over the model's seeds (module docstring), with `seeds`: how
    many runs were averaged. `average=False`: one row per seed instead (column `seed`), what `seed_sources` reads."""
    rows = []
    for (model, seed), run in runs.items():
        rows += [{**row, "seed": seed}
                 for row in score_runs_per_query(dataset, {model: run}, label=label, recall_at=recall_at)]
    frame = pd.DataFrame(rows)
    if frame.empty or not average:
        return rows
    keys = ["model", "dataset", "split", "metric", "query_id"]
    out = frame.groupby(keys, sort=False)["value"].agg(["mean", "count"]).reset_index()
    out = out.rename(columns={"mean": "value", "count": "seeds"})
    return out.to_dict("records")


def seed_sources(per_query, metric: str | None = None, dataset: str | None = None) -> dict[str, list[dict]]:
    """{model: [{metric: {query_id: value}} per seed]} from per-query rows with a seed column
    (`score_seeded_runs_per_query(..., average=False)`): the sources `significance.compare_systems` takes."""
    frame = pd.DataFrame(per_query)
    if dataset is not None:
        frame = frame[frame["dataset"] == dataset]
    if metric is not None:
        frame = frame[frame["metric"] == metric]
    out: dict[str, list[dict]] = {}
    for model, rows in frame.groupby("model", sort=False):
        out[model] = [{m: dict(zip(g["query_id"], g["value"].astype(float))) for m, g in by_seed.groupby("metric")}
                      for _, by_seed in rows.groupby(seed_labels(rows["seed"]), sort=True)]
    return out


def seed_labels(seeds: pd.Series) -> pd.Series:
    """Seeds as strings, a model without seeds (None / NaN) as "none": pandas would drop a NaN group."""
    return pd.Series(["none" if pd.isna(s) else str(int(s)) if isinstance(s, float) else str(s) for s in seeds],
                     index=seeds.index)
