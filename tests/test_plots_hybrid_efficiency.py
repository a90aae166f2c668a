"""plots.plot_alpha_curves and plots.plot_cost_bars: what they draw, from small tables."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from taser_book.plots import plot_alpha_curves, plot_cost_bars  # noqa: E402


def _sweep():
    rows = []
    for seed, shift in ((1, 0.0), (2, 2.0)):
        for alpha in (0.0, 0.5, 1.0, 1.5):
            rows.append({"model": "m", "seed": seed, "alpha": alpha, "metric": "R@20", "value": 50 + 10 * alpha + shift})
            rows.append({"model": "m", "seed": seed, "alpha": alpha, "metric": "R@5", "value": 10.0})
    rows += [{"model": "z", "seed": None, "alpha": a, "metric": "R@20", "value": 70.0} for a in (0.0, 0.5, 1.0, 1.5)]
    return pd.DataFrame(rows)


def test_alpha_curves_mean_line_dense_marker_and_chosen_star():
    fig = plot_alpha_curves(_sweep(), {"m": 1.0}, metric="R@20", labels={"m": "Model"})
    ax = fig.axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    curve = lines["Model (2 seeds)"]
    assert list(curve.get_xdata()) == [0.5, 1.0, 1.5]                   # alpha 0 is not on the line
    assert np.allclose(curve.get_ydata(), [56.0, 61.0, 66.0])            # the mean over seeds
    markers = [line for line in ax.get_lines() if line.get_marker() in ("o", "*")]
    dense = [line for line in markers if line.get_marker() == "o"]
    star = [line for line in markers if line.get_marker() == "*"]
    assert [list(line.get_xdata()) for line in dense] == [[0.0], [0.0]]
    assert np.allclose(dense[0].get_ydata(), [51.0])
    assert len(star) == 1 and list(star[0].get_xdata()) == [1.0] and np.allclose(star[0].get_ydata(), [61.0])
    assert "z (1 seed)" in lines
    assert ax.get_ylabel() == "dev R@20 (%)"  # the unit of the tables' R@K


def _cost():
    rows = []
    for seed, extra in ((1, 0.0), (2, 60.0)):
        rows += [{"model": "dpr", "seed": seed, "metric": "epoch_seconds", "value": 600.0 + extra},
                 {"model": "taser", "seed": seed, "metric": "epoch_seconds", "value": 450.0 + extra},
                 {"model": "dpr", "seed": seed, "metric": "peak_bytes", "value": 2.0 * 2 ** 30},
                 {"model": "taser", "seed": seed, "metric": "peak_bytes", "value": 1.0 * 2 ** 30}]
    return pd.DataFrame(rows)


def test_cost_bars_means_in_units_and_ratio_panel_with_the_papers():
    fig = plot_cost_bars(_cost(), {"epoch_seconds": ("minutes", 1 / 60), "peak_bytes": ("GiB", 1 / 2 ** 30)},
                         models=["dpr", "taser"], baseline="dpr", paper_ratio={"epoch_seconds": {"taser": 11 / 15}})
    minutes, memory, ratio = fig.axes
    assert [round(p.get_height(), 6) for p in minutes.patches] == [10.5, 8.0]   # mean of 10, 11 and of 7.5, 8.5
    assert [round(p.get_height(), 6) for p in memory.patches] == [2.0, 1.0]
    heights = sorted(round(p.get_height(), 4) for p in ratio.patches)
    assert heights == sorted([round(8.0 / 10.5, 4), round(11 / 15, 4), 0.5])   # ours, the paper's, memory
    assert minutes.get_ylabel() == "minutes" and ratio.get_ylabel() == "ratio to dpr"


def test_cost_bars_without_baseline_has_one_panel_per_metric():
    fig = plot_cost_bars(_cost(), {"peak_bytes": ("GiB", 1 / 2 ** 30)})
    assert len(fig.axes) == 1
    assert [p.get_height() for p in fig.axes[0].patches] == pytest.approx([2.0, 1.0])
