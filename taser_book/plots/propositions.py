"""Figures of the propositions of "In defense of dual-encoders": how well a rank-d SVD dual encoder reproduces a score
matrix (Proposition 1, finite form) and how the softmax cross-entropy's gradient approaches the margin MSE's
(Proposition 3). Each function takes the frame `analyses.propositions` returns and gives back the Figure.

    >>> plot_truncation_curve(truncation_curve(S, R))                  # error and MRR@10 against d
    >>> plot_truncation_curve(pd.concat([ca.assign(model="CA"), de.assign(model="DE")]))   # one line per model
    >>> plot_prop3_gradients(prop3_gradients(s, t, taus=np.logspace(0, 3, 13)))
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .scores import _finish, _order, _require
from .style import COLUMN_WIDTH_IN, book_style


@book_style
def plot_truncation_curve(curve: pd.DataFrame, *, models: Sequence[str] | None = None, log_error: bool = True,
                          title: str | None = None) -> Figure:
    """Two panels against the embedding dimension d (log2 axis): the relative error ||S - S_d||_F / ||S||_F of the
    rank-d approximation, and (when the frame has `mrr`) the MRR@10 of ranking by S_d, with the MRR@10 of S
    itself dashed and rank(S) dotted. `curve`: `truncation_curve`'s columns (dim, rank, relative_error[, mrr,
    mrr_full]) and optionally `model` (one line per model)."""
    _require(curve, ["dim", "relative_error"], "plot_truncation_curve")
    frame = curve if "model" in curve.columns else curve.assign(model="S")
    names = _order(frame["model"], models)
    with_mrr = "mrr" in frame.columns and frame["mrr"].notna().any()
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(1, 2 if with_mrr else 1, figsize=(COLUMN_WIDTH_IN if with_mrr else COLUMN_WIDTH_IN * 0.6, 3.2), squeeze=False)
    err_ax = axes[0, 0]
    for i, name in enumerate(names):
        mine = frame[frame["model"] == name].sort_values("dim")
        color = colors[i % len(colors)]
        label = str(name) if len(names) > 1 or "model" in curve.columns else None
        err_ax.plot(mine["dim"], mine["relative_error"].clip(lower=1e-16) if log_error else mine["relative_error"],
                    "-o", ms=3, color=color, label=label)
        if with_mrr:
            axes[0, 1].plot(mine["dim"], mine["mrr"], "-o", ms=3, color=color, label=label)
            if "mrr_full" in mine.columns and mine["mrr_full"].notna().any():
                axes[0, 1].axhline(float(mine["mrr_full"].iloc[0]), color=color, ls="--", lw=1)
        if "rank" in mine.columns:
            for ax in axes[0]:
                ax.axvline(float(mine["rank"].iloc[0]), color=color, ls=":", lw=1)
    err_ax.set_ylabel("relative error\n||S - S_d|| / ||S||")
    if log_error:
        err_ax.set_yscale("log")
    for ax in axes[0]:
        ax.set_xscale("log", base=2)
        ticks = sorted(set(int(d) for d in frame["dim"]))
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("embedding dimension d")
    if with_mrr:
        axes[0, 1].set_ylabel("MRR@10 of ranking by S_d")
    if any(ax.get_legend_handles_labels()[0] for ax in axes[0]):
        axes[0, -1].legend(fontsize=8)
    return _finish(fig, title)


@book_style
def plot_prop3_gradients(grads: pd.DataFrame, *, component: int = 1, title: str | None = None) -> Figure:
    """Proposition 3 against the temperature tau (log axis): left, the ratio tau^2 d l_sce / d s_i over
    (1/8) d l_mmse / d s_i for every pair (thin lines; 1 is the limit, dashed); right, the largest and the median
    absolute difference |tau^2 d l_sce - d l_mmse / 8| over the pairs (log-log: slope -2 once tau exceeds the
    margins). `grads`: `prop3_gradients`'s columns (pair, tau, i, sce_scaled, mmse_over_8, ratio, abs_error); only
    the gradient in s_`component` is drawn (the other is its negative)."""
    _require(grads, ["pair", "tau", "i", "ratio", "abs_error"], "plot_prop3_gradients")
    part = grads[grads["i"] == component]
    if part.empty:
        raise ValueError(f"no rows with i == {component}; the frame has i in {sorted(set(grads['i']))}")
    fig, (ratio_ax, err_ax) = plt.subplots(1, 2, figsize=(COLUMN_WIDTH_IN, 3.2))
    for _, mine in part.groupby("pair", sort=False):
        mine = mine.sort_values("tau")
        ratio_ax.plot(mine["tau"], mine["ratio"], color="tab:blue", lw=0.8, alpha=0.5)
    ratio_ax.axhline(1.0, color="black", ls="--", lw=1)
    ratio_ax.set_ylabel(f"τ² ∂ℓ_sce/∂s{component}  ÷\n(1/8) ∂ℓ_mmse/∂s{component}")
    stats = part.groupby("tau")["abs_error"].agg(["max", "median"]).reset_index()
    err_ax.plot(stats["tau"], stats["max"].clip(lower=1e-300), "-o", ms=3, label="largest over pairs")
    err_ax.plot(stats["tau"], stats["median"].clip(lower=1e-300), "-s", ms=3, label="median over pairs")
    err_ax.set_yscale("log")
    err_ax.set_ylabel("|τ² ∂ℓ_sce − (1/8) ∂ℓ_mmse|")
    err_ax.legend(fontsize=8)
    for ax in (ratio_ax, err_ax):
        ax.set_xscale("log")
        ax.set_xlabel("temperature τ")
    finite = part["ratio"].replace([np.inf, -np.inf], np.nan).dropna()
    if len(finite):  # keep the small-tau ratios (which may be far from 1) from squashing the approach to 1
        lo, hi = np.nanpercentile(finite, [2, 98])
        ratio_ax.set_ylim(min(lo, 0.9) - 0.05, max(hi, 1.1) + 0.05)
    return _finish(fig, title)
