"""The progress bar every long loop of the library shows: a widget in Jupyter, text in a terminal.

`tqdm.auto` picks a widget inside a Jupyter kernel. A notebook run by `taser reproduce` is such a kernel, but its
output goes to a terminal, where a widget shows nothing: the runner sets TASER_PROGRESS=text for the kernels it
starts, and the library's bars are then text on stderr, which the runner streams (and the book leaves out).
"""

from __future__ import annotations

import os

from tqdm import tqdm as _text_tqdm
from tqdm.auto import tqdm as _auto_tqdm

PROGRESS_ENV = "TASER_PROGRESS"


def _choose():
    return _text_tqdm if os.environ.get(PROGRESS_ENV) == "text" else _auto_tqdm


class _Tqdm:
    """`tqdm(...)` as tqdm itself, choosing text or widget when called (the environment may change after import)."""

    def __call__(self, *args, **kwargs):
        return _choose()(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(_choose(), name)


tqdm = _Tqdm()
