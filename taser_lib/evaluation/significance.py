"""Paired significance tests between two systems' per-query values (same queries), two-sided, via scipy; and the
one-call comparisons of finished runs that read their per-query files (`evaluation.records`).

    >>> compare_runs("runs/taser", "runs/dpr", metric="R@20")          # one run each
    >>> c = compare_seed_groups(taser_seed_dirs, dpr_seed_dirs, "R@20")  # seeds averaged per query, then paired
    >>> c.p_value, c.ci, c.seed_std_a, c.summary()
    >>> compare_systems({"dpr": dpr_dirs, "taser": taser_dirs, "shared": shared_dirs}, "R@20", baseline="dpr")

Multiple comparisons are corrected with Holm's step-down method (or Bonferroni) over the randomisation tests'
p-values (`adjust_p_values`). ranx offers the same tests, but it re-computes the metrics from runs and qrels and
installs nine more packages (numba, llvmlite, ir_datasets, fastparquet, lxml, ...), while these tests only need the
per-query values that every evaluation already stores: scipy suffices.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Union

import numpy as np
from scipy import stats

from .permutation import sign_flip_test
from .records import read_per_query, select_metric


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
    d = x - y
    if np.all(d == d[0]):  # a constant non-zero difference: no variance, t is infinite
        return TestResult(math.copysign(math.inf, d[0]), 0.0, float(d[0]), len(x))
    result = stats.ttest_rel(x, y)
    return TestResult(float(result.statistic), float(result.pvalue), float(np.mean(x - y)), len(x))


def randomisation_test(a: Mapping[str, float], b: Mapping[str, float], n_resamples: int = 10_000,
                       seed: int = 0) -> TestResult:
    """Paired randomisation (permutation) test of the mean difference: each query's pair of values is swapped at
    random, which flips the sign of its difference; exact when 2**n <= n_resamples. The p-value is the one scipy's
    `permutation_test(permutation_type="samples")` gives for the same seed (`permutation.sign_flip_test` draws the
    same resamples without scipy's loop over queries). Resamples are drawn 1000 at a time, so memory stays bounded
    for thousands of queries."""
    x, y = _paired(a, b)
    result = sign_flip_test(x - y, n_resamples=n_resamples, batch=1000, alternative="two-sided", seed=seed)
    return TestResult(result.statistic, result.pvalue, float(np.mean(x - y)), len(x))


# --- multiple comparisons ------------------------------------------------------------------------------------------

CORRECTIONS = ("holm", "bonferroni", "none")


def adjust_p_values(p_values: Mapping[str, float], method: str = "holm") -> dict[str, float]:
    """Family-wise error corrections of several tests' p-values ({name: p} -> {name: adjusted p}).

    `holm`: Holm's step-down method (sort ascending; the i-th smallest of m is multiplied by m - i, i from 0, made
    monotone by a running maximum, capped at 1); `bonferroni`: each times m, capped at 1; `none`: unchanged."""
    if method not in CORRECTIONS:
        raise ValueError(f"unknown correction {method!r}; expected one of {CORRECTIONS}")
    m = len(p_values)
    if method == "none" or m == 0:
        return dict(p_values)
    if method == "bonferroni":
        return {k: min(1.0, p * m) for k, p in p_values.items()}
    out, running = {}, 0.0
    for i, (name, p) in enumerate(sorted(p_values.items(), key=lambda kv: kv[1])):
        running = max(running, min(1.0, (m - i) * p))
        out[name] = running
    return {k: out[k] for k in p_values}


# --- comparing finished runs ---------------------------------------------------------------------------------------

Source = Union[str, Path, Mapping[str, Mapping[str, float]]]  # a run folder / per-query file, or loaded values


@dataclass(frozen=True)
class Comparison:
    """System a against system b on one metric, over the queries both were evaluated on.

    Per-query values are first averaged over each system's seeds; the tests pair those averages by query.
    `seed_means_*` are each seed's aggregate (its mean over the queries): their spread (`seed_std_*`) is the
    seed noise a single run's number carries."""

    metric: str
    label_a: str
    label_b: str
    n_queries: int
    mean_a: float
    mean_b: float
    difference: float  # mean_a - mean_b
    ci: tuple[float, float]  # paired-t confidence interval of the difference
    confidence: float
    randomisation: TestResult
    t_test: TestResult
    seed_means_a: tuple[float, ...]
    seed_means_b: tuple[float, ...]
    correction: str = "none"
    p_adjusted: float | None = None  # the randomisation p after `correction` over a family of comparisons

    @property
    def p_value(self) -> float:
        """The randomisation test's p-value, corrected when this comparison was part of a family."""
        return self.randomisation.p_value if self.p_adjusted is None else self.p_adjusted

    @property
    def seed_std_a(self) -> float:
        return _std(self.seed_means_a)

    @property
    def seed_std_b(self) -> float:
        return _std(self.seed_means_b)

    def significant(self, alpha: float = 0.05) -> bool:
        return self.p_value < alpha

    def summary(self, digits: int = 4) -> str:
        f = f"{{:.{digits}f}}"
        p = f"randomisation p={self.randomisation.p_value:.3g}, paired t p={self.t_test.p_value:.3g}"
        if self.p_adjusted is not None:
            p += f", {self.correction}-adjusted p={self.p_adjusted:.3g}"
        seeds = f"{len(self.seed_means_a)} vs {len(self.seed_means_b)} seeds"
        if len(self.seed_means_a) > 1 or len(self.seed_means_b) > 1:
            seeds += f" (seed std {f.format(self.seed_std_a)} vs {f.format(self.seed_std_b)})"
        return (f"{self.metric}: {self.label_a} {f.format(self.mean_a)} vs {self.label_b} {f.format(self.mean_b)}, "
                f"difference {self.difference:+.{digits}f} ({self.confidence:.0%} CI [{f.format(self.ci[0])}, "
                f"{f.format(self.ci[1])}]); {p}; {self.n_queries} queries, {seeds}")

    def as_dict(self) -> dict:
        """A flat row for a results table."""
        return {"metric": self.metric, "a": self.label_a, "b": self.label_b, "queries": self.n_queries,
                "mean_a": self.mean_a, "mean_b": self.mean_b, "difference": self.difference,
                "ci_low": self.ci[0], "ci_high": self.ci[1], "confidence": self.confidence,
                "p_randomisation": self.randomisation.p_value, "p_t_test": self.t_test.p_value,
                "correction": self.correction, "p_adjusted": self.p_adjusted,
                "seeds_a": len(self.seed_means_a), "seeds_b": len(self.seed_means_b),
                "seed_std_a": self.seed_std_a, "seed_std_b": self.seed_std_b}


