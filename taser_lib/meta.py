"""Provenance recorded with every result and checkpoint: versions, git revision, time."""

from __future__ import annotations

import datetime as _dt
import platform
import subprocess
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
