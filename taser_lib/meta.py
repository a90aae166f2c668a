"""Provenance recorded with every result and checkpoint: versions, git revision, time, the machine."""

from __future__ import annotations

import datetime as _dt
import functools
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("taser-lib", "torch", "transformers", "faiss-cpu", "bm25s", "ir-measures", "numpy", "pandas")


def package_versions(packages: tuple[str, ...] = _PACKAGES) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_revision(cwd: str | Path | None = None) -> str | None:
    """The checkout's commit, with '+dirty' when there are uncommitted changes; None outside git."""
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _gpu_name() -> str | None:
    """The first CUDA device's name; None without torch or a GPU (torch is imported only if installed)."""
    try:
        torch = sys.modules.get("torch")
        if torch is None:
            import torch  # noqa: PLC0415 - optional and heavy
        if torch.cuda.is_available():
            count = torch.cuda.device_count()
            name = torch.cuda.get_device_name(0)
            return f"{count} x {name}" if count > 1 else name
    except Exception:  # no torch, or a broken CUDA set-up: report no GPU rather than fail a result
        return None
    return None


@functools.lru_cache(maxsize=1)
def machine_description() -> dict[str, Any]:
    """The machine a result was made on: CPU model and cores, GPU (if any), and a one-line `summary`."""
    cpu, cores, gpu = _cpu_model(), os.cpu_count(), _gpu_name()
    summary = f"{cpu} ({cores} cores)" + (f", {gpu}" if gpu else "")
    return {"cpu": cpu, "cpu_cores": cores, "gpu": gpu, "platform": platform.platform(), "summary": summary}


def run_metadata(**extra: Any) -> dict[str, Any]:
    """What every result file records next to its numbers."""
    return {
        "versions": package_versions(),
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "time_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        **extra,
    }
