"""Benchmark 6: top-100 search. faiss exact inner-product search (the library's `DenseIndex`, flat) vs numpy
(one BLAS matmul per query chunk + argpartition + sort of the top 100), and faiss HNSW (the library's default
parameters): its speed-up over flat (for a batch of queries in one call, and for one query per call) and its
recall@100 against flat's exact top 100.

Two corpora: the SQuAD-open passages encoded by the default model, searched by the SQuAD-open test questions; and
seeded random unit vectors of the same dimension (100k), searched by random unit queries.

With `--device cuda` and faiss-gpu, also faiss-gpu against CPU faiss on the random corpus (`bench.faiss_gpu`): flat,
IVF-Flat and IVF-PQ build and search times and IVF recall@100. The comparisons above stay on the CPU (`use_gpu=False`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from taser_lib.retrieval import DenseIndex
from . import faiss_gpu, inputs
from .core import BenchConfig, interleaved, paired_ratio, recall_at_k, row, spread, timed

NAME = "search"
TITLE = "Top-100 search: faiss flat vs numpy, and HNSW"
K = 100
QUERY_CHUNK = 256  # numpy scores this many queries at once (a [chunk, n] float32 matrix)
SINGLE_QUERIES = 100  # queries searched one per call for the latency comparison


def numpy_top_k(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, rows) of each query's k best corpus rows by inner product, best first."""
    k = min(k, len(corpus))
    all_scores, all_rows = [], []
    for start in range(0, len(queries), QUERY_CHUNK):
        scores = queries[start:start + QUERY_CHUNK] @ corpus.T
        rows = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        top = np.take_along_axis(scores, rows, axis=1)
        order = np.argsort(-top, axis=1, kind="stable")
        all_scores.append(np.take_along_axis(top, order, axis=1))
        all_rows.append(np.take_along_axis(rows, order, axis=1))
    return np.concatenate(all_scores), np.concatenate(all_rows)


def compare(cfg: BenchConfig, corpus: np.ndarray, queries: np.ndarray, repeats: int) -> dict[str, Any]:
    """Flat vs numpy vs HNSW on one corpus; searches return raw rows, so all three are timed alike."""
    ids = [str(i) for i in range(len(corpus))]
    flat = DenseIndex.from_embeddings(corpus, ids, "flat", use_gpu=False)  # faiss-gpu: compared in faiss_gpu
    build_seconds, hnsw = timed(lambda: DenseIndex.from_embeddings(corpus, ids, "hnsw"), "cpu")
    fns = {"faiss_flat": lambda: flat.index.search(queries, K),
           "numpy": lambda: numpy_top_k(queries, corpus, K),
           "faiss_hnsw": lambda: hnsw.index.search(queries, K)}
    times, out = interleaved(fns, repeats, "cpu")
    exact = out["faiss_flat"][1]
    # Interactive use: one query per call (flat can no longer batch its scan into one matrix product).
    single = queries[:SINGLE_QUERIES]

    def one_at_a_time(index):
        return lambda: [index.index.search(single[i:i + 1], K) for i in range(len(single))]

    single_times, _ = interleaved({"faiss_flat": one_at_a_time(flat), "faiss_hnsw": one_at_a_time(hnsw)},
                                  repeats, "cpu")
    return {
        "seconds": times, "seconds_spread": {k: spread(v) for k, v in times.items()},
        "flat_speedup_over_numpy": paired_ratio(times["numpy"], times["faiss_flat"]),
        "hnsw_speedup_over_flat": paired_ratio(times["faiss_flat"], times["faiss_hnsw"]),
        "single_query_seconds": {k: spread([t / len(single) for t in v]) for k, v in single_times.items()},
        "hnsw_speedup_over_flat_single_query": paired_ratio(single_times["faiss_flat"], single_times["faiss_hnsw"]),
        # Ties aside, numpy's top 100 is flat's: compared as sets (equal scores may swap places).
        "hnsw_recall_at_100": recall_at_k(out["faiss_hnsw"][1], exact),
        "numpy_recall_at_100": recall_at_k(out["numpy"][1], exact),
        "hnsw_build_seconds": build_seconds, "hnsw_params": hnsw.params, "flat_on_gpu": flat.on_gpu,
        "corpus": len(corpus), "queries": len(queries), "dim": int(corpus.shape[1]),
    }


def run(cfg: BenchConfig) -> dict[str, Any]:
    repeats = cfg.pick(5, 1)
    n_random, n_queries = cfg.pick(100_000, 1_000), cfg.pick(1_000, 10)
    squad = inputs.squad(cfg)
    _, emb, _ = inputs.corpus_embeddings(cfg, cfg.pick(None, 50))
    test = list(squad.splits["test"].values())[:cfg.pick(None, 10)]
    enc = inputs.encoder(cfg)
    questions = enc.encode_queries([q.text for q in test])
    corpus = inputs.random_unit_vectors(n_random, emb.shape[1], cfg.seed)
    random_queries = inputs.random_unit_vectors(n_queries, emb.shape[1], cfg.seed + 1)
    results = {"squad_open": compare(cfg, emb, questions, repeats),
               "random": compare(cfg, corpus, random_queries, repeats)}
    rows = []
    random_label = f"random {n_random // 1000}k"
    for name, label in (("squad_open", "SQuAD-open"), ("random", random_label)):
        r = results[name]
        rows += [row(f"{label}: faiss flat speed-up over numpy", r["flat_speedup_over_numpy"]["median"], "x"),
                 row(f"{label}: HNSW speed-up over flat, query batch", r["hnsw_speedup_over_flat"]["median"], "x"),
                 row(f"{label}: HNSW speed-up over flat, one query per call",
                     r["hnsw_speedup_over_flat_single_query"]["median"], "x"),
                 row(f"{label}: HNSW recall@100 vs flat", r["hnsw_recall_at_100"])]
    gpu = faiss_gpu.measure(cfg.device, corpus, random_queries, random_label, cfg.quick, repeats,
                            build_repeats=cfg.pick(3, 1), seed=cfg.seed)
    results["faiss_gpu_vs_cpu"] = gpu["measured"]
    rows += gpu["rows"]
    return {
        "rows": rows, "measured": results,
        "sizes": {"random_corpus": n_random, "random_queries": n_queries, "squad_open_corpus": len(emb),
                  "squad_open_queries": len(test), "k": K, "repeats": repeats},
        "notes": ["batch: all three search the whole query batch in one call; numpy scores queries in chunks of "
                  f"{QUERY_CHUNK}", f"one query per call: the first {SINGLE_QUERIES} queries, searched one by one",
                  "HNSW uses the library's default parameters (DenseIndex); random high-dimensional vectors are "
                  "the hard case for graph indexes (no neighbourhood structure), so their recall is low",
                  "numpy_recall_at_100 checks the baseline finds flat's exact top 100 (ties aside)",
                  *gpu["notes"]],
    }
