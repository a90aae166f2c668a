"""taser_book.plots.scores: score densities, margin histograms, size sweeps with seed spread, learning curves."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from taser_book.analyses.scores import normalised_margins  # noqa: E402
from taser_book.plots import (learning_curve_table, plot_learning_curves, plot_margin_histograms,  # noqa: E402
                             plot_score_densities, plot_size_sweep)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def score_frame(models=("CA", "DE"), n=30, k=8, seed=0, shift=(0.0, 700.0, 300.0)):
    rng = np.random.default_rng(seed)
    rows = []
    for model, offset in zip(models, shift, strict=False):
        for q in range(n):
            rows.append({"model": model, "query_id": f"q{q}", "doc_id": "p", "label": "pos",
                         "score": offset + 5 + rng.normal()})
            rows += [{"model": model, "query_id": f"q{q}", "doc_id": f"n{j}", "label": "neg",
                      "score": offset + rng.normal()} for j in range(k - 1)]
    return pd.DataFrame(rows)


def hist_area(ax, color):
    bars = [p for p in ax.patches if matplotlib.colors.same_color(p.get_facecolor()[:3], color)]
    return sum(p.get_width() * p.get_height() for p in bars)


def test_densities_one_panel_per_model_each_a_density_of_positives_and_negatives():
    frame = score_frame()
    fig = plot_score_densities(frame, title="Fig. 2")
    assert [ax.get_title() for ax in fig.axes] == ["CA", "DE"]
    for ax in fig.axes:
        assert hist_area(ax, "tab:orange") == pytest.approx(1.0) and hist_area(ax, "tab:blue") == pytest.approx(1.0)
        lo, hi = ax.get_xlim()
        assert lo < 0 < hi                                  # centred: DE's 700 offset is gone
    assert fig.axes[0].get_shared_x_axes().joined(fig.axes[0], fig.axes[1])
    assert [t.get_text() for t in fig.axes[-1].get_legend().get_texts()] == ["negatives", "positives"]


def test_uncentred_densities_keep_the_baseline_shift_on_separate_axes():
    fig = plot_score_densities(score_frame(), centred=False, kde=True)
    ca, de = fig.axes
    assert de.get_xlim()[0] > 600 and ca.get_xlim()[1] < 100
    assert len(de.get_lines()) == 2                         # one kernel density line per label


def test_densities_by_stage_make_a_grid():
    frames = [score_frame(seed=s).assign(stage=stage) for s, stage in enumerate(["init", "10k", "final"])]
    fig = plot_score_densities(pd.concat(frames), row="stage", models=["DE", "CA"])
    assert len(fig.axes) == 6
    assert fig.axes[0].get_title() == "DE, stage = init" and fig.axes[5].get_title() == "CA, stage = final"


def test_margin_histograms_share_one_axes_with_each_models_median():
    margins = normalised_margins(score_frame(("CA", "DE", "DIST")))
    fig = plot_margin_histograms(margins, value_range=(-0.2, 1.0))
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CA", "DE", "DIST"]
    medians = sorted(line.get_xdata()[0] for line in ax.get_lines())
    expected = sorted(margins.groupby("model")["normalised_margin"].median())
    assert np.allclose(medians, expected)
    for patch in ax.patches:                                # step outlines on the common bins over the range
        xs = patch.get_xy()[:, 0]
        assert xs.min() == pytest.approx(-0.2) and xs.max() == pytest.approx(1.0)


def sweep(seeds=(1, 2, 3)):
    rows = []
    for seed in seeds:
        for size in (64, 128, 384):
            for split, base in (("train", 0.5), ("test", 0.3)):
                for model, bonus in (("CA", 0.05), ("DE", 0.0)):
                    rows.append({"model": model, "embedding_dim": size, "split": split, "seed": seed,
                                 "value": base + bonus + size / 4000 + seed / 100})
    return pd.DataFrame(rows)


def test_size_sweep_draws_the_seed_mean_with_a_band():
    table = sweep()
    fig = plot_size_sweep(table, x="embedding_dim", panels=["train", "test"], log_x=True)
    train, test = fig.axes
    assert train.get_title() == "train" and test.get_title() == "test"
    de = next(line for line in test.get_lines() if line.get_label() == "DE")
    expected = table[(table["model"] == "DE") & (table["split"] == "test")].groupby("embedding_dim")["value"].mean()
    assert np.allclose(de.get_xdata(), [64, 128, 384]) and np.allclose(de.get_ydata(), expected)
    assert sum(isinstance(c, PolyCollection) for c in test.collections) == 2    # one band per model
    assert train.get_xscale() == "log"


def test_size_sweep_with_error_bars_categories_and_rows():
    table = sweep().assign(size=lambda f: "6-" + f["embedding_dim"].astype(str))
    table = pd.concat([table.assign(depth=2), table.assign(depth=6)])
    fig = plot_size_sweep(table, x="size", row="depth", spread="bars")
    assert len(fig.axes) == 4
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["6-64", "6-128", "6-384"]
    assert fig.axes[0].containers                             # error bars
    one_seed = plot_size_sweep(sweep(seeds=(1,)), x="embedding_dim")
    assert not any(isinstance(c, PolyCollection) for ax in one_seed.axes for c in ax.collections)
    with pytest.raises(ValueError, match="spread must be one of"):
        plot_size_sweep(sweep(), x="embedding_dim", spread="cloud")


def test_size_sweep_draws_the_papers_numbers_dashed_on_a_right_hand_axis():
    table = sweep()
    paper = pd.DataFrame([{"model": m, "embedding_dim": d, "split": sp, "value": v}
                          for m, d, sp, v in [("DE", 128, "test", 0.249), ("DE", 768, "test", 0.310),
                                              ("CA", 768, "test", 0.364), ("BERT", 768, "test", 0.4),
                                              ("DE", 768, "dev", 0.1)]])  # a split we do not plot is left out
    fig = plot_size_sweep(table, x="embedding_dim", panels=["train", "test"], log_x=True, paper=paper,
                          paper_label="paper (MS MARCO dev)")
    train, test, right = fig.axes                              # the test panel's right-hand axis only
    assert right.get_ylabel() == "paper (MS MARCO dev)"
    dashed = {line.get_label(): line for line in right.get_lines()}
    assert set(dashed) == {"DE (paper (MS MARCO dev))", "CA (paper (MS MARCO dev))", "BERT (paper (MS MARCO dev))"}
    de = dashed["DE (paper (MS MARCO dev))"]
    assert list(de.get_xdata()) == [128, 768] and list(de.get_ydata()) == [0.249, 0.31]
    assert de.get_linestyle() == "--" and de.get_markerfacecolor() == "none"
    ours = next(line for line in test.get_lines() if line.get_label() == "DE")
    assert ours.get_color() == de.get_color()                  # the same model in the same colour
    assert [t.get_text() for t in test.get_xticklabels()] == ["64", "128", "384", "768"]  # both sides' sizes
    assert {t.get_text() for t in fig.legends[0].get_texts()} >= {"CA", "DE", "BERT (paper (MS MARCO dev))"}
    from taser_book.plots.scores import _spaced_labels  # close ticks keep their marks, not their labels
    assert _spaced_labels([0, 0.1, 0.2, 0.3, 0.9, 0.99], log_x=False) == ["0", "", "0.2", "", "0.9", ""]
    assert _spaced_labels([32, 64, 128, 256, 512, 768], log_x=True)[-2:] == ["512", ""]


def curves():
    steps = np.arange(0, 50, 10)
    out = {}
    for model, slope in (("CA", 0.01), ("DE", 0.02)):
        out[model] = pd.DataFrame({"step": steps, "epoch": steps / 50, "train_loss": np.nan,
                                   "train/MRR@10": 0.3 + slope * steps / 10, "dev/MRR@10": 0.3 + steps / 1000,
                                   "dev/nDCG@10": 0.4})
    return out


def test_learning_curves_from_the_loops_curve_frames():
    table = learning_curve_table(curves())
    assert list(table.columns) == ["model", "step", "split", "value"]
    assert set(table["split"]) == {"train", "test"}
    fig = plot_learning_curves(curves())
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["CA train", "CA test", "DE train", "DE test"]
    de_train = ax.get_lines()[2]
    assert de_train.get_linestyle() == "--" and np.allclose(de_train.get_ydata(), 0.3 + 0.02 * np.arange(5))
    with pytest.raises(KeyError, match="no column"):
        learning_curve_table(curves(), metric="R@20")


def test_learning_curves_over_seeds_draw_a_band():
    table = pd.concat([learning_curve_table(curves()).assign(seed=s, value=lambda f: f["value"] + s / 100)
                       for s in (1, 2, 3)])
    fig = plot_learning_curves(table, models=["DE"])
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2 and sum(isinstance(c, PolyCollection) for c in ax.collections) == 2
    assert np.allclose(ax.get_lines()[0].get_ydata(), 0.3 + 0.02 * np.arange(5) + 0.02)
