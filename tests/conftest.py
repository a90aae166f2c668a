"""Shared test fixtures. Tests run offline: the real data is ../shared/data (or $TASER_DATA_MIRROR)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# faiss and torch each start one OpenMP thread per core; two pools on 2 cores thrash. One each in tests.
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]

import taser_lib.datasets  # noqa: E402,F401  the registry, which the tests' configs name (test_named: the core without it)
import taser_lib.speed  # noqa: E402,F401  auto's CPU measurement and fused linears, as the book runs (test_plugins: without)


def shared_data_dir() -> Path:
    return Path(os.environ.get("TASER_DATA_MIRROR", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    assert path.is_dir(), f"the offline data mirror {path} is missing: tests need ../shared/data beside the checkout"
    return path


@pytest.fixture(scope="session")
def tiny_bert_with_tokenizer(tmp_path_factory) -> Path:
    """A random 2-layer BERT of width 32 (seeded) saved with the packaged model's tokenizer: a model folder that
    `build_model` and `load_tokenizer` both read, made once per test session."""
    import torch
    from transformers import BertConfig, BertModel

    from taser_lib.models import load_tokenizer

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=64)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    load_tokenizer("default").save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    # No test may reach a hub: transformers and huggingface_hub honour these.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


# Every figure a library function draws in these test files must fit the book's column with readable text: checked
# on each figure still open when a test ends (the figure functions return their figures, the tests keep them open).
FIGURE_TESTS = ("test_plots_", "test_routing_usage", "test_disagreement", "test_testbed", "test_de_score_analysis",
                "test_propositions")


@pytest.fixture(autouse=True)
def _figures_fit_the_column(request):
    if not request.node.path.name.startswith(FIGURE_TESTS):
        yield
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from taser_book.plots.style import COLUMN_WIDTH_IN, MIN_TEXT_PX, rendered_width_in, text_sizes_px
    plt.close("all")
    yield
    try:
        for number in plt.get_fignums():
            fig = plt.figure(number)
            width = rendered_width_in(fig)
            assert width <= COLUMN_WIDTH_IN * 1.05, f"a figure is {width:.2f} in wide; the column is {COLUMN_WIDTH_IN}"
            small = [(text, round(px, 1)) for text, px in text_sizes_px(fig) if px < MIN_TEXT_PX]
            assert not small, f"text under {MIN_TEXT_PX} px on screen: {small[:5]}"
    finally:
        plt.close("all")


# `make test TEST_WORKERS=2` runs on both cores (pytest-xdist, `-n 2 --dist loadscope`). A test file's tests share
# module-scoped fixtures (trained tiny models, built books) and a notebook's nbval cells share one kernel, so each file
# is one unit that a single worker runs; only the full-code-path notebooks, each independent, are spread one by one.
# (pytest-xdist's `loadgroup` marks do nothing under pytest 9: it renames `item._nodeid`, which pytest 9 no longer
# reads, so the units are set here through xdist's scheduler hook.)
SPREAD = ("tests/test_full_code_path.py",)


# The slowest units first, so that neither worker is left with a long one at the end. Measured with --durations on a
# fresh clone (2026-11-28, smoke on the tiny model): the notebooks at smoke 20-130 s each under two workers (about
# 1,000 s in all; 360 s one after another on an idle machine), the full-code-path notebooks 15-65 s each (about
# 520 s), the two books 140 s, the quick bench 63 s.
SLOW_FIRST = ("notebooks/", "tests/test_book.py", "tests/test_bench.py", "tests/test_full_code_path.py")


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # only in pytest-xdist's workers: a serial run keeps pytest's order
        return

    def rank(item):
        return next((i for i, prefix in enumerate(SLOW_FIRST) if item.nodeid.startswith(prefix)), len(SLOW_FIRST))

    items.sort(key=rank)  # stable: a file's tests and a notebook's cells keep their order


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, pytest ignores this one
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # keep the order above (xdist would put the units with most tests first)

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path in SPREAD else path

    return ByFile(config, log)
