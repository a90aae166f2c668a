"""nbval runs each notebook here at its own defaults (smoke sizes). Its kernel gets this machine's cores shared out among
the test run's workers as its thread count: every core in a serial run, one each under `make test`'s two pytest-xdist
workers on two cores (tests/conftest.py gives one thread to each process of the unit tests). Two kernels each using
both cores of a 2-core machine run several times slower than one core each (`reproduce._threads_per_kernel`)."""

from __future__ import annotations

import os

import pytest

from taser_book.runner import THREAD_ENVS, available_cores


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """The kernel starts in the setup of a notebook's first cell and reads its thread count then."""
    saved = {v: os.environ.get(v) for v in THREAD_ENVS}
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)   # set by pytest-xdist in its workers
    os.environ.update({v: str(max(1, available_cores() // workers)) for v in THREAD_ENVS})
    try:
        yield
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
