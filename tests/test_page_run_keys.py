"""No run-cache key changed (issue 49): the CA teacher each committed `cpu` page recorded (its run folder,
`<kind>-<key>`, in the page's parameters) is the run the page's module asks for at `cpu` now, and the run its
notebook asked for before the page moved into its module.

The page runs with `trained_run` replaced by a stand-in that works out the folder the run cache would use
(`runs.cache.run_location`: the key of the resolved config and its data's and checkpoints' fingerprints) and stops
there, so nothing trains. The teacher is each page's first run; the students' keys hold the teacher's weights'
fingerprint, so they need it trained and are not computed here.

A page whose models start from a re-initialised copy of the model (`reinit_layers`, written on first use by
`runs.testbed.reinitialised_checkpoint` under the run cache) has that copy's absolute path in its runs' configs, and
the copy's folder name holds a hash of where the packaged model is installed; its config.json names the transformers
that wrote it. Its teacher's key is then the recorded one only in the checkout the result was made in. For those the
module and the notebook must still ask for one and the same run."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
import yaml

import taser_book.runs.recipes as recipes
from git_versions import source_at
from test_moves import old_module_names
from taser_book.profiles import page_settings
from taser_book.runs.cache import run_location

REPO = Path(__file__).resolve().parents[1]
PROOF = "tests/test_page_proofs.py::test_the_page_publishes_what_its_notebook_did"


def _recorded_teachers() -> dict[str, str]:
    """{page: the teacher run folder its committed cpu result recorded}."""
    found = {}
    for meta in sorted(REPO.glob("results/cpu/*/meta.json")):
        tables = json.loads(meta.read_text(encoding="utf-8")).get("tables") or {}
        teachers = {t["parameters"]["teacher"] for t in tables.values()
                    if isinstance((t.get("parameters") or {}).get("teacher"), str)}
        if teachers:
            (found[meta.parent.name],) = teachers
    return found


def _notebook_before(page: str) -> str:
    """The notebook's text as it was before the page moved into its module (its page-proof entry's `from`)."""
    entries = yaml.safe_load((REPO / "taser_book/result_preserving_changes.yaml").read_text(encoding="utf-8"))
    (entry,) = [e for e in entries if e.get("shown_by") == PROOF and e["file"] == f"notebooks/{page}.ipynb"]
    return source_at(entry["file"], entry["from"])


class _Located(Exception):
    """The folder of the first run a page asked for."""


def _locate_only(config, *, seed=None, overrides=(), runs_root=None, force=None, progress=True):
    raise _Located(run_location(config, seed=seed, overrides=overrides, runs_root=runs_root).name)


def _module_teacher(page: str) -> str:
    module = importlib.import_module(f"taser_book.pages.{page}")
    with pytest.raises(_Located) as located:
        module.run(module.settings("cpu"), None)
    return located.value.args[0]


def _notebook_teacher(page: str) -> str:
    namespace = {"__name__": "__main__", "display": lambda *args, **kwargs: None}
    with pytest.raises(_Located) as located:
        for cell in json.loads(_notebook_before(page))["cells"]:
            if cell["cell_type"] == "code":
                exec(compile("".join(cell["source"]), f"{page}.ipynb", "exec"), namespace)
                if "parameters" in cell["metadata"].get("tags", []):
                    namespace.update(profile="cpu", overrides={}, results_dir=None)
    return located.value.args[0]


def _reinitialised(page: str) -> bool:
    return bool(getattr(page_settings(page, "cpu"), "reinit_layers", 0))


def test_the_pages_that_record_a_teacher_are_found():
    teachers = _recorded_teachers()
    assert len(teachers) >= 10 and sum(not _reinitialised(p) for p in teachers) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(_recorded_teachers()))
def test_a_page_asks_at_cpu_for_the_teacher_its_notebook_asked_for(page, monkeypatch):
    monkeypatch.setattr(recipes, "trained_run", _locate_only)
    old_module_names(monkeypatch)  # the notebook before the registry's move imports it where it was
    assert _module_teacher(page) == _notebook_teacher(page)


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(p for p in _recorded_teachers() if not _reinitialised(p)))
def test_a_page_asks_at_cpu_for_the_teacher_its_result_recorded(page, monkeypatch):
    monkeypatch.setattr(recipes, "trained_run", _locate_only)
    assert _module_teacher(page) == _recorded_teachers()[page]
