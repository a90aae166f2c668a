"""No run-cache key changed (issue 49): the CA teacher each committed `cpu` page recorded (its run folder,
`<kind>-<key>`, in the page's parameters) is the run the page's module asks for at `cpu` now.

The page runs with `trained_run` replaced by a stand-in that works out the folder the run cache would use
(`runs.cache.run_location`: the key of the resolved config and its data's fingerprint) and stops there, so nothing
trains. The teacher is each page's first run; the students' keys hold the teacher's weights' fingerprint, so they
need it trained and are not computed here."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

import taser_book.runs.recipes as recipes
from taser_book.runs.cache import run_location

REPO = Path(__file__).resolve().parents[1]


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


class _Located(Exception):
    """The folder of the first run a page asked for."""


def _locate_only(config, *, seed=None, overrides=(), runs_root=None, force=None, progress=True):
    raise _Located(run_location(config, seed=seed, overrides=overrides, runs_root=runs_root).name)


def test_the_pages_that_record_a_teacher_are_found():
    assert len(_recorded_teachers()) >= 10


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(_recorded_teachers()))
def test_a_page_asks_at_cpu_for_the_teacher_its_result_recorded(page, monkeypatch):
    module = importlib.import_module(f"taser_book.pages.{page}")
    monkeypatch.setattr(recipes, "trained_run", _locate_only)
    with pytest.raises(_Located) as located:
        module.run(module.settings("cpu"), None)
    assert located.value.args[0] == _recorded_teachers()[page]
