"""Paired t-test and randomisation test against hand computations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from taser_lib.evaluation.significance import paired_t_test, randomisation_test

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
