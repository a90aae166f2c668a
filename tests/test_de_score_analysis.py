"""Per-query score statistics (paired tests over queries), Proposition 3's inputs from a score grid, the KL / CE
entropy gap, and the propositions' figures."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from taser_book.analyses.propositions import (dims_to_match, distillation_entropy_gap, prop3_gradients,  # noqa: E402
                                              prop3_pairs, svd_embeddings, truncation_curve)
from taser_book.analyses.scores import per_query_statistics, score_summary  # noqa: E402
from taser_lib.losses import kl_distill, softmax_ce_distill  # noqa: E402
from taser_book.plots import plot_prop3_gradients, plot_truncation_curve  # noqa: E402


def frame() -> pd.DataFrame:
    """Model A: q1 pos 4, negs 2, 0, -2; q2 pos 1, negs 3, 1. Model B: the same scores doubled plus 10."""
    rows = [("q1", "a", "pos", 4.0), ("q1", "b", "neg", 2.0), ("q1", "c", "neg", 0.0), ("q1", "d", "neg", -2.0),
            ("q2", "e", "pos", 1.0), ("q2", "f", "neg", 3.0), ("q2", "g", "neg", 1.0)]
    a = pd.DataFrame(rows, columns=["query_id", "doc_id", "label", "score"]).assign(model="A")
    b = a.assign(model="B", score=2 * a["score"] + 10)
    return pd.concat([a, b], ignore_index=True)[["model", "query_id", "doc_id", "label", "score"]]


def value(table, model, query, statistic):
    row = table[(table["model"] == model) & (table["query_id"] == query) & (table["statistic"] == statistic)]
    assert len(row) == 1, row
    return float(row["value"].iloc[0])


def test_per_query_statistics_by_hand():
    table = per_query_statistics(frame(), statistics=("negative_spread", "median_margin", "mean_margin",
                                                      "mean_score_rho", "overlap"))
    rho = 6.0  # A's scores span -2 .. 4
    assert value(table, "A", "q1", "negative_spread") == pytest.approx(2.0 / rho)  # std of 2, 0, -2
    assert value(table, "A", "q2", "negative_spread") == pytest.approx(math.sqrt(2.0) / rho)
    assert value(table, "A", "q1", "median_margin") == pytest.approx(4.0 / rho)  # margins 2, 4, 6
    assert value(table, "A", "q2", "mean_margin") == pytest.approx(-1.0 / rho)  # margins -2, 0
    assert value(table, "A", "q1", "mean_score_rho") == pytest.approx(1.0 / rho)
    assert value(table, "A", "q1", "overlap") == 0.0
    assert value(table, "A", "q2", "overlap") == pytest.approx(0.75)  # one negative above, one tied
    # scale-free: B = 2 A + 10 has A's spreads, margins and overlaps, but its own location
    for stat in ("negative_spread", "median_margin", "mean_margin", "overlap"):
        for q in ("q1", "q2"):
            assert value(table, "B", q, stat) == pytest.approx(value(table, "A", q, stat))
    assert value(table, "B", "q1", "mean_score_rho") == pytest.approx(12.0 / 12.0)
    assert list(table.columns) == ["model", "query_id", "statistic", "value"]


def test_per_query_statistics_average_to_the_summary_within_statistics():
    rng = np.random.default_rng(0)
    rows = []
    for m in ("A", "B"):
        for q in range(12):
            for d in range(6):
                rows.append((m, f"q{q}", f"d{d}", "pos" if d == 0 else "neg", rng.normal(2 if d == 0 else 0)))
    f = pd.DataFrame(rows, columns=["model", "query_id", "doc_id", "label", "score"])
    table = per_query_statistics(f, statistics=("negative_spread", "overlap", "median_margin"))
    summary = score_summary(f).set_index("model")
    means = table.groupby(["model", "statistic"])["value"].mean()
    for m in ("A", "B"):
        assert means[(m, "negative_spread")] == pytest.approx(summary.loc[m, "negative_spread_within"])
        assert means[(m, "overlap")] == pytest.approx(summary.loc[m, "overlap_within"])
    # one positive per query: each query's median margin is the median of its five margins
    q0 = f[(f["model"] == "A") & (f["query_id"] == "q0")]
    rho = np.ptp(f.loc[f["model"] == "A", "score"])
    want = np.median(q0["score"].iloc[0] - q0["score"].iloc[1:]) / rho
    assert value(table, "A", "q0", "median_margin") == pytest.approx(want)


def test_per_query_statistics_refuse_unknown_names_and_drop_undefined_values():
    with pytest.raises(ValueError, match="unknown per-query statistic"):
        per_query_statistics(frame(), statistics=("spread",))
    one_negative = frame()[lambda f: ~f["doc_id"].isin(["g"])]  # q2 keeps one negative: no spread
    table = per_query_statistics(one_negative, statistics=("negative_spread",))
    assert set(table["query_id"]) == {"q1"}


def test_prop3_pairs_take_the_teachers_best_positive_and_hardest_negative():
    T = np.array([[5.0, 1.0, 3.0, 2.0], [0.0, 4.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    R = np.array([[1, 0, 0, 1], [1, 0, 1, 0], [0, 0, 0, 0]])
    S = T * 10
    t, s = prop3_pairs(T, R, S)
    np.testing.assert_array_equal(t, [[5.0, 3.0], [1.0, 4.0]])  # row 3 has no positive: left out
    np.testing.assert_array_equal(s, 10 * t)
    with pytest.raises(ValueError, match="share one shape"):
        prop3_pairs(T, R, S[:, :3])
    with pytest.raises(ValueError, match="no row"):
        prop3_pairs(T, np.ones_like(R), S)


def test_prop3_on_a_low_rank_student_of_a_score_grid_reaches_the_limit():
    rng = np.random.default_rng(1)
    T = rng.normal(size=(10, 30)) * 3
    R = (rng.random((10, 30)) < 0.2).astype(int)
    R[:, 0] = 1
    Z, W = svd_embeddings(T, dim=2)
    t, s = prop3_pairs(T, R, Z @ W.T)
    grads = prop3_gradients(s, t, taus=[1.0, 1e3])
    far = grads[grads["tau"] == 1e3]
    assert far["abs_error"].max() < 1e-3
    assert grads[grads["tau"] == 1.0]["abs_error"].max() > far["abs_error"].max()


def test_kl_is_softmax_ce_minus_the_teachers_entropy_for_any_k():
    rng = np.random.default_rng(2)
    s, t = rng.normal(size=(4, 8)) * 5, rng.normal(size=(4, 8)) * 5
    gap = distillation_entropy_gap(s, t, taus=[0.5, 1.0, 10.0])
    assert len(gap) == 12 and gap["error"].max() < 1e-12 and set(gap["K"]) == {8}
    import torch
    one = gap[(gap["row"] == 2) & (gap["tau"] == 10.0)].iloc[0]
    assert one["sce"] == pytest.approx(float(softmax_ce_distill(torch.tensor(s[2:3]), torch.tensor(t[2:3]), 10.0)))
    assert one["kl"] == pytest.approx(float(kl_distill(torch.tensor(s[2:3]), torch.tensor(t[2:3]), 10.0)))
    flat = distillation_entropy_gap(s[0], np.zeros(8), taus=[1.0])  # a uniform teacher: entropy log K
    assert flat["teacher_entropy"].iloc[0] == pytest.approx(math.log(8))
    with pytest.raises(ValueError, match="share a shape"):
        distillation_entropy_gap(s, t[:, :3], taus=[1.0])


def test_dims_to_match_finds_the_smallest_dimension_within_tolerance():
    curve = pd.DataFrame({"dim": [1, 2, 4, 8], "mrr": [0.50, 0.79, 0.78, 0.80], "mrr_full": 0.80})
    assert dims_to_match(curve, 0.01) == 2 and dims_to_match(curve, 0.0) == 8 and dims_to_match(curve, 0.5) == 1
    assert dims_to_match(curve.assign(mrr_full=0.9), 0.05) is None
    with pytest.raises(KeyError, match="relevance"):
        dims_to_match(curve.drop(columns="mrr"))
    rng = np.random.default_rng(4)  # on a real curve: the full rank always matches
    S = rng.normal(size=(6, 15))
    R = (rng.random((6, 15)) < 0.3).astype(int)
    R[:, 0] = 1
    assert dims_to_match(truncation_curve(S, R), 0.0) <= 6


# --- figures ---------------------------------------------------------------------------------------------------------

def test_truncation_curve_figure_has_error_and_mrr_panels():
    rng = np.random.default_rng(3)
    S = rng.normal(size=(8, 20))
    R = np.zeros_like(S, dtype=int)
    R[np.arange(8), rng.integers(0, 20, 8)] = 1
    curve = truncation_curve(S, R)
    fig = plot_truncation_curve(curve, title="grid")
    err_ax, mrr_ax = fig.axes
    assert err_ax.get_yscale() == "log" and mrr_ax.get_ylabel().startswith("MRR@10")
    assert len(mrr_ax.get_lines()[0].get_xdata()) == len(curve)
    two = pd.concat([curve.assign(model="CA"), curve.assign(model="DE")])
    fig2 = plot_truncation_curve(two, models=["DE", "CA"])
    assert [t.get_text() for t in fig2.axes[1].get_legend().get_texts()] == ["DE", "CA"]
    alone = plot_truncation_curve(truncation_curve(S))
    assert len(alone.axes) == 1
    with pytest.raises(KeyError, match="relative_error"):
        plot_truncation_curve(curve.drop(columns="relative_error"))
    plt.close("all")


def test_prop3_figure_draws_a_ratio_line_per_pair_and_the_error_decay():
    grads = prop3_gradients([[2.0, -1.0], [0.5, 1.5], [3.0, 0.0]], [[5.0, 1.0], [-2.0, 0.0], [1.0, 1.0]],
                            taus=np.logspace(0, 3, 7))
    fig = plot_prop3_gradients(grads)
    ratio_ax, err_ax = fig.axes
    assert len(ratio_ax.get_lines()) == 3 + 1  # one per pair and the limit
    largest = err_ax.get_lines()[0].get_ydata()
    assert largest[-1] < largest[0] * 1e-3  # the gap shrinks as tau grows
    with pytest.raises(ValueError, match="no rows"):
        plot_prop3_gradients(grads, component=3)
    plt.close("all")
