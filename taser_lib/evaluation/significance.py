"""Paired significance tests between two systems' per-query values (same queries), two-sided, via scipy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class TestResult:
    statistic: float
    p_value: float
    mean_difference: float  # mean of a - b
    n: int


def _paired(a: Mapping[str, float], b: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        raise ValueError(f"paired tests need the same queries: {len(only_a)} only in a (e.g. {only_a[:3]}), "
                         f"{len(only_b)} only in b (e.g. {only_b[:3]})")
    if len(a) < 2:
        raise ValueError(f"paired tests need at least 2 queries, got {len(a)}")
    keys = sorted(a)
    return np.array([a[q] for q in keys], dtype=float), np.array([b[q] for q in keys], dtype=float)


def paired_t_test(a: Mapping[str, float], b: Mapping[str, float]) -> TestResult:
    """Student's paired t-test. Identical values (all differences 0) give statistic 0 and p = 1."""
    x, y = _paired(a, b)
    if np.all(x == y):
        return TestResult(0.0, 1.0, 0.0, len(x))
    result = stats.ttest_rel(x, y)
    return TestResult(float(result.statistic), float(result.pvalue), float(np.mean(x - y)), len(x))


def randomisation_test(a: Mapping[str, float], b: Mapping[str, float], n_resamples: int = 10_000,
                       seed: int = 0) -> TestResult:
    """Paired randomisation (permutation) test of the mean difference: each query's pair of values is swapped at
    random (scipy's `permutation_type="samples"`); exact when 2**n <= n_resamples."""
    x, y = _paired(a, b)
    result = stats.permutation_test((x, y), lambda u, v, axis: np.mean(u - v, axis=axis),
                                    permutation_type="samples", vectorized=True, n_resamples=n_resamples,
                                    alternative="two-sided", rng=np.random.default_rng(seed))
    return TestResult(float(result.statistic), float(result.pvalue), float(np.mean(x - y)), len(x))
