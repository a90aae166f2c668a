"""TASER Figure 1 drawn from a config: it fits the column and its text is readable there (the conftest fixture
checks every figure a test leaves open), with two experts and with four."""

import subprocess
import sys

import pytest

from taser_book.plots import draw_taser_architecture
from taser_lib.models.taser import TaserConfig


@pytest.mark.parametrize("routing, experts", [("deterministic", 2), ("sequence", 4), ("token", 8)])
def test_architecture_figure_names_every_expert(routing, experts):
    config = TaserConfig(num_hidden_layers=6, shared_blocks=1, routing=routing, num_experts=experts)
    fig = draw_taser_architecture(config)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum("router" in t for t in texts) == len(config.specialized_layers)
    assert sum(t.split("\n")[0] in config.strategy.expert_names(experts) for t in texts) == \
        experts * len(config.specialized_layers)


def test_a_figure_function_loads_only_its_own_module():
    # a page records the library files its kernel loaded: drawing bars must not load (and depend on) routing code
    code = ("import sys; from taser_book.plots import plot_metric_bars; "
            "print(sorted(m for m in sys.modules if m.startswith('taser_book.plots.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['taser_book.plots.retrieval', 'taser_book.plots.style']"
