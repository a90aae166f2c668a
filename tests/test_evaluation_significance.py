"""Paired t-test and randomisation test against hand computations; Holm / Bonferroni; comparisons of finished runs
and of seed groups read from their per-query files."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from taser_lib.evaluation.records import record_evaluation
from taser_lib.evaluation.significance import (adjust_p_values, compare_runs, compare_seed_groups, compare_systems,
                                               paired_t_test, randomisation_test)

A = {"q1": 0.9, "q2": 0.5, "q3": 0.7, "q4": 0.4, "q5": 0.8}
B = {"q1": 0.6, "q2": 0.5, "q3": 0.4, "q4": 0.3, "q5": 0.6}


def test_t_test_by_hand():
    d = np.array([A[q] - B[q] for q in sorted(A)])  # .3 0 .3 .1 .2
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    result = paired_t_test(A, B)
    assert result.statistic == pytest.approx(t)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(t), df=len(d) - 1))
    assert result.mean_difference == pytest.approx(0.18) and result.n == 5
    same = paired_t_test(A, dict(A))
    assert (same.statistic, same.p_value) == (0.0, 1.0)


def test_randomisation_test_exact_by_enumeration():
    d = np.array([A[q] - B[q] for q in sorted(A)])
    observed = d.mean()
    # All 2^5 sign assignments (swapping a query's pair flips its difference's sign).
    means = [np.mean(d * np.array(signs)) for signs in itertools.product((1, -1), repeat=len(d))]
    p = np.mean([abs(m) >= abs(observed) - 1e-12 for m in means])
    result = randomisation_test(A, B, n_resamples=10_000)  # 2^5 <= n_resamples: scipy enumerates exactly
    assert result.statistic == pytest.approx(observed)
    assert result.p_value == pytest.approx(p)


def test_randomisation_is_seeded():
    rng = np.random.default_rng(3)
    a = {f"q{i}": float(x) for i, x in enumerate(rng.random(40))}
    b = {q: v + 0.05 * float(rng.standard_normal()) for q, v in a.items()}
    first = randomisation_test(a, b, n_resamples=2000, seed=7)
    assert randomisation_test(a, b, n_resamples=2000, seed=7) == first
    assert 0 <= first.p_value <= 1


def test_mismatched_queries():
    with pytest.raises(ValueError, match="same queries"):
        paired_t_test(A, {**B, "q6": 0.1})
    with pytest.raises(ValueError, match="at least 2"):
        randomisation_test({"q": 1.0}, {"q": 0.0})


def test_constant_difference_has_no_variance():
    b = {f"q{i}": i / 8 for i in range(6)}
    result = paired_t_test({q: v + 0.25 for q, v in b.items()}, b)  # exact in binary: every difference is 0.25
    assert result.p_value == 0.0 and result.statistic == math.inf and result.mean_difference == 0.25


# --- Holm / Bonferroni --------------------------------------------------------------------------------------------

def test_holm_and_bonferroni_by_hand():
    p = {"x": 0.01, "y": 0.04, "z": 0.03, "w": 0.5}
    # Holm: sorted 0.01, 0.03, 0.04, 0.5 times 4, 3, 2, 1 -> 0.04, 0.09, 0.08, 0.5; running max -> 0.04, 0.09, 0.09, 0.5
    assert adjust_p_values(p, "holm") == pytest.approx({"x": 0.04, "z": 0.09, "y": 0.09, "w": 0.5})
    assert adjust_p_values(p, "bonferroni") == pytest.approx({"x": 0.04, "y": 0.16, "z": 0.12, "w": 1.0})
    assert adjust_p_values(p, "none") == p
    assert list(adjust_p_values(p)) == list(p)  # the caller's order
    with pytest.raises(ValueError, match="unknown correction"):
        adjust_p_values(p, "sidak")


# --- comparing finished runs from their per-query files ----------------------------------------------------------

def write_run(folder, values: dict[str, float], metric="nDCG@10"):
    """A finished run folder as the trainers leave it (aggregates + per-query values)."""
    record_evaluation(folder / "test_metrics.json", {metric: float(np.mean(list(values.values())))},
                      {metric: values}, split="test")
    return folder


def system(rng, quality, n=80):
    """Per-query values of a system of the given quality on n shared queries (query difficulty is shared)."""
    difficulty = np.random.default_rng(99).random(n)
    return {f"q{i}": float(np.clip(difficulty[i] + quality + 0.05 * rng.standard_normal(), 0, 1)) for i in range(n)}


def test_compare_runs_finds_a_strong_difference_and_none_between_equal_runs(tmp_path):
    rng = np.random.default_rng(0)
    strong = write_run(tmp_path / "strong", system(rng, 0.15))
    weak = write_run(tmp_path / "weak", system(rng, 0.0))
    result = compare_runs(strong, weak, metric="nDCG@10")
    assert result.p_value < 0.05 and result.t_test.p_value < 0.05
    assert result.difference > 0 and result.ci[0] > 0  # the interval excludes 0
    assert result.ci[0] < result.difference < result.ci[1]
    assert result.mean_a - result.mean_b == pytest.approx(result.difference)
    assert result.n_queries == 80 and result.significant()

    same = compare_runs(weak, tmp_path / "weak" / "test_per_query.csv", metric="nDCG@10")
    assert same.p_value == 1.0 and same.t_test.p_value == 1.0
    assert same.difference == 0.0 and same.ci == (0.0, 0.0) and not same.significant()
    assert "nDCG@10" in same.summary() and "80 queries" in same.summary()


def test_compare_runs_needs_the_same_queries_and_an_existing_metric(tmp_path):
    a = write_run(tmp_path / "a", {"q1": 1.0, "q2": 0.0, "q3": 0.5})
    b = write_run(tmp_path / "b", {"q1": 1.0, "q2": 0.0})
    with pytest.raises(ValueError, match="same queries"):
        compare_runs(a, b, metric="nDCG@10")
    with pytest.raises(KeyError, match="R@20"):
        compare_runs(a, a, metric="R@20")


def test_compare_seed_groups_averages_seeds_per_query_then_pairs_queries(tmp_path):
    rng = np.random.default_rng(1)
    a_seeds = [system(rng, 0.1) for _ in range(3)]
    b_seeds = [system(rng, 0.0) for _ in range(2)]
    dirs_a = [write_run(tmp_path / f"a{i}", v) for i, v in enumerate(a_seeds)]
    dirs_b = [write_run(tmp_path / f"b{i}", v) for i, v in enumerate(b_seeds)]
    result = compare_seed_groups(dirs_a, dirs_b, "nDCG@10", labels=("taser", "dpr"))
    averaged_a = {q: np.mean([s[q] for s in a_seeds]) for q in a_seeds[0]}
    averaged_b = {q: np.mean([s[q] for s in b_seeds]) for q in b_seeds[0]}
    assert result.t_test == paired_t_test(averaged_a, averaged_b)  # the test runs on the seed averages
    assert result.randomisation == randomisation_test(averaged_a, averaged_b)
    seed_means_a = [np.mean(list(s.values())) for s in a_seeds]
    assert result.seed_means_a == pytest.approx(seed_means_a)
    assert result.seed_std_a == pytest.approx(np.std(seed_means_a, ddof=1))
    assert len(result.seed_means_b) == 2 and result.seed_std_b > 0
    assert result.p_value < 0.05 and (result.label_a, result.label_b) == ("taser", "dpr")
    assert "3 vs 2 seeds" in result.summary()
    row = result.as_dict()
    assert row["seeds_a"] == 3 and row["p_randomisation"] == result.p_value
    # loaded values work as sources too
    loaded = compare_seed_groups([{"nDCG@10": s} for s in a_seeds], [{"nDCG@10": s} for s in b_seeds], "nDCG@10")
    assert loaded.difference == pytest.approx(result.difference)
    with pytest.raises(ValueError, match="same queries"):
        compare_seed_groups([dirs_a[0], write_run(tmp_path / "short", {"q0": 1.0, "q1": 0.0})], dirs_b, "nDCG@10")
    with pytest.raises(TypeError, match="list"):
        compare_seed_groups(dirs_a[0], dirs_b, "nDCG@10")


def test_one_seed_has_no_spread(tmp_path):
    rng = np.random.default_rng(2)
    result = compare_runs({"m": system(rng, 0.0)}, {"m": system(rng, 0.0)}, "m")
    assert math.isnan(result.seed_std_a) and "seed std" not in result.summary()


def test_compare_systems_corrects_over_the_family(tmp_path):
    rng = np.random.default_rng(3)
    systems = {name: [{"m": system(rng, q)} for _ in range(2)]
               for name, q in (("dpr", 0.0), ("taser", 0.1), ("shared", 0.005))}
    against = compare_systems(systems, "m", baseline="dpr")
    assert [(c.label_a, c.label_b) for c in against] == [("taser", "dpr"), ("shared", "dpr")]
    raw = {i: c.randomisation.p_value for i, c in enumerate(against)}
    assert [c.p_adjusted for c in against] == pytest.approx(list(adjust_p_values(raw, "holm").values()))
    assert all(c.p_value >= c.randomisation.p_value and c.correction == "holm" for c in against)
    assert against[0].significant()
    pairs = compare_systems(systems, "m", correction="bonferroni")
    assert len(pairs) == 3
    assert all(c.p_adjusted == pytest.approx(min(1.0, 3 * c.randomisation.p_value)) for c in pairs)
    with pytest.raises(KeyError, match="bm25"):
        compare_systems(systems, "m", baseline="bm25")
