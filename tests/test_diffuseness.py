"""The spread of negative scores in centred raw units (Figs. 2, 5, 7) and its bootstrap over questions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from taser_book.analyses.diffuseness import bootstrap_statistics, per_query_spread, spread_statistics


def frame(model: str, scores: dict[str, tuple[float, list[float]]], **extra) -> pd.DataFrame:
    """One positive and some negatives per question: {query: (positive, [negatives])}."""
    rows = []
    for q, (pos, negs) in scores.items():
        rows.append({"model": model, "query_id": q, "label": "pos", "score": pos, **extra})
        rows += [{"model": model, "query_id": q, "label": "neg", "score": s, **extra} for s in negs]
    return pd.DataFrame(rows)


SMALL = {"q1": (5.0, [1.0, 3.0]), "q2": (4.0, [0.0, 2.0, 4.0])}


def test_hand_computed_statistics():
    stats = spread_statistics(frame("de", SMALL)).set_index("statistic")["value"]
    negs = np.array([1.0, 3.0, 0.0, 2.0, 4.0])
    assert stats["negative_std"] == pytest.approx(negs.std(ddof=1))
    assert stats["negative_std_within"] == pytest.approx((np.sqrt(2) + 2.0) / 2)
    assert stats["negative_iqr"] == pytest.approx(np.quantile(negs, 0.75) - np.quantile(negs, 0.25))
    # q1: std sqrt(2) over margin 5 - 2 = 3; q2: std 2 over 4 - 2 = 2
    assert stats["spread_ratio"] == pytest.approx((np.sqrt(2) / 3 + 1.0) / 2)
    # positives 5, 4 against negatives 1, 3, 0, 2, 4: only (4 vs 4) ties -> 0.5 of 10 pairs
    assert stats["overlap"] == pytest.approx(0.5 / 10)


def test_the_spread_is_in_raw_units_and_ignores_the_offset():
    shifted = {q: (p + 100.0, [s + 100.0 for s in n]) for q, (p, n) in SMALL.items()}
    scaled = {q: (2 * p, [2 * s for s in n]) for q, (p, n) in SMALL.items()}
    base = spread_statistics(frame("m", SMALL)).set_index("statistic")["value"]
    assert spread_statistics(frame("m", shifted)).set_index("statistic")["value"].to_dict() == pytest.approx(
        base.to_dict())
    doubled = spread_statistics(frame("m", scaled)).set_index("statistic")["value"]
    assert doubled["negative_std"] == pytest.approx(2 * base["negative_std"])       # raw units scale
    assert doubled["spread_ratio"] == pytest.approx(base["spread_ratio"])           # the ratio does not
    assert doubled["overlap"] == pytest.approx(base["overlap"])


def test_per_query_values_and_a_question_without_a_margin():
    data = {**SMALL, "q3": (0.0, [1.0, 2.0])}                # positive below its negatives: no ratio
    per = per_query_spread(frame("m", data)).set_index(["query_id", "statistic"])["value"]
    assert per[("q1", "negative_std")] == pytest.approx(np.sqrt(2))
    assert per[("q2", "spread_ratio")] == pytest.approx(1.0)
    assert ("q3", "negative_std") in per.index and ("q3", "spread_ratio") not in per.index


def test_the_bootstrap_is_paired_and_centred_on_the_pooled_statistic():
    rng = np.random.default_rng(0)
    data = {f"q{i}": (float(rng.normal(3)), list(rng.normal(0, 1 + i % 3, 6))) for i in range(40)}
    both = pd.concat([frame("a", data), frame("b", data)], ignore_index=True)
    reps = bootstrap_statistics(both, n_resamples=300, seed=1)
    wide = reps.pivot_table(index=["statistic", "replicate"], columns="model", values="value")
    assert np.allclose(wide["a"], wide["b"])                  # one resample for both models: identical models agree
    point = spread_statistics(frame("a", data)).set_index("statistic")["value"]
    means = reps[reps["model"] == "a"].groupby("statistic")["value"].mean()
    assert means["negative_std"] == pytest.approx(point["negative_std"], rel=0.05)
    assert means["overlap"] == pytest.approx(point["overlap"], abs=0.02)
    again = bootstrap_statistics(both, n_resamples=300, seed=1)
    pd.testing.assert_frame_equal(reps, again)                 # seeded


def test_the_bootstrap_averages_seeds_within_each_replicate():
    one = frame("de", SMALL, seed=13)
    two = frame("de", {q: (p, [2 * s for s in n]) for q, (p, n) in SMALL.items()}, seed=14)
    reps = bootstrap_statistics(pd.concat([one, two]), by=("model", "seed"), statistics=("negative_std",),
                                n_resamples=50, average="seed")
    assert list(reps.columns) == ["model", "statistic", "replicate", "value"] and len(reps) == 50
    per_seed = bootstrap_statistics(pd.concat([one, two]), by=("model", "seed"), statistics=("negative_std",),
                                    n_resamples=50)
    expected = per_seed.groupby("replicate")["value"].mean().to_numpy()
    assert np.allclose(reps["value"].to_numpy(), expected)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="no column label"):
        spread_statistics(pd.DataFrame({"model": ["m"], "query_id": ["q"], "score": [1.0]}))
    with pytest.raises(ValueError, match="unknown bootstrap statistic"):
        bootstrap_statistics(frame("m", SMALL), statistics=("iqr",))
