"""The hybrid-weight figure (TASER Eq. 6, App. D): each dense model's dev metric against alpha."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..tables.hybrid_sweep import DENSE_ALONE, seed_curves
from .style import COLUMN_WIDTH_IN, book_style, panel_grid, panels_of


@book_style
def plot_alpha_curves(sweep: pd.DataFrame, chosen: Mapping[str, float] | None = None, *, metric: str | None = None,
                      models: Sequence[str] | None = None, labels: Mapping[str, str] | None = None,
                      title: str | None = None, unit: str | None = "%", ax=None) -> Figure:
    """One line per model: the dev metric of Eq. 6 against alpha (`tables.hybrid_sweep.alpha_sweep`, in % like
    every R@K of the book's tables: `unit` labels the axis, None for none), the mean
    over seeds with a band of one standard deviation. The dense run alone (alpha 0.0 in the sweep) is drawn as a
    hollow marker at alpha 0, and each model's `chosen` alpha as a star on its line. `metric`: which of the sweep's
    metrics (default: its first); `ax`: draw into this axes (its figure is returned)."""
    metric = metric or str(sweep["metric"].iloc[0])
    curves = seed_curves(sweep[sweep["metric"] == metric])
    models = list(models) if models is not None else list(dict.fromkeys(curves["model"]))
    labels = dict(labels or {})
    if ax is None:
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 3.8))
    else:
        fig = ax.figure
    for model in models:
        curve = curves[curves["model"] == model].sort_values("alpha")
        if curve.empty:
            continue
        fused = curve[curve["alpha"] != DENSE_ALONE]
        alone = curve[curve["alpha"] == DENSE_ALONE]
        seeds = int(curve["seeds"].max())
        line, = ax.plot(fused["alpha"], fused["mean"], "-", marker=".",
                        label=f"{labels.get(model, model)} ({seeds} seed{'s' if seeds > 1 else ''})")
        std = fused["std"].fillna(0.0).to_numpy()
        if np.any(std > 0):
            ax.fill_between(fused["alpha"], fused["mean"] - std, fused["mean"] + std, color=line.get_color(),
                            alpha=0.15, linewidth=0)
        if not alone.empty:
            ax.plot([DENSE_ALONE], alone["mean"], "o", markerfacecolor="none", color=line.get_color())
        if chosen and model in chosen:
            at = fused[np.isclose(fused["alpha"], chosen[model])]
            if not at.empty:
                ax.plot(at["alpha"], at["mean"], "*", markersize=13, color=line.get_color())
    ax.set_xlabel("alpha (Eq. 6); 0: the dense run alone (hollow)")
    ax.set_ylabel(f"dev {metric} ({unit})" if unit else f"dev {metric}")
    ax.axvspan(0.5, 2.0, color="grey", alpha=0.06, linewidth=0)
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


@book_style
def plot_alpha_panels(sweep: pd.DataFrame, chosen: Mapping[str, float] | None = None, *,
                      metrics: Sequence[str] | None = None, models: Sequence[str] | None = None,
                      labels: Mapping[str, str] | None = None, unit: str | None = "%") -> Figure:
    """`plot_alpha_curves` for each of `metrics` (default: every metric of the sweep), one panel per metric
    stacked in the column; the chosen alphas (stars) are drawn on the first metric's panel, the one they were
    chosen on."""
    metrics = list(metrics) if metrics is not None else list(dict.fromkeys(sweep["metric"]))
    fig, grid = panel_grid(len(metrics), max_cols=1, panel_height=3.4)
    for i, (ax, metric) in enumerate(zip(panels_of(grid), metrics)):
        plot_alpha_curves(sweep, chosen if i == 0 else None, metric=metric, models=models, labels=labels, unit=unit, ax=ax,
                          title=f"dev {metric}" + (" (stars: the chosen alpha)" if i == 0 and chosen else ""))
    return fig
