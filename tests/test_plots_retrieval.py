"""taser_book.plots.plot_metric_bars: grouped bars of a long result table, with the spread over seeds."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from taser_book.plots import plot_metric_bars  # noqa: E402


def _table(seeds=(1,)):
    rows = []
    for seed in seeds:
        for model, base in (("bm25", 70.0), ("dense", 60.0)):
            rows += [{"model": model, "dataset": "squad-open", "metric": "R@20", "value": base + seed, "seed": seed},
                     {"model": model, "dataset": "squad-open", "metric": "R@5", "value": base - 20, "seed": seed},
                     {"model": model, "dataset": "scifact", "metric": "nDCG@10", "value": base / 2, "seed": seed}]
    return pd.DataFrame(rows)


def test_one_bar_per_model_and_dataset_with_its_metric():
    fig = plot_metric_bars(_table(), {"squad-open": "R@20", "scifact": "nDCG@10"})
    ax = fig.axes[0]
    heights = sorted(round(p.get_height(), 6) for p in ax.patches)
    assert heights == [30.0, 35.0, 61.0, 71.0]        # R@5 is left out; one bar per (dataset, model)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["squad-open\nR@20", "scifact\nnDCG@10"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bm25", "dense"]


def test_seeds_give_mean_and_error_bars():
    fig = plot_metric_bars(_table(seeds=(1, 2, 3)), "R@20")
    ax = fig.axes[0]
    assert sorted(round(p.get_height(), 6) for p in ax.patches) == [62.0, 72.0]   # the mean over seeds
    errs = [c for c in ax.containers if getattr(c, "errorbar", None) is not None]
    segments = errs[0].errorbar.lines[2][0].get_segments()
    assert np.isclose(segments[0][1][1] - segments[0][0][1], 2 * np.std([1, 2, 3], ddof=1))
