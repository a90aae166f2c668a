"""The training-cost figure (TASER Sec. 4.1, Table A3): time per epoch and memory of each model, as bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import book_style, panel_grid, panels_of

# metric -> (axis label, factor from the stored unit)
DEFAULT_PANELS: dict[str, tuple[str, float]] = {
    "epoch_seconds": ("minutes per epoch (wall)", 1 / 60),
    "peak_bytes": ("peak memory (GiB)", 1 / 2 ** 30),
}


@book_style
def plot_cost_bars(table: pd.DataFrame, panels: Mapping[str, tuple[str, float]] | None = None, *,
                   models: Sequence[str] | None = None, labels: Mapping[str, str] | None = None,
                   baseline: str | None = None, paper_ratio: Mapping[str, Mapping[str, float]] | None = None,
                   title: str | None = None) -> Figure:
    """One panel per metric of `panels` (metric -> (axis label, unit factor)): a bar per model, the mean of its
    rows (e.g. its seeds) with their standard deviation as error bar and each seed as a dot. `table` is long:
    model, metric, value[, seed].

    With `baseline` (a model), a last panel shows every metric as a ratio to the baseline's mean, and beside it,
    hatched, the paper's ratios (`paper_ratio`: {metric: {model: ratio}}) where it gives them."""
    panels = dict(panels or DEFAULT_PANELS)
    labels = dict(labels or {})
    models = list(models) if models is not None else list(dict.fromkeys(table["model"]))
    n = len(panels) + (1 if baseline else 0)
    fig, grid = panel_grid(n, max_cols=2, panel_height=3.3)
    axes = panels_of(grid)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x = np.arange(len(models))
    means: dict[str, dict[str, float]] = {}
    for ax, (metric, (axis_label, factor)) in zip(axes, panels.items()):
        rows = table[table["metric"] == metric]
        means[metric] = {}
        for i, model in enumerate(models):
            values = rows.loc[rows["model"] == model, "value"].astype(float).to_numpy() * factor
            if not len(values):
                ax.text(i, 0, "–", ha="center", va="bottom", fontsize=8, color="grey")
                continue
            means[metric][model] = float(values.mean())
            ax.bar(i, values.mean(), 0.7, color=colors[i % len(colors)],
                   yerr=values.std(ddof=1) if len(values) > 1 else None, capsize=3)
            if len(values) > 1:
                ax.scatter(np.full(len(values), i), values, s=9, color="black", zorder=3)
            ax.text(i, values.mean(), f"{values.mean():.3g}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [labels.get(m, m) for m in models], rotation=20, ha="right")
        ax.set_ylabel(axis_label)
    if baseline:
        ax = axes[-1]
        others = [m for m in models if m != baseline]
        width = 0.8 / max(1, 2 * len(panels))
        for j, metric in enumerate(panels):
            base = means[metric].get(baseline)
            ours = [means[metric].get(m, np.nan) / base if base else np.nan for m in others]
            theirs = [(paper_ratio or {}).get(metric, {}).get(m, np.nan) for m in others]
            offset = (2 * j - len(panels) + 0.5) * width
            xs = np.arange(len(others))
            color = colors[(len(models) + j) % len(colors)]  # not the models' colours of the other panels
            ax.bar(xs + offset, ours, width, color=color, label=f"{panels[metric][0]}: ours")
            if not np.all(np.isnan(theirs)):
                ax.bar(xs + offset + width, theirs, width, color="white", edgecolor=color, hatch="//",
                       label=f"{panels[metric][0]}: paper")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(np.arange(len(others)), [labels.get(m, m) for m in others], rotation=20, ha="right")
        ax.set_ylabel(f"ratio to {labels.get(baseline, baseline)}")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
