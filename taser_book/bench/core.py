"""What every benchmark shares: its settings, noise-robust timing, peak memory, and the result record.

These machines are noisy (other processes share the cores), so competing implementations are timed round-robin
with the order rotated each round (load falls on all of them alike), ratios are taken per round and reported as
their median with the interquartile range, and every record carries the load average before and after.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
import torch

from taser_lib.meta import run_metadata
from taser_lib.speed.fused import fusion_record
from taser_lib.speed.precision import isa_limit, precision_record
from .config import BenchConfig

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, t: v >= t, ">": lambda v, t: v > t, "<=": lambda v, t: v <= t, "<": lambda v, t: v < t,
}


# --- timing ------------------------------------------------------------------------------------------------------

def synchronize(device: str | torch.device) -> None:
    """Wait for queued GPU work (CUDA kernels run asynchronously, so a timer must wait for them)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], Any], device: str | torch.device) -> tuple[float, Any]:
    """(seconds, result) of one call, GPU work included."""
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - start, out


def interleaved(fns: Mapping[str, Callable[[], Any]], repeats: int, device: str | torch.device,
                warmup: int = 1) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Time each function `repeats` times, round-robin, rotating the order every round.

    Returns ({name: seconds per round}, {name: result of its last call}). `warmup` untimed rounds come first.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    names = list(fns)
    last: dict[str, Any] = {}
    for _ in range(warmup):
        for name in names:
            last[name] = fns[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            seconds, last[name] = timed(fns[name], device)
            times[name].append(seconds)
    return times, last


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, extremes and count of repeated measurements."""
    if not len(values):
        raise ValueError("no measurements")
    arr = np.asarray(values, dtype=np.float64)
    q1, median, q3 = np.percentile(arr, [25, 50, 75])
    return {"median": float(median), "q1": float(q1), "q3": float(q3), "min": float(arr.min()),
            "max": float(arr.max()), "n": int(arr.size)}


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> dict[str, float]:
    """Spread of the per-round ratios numerator[r] / denominator[r] (rounds timed back to back)."""
    if len(numerator) != len(denominator):
        raise ValueError("paired ratios need the same number of rounds on both sides")
    return spread([a / b for a, b in zip(numerator, denominator)])


def rate(amount: float, times: Sequence[float]) -> dict[str, float]:
    """Spread of amount / seconds over repeats (e.g. passages per second)."""
    return spread([amount / t for t in times])


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean over queries of |found ∩ exact| / |exact| (faiss marks missing results with -1)."""
    return float(np.mean([len(set(f[f >= 0].tolist()) & set(e.tolist())) / len(e) for f, e in zip(found, exact)]))


# --- memory ------------------------------------------------------------------------------------------------------

class PeakMemory:
    """Peak tensor memory a block allocates above what was allocated when it began (`.peak_bytes`), and how it
    was measured (`.method`).

    CUDA: `torch.cuda.max_memory_allocated` minus the allocation at the start. CPU: torch's profiler records every
    allocation and free of the CPU allocator (`profile_memory=True`); the peak of their running sum in time order.
    Both count tensor memory only, not the allocator's cache or library workspaces. The profiler slows the block
    down, so time it separately.
    """

    def __init__(self, device: str | torch.device):
        self.device = torch.device(device)
        self.peak_bytes = 0
        self.method = ("torch.cuda.max_memory_allocated" if self.device.type == "cuda"
                       else "torch.profiler allocation events (profile_memory=True)")

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        else:
            self._profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                   profile_memory=True)
            self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._start
            return
        self._profile.__exit__(*exc)
        events = [e for e in self._profile.profiler.kineto_results.events() if e.name() == "[memory]"]
        events.sort(key=lambda e: e.start_ns())
        live = np.cumsum([e.nbytes() for e in events]) if events else np.zeros(1)
        self.peak_bytes = int(max(0, live.max()))


# --- the result record ---------------------------------------------------------------------------------------------

def row(metric: str, value: float, unit: str = "", *, target: float | None = None, op: str = ">=") -> dict[str, Any]:
    """One line of the summary table; `met` is None for a measurement without a target."""
    if target is not None and op not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, got {op!r}")
    return {"metric": metric, "value": float(value), "unit": unit, "op": op if target is not None else None,
            "target": target, "met": None if target is None else bool(OPS[op](value, target))}


def describe_device(device: str | torch.device) -> dict[str, Any]:
    device = torch.device(device)
    if device.type == "cuda":
        return {"type": "cuda", "name": torch.cuda.get_device_name(device),
                "memory_bytes": torch.cuda.get_device_properties(device).total_memory}
    described = {"type": "cpu", "name": _cpu_name(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    isa_cap = isa_limit()
    if isa_cap:
        described["isa_limit"] = isa_cap
    return described


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def record(name: str, title: str, cfg: BenchConfig, body: dict[str, Any], started: float,
           load_before: list[float] | None) -> dict[str, Any]:
    """The JSON record of one benchmark: its body (summary `rows`, every measurement, sizes, notes) and provenance."""
    return {
        "benchmark": name, "title": title, "quick": cfg.quick, **body,
        "meta": run_metadata(config=asdict(cfg), device=describe_device(cfg.device), precision=precision_record(), fused_linears=fusion_record(),
                             wall_seconds=round(time.perf_counter() - started, 3),
                             load_average_before=load_before, load_average_after=load_average()),
    }
