"""One look for every figure of the book: seaborn's `ticks` theme, drawn at the width of the book's text column.

A figure wider than the column is shrunk by the browser, and its text with it: a 1,450 px figure in a 700 px column
shows 10-point tick labels about 6 px tall. So every figure here is at most `COLUMN_WIDTH_IN` wide at `DPI` (about
700 px, shown at its own size), panels wrap into rows instead of growing sideways, and the smallest text is at
least `MIN_TEXT_PX` pixels on screen (`text_sizes_px` measures it; the tests hold every figure function to it).

The style is applied only while a figure function draws (`book_style`, a decorator), so importing `taser_lib`
changes nothing in a user's own matplotlib settings.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.text import Text

COLUMN_WIDTH_IN = 7.0  # the book's text column: about 700 px at DPI
DPI = 100              # the inline backend's and the book's
MIN_TEXT_PX = 9.0      # the smallest text on screen, in pixels, once the figure is shown in the column

# seaborn's "notebook" sizes scaled so that the smallest (tick labels, legends) are ~9.5 pt, 13 px at DPI
_RC: dict[str, Any] = {**sns.axes_style("ticks"), **sns.plotting_context("notebook", font_scale=0.82),
                       "figure.dpi": DPI, "savefig.dpi": DPI, "axes.spines.top": False, "axes.spines.right": False,
                       "legend.frameon": False}

F = TypeVar("F", bound=Callable[..., Any])


@contextlib.contextmanager
def book_rc() -> Iterator[None]:
    """The book's matplotlib settings for the duration of the block (the user's own come back after it).

    All but interactive mode: a notebook's first figure loads the inline backend, and loading it turns interactive
    mode on. Restoring the mode of before (as `plt.rc_context` does) would leave every later figure of the notebook
    undrawn, so the block's interactive mode stays. (`rc_context` already leaves the backend alone.)"""
    with plt.rc_context(_RC):
        try:
            yield
        finally:
            interactive = mpl.is_interactive()
    mpl.interactive(interactive)


def book_style(function: F) -> F:
    """Decorator: the figure function draws under `book_rc`."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with book_rc():
            return function(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


def panel_grid(panels: int, *, max_cols: int = 2, panel_height: float = 3.0, width: float = COLUMN_WIDTH_IN,
               **subplot_kw: Any) -> tuple[Figure, np.ndarray]:
    """A figure `width` inches wide with `panels` axes, at most `max_cols` to a row, each row `panel_height`
    inches tall. Returns (figure, 2-D array of axes); the grid's unused cells are removed (their entries are None),
    so `fig.axes` holds exactly the panels."""
    cols = max(1, min(max_cols, panels))
    rows = max(1, math.ceil(panels / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width, panel_height * rows), squeeze=False, **subplot_kw)
    axes = axes.astype(object)
    for index in range(panels, rows * cols):
        r, c = divmod(index, cols)
        fig.delaxes(axes[r, c])
        axes[r, c] = None
    return fig, axes


def panels_of(axes: np.ndarray) -> list:
    """The axes of `panel_grid` in reading order, without its removed cells."""
    return [ax for ax in np.asarray(axes, dtype=object).ravel() if ax is not None]


def rendered_width_in(fig: Figure) -> float:
    """The width in inches of `fig` as the notebook shows it (cropped to its tight bounding box, as the inline
    backend saves it, so a legend outside the axes counts)."""
    renderer = fig.canvas.get_renderer()
    return float(fig.get_tightbbox(renderer).width)


def text_sizes_px(fig: Figure, column_in: float = COLUMN_WIDTH_IN) -> list[tuple[str, float]]:
    """(text, height in pixels on screen) of every visible, non-empty text of `fig`, once the figure is shown in a
    column `column_in` wide (shrunk when it is wider, never enlarged)."""
    scale = min(1.0, column_in / max(rendered_width_in(fig), 1e-9))
    out = []
    for text in fig.findobj(Text):
        if text.get_visible() and text.get_text().strip():
            out.append((text.get_text(), text.get_fontsize() * DPI / 72.0 * scale))
    return out
