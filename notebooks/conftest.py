"""nbval runs each notebook here at its own defaults (smoke sizes), one kernel at a time, after the unit tests: that
kernel gets every core of the machine as its thread count (tests/conftest.py gives one thread to each process of the
unit tests, where two thread pools would thrash)."""

from __future__ import annotations

import os

import pytest

from taser_book.reproduce import THREAD_ENVS, available_cores


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """The kernel starts in the setup of a notebook's first cell and reads its thread count then."""
    saved = {v: os.environ.get(v) for v in THREAD_ENVS}
    os.environ.update({v: str(available_cores()) for v in THREAD_ENVS})
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
