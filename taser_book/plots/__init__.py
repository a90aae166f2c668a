"""The figures' drawing code, shared by notebooks: each function takes results and returns a Figure.

The functions load lazily, each from its own module (PEP 562): a notebook that draws bar charts imports
`retrieval.py` and `style.py`, not the routing or architecture code. A page's result records the library files
its kernel loaded, so a change to one figure module makes stale only the pages that draw with it.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULE_OF = {
    "draw_taser_architecture": "architecture", "expert_names": "architecture",
    "plot_cost_bars": "efficiency",
    "plot_alpha_curves": "hybrid", "plot_alpha_panels": "hybrid",
    "plot_beside_paper": "retrieval", "plot_metric_bars": "retrieval",
    "plot_prop3_gradients": "propositions", "plot_truncation_curve": "propositions",
    "plot_expert_usage": "routing", "plot_routing_entropy": "routing",
    "COLUMN_WIDTH_IN": "style", "book_rc": "style", "book_style": "style", "panel_grid": "style",
    "learning_curve_table": "scores", "plot_learning_curves": "scores", "plot_margin_histograms": "scores",
    "plot_score_densities": "scores", "plot_size_sweep": "scores",
}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
