"""Retrieval results as grouped bars: one group per dataset, one bar per model (with the spread over seeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure


def plot_metric_bars(table: pd.DataFrame, metrics: Mapping[str, str] | str, *,
                     models: Sequence[str] | None = None, title: str | None = None) -> Figure:
    """Grouped bars of a long result table (columns model, dataset, metric, value; optionally seed).

    `metrics` names the metric to show, one for all datasets or one per dataset (e.g. R@20 for the QA sets and
    nDCG@10 for the others); a dataset it does not name is left out. With several rows per (dataset, model), e.g.
    one per seed, a bar is their mean and its error bar their standard deviation. Each bar's label names its metric.
    """
    per_dataset = {d: metrics for d in table["dataset"].unique()} if isinstance(metrics, str) else dict(metrics)
    chosen = table[[per_dataset.get(d) == m for d, m in zip(table["dataset"], table["metric"])]]
    models = list(models) if models is not None else list(dict.fromkeys(chosen["model"]))
    datasets = [d for d in dict.fromkeys(chosen["dataset"])]
    stats = chosen.groupby(["dataset", "model"], sort=False)["value"].agg(["mean", "std", "count"])
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(datasets) * max(1, len(models)) / 2 + 2), 3.8))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(datasets))
    for i, model in enumerate(models):
        means = [stats["mean"].get((d, model), np.nan) for d in datasets]
        spread = [stats["std"].get((d, model), np.nan) if stats["count"].get((d, model), 0) > 1 else 0.0
                  for d in datasets]
        ax.bar(x + (i - (len(models) - 1) / 2) * width, means, width, label=model,
               yerr=spread if any(s > 0 for s in spread) else None, capsize=3)
    ax.set_xticks(x, [f"{d}\n{per_dataset[d]}" for d in datasets])
    ax.set_ylabel("value")
    ax.legend(frameon=False, ncols=min(len(models), 4), loc="upper center", bbox_to_anchor=(0.5, -0.22))
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
