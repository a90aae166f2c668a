"""faiss-gpu against CPU faiss on the same vectors (part of benchmark 6, `search`; measured with `--device cuda`).

Three indexes, each built once on the CPU and once on the GPU from the same vectors: exact inner product (the
library's `DenseIndex`, flat), IVF-Flat (`IVF{nlist},Flat`, the library's nlist and nprobe), and the library's IVF-PQ
(`DenseIndex`, ivfpq). A GPU build moves the empty index to the GPU first, so training (k-means) and adding run there,
as `DenseIndex(use_gpu=True)` does. Reported per index: the GPU's speed-up in build time (train + add) and in search
time (the whole query batch in one call, top 100), and for the IVF indexes their recall@100 against the exact top 100
(CPU flat), on each side.

Without a GPU (or without faiss-gpu) nothing is measured and the record says so in a note; this never fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from taser_lib.retrieval import DenseIndex
from taser_lib.retrieval.dense import INDEX_TYPES, _training_sample, faiss
from .core import interleaved, paired_ratio, recall_at_k, row, spread

K = 100
SKIP_NOTE = "no GPU: faiss-gpu vs CPU faiss not measured"
KINDS = {"flat": "flat", "ivf_flat": "IVF-Flat", "ivfpq": "IVF-PQ"}
# faiss calls return only when their GPU work is done (results come back to host memory), so the timers need no
# torch synchronisation.
TIMER_DEVICE = "cpu"


def unavailable(device: str) -> str | None:
    """Why faiss-gpu cannot be compared here (a note for the record), or None when it can."""
    if device != "cuda":
        return f"{SKIP_NOTE} (the benchmark ran on {device}; run `taser bench --device cuda` on a GPU machine)"
    if faiss is None:
        return f"{SKIP_NOTE} (faiss is not installed)"
    gpus = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    if gpus < 1:
        return f"{SKIP_NOTE} (faiss sees no GPU: faiss-cpu is installed, not faiss-gpu; see environment.yml)"
    return None


def default_params(quick: bool) -> dict[str, int]:
    """IVF parameters: the library's IVF-PQ defaults (nlist, nprobe, m, nbits); quick runs use fewer lists."""
    params = dict(INDEX_TYPES["ivfpq"])
    if quick:
        params.update(nlist=16, nprobe=4)
    return params


def _builder(kind: str, corpus: np.ndarray, ids: list[str], params: dict[str, int], seed: int,
             use_gpu: bool) -> Callable[[], Any]:
    """A function that builds the index from scratch and returns its faiss index (on the GPU when `use_gpu`)."""
    if kind == "flat":
        return lambda: DenseIndex.from_embeddings(corpus, ids, "flat", use_gpu=use_gpu).index
    if kind == "ivfpq":
        return lambda: DenseIndex.from_embeddings(corpus, ids, "ivfpq", params, use_gpu=use_gpu, seed=seed).index

    def ivf_flat():  # the library has no IVF-Flat type: built as DenseIndex builds IVF-PQ (same sample, nprobe)
        cpu = faiss.index_factory(corpus.shape[1], f"IVF{params['nlist']},Flat", faiss.METRIC_INNER_PRODUCT)
        faiss.extract_index_ivf(cpu).nprobe = params["nprobe"]
        index = faiss.index_cpu_to_all_gpus(cpu) if use_gpu else cpu
        index.train(_training_sample([corpus], len(corpus), params["train_size"], seed))
        index.add(corpus)
        return index

    return ivf_flat


