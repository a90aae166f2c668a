"""taser_book.plots.style: the book's look applies while a figure function draws, and nothing else changes."""

from __future__ import annotations

import matplotlib
import nbformat

from taser_book.plots.style import _RC, book_rc


def test_book_rc_restores_the_users_settings_but_keeps_interactive_mode():
    before_size, before_interactive = matplotlib.rcParams["font.size"], matplotlib.is_interactive()
    try:
        matplotlib.interactive(False)
        with book_rc():
            assert matplotlib.rcParams["font.size"] == _RC["font.size"]
            matplotlib.interactive(True)  # what loading the notebook's inline backend does at its first figure
        assert matplotlib.rcParams["font.size"] == before_size
        assert matplotlib.is_interactive(), "book_rc turned interactive mode off again: later figures go undrawn"
    finally:
        matplotlib.interactive(before_interactive)


def test_every_figure_cell_of_a_notebook_shows_its_figure():
    """Since 446e978 a page showed only its first figure cell: the first figure, drawn inside `book_rc`, loaded the
    inline backend (interactive on) and the context then restored interactive off."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    table = ("import pandas as pd\nfrom taser_book.plots import plot_metric_bars\n"
             "t = pd.DataFrame({'model': ['a', 'b'], 'dataset': ['d', 'd'], 'metric': ['m', 'm'], 'value': [1, 2]})")
    nb.cells = [nbformat.v4.new_code_cell(table)] + [nbformat.v4.new_code_cell("plot_metric_bars(t, 'm');")
                                                     for _ in range(3)]
    NotebookClient(nb, kernel_name="python3", timeout=100).execute()
    shown = [sum("image/png" in o.get("data", {}) for o in cell.outputs) for cell in nb.cells[1:]]
    assert shown == [1, 1, 1]
