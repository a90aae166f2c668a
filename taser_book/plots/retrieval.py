"""Retrieval results as grouped bars: one group per dataset, one bar per model (with the spread over seeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from .style import COLUMN_WIDTH_IN, book_style

# How a panel names the datasets it shows (any other id is shown as it is)
DATASET_NAMES = {"dpr-nq": "NQ (DPR's Wikipedia)", "dpr-squad1": "SQuAD (DPR's Wikipedia)",
                 "dpr-trivia": "TriviaQA (DPR's Wikipedia)", "msmarco-passage": "MS MARCO dev",
                 "squad-open": "SQuAD-open", "wikiqa": "WikiQA", "trecqa": "TrecQA"}


@book_style
def plot_metric_bars(table: pd.DataFrame, metrics: Mapping[str, str] | str, *,
                     models: Sequence[str] | None = None, title: str | None = None,
                     ylabel: str | None = None) -> Figure:
    """Grouped bars of a long result table (columns model, dataset, metric, value; optionally seed).

    `metrics` names the metric to show, one for all datasets or one per dataset (e.g. R@20 for the QA sets and
    nDCG@10 for the others); a dataset it does not name is left out. With several rows per (dataset, model), e.g.
    one per seed, a bar is their mean and its error bar their standard deviation. Each bar's label names its metric.
    `ylabel` (default: the metric, or the metrics shown) should carry the values' unit, e.g. "R@20 (%)".
    """
    per_dataset = {d: metrics for d in table["dataset"].unique()} if isinstance(metrics, str) else dict(metrics)
    chosen = table[[per_dataset.get(d) == m for d, m in zip(table["dataset"], table["metric"])]]
    models = list(models) if models is not None else list(dict.fromkeys(chosen["model"]))
    datasets = [d for d in dict.fromkeys(chosen["dataset"])]
    stats = chosen.groupby(["dataset", "model"], sort=False)["value"].agg(["mean", "std", "count"])
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 3.6))
    width = 0.8 / max(1, len(models))
    x = np.arange(len(datasets))
    for i, model in enumerate(models):
        means = [stats["mean"].get((d, model), np.nan) for d in datasets]
        spread = [stats["std"].get((d, model), np.nan) if stats["count"].get((d, model), 0) > 1 else 0.0
                  for d in datasets]
        ax.bar(x + (i - (len(models) - 1) / 2) * width, means, width, label=model,
               yerr=spread if any(s > 0 for s in spread) else None, capsize=3)
    ax.set_xticks(x, [f"{d}\n{per_dataset[d]}" for d in datasets])
    shown = list(dict.fromkeys(per_dataset[d] for d in datasets))
    ax.set_ylabel(ylabel or " / ".join(shown))
    ax.legend(ncols=min(len(models), 4), loc="upper center", bbox_to_anchor=(0.5, -0.2))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


@book_style
def plot_beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, metric: str, *, models: Sequence[str],
                      our_dataset: str, paper_dataset: str, labels: Mapping[str, str] | None = None,
                      title: str | None = None, unit: str | None = None) -> Figure:
    """Two panels of bars on one scale: ours (mean over the rows of each model, e.g. its seeds, with their standard
    deviation as error bar and each seed as a dot) and the paper's published value for the same systems.

    `ours` is a long table (model, dataset, metric, value[, seed]) and `paper` one of `claims.paper_table`; a model
    missing from one side leaves an empty slot there (marked "–"), so the two panels line up; when the paper gives
    no value of `metric` at all, only our panel is drawn and its title says so. `labels` renames the models; `unit`
    goes into the axis label, e.g. "%"."""
    labels = dict(labels or {})
    mine = ours[(ours["dataset"] == our_dataset) & (ours["metric"] == metric)]
    theirs = paper[(paper["dataset"] == paper_dataset) & (paper["metric"] == metric)]
    ours_name, paper_name = (DATASET_NAMES.get(d, d) for d in (our_dataset, paper_dataset))
    sides = [(mine, f"ours: {ours_name}")]
    if len(theirs):
        sides.append((theirs, f"paper: {paper_name}"))
    else:
        sides = [(mine, f"ours: {ours_name} (the paper gives no {metric})")]
    fig, axes = plt.subplots(1, len(sides), figsize=(COLUMN_WIDTH_IN, 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    x = np.arange(len(models))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (frame, name) in zip(axes, sides):
        for i, model in enumerate(models):
            values = frame.loc[frame["model"] == model, "value"].astype(float).to_numpy()
            if not len(values):
                ax.text(i, 1, "–", ha="center", va="bottom", fontsize=8, color="grey")
                continue
            spread = values.std(ddof=1) if len(values) > 1 else None
            ax.bar(i, values.mean(), 0.7, color=colors[i % len(colors)], yerr=spread, capsize=3)
            if len(values) > 1:
                ax.scatter(np.full(len(values), i), values, s=9, color="black", zorder=3)
            ax.text(i, values.mean(), f"{values.mean():.1f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(x, [labels.get(m, m) for m in models], rotation=30, ha="right")
        ax.set_title(name)
    axes[0].set_ylabel(f"{metric} ({unit})" if unit else metric)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
