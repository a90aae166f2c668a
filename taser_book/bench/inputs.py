"""The benchmarks' inputs: SQuAD-open (built in memory from the SQuAD v1.1 dev file), passage slices, the default
encoder, corpus embeddings and random vectors. Loaded once per process and shared between benchmarks."""

from __future__ import annotations

import functools
import time

import numpy as np

from taser_lib.data import SquadOpen, build_squad_open
from taser_lib.datasets import fetch
from taser_lib.models import DenseEncoder, load_encoder
from .core import BenchConfig


@functools.lru_cache(maxsize=4)
def squad_open(data_dir: str | None, mirror: str | None) -> SquadOpen:
    """SQuAD-open, built from the SQuAD dev file in the data directory (fetched from the mirror, never the network
    unless the data layer is told to download)."""
    (source,) = fetch("squad-open", data_dir=data_dir, mirror=mirror, progress=False)
    return build_squad_open(source)


def squad(cfg: BenchConfig) -> SquadOpen:
    return squad_open(cfg.data_dir, cfg.mirror)


def passages(cfg: BenchConfig, n: int) -> list[tuple[str, str]]:
    """n (title, text) passages of SQuAD-open: a seeded random sample, or the corpus cycled when n exceeds it."""
    corpus = list(squad(cfg).corpus.values())
    if n <= len(corpus):
        chosen = np.sort(np.random.default_rng(cfg.seed).choice(len(corpus), n, replace=False))
    else:
        chosen = np.arange(n) % len(corpus)
    return [(corpus[i].title, corpus[i].text) for i in chosen]


def encoder(cfg: BenchConfig, batch_size: int = 64, max_passage_length: int = 256,
            precision: str = "fp32", model: str = "default") -> DenseEncoder:
    """`model` (the packaged default unless told) as a `DenseEncoder` on the benchmark's device."""
    return load_encoder(model, device=cfg.device, batch_size=batch_size, max_passage_length=max_passage_length,
                        show_progress=cfg.progress, precision=precision)


@functools.lru_cache(maxsize=2)
def _corpus_embeddings(cfg: BenchConfig, n: int | None) -> tuple[list[str], np.ndarray, float]:
    corpus = squad(cfg).corpus
    ids = list(corpus)[:n]
    start = time.perf_counter()
    emb = encoder(cfg).encode_passages([(corpus[d].title, corpus[d].text) for d in ids])
    return ids, emb, time.perf_counter() - start


def corpus_embeddings(cfg: BenchConfig, n: int | None = None) -> tuple[list[str], np.ndarray, float]:
    """(ids, embeddings, seconds it took) of the first n SQuAD-open passages (all when n is None), with the
    default model; computed once per process."""
    return _corpus_embeddings(cfg, n)


def random_unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    """n seeded Gaussian vectors scaled to unit length (float32), a stand-in corpus of any size."""
    x = np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x
