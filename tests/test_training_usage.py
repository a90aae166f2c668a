"""taser_lib.training.usage.UsageMeter on the CPU: step time and the peak resident set since training began."""

from __future__ import annotations

import torch

from taser_lib.training import usage


def test_the_cpu_peak_is_never_below_the_resident_size_at_the_start(monkeypatch):
    """The kernel folds per-thread RSS counters in lazily, so VmHWM read at the end once fell 72 KiB short of the
    VmRSS read at the start (CI); the reported peak is at least the start."""
    sizes = {"VmRSS": 1_000_000, "VmHWM": 999_928}  # KiB
    monkeypatch.setattr(usage, "_status_kib", sizes.get)
    monkeypatch.setattr(usage, "_reset_cpu_peak", lambda: True)
    meter = usage.UsageMeter(torch.device("cpu"))
    with meter:
        pass
    report = meter.report(steps_per_epoch=1)
    assert report["start_bytes"] == 1_000_000 * 1024 and report["peak_bytes"] == report["start_bytes"]
    assert report["peak_growth_bytes"] == 0 and report["memory"] == "VmHWM (reset at start)"
    sizes["VmHWM"] = 1_000_512
    assert meter.report()["peak_bytes"] == 1_000_512 * 1024 and meter.report()["peak_growth_bytes"] == 512 * 1024