def compare(corpus: np.ndarray, queries: np.ndarray, params: dict[str, int], repeats: int, build_repeats: int,
            seed: int = 0) -> dict[str, Any]:
    """CPU faiss vs faiss-gpu for every index kind on the same corpus and queries (see the module's docstring)."""
    corpus, queries = np.ascontiguousarray(corpus, np.float32), np.ascontiguousarray(queries, np.float32)
    ids = [str(i) for i in range(len(corpus))]
    k = min(K, len(corpus))
    out: dict[str, Any] = {"corpus": len(corpus), "queries": len(queries), "dim": int(corpus.shape[1]), "k": k,
                           "params": params, "faiss_version": getattr(faiss, "__version__", None), "indexes": {}}
    exact, errors = None, {}
    out["errors"] = errors
    try:  # untimed: the first GPU call creates the CUDA context and faiss's GPU resources
        _builder("flat", queries, [str(i) for i in range(len(queries))], params, seed, True)().search(queries[:1], 1)
    except RuntimeError as e:
        errors["gpu"] = _message(e)
        return out
    for kind in KINDS:
        builds = {side: _builder(kind, corpus, ids, params, seed, side == "gpu") for side in ("cpu", "gpu")}
        try:
            build_times, built = interleaved(builds, build_repeats, TIMER_DEVICE, warmup=0)
            searches = {side: (lambda index=index: index.search(queries, k)) for side, index in built.items()}
            search_times, found = interleaved(searches, repeats, TIMER_DEVICE)
        except RuntimeError as e:  # a faiss error on one index: recorded, the others still measured
            errors[kind] = _message(e)
            continue
        if kind == "flat":
            exact = found["cpu"][1]
        result = {
            "build_seconds": {side: spread(t) for side, t in build_times.items()},
            "search_seconds": {side: spread(t) for side, t in search_times.items()},
            "gpu_build_speedup": paired_ratio(build_times["cpu"], build_times["gpu"]),
            "gpu_search_speedup": paired_ratio(search_times["cpu"], search_times["gpu"]),
        }
        if exact is not None:
            result["recall_at_k_vs_exact"] = {side: recall_at_k(found[side][1], exact) for side in ("cpu", "gpu")}
        out["indexes"][kind] = result
    return out


def _message(error: Exception) -> str:
    lines = str(error).strip().splitlines() or [type(error).__name__]
    return lines[-1][:300]


def summary_rows(measured: dict[str, Any], label: str) -> list[dict[str, Any]]:
    rows = []
    for kind, r in measured["indexes"].items():
        name = KINDS[kind]
        rows += [row(f"{label}: faiss-gpu {name} build speed-up over CPU faiss", r["gpu_build_speedup"]["median"],
                     "x"),
                 row(f"{label}: faiss-gpu {name} search speed-up over CPU faiss, query batch",
                     r["gpu_search_speedup"]["median"], "x")]
        if "recall_at_k_vs_exact" in r:
            recall = r["recall_at_k_vs_exact"]
            if kind == "flat":
                rows.append(row(f"{label}: faiss-gpu flat recall@{measured['k']} vs CPU flat", recall["gpu"]))
            else:
                rows += [row(f"{label}: {name} recall@{measured['k']} vs exact, CPU faiss", recall["cpu"]),
                         row(f"{label}: {name} recall@{measured['k']} vs exact, faiss-gpu", recall["gpu"])]
    return rows


def measure(device: str, corpus: np.ndarray, queries: np.ndarray, label: str, quick: bool, repeats: int,
            build_repeats: int, seed: int = 0, params: dict[str, int] | None = None) -> dict[str, Any]:
    """{"rows", "measured", "notes"} for the search benchmark's record; without a GPU, no rows and a note.
    `params`: IVF parameters (nlist, nprobe, m, nbits, train_size), `default_params(quick)` when None."""
    reason = unavailable(device)
    if reason is not None:
        return {"rows": [], "measured": {"measured": False, "reason": reason}, "notes": [reason]}
    params = default_params(quick) if params is None else params
    measured = {"measured": True, **compare(corpus, queries, params, repeats, build_repeats, seed)}
    notes = [f"faiss-gpu vs CPU faiss on {label} ({measured['corpus']} vectors, {measured['queries']} queries): "
             f"build = train + add from scratch, median over {build_repeats} round-robin rounds; search = the "
             f"query batch in one call, top {measured['k']}, median over {repeats} rounds; IVF "
             f"nlist={params['nlist']}, nprobe={params['nprobe']}, IVF-PQ m={params['m']}x{params['nbits']} bits; "
             f"recall against CPU flat's exact top {measured['k']}"]
    notes += [f"faiss-gpu {KINDS.get(kind, '(any index)')} not measured: {error}"
              for kind, error in measured["errors"].items()]
    return {"rows": summary_rows(measured, label), "measured": measured, "notes": notes}
