"""Peak memory of indexing a corpus, streamed or loaded, measured in a fresh process per corpus size.

    >>> stream_peak_memory(200_000, shard_size=10_000, dim=384, out_dir="emb")   # {"peak_growth_bytes": ..., ...}

The corpus is GENERATED (`generated_rows`: no real corpus of that size is offline) and encoded by `StubEncoder`, a
stand-in that returns seeded random vectors of the model's dimension without a model, so that what is measured is
the indexing pipeline's own memory (rows, shard buffers, embeddings, ids), not a model's. Each measurement runs in a
child process (`python -m taser_book.bench.memory ...`) and reports its peak resident set size during the run above
its resident set size when the run began (after its imports): memory the run itself added, nothing from the caller.
On Linux the kernel's peak (VmHWM) is reset when the run begins (/proc/self/clear_refs), so the imports' transient
peak does not hide the run's; elsewhere getrusage's ru_maxrss is used, which can only report growth above it.

Modes: `stream` reads rows from a generator through `encode_stream_to_shards` (what `taser encode` does); `load`
first builds the whole corpus in memory (a dict of Documents, as loading a corpus file does) and then runs
`encode_corpus_to_shards`: the behaviour streaming replaces, for contrast.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

_FILLER = ("the quick brown fox jumps over the lazy dog while a wiki passage of about one hundred words goes on "
           "about history, places and people; ") * 6  # ~600 characters, about a DPR passage


def generated_rows(n: int, start: int = 0) -> Iterator[tuple[str, str, str]]:
    """n GENERATED (id, title, text) rows of about 600 characters each, the same for the same (n, start)."""
    for i in range(start, start + n):
        yield f"gen{i}", f"Title {i % 9973}", f"passage {i}: " + _FILLER[i % 97:]


class StubEncoder:
    """`encode_passages` -> seeded random float32 vectors [n, dim]; no model (see the module docstring).
    `fail_on_call` raises on that call (1-based), to interrupt a run."""

    def __init__(self, dim: int = 384, fail_on_call: int | None = None):
        self.dim, self.fail_on_call, self.calls, self.encoded = dim, fail_on_call, 0, 0

    def encode_queries(self, texts):
        return np.random.default_rng(0).standard_normal((len(texts), self.dim), dtype=np.float32)

    def encode_passages(self, passages):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError(f"simulated crash on call {self.calls}")
        self.encoded += len(passages)
        return np.random.default_rng(self.calls).standard_normal((len(passages), self.dim), dtype=np.float32)


def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> tuple[int, str]:
    """(resident bytes now, method): the peak reset where the kernel allows it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        rss = _status_kib("VmRSS")
        if rss is not None:
            return rss * 1024, "VmHWM after resetting it (/proc/self/clear_refs) minus VmRSS at the start"
    except OSError:
        pass
    return _max_rss_bytes(), "getrusage ru_maxrss at the end minus at the start (peak since process start)"


def _peak_bytes() -> int:
    hwm = _status_kib("VmHWM")
    return hwm * 1024 if hwm is not None else _max_rss_bytes()


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _child(n: int, shard_size: int, dim: int, mode: str, out_dir: str, fail_on_call: int | None) -> dict[str, Any]:
    from taser_lib.data.types import Document
    from taser_lib.retrieval.dense import encode_corpus_to_shards, encode_stream_to_shards

    encoder = StubEncoder(dim, fail_on_call)
    base, method = _reset_peak()
    error = None
    try:
        if mode == "stream":
            encode_stream_to_shards(encoder, generated_rows(n), out_dir, shard_size=shard_size, progress=False)
        else:
            corpus = {d: Document(d, text, title) for d, title, text in generated_rows(n)}
            encode_corpus_to_shards(encoder, corpus, out_dir, shard_size=shard_size, progress=False)
    except RuntimeError as err:
        error = str(err)
    peak = _peak_bytes()
    return {"rows": n, "shard_size": shard_size, "dim": dim, "mode": mode, "baseline_bytes": base,
            "peak_bytes": peak, "peak_growth_bytes": max(0, peak - base), "method": method,
            "encoder_calls": encoder.calls, "rows_encoded": encoder.encoded, "error": error}


def stream_peak_memory(n: int, shard_size: int, dim: int, out_dir: str | Path, mode: str = "stream",
                       fail_on_call: int | None = None, timeout: float = 600) -> dict[str, Any]:
    """Index n generated rows into `out_dir` in a child process; its record (peak_growth_bytes, encoder calls,
    rows encoded, the simulated crash's message if `fail_on_call` fired)."""
    if mode not in ("stream", "load"):
        raise ValueError(f"mode must be stream or load, got {mode!r}")
    argv = [sys.executable, "-m", __name__, str(n), str(shard_size), str(dim), mode, str(out_dir),
            str(fail_on_call or 0)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def shard_bound_bytes(shard_size: int, dim: int, row_bytes: int = 2048, slack_bytes: int = 64 * 2 ** 20) -> int:
    """What indexing may hold at once when it holds one shard: rows (`row_bytes` each, generous for ~600-character
    rows as Python objects), the shard's float32 embeddings twice (the encoder's output and a copy in flight),
    plus a fixed slack for the allocator and libraries. Depends on the shard size, not the corpus size."""
    return shard_size * (row_bytes + 2 * 4 * dim) + slack_bytes


if __name__ == "__main__":
    n_, shard_, dim_, mode_, out_, fail_ = sys.argv[1:7]
    print(json.dumps(_child(int(n_), int(shard_), int(dim_), mode_, out_, int(fail_) or None)))
