"""The testbed probe's figure: the CA − one-hot DE test gap against the number of training questions, one line
per testbed, each seed a point with its paired 95% confidence interval (`runs.testbed.probe_gaps`)."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from .style import COLUMN_WIDTH_IN, book_style


@book_style
def plot_probe_gap(gaps: pd.DataFrame, *, questions: Mapping[tuple[str, str], int], metric: str = "MRR@10",
                   scale: float = 100.0, title: str | None = None) -> Figure:
    """CA − DE (`metric` x `scale`, "points") against training questions (log axis). `questions` maps (dataset,
    n_train label) to the number of questions trained on (the label "all" becomes the split's size). A point above
    zero whose interval clears zero is a setting where the paper's premise holds."""
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 3.6))
    ax.axhline(0.0, color="0.4", lw=0.8)
    by = ["dataset", "start"] if "start" in gaps.columns else ["dataset"]
    for i, (key, part) in enumerate(gaps.groupby(by, sort=False)):
        dataset = key[0]
        label = dataset if len(key) == 1 or key[1] == "packaged" else f"{dataset}, {key[1]}"
        if (dataset, "all") in questions and "all" in set(part["n_train"].astype(str)):
            label += f" (all: {questions[(dataset, 'all')]:,} questions)"
        color = f"C{i}"
        xs = [questions[(dataset, str(n))] for n in part["n_train"]]
        part = part.assign(x=xs)
        means = part.groupby("x")["ca − de"].mean().sort_index()
        ax.plot(means.index, means.to_numpy() * scale, "-", color=color, label=label)
        low = (part["ca − de"] - part["ca − de CI low"]) * scale
        high = (part["ca − de CI high"] - part["ca − de"]) * scale
        ax.errorbar(part["x"], part["ca − de"] * scale, yerr=[low, high], fmt="o", color=color, ms=4, capsize=3)
    ax.set_xscale("log")
    ticks = sorted({questions[(d, str(n))] for d, n in zip(gaps["dataset"], gaps["n_train"]) if str(n) != "all"})
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])   # the probed sizes, as plain numbers
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("training questions (CA and DE alike, log scale)")
    ax.set_ylabel(f"CA − one-hot DE, test {metric} (points)")
    ax.legend(title="testbed, start", frameon=False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
