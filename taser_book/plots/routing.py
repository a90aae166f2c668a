"""TASER's learned routing drawn: expert usage as a heatmap, routing entropy over training (App. A, Table A1)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from taser_book.analyses.routing import align_experts
from .style import COLUMN_WIDTH_IN, book_style, panel_grid, panels_of


def _need(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise KeyError(f"{what}: no column(s) {missing}; the frame has {list(frame.columns)}")


@book_style
def plot_expert_usage(usage: pd.DataFrame, *, models: Sequence[str] | None = None, title: str | None = None
                      ) -> Figure:
    """One heatmap per model: rows are (specialized block, side[, unit]), columns the experts, each cell the share
    of that side's units the block routes to that expert (`analyses.routing.expert_usage`, with a `model`
    column). Rows of several seeds are averaged after `align_experts` has renumbered each seed's experts (0: the
    one the questions use most), since expert numbers mean nothing across seeds; the x label then says so. Shares
    are printed in the cells; an expert a model does not have is left blank."""
    _need(usage, ["model", "layer", "side", "expert", "share"], "plot_expert_usage")
    aligned = "seed" in usage.columns and usage.groupby("model")["seed"].nunique().max() > 1
    if aligned:
        usage = align_experts(usage)
    models = list(models) if models is not None else list(dict.fromkeys(usage["model"]))
    if not models:
        raise ValueError("plot_expert_usage: no models to draw")
    experts = int(usage["expert"].max()) + 1
    rows = max(len(usage[usage["model"] == m][["layer", "side"]].drop_duplicates()) for m in models)
    fig, grid = panel_grid(len(models), max_cols=2, panel_height=1.3 + 0.32 * rows, layout="constrained")
    axes = panels_of(grid)
    image = None
    for index, (ax, model) in enumerate(zip(axes, models)):
        mine = usage[usage["model"] == model]
        has_unit = "unit" in mine.columns and mine["unit"].nunique() > 1
        keys = ["layer", "side", *(["unit"] if has_unit else [])]
        mean = mine.groupby([*keys, "expert"], sort=False)["share"].mean().unstack("expert")
        order = sorted(mean.index, key=lambda k: (k[0], k[1] != "question", *k[2:]))
        grid = mean.reindex(index=order, columns=range(experts)).to_numpy(dtype=float)
        image = ax.imshow(np.ma.masked_invalid(grid), vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
        for (r, c), value in np.ndenumerate(grid):
            if not math.isnan(value):
                ax.text(c, r, f"{value:.0%}", ha="center", va="center", fontsize=7,
                        color="black" if value > 0.6 else "white")
        ax.set_xticks(range(experts), [f"E{e}" for e in range(experts)])
        first_column = index % grid.shape[1] == 0
        ax.set_yticks(range(len(order)), [f"layer {k[0]}, {' '.join(str(x) for x in k[1:])}" for k in order]
                      if first_column else [])
        units = mine["unit"].unique() if "unit" in mine.columns else []
        ax.set_title(model + (f"\n(share of {units[0]}s)" if len(units) == 1 else ""))
        ax.set_xlabel("expert (by the questions' use,\nper seed)" if aligned else "expert")
    fig.colorbar(image, ax=axes, fraction=0.03, pad=0.02, label="share of units")
    if title:
        fig.suptitle(title)
    return fig


@book_style
def plot_routing_entropy(curves: pd.DataFrame, *, by: str = "mode", num_experts: int | None = None,
                         smooth: int = 1, title: str | None = None) -> Figure:
    """Two panels over training steps: the mean per-unit routing entropy (`h_unit`: how unsure each routing
    decision is) and the entropy of the batch-averaged routing (`h_batch`: how evenly a batch uses the experts),
    one line per value of `by` (e.g. the entropy mode), averaged over seeds (the band spans the seeds' min to max).
    `curves` is `training.logs.routing_entropy_curve` rows with a `by` column (and optionally `seed`); `smooth`
    takes a centred rolling mean over that many logged steps. With `num_experts`, a dashed line marks log I, the
    entropy of uniform routing."""
    _need(curves, [by, "step", "h_unit", "h_batch"], "plot_routing_entropy")
    fig, axes = plt.subplots(1, 2, figsize=(COLUMN_WIDTH_IN, 3.4), sharex=True)
    names = {"h_unit": "per-unit routing entropy", "h_batch": "entropy of the batch's\nmean routing"}
    styles = ("-", "--", ":", "-.")  # a line under another stays visible
    for ax, column in zip(axes, ("h_unit", "h_batch")):
        means = {}
        for i, (name, group) in enumerate(curves.groupby(by, sort=False)):
            series = (group.pivot_table(index="step", columns="seed", values=column)
                      if "seed" in group.columns else group.set_index("step")[[column]])
            series = series.sort_index().rolling(max(1, smooth), center=True, min_periods=1).mean()
            mean = means[name] = series.mean(axis=1)
            line, = ax.plot(mean.index, mean.to_numpy(), styles[i % len(styles)], label=str(name))
            if series.shape[1] > 1:
                ax.fill_between(series.index, series.min(axis=1), series.max(axis=1), alpha=0.2,
                                color=line.get_color())
        if num_experts:
            ax.axhline(math.log(num_experts), color="grey", linestyle="--", linewidth=1)
            ax.text(ax.get_xlim()[0], math.log(num_experts), f" log {num_experts} (uniform)", va="bottom",
                    fontsize=8, color="grey")
        if len(means) > 1:  # curves drawn on top of each other: say so, with how far apart they are
            gap = pd.concat(means, axis=1).dropna()
            gap = float((gap.max(axis=1) - gap.min(axis=1)).max()) if len(gap) else math.nan
            low, high = ax.get_ylim()
            if gap == gap and gap < 0.01 * (high - low):
                ax.text(0.98, 0.03, f"the curves coincide:\nmax difference {gap:.1g} nats", transform=ax.transAxes,
                        ha="right", va="bottom", fontsize=8, color="grey")
        ax.set_title(names[column], fontsize=9)
        ax.set_xlabel("training step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("entropy (nats)")
    axes[0].legend(title=by, fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
