"""Shared test fixtures. Tests run offline: the real data is ../shared/data (or $TASER_DATA_MIRROR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# faiss and torch each start one OpenMP thread per core; two pools on 2 cores thrash. One each in tests.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("TASER_DATA_MIRROR", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    assert path.is_dir(), f"the offline data mirror {path} is missing: tests need ../shared/data beside the checkout"
    return path


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # No test may reach a hub: transformers and huggingface_hub honour these.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
