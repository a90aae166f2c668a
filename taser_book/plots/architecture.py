"""TASER Figure 1 drawn from a model's own config: shared blocks, specialized blocks with their experts and
router, bottom to top as the paper draws them."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch

from taser_lib.models.taser import TaserConfig
from .style import COLUMN_WIDTH_IN, book_style

_SHARED, _ATTN, _EXPERT, _ROUTER = "#d9d9d9", "#9ecae1", "#fdae6b", "#a1d99b"


def expert_names(config: TaserConfig) -> list[str]:
    return config.strategy.expert_names(config.num_experts)


def _box(ax, x, y, w, h, color, text, fontsize=8):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor="black", linewidth=0.8))
    ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=fontsize)


@book_style
def draw_taser_architecture(config: TaserConfig, title: str | None = None):
    """A matplotlib Figure of the encoder stack described by `config` (any T, I, routing, depth)."""
    specialized = set(config.specialized_layers)
    n = config.num_hidden_layers
    row_h, gap = 1.0, 0.35
    fig_h = max(3.0, 0.55 * n * (row_h + gap) + 1.2)
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, fig_h))
    names = expert_names(config)
    for layer in range(n):
        y = layer * (row_h + gap)
        ax.text(-0.15, y + row_h / 2, f"block {layer + 1}", ha="right", va="center", fontsize=8)
        if layer not in specialized:
            _box(ax, 0, y, 6, row_h, _SHARED, "shared block: MHA + Add&Norm, FFN + Add&Norm")
            continue
        _box(ax, 0, y, 1.8, row_h, _ATTN, "MHA\n+ Add&Norm")
        router = {"deterministic": "router:\nquestion or\npassage", "sequence": "router R(u)\nper sequence",
                  "token": "router R(u)\nper token", "shared": "no-op\nrouter"}[config.routing]
        _box(ax, 1.95, y, 1.1, row_h, _ROUTER, router, fontsize=7)
        width = (6 - 3.2) / len(names)
        for i, name in enumerate(names):  # four or more experts: the name alone fits ("+ Add&Norm" as in the key)
            _box(ax, 3.2 + i * width, y + 0.08, width - 0.08, row_h - 0.16, _EXPERT,
                 f"{name}\n+ Add&Norm" if len(names) < 4 else name, fontsize=7)
    ax.annotate("", xy=(3, n * (row_h + gap) - gap + 0.35), xytext=(3, n * (row_h + gap) - gap),
                arrowprops=dict(arrowstyle="->"))
    ax.text(3, n * (row_h + gap) - gap + 0.45, f"[{config.pooling.upper()}] vector", ha="center", fontsize=8)
    ax.annotate("", xy=(3, 0), xytext=(3, -0.45), arrowprops=dict(arrowstyle="->"))
    ax.text(3, -0.75, "question or passage tokens", ha="center", fontsize=8)
    ax.set_xlim(-1.4, 6.2)
    ax.set_ylim(-1.0, n * (row_h + gap) + 0.6)
    ax.axis("off")
    if len(names) >= 4:
        ax.text(6.0, n * (row_h + gap) - gap + 0.45, "each expert: FFN + Add&Norm", ha="right", fontsize=8)
    ax.set_title(title or (f"TASER ({config.routing}, T={config.shared_blocks}, I={config.num_experts}, "
                           f"{n} blocks, hidden {config.hidden_size})"), fontsize=10)
    fig.tight_layout()
    return fig
