"""Pages as Python (taser_book/pages): a page's experiment is one call, its notebook prose and one call per cell.

A page moved into a module runs what its notebook ran: `test_the_testbed_page_makes_the_calls_its_notebook_made`
executes the notebook's code as it was before the move (from git) and the module's `run`, with the experiment's
functions replaced by recorders, and compares every call with its arguments: the same calls give the same runs
(the run cache's keys come from them), the same tables and the same saved parameters."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest

import taser_book.pages
from taser_book.pages import common, testbed
from taser_book.profiles import page_settings
from git_versions import git

REPO = Path(__file__).resolve().parents[1]
BEFORE = "a3c5422"  # the revision whose testbed notebook still built its parameters and saved its tables itself
PAGES = sorted(m.name for m in pkgutil.iter_modules(taser_book.pages.__path__) if m.name != "common")


def _literal_params(s):  # the dict eleven notebooks spelled out before common.reranking_params
    return dict(model=s.model, pooling=s.pooling, precision=s.precision, max_query_length=s.max_query_length,
                max_passage_length=s.max_passage_length, batch_size=s.batch_size, eval_batch_size=s.eval_batch_size,
                epochs=s.epochs, learning_rate=s.learning_rate, n_train=s.n_train, n_queries=s.n_queries,
                n_docs=s.n_docs)


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu"])
def test_reranking_params_are_the_dict_the_notebooks_spelled(profile):
    s = page_settings("de_margins", profile)
    assert list(common.reranking_params(s).items()) == list(_literal_params(s).items())
    assert common.reranking_params(s, model="elsewhere")["model"] == "elsewhere"
    with pytest.raises(TypeError, match="n_scored not among"):
        common.reranking_params(s, n_scored=3)


class _Recorder:
    """Stands in for the experiment's functions: records each call and returns a token naming it."""

    def __init__(self):
        self.calls: list[tuple[str, tuple, dict]] = []

    def fake(self, name):
        def call(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "probe_gaps":
                return pd.DataFrame({"gaps": [1]})
            if name == "probe_training":
                return pd.DataFrame({"training": [1]})
            return SimpleNamespace(made_by=name)
        return call


FAKED = ("probe_points", "probe_runs", "probe_rows", "probe_gaps", "probe_training", "save_result")


def _normal(calls):
    """Calls with their tokens and frames read as what made them."""
    def norm(value):
        if isinstance(value, SimpleNamespace):
            return ("<result of>", value.made_by)
        if isinstance(value, pd.DataFrame):
            return ("<frame>", tuple(value.columns))
        if isinstance(value, dict):
            return {k: norm(v) for k, v in value.items()}
        return value
    return [(name, tuple(norm(a) for a in args), {k: norm(v) for k, v in kwargs.items()})
            for name, args, kwargs in calls]


@pytest.mark.parametrize("profile", ["smoke", "cpu"])
def test_the_testbed_page_makes_the_calls_its_notebook_made(profile, monkeypatch):
    old = nbformat.reads(git("show", f"{BEFORE}:notebooks/testbed.ipynb"), as_version=4)
    code = [c.source for c in old.cells if c.cell_type == "code"]
    assert code[2].startswith("runs = probe_runs") and code[3].startswith("_ = save_result")
    before = _Recorder()
    import taser_book.results
    import taser_book.runs.testbed
    for name in FAKED:
        monkeypatch.setattr(taser_book.results if name == "save_result" else taser_book.runs.testbed, name,
                            before.fake(name))
    namespace = {"profile": profile, "overrides": {}, "results_dir": "somewhere"}
    for cell in (code[1], code[2], code[3]):      # the settings and parameters, the runs and tables, the saving
        exec(cell, namespace)
    monkeypatch.undo()

    after = _Recorder()
    for name in FAKED:
        monkeypatch.setattr(testbed, name, after.fake(name))
    page = testbed.run(testbed.settings(profile), "somewhere")
    assert _normal(after.calls) == _normal(before.calls)
    assert page.results_dir == "somewhere" and list(page.gaps.columns) == ["gaps"]


def test_every_page_module_has_its_notebook_and_settings():
    assert PAGES, "no page modules"
    for name in PAGES:
        module = importlib.import_module(f"taser_book.pages.{name}")
        assert module.PAGE == name and (REPO / "notebooks" / f"{name}.ipynb").is_file()
        assert module.settings("smoke").as_dict() == page_settings(name, "smoke").as_dict()


def _one_call(source: str) -> bool:
    """A cell that is one statement: a call (its figure or table), or a name bound to one call."""
    body = ast.parse(source).body
    if len(body) != 1:
        return False
    stmt = body[0]
    value = stmt.value if isinstance(stmt, (ast.Expr, ast.Assign)) else None
    return isinstance(value, ast.Call)


@pytest.mark.parametrize("name", PAGES)
def test_a_page_notebook_is_prose_and_one_call_per_cell(name):
    """Past its parameters and its set-up cell (imports, settings), every code cell of a page moved into a module is
    one call; its set-up cell calls the module's settings(profile, overrides) and runs nothing else."""
    nb = nbformat.read(REPO / "notebooks" / f"{name}.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    start = next(i for i, c in enumerate(code) if "parameters" in c.metadata.get("tags", []))
    setup = ast.parse(code[start + 1].source).body
    calls = [s.value for s in setup if isinstance(s, (ast.Expr, ast.Assign)) and isinstance(s.value, ast.Call)]
    assert [ast.unparse(c.func) for c in calls if ast.unparse(c.func).endswith(".settings")] == [f"{name}.settings"]
    assert all(isinstance(s, (ast.Import, ast.ImportFrom)) or s.value in calls for s in setup)
    for i, cell in enumerate(code[start + 2:], start + 2):
        assert _one_call(cell.source), f"{name}.ipynb code cell {i} is more than one call:\n{cell.source}"


def test_the_one_call_check_sees_plumbing():
    assert _one_call("page.numbers()") and _one_call("page = testbed.run(settings, results_dir)")
    assert not _one_call("cutoffs") and not _one_call("x = 1\npage.numbers()") and not _one_call("a = b")
