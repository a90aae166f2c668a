"""Progress bars: the library's tqdm is tqdm.auto, so a notebook shows a widget (ipywidgets, no "TqdmWarning:
IProgress not found") and a terminal shows text; the book strips the widget output and its saved state."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from taser_book.book import book_notebook

PACKAGE = Path(__file__).resolve().parents[1] / "taser_lib"
WIDGET = "application/vnd.jupyter.widget-view+json"


def test_library_uses_its_one_progress_bar():
    plain = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if p.name != "progress.py"
             and re.search(r"^\s*(from tqdm(\.auto)? import|import tqdm\s*$)", p.read_text(encoding="utf-8"), re.M)]
    assert plain == [], f"use `from taser_lib.progress import tqdm` in {plain}"


def test_the_runner_gets_text_bars_and_everyone_else_tqdm_auto(monkeypatch):
    import tqdm as tqdm_module
    import tqdm.auto

    from taser_lib.progress import PROGRESS_ENV, tqdm as bar

    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    with bar(range(2), disable=True) as auto:
        assert type(auto) is tqdm.auto.tqdm
    monkeypatch.setenv(PROGRESS_ENV, "text")  # what `taser reproduce` sets for its kernels
    with bar(range(2), disable=True) as text:
        assert type(text) is tqdm_module.tqdm


def test_notebook_progress_is_a_widget_and_the_book_strips_it(tmp_path):
    pytest.importorskip("ipywidgets")
    from nbclient import NotebookClient

    source = nbformat.v4.new_notebook()
    source.cells = [nbformat.v4.new_markdown_cell("# Progress"), nbformat.v4.new_code_cell(
        "import warnings\nwarnings.simplefilter('always')\n"
        "from taser_lib.training.loop import tqdm\n"  # the library's own tqdm
        "for _ in tqdm(range(3), desc='steps'):\n    pass\nprint('done')")]
    nbformat.write(source, str(tmp_path / "nb.ipynb"))
    executed = nbformat.read(str(tmp_path / "nb.ipynb"), as_version=4)
    NotebookClient(executed, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
                   ).execute()
    nbformat.write(executed, str(tmp_path / "executed.ipynb"))
    outputs = executed.cells[1].outputs
    assert any(WIDGET in o.get("data", {}) for o in outputs), outputs
    assert "widgets" in executed.metadata  # nbclient (and papermill) save the widgets' state
    stderr = "".join(o.get("text", "") for o in outputs if o.get("name") == "stderr")
    assert "IProgress" not in stderr and "TqdmWarning" not in stderr

    book_notebook(tmp_path / "nb.ipynb", tmp_path / "executed.ipynb", tmp_path / "book.ipynb")
    page = nbformat.read(str(tmp_path / "book.ipynb"), as_version=4)
    assert [o.get("text") for o in page.cells[1].outputs] == ["done\n"]
    assert "widgets" not in page.metadata
