"""What a training run cost: seconds per optimiser step and peak memory, measured while it trains.

`UsageMeter` is started when the loop starts stepping and read when it ends. It times only the optimiser steps
(forward, backward, update), not the evaluations or the checkpoints between them, so that `seconds_per_step` and
`epoch_seconds` compare models, whatever their evaluation schedule. Memory:

- CUDA: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` at the start (tensors only, what the
  papers' "memory" means on a GPU);
- CPU (Linux): the process's peak resident set size (VmHWM) after resetting it at the start (/proc/self/clear_refs),
  reported beside the resident size when training began, so `peak_growth_bytes` is what training itself added.
  Elsewhere `resource.getrusage`'s ru_maxrss, which cannot be reset (growth then only counts above earlier peaks).

Wall time depends on what else the machine runs; `cpu_seconds_per_step` (the process's CPU time, all its threads)
does much less, so it is the fairer comparison of models trained on a busy machine. A resumed run measures only
the steps of its last process (`steps_timed`).
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

_STATUS = Path("/proc/self/status")


def _status_kib(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _reset_cpu_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _ru_maxrss_bytes() -> int:
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(value if sys.platform == "darwin" else value * 1024)


class UsageMeter:
    """Accumulates step time; `report()` gives the run's usage as a JSON-able dict."""

    def __init__(self, device: torch.device):
        self.device = device
        self.seconds, self.cpu_seconds, self.steps = 0.0, 0.0, 0
        self._t0: float | None = None
        self._c0: float | None = None
        self.cuda = device.type == "cuda" and torch.cuda.is_available()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(device)
            self.start_bytes = int(torch.cuda.memory_allocated(device))
        else:
            self.reset = _reset_cpu_peak()
            rss = _status_kib("VmRSS")
            self.start_bytes = rss * 1024 if rss is not None else _ru_maxrss_bytes()

    def __enter__(self) -> "UsageMeter":
        if self.cuda:
            torch.cuda.synchronize(self.device)
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        self.seconds += time.perf_counter() - (self._t0 or time.perf_counter())
        self.cpu_seconds += time.process_time() - (self._c0 or time.process_time())
        self.steps += 1

    def report(self, steps_per_epoch: int | None = None) -> dict[str, Any]:
        if self.cuda:
            peak, kind = int(torch.cuda.max_memory_allocated(self.device)), "cuda max_memory_allocated"
        else:
            hwm = _status_kib("VmHWM")
            peak = hwm * 1024 if hwm is not None and self.reset else _ru_maxrss_bytes()
            kind = "VmHWM (reset at start)" if hwm is not None and self.reset else "ru_maxrss (not reset)"
            # The kernel's RSS counters are per-thread and folded in lazily, so VmHWM read at the end can fall a few
            # pages short of the VmRSS read at the start (72 KiB once); the peak since the start is at least that.
            peak = max(peak, self.start_bytes)
        per_step = self.seconds / self.steps if self.steps else None
        return {"steps_timed": self.steps, "step_seconds": round(self.seconds, 3),
                "seconds_per_step": per_step,
                "cpu_seconds_per_step": self.cpu_seconds / self.steps if self.steps else None,
                "threads": torch.get_num_threads(),
                "epoch_seconds": per_step * steps_per_epoch if per_step and steps_per_epoch else None,
                "steps_per_epoch": steps_per_epoch, "device": str(self.device), "memory": kind,
                "start_bytes": self.start_bytes, "peak_bytes": peak,
                "peak_growth_bytes": max(0, peak - self.start_bytes)}
