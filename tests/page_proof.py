"""The proof that a page moved into `taser_book/pages/<page>.py` computes what its notebook computed (issue 49).

A page's committed result is its tables: what `publish` saved, with the parameters and settings it recorded. The
notebook as the committed result recorded it (its digest, from git) is executed cell by cell in one namespace, and the
page module's `run` is called with the same settings; `publish` is recorded in both instead of saving. The two must
hand `publish` the same tables (equal frames: values, dtypes, index and column order), the same parameters and the
same settings. Both run for real at `smoke` sizes, on the code paths `cpu` takes (`overrides`: the page's `cpu`
settings that choose a path, as each page's test spells out), sharing one run cache, so the same run requests give
the same runs and any difference in what the page computes from them shows.

    record = PublishRecorder(monkeypatch)
    before = record.notebook("notebooks/de_margins.ipynb", FROM_DIGEST, "smoke", overrides)
    after = record.page(de_margins, "smoke", overrides)
    assert_same_publish(before, after)
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from git_versions import source_at
from test_moves import old_module_names


def execute_cells(cells: list[dict], where: str, inject: Mapping[str, Any]) -> dict[str, Any]:
    """A notebook's code cells, in order, in one namespace in this process, as papermill runs them: `inject` (the
    parameters papermill would inject) right after the cell tagged "parameters"; IPython's `%` lines and `display`
    do nothing here, and each cell's figures are closed. Returns the namespace."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    namespace: dict[str, Any] = {"__name__": "__main__", "display": lambda *args, **kwargs: None}  # IPython's
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("%"))
        exec(compile(source, f"{where} cell {i}", "exec"), namespace)
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            namespace.update(inject)
        plt.close("all")
    return namespace


@dataclass
class Published:
    """One `publish` call: the page's name, its tables in order, its parameters and settings (as a dict)."""

    notebook: str
    tables: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    table_parameters: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


class PublishRecorder:
    """Replaces `taser_book.scorecard.publish` (and the binding a page module holds) with a recorder."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.monkeypatch = monkeypatch
        self.calls: list[Published] = []
        old_module_names(monkeypatch)  # the notebooks before the registry's move import it where it was
        import taser_book.pages.common
        import taser_book.scorecard
        monkeypatch.setattr(taser_book.scorecard, "publish", self._publish)
        monkeypatch.setattr(taser_book.pages.common, "publish", self._publish)  # PageResult.publish's
        import matplotlib
        matplotlib.use("Agg")

    def _publish(self, results_dir, notebook, tables, parameters=None, *, table_parameters=None, settings=None,
                 root=None):
        assert results_dir is None, "the proof saves nothing"
        self.calls.append(Published(notebook, dict(tables), dict(parameters or {}), dict(table_parameters or {}),
                                    settings.as_dict() if settings is not None else {}))
        return None

    def notebook(self, path: str, digest: str, profile: str, overrides: Mapping[str, Any]) -> list[Published]:
        """Execute the notebook `path` as it was at `digest` (its code cells, in order, in one namespace, with the
        parameters papermill would inject) and return its `publish` calls."""
        start = len(self.calls)
        execute_cells(json.loads(source_at(path, digest))["cells"], f"{path} (at {digest[:12]})",
                      {"profile": profile, "overrides": dict(overrides), "results_dir": None})
        return self.calls[start:]

    def page(self, module, profile: str, overrides: Mapping[str, Any]) -> list[Published]:
        """Call the page module's `run(settings(profile, overrides), results_dir=None)`; its `publish` calls."""
        import matplotlib.pyplot as plt
        if hasattr(module, "publish"):
            self.monkeypatch.setattr(module, "publish", self._publish)
        start = len(self.calls)
        module.run(module.settings(profile, dict(overrides)), None)
        plt.close("all")
        return self.calls[start:]


def _same_value(a: Any, b: Any, where: str, timings: Mapping[str, Any] | None = None) -> None:
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        assert isinstance(a, pd.DataFrame) and isinstance(b, pd.DataFrame), f"{where}: a frame on one side only"
        timed = list((timings or {}).get(where.rsplit("[", 1)[-1].strip("]'\""), ()))
        if timed:  # measured wall times: the same columns, their values not compared
            assert set(timed) <= set(a.columns) and set(timed) <= set(b.columns), f"{where}: no {timed}"
            a, b = a.drop(columns=timed), b.drop(columns=timed)
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, Mapping) and isinstance(b, Mapping):
        assert list(a) == list(b), f"{where}: keys {list(a)} != {list(b)}"
        for key in a:
            _same_value(a[key], b[key], f"{where}[{key!r}]", timings)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_same_publish(before: list[Published], after: list[Published],
                        timings: Mapping[str, Any] | None = None) -> None:
    """The same `publish` calls: the page's name, every table (exactly equal), parameters and settings.
    `timings` ({table: [column, ...], "parameters": [key, ...]}): columns or parameters of measured wall time, present
    on both sides, their values not compared."""
    assert len(before) == len(after) >= 1, f"{len(before)} publish call(s) before, {len(after)} after"
    timed = list((timings or {}).get("parameters", ()))
    for old, new in zip(before, after):
        assert old.notebook == new.notebook
        _same_value(old.tables, new.tables, f"{old.notebook} tables", timings)
        assert all(k in old.parameters and k in new.parameters for k in timed), f"{old.notebook}: no {timed}"
        _same_value({k: v for k, v in old.parameters.items() if k not in timed},
                    {k: v for k, v in new.parameters.items() if k not in timed}, f"{old.notebook} parameters")
        _same_value(old.table_parameters, new.table_parameters, f"{old.notebook} table_parameters")
        _same_value(old.settings, new.settings, f"{old.notebook} settings")


def recorded_digest(page: str, profile: str = "cpu") -> str:
    """The notebook digest the committed `profile` result of `page` recorded."""
    meta = Path(__file__).resolve().parents[1] / "results" / profile / page / "meta.json"
    return json.loads(meta.read_text(encoding="utf-8"))["notebook_source"]["sha256"]



def entry(page: str, before: str) -> str:
    """The result_preserving_changes.yaml entry declaring the move of `page` (its notebook at digest `before`, the
    version the committed results count as current) into its page module."""
    from taser_book.results import notebook_sha256
    repo = Path(__file__).resolve().parents[1]
    files = [f"taser_book/pages/{page}.py", "taser_book/pages/common.py", "taser_book/pages/__init__.py"]
    requires = "".join(f"\n    {f}: {hashlib.sha256((repo / f).read_bytes()).hexdigest()}" for f in files)
    return (f"- file: notebooks/{page}.ipynb\n  from: {before}\n"
            f"  to: {notebook_sha256(repo / 'notebooks' / f'{page}.ipynb')}\n"
            f"  why: >-\n    The page's experiment moved into taser_book/pages/{page}.py: the notebook is prose and one "
            f"call per cell.\n    The module makes the notebook's calls and hands publish the same tables, "
            f"parameters and settings.\n"
            f"  shown_by: tests/test_page_proofs.py::test_the_page_publishes_what_its_notebook_did\n"
            f"  requires:{requires}\n")


if __name__ == "__main__":  # python tests/page_proof.py PAGE: the entry for PAGE's move, from its notebook at HEAD
    from taser_book.results import notebook_sha256
    name = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        old = subprocess.run(["git", "show", f"HEAD:notebooks/{name}.ipynb"], check=True, capture_output=True,
                             text=True).stdout
        Path(tmp, "nb.ipynb").write_text(old, encoding="utf-8")
        print(entry(name, notebook_sha256(Path(tmp, "nb.ipynb"))))
