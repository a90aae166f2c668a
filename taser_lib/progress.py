"""The progress bar every long loop of the library shows: a widget in Jupyter, text in a terminal.

`tqdm.auto` picks a widget inside a Jupyter kernel. A notebook run by `taser reproduce` is such a kernel, but its
output goes to a terminal, where a widget shows nothing: the runner sets TASER_PROGRESS=text for the kernels it
starts, and the library's bars are then text on stderr, which the runner streams (and the book leaves out).

`disable_progress_bars()` switches every bar of the library off, and transformers' own, as `huggingface_hub` and
`datasets` name it (TASER_PROGRESS=off switches the library's off for a whole process); `enable_progress_bars()` switches them back on.
"""

from __future__ import annotations

import os

from tqdm import tqdm as _text_tqdm
from tqdm.auto import tqdm as _auto_tqdm

PROGRESS_ENV = "TASER_PROGRESS"


_shown = True


def disable_progress_bars() -> None:
    """No progress bar from the library, nor from transformers' loading and saving, until `enable_progress_bars()`."""
    global _shown
    _shown = False
    _transformers_bars(False)


def enable_progress_bars() -> None:
    global _shown
    _shown = True
    _transformers_bars(True)


def _transformers_bars(on: bool) -> None:
    from transformers.utils import logging

    (logging.enable_progress_bar if on else logging.disable_progress_bar)()


def progress_bars_shown() -> bool:
    return _shown and os.environ.get(PROGRESS_ENV) != "off"


def _choose():
    return _text_tqdm if os.environ.get(PROGRESS_ENV) == "text" else _auto_tqdm


class _Tqdm:
    """`tqdm(...)` as tqdm itself, choosing text or widget when called (the environment may change after import)."""

    def __call__(self, *args, **kwargs):
        if not progress_bars_shown():
            kwargs["disable"] = True
        return _choose()(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(_choose(), name)


tqdm = _Tqdm()
