"""`make setup` installs under constraints.txt: the versions the committed results recorded, so that a fresh
clone reproduces with the libraries its results were made with (a newer transformers writes another config.json into
a re-initialised checkpoint, and the runs started from it get other run-cache keys)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _constraints() -> dict[str, str]:
    lines = (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
    return dict(line.split("==") for line in (l.strip() for l in lines) if line and not line.startswith("#"))


def _recorded() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for meta in REPO.glob("results/cpu/*/meta.json"):
        for package, version in (json.loads(meta.read_text(encoding="utf-8")).get("versions") or {}).items():
            found.setdefault(package, set()).add(version)
    return found


def test_the_constraints_are_the_versions_the_results_recorded():
    recorded, pinned = _recorded(), _constraints()
    assert pinned and set(pinned) <= set(recorded), f"pinned but never recorded: {set(pinned) - set(recorded)}"
    for package, version in pinned.items():
        assert recorded[package] == {version}, f"{package}: pinned {version}, the results recorded {recorded[package]}"
    torch = re.search(r"TORCH_SPEC\s*\?=\s*torch==(\S+)", (REPO / "Makefile").read_text(encoding="utf-8"))
    assert torch and {v.split("+")[0] for v in recorded["torch"]} == {torch.group(1)}


def test_setup_installs_under_the_constraints():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "-c constraints.txt" in makefile and "pyproject.toml constraints.txt" in makefile