def _std(values: Sequence[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def _values(source: Source, metric: str) -> dict[str, float]:
    if isinstance(source, Mapping):
        return select_metric(source, metric, "the given values")
    return select_metric(read_per_query(source), metric, source)


def seed_average(sources: Sequence[Source], metric: str) -> tuple[dict[str, float], tuple[float, ...]]:
    """({query id: mean over the seeds}, each seed's mean over the queries) of one system's seed runs; every
    seed must have been evaluated on the same queries."""
    if isinstance(sources, (str, Path, Mapping)):
        raise TypeError("sources must be a list of run folders / per-query files (one per seed)")
    if not sources:
        raise ValueError("no runs given")
    runs = [_values(s, metric) for s in sources]
    queries = set(runs[0])
    for source, values in zip(sources[1:], runs[1:]):
        if set(values) != queries:
            raise ValueError(f"the seeds of one system must cover the same queries: {source} has "
                             f"{len(set(values) - queries)} queries the first seed lacks and lacks "
                             f"{len(queries - set(values))} of its queries")
    averaged = {q: float(np.mean([values[q] for values in runs])) for q in sorted(queries)}
    return averaged, tuple(float(np.mean(list(values.values()))) for values in runs)


def _ci(a: Mapping[str, float], b: Mapping[str, float], confidence: float) -> tuple[float, float]:
    x, y = _paired(a, b)
    d = x - y
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    interval = stats.ttest_rel(x, y).confidence_interval(confidence)
    return float(interval.low), float(interval.high)


def compare_seed_groups(sources_a: Sequence[Source], sources_b: Sequence[Source], metric: str, *,
                        labels: tuple[str, str] = ("a", "b"), n_resamples: int = 10_000, seed: int = 0,
                        confidence: float = 0.95) -> Comparison:
    """Two systems, each trained with several seeds: per-query values averaged over each system's seeds, then
    the paired randomisation test and paired t-test across queries, the mean difference with its confidence
    interval, and each system's seed spread. A source is a run folder (its test_per_query.csv), a per-query CSV,
    an aggregates JSON beside one (`taser evaluate`'s *.eval.json), or already loaded {metric: {qid: value}}."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    a, seeds_a = seed_average(sources_a, metric)
    b, seeds_b = seed_average(sources_b, metric)
    t_test = paired_t_test(a, b)  # checks the queries match
    rand = randomisation_test(a, b, n_resamples=n_resamples, seed=seed)
    return Comparison(metric, labels[0], labels[1], len(a), float(np.mean(list(a.values()))),
                      float(np.mean(list(b.values()))), rand.mean_difference, _ci(a, b, confidence), confidence,
                      rand, t_test, seeds_a, seeds_b)


def compare_runs(run_a: Source, run_b: Source, metric: str, **options) -> Comparison:
    """Two finished runs (one seed each) on `metric`: see `compare_seed_groups` for the sources and options."""
    return compare_seed_groups([run_a], [run_b], metric, **options)


def compare_systems(systems: Mapping[str, Sequence[Source]], metric: str, *, baseline: str | None = None,
                    pairs: Sequence[tuple[str, str]] | None = None, correction: str = "holm",
                    **options) -> list[Comparison]:
    """Every system against `baseline`, or the given `pairs` (a, b), or else every pair; each a
    `compare_seed_groups` of its seeds, with the randomisation p-values corrected over the family
    (`adjust_p_values`; Holm by default)."""
    names = list(systems)
    if baseline is not None and baseline not in systems:
        raise KeyError(f"baseline {baseline!r} is not one of the systems {names}")
    if pairs is not None:
        pairs = [tuple(pair) for pair in pairs]
        unknown = sorted({n for pair in pairs for n in pair} - set(names))
        if unknown:
            raise KeyError(f"pairs name systems {unknown} that are not among {names}")
    elif baseline is not None:
        pairs = [(n, baseline) for n in names if n != baseline]
    else:
        pairs = list(itertools.combinations(names, 2))
    if not pairs:
        raise ValueError("need at least two systems to compare")
    found = [compare_seed_groups(systems[x], systems[y], metric, labels=(x, y), **options) for x, y in pairs]
    adjusted = adjust_p_values({i: c.randomisation.p_value for i, c in enumerate(found)}, correction)
    return [replace(c, correction=correction, p_adjusted=adjusted[i]) for i, c in enumerate(found)]
