"""Hypothesis tests matched to the words of a claim, on arrays of values (scipy underneath).

`significance.py` answers "do two systems differ?" (two-sided, paired). A reproduction's claims say more than that,
and each form of words has its own test:

- "A beats B": the paired two-sided tests of `significance.py`; the direction is the sign of the mean per-key
  difference, never of a pooled number computed some other way.
- "A comes within m of B": an equivalence test, two one-sided tests (TOST, Schuirmann 1987): equivalence is shown
  when both H0: mean(d) <= -m and H0: mean(d) >= +m are rejected; p = the larger one-sided p (`equivalence`). Its
  opposite, "A is more than m away from B", is the one-sided test of |mean(d)| > m (`outside_margin`).
- "A is on par with B (not worse than m below)": non-inferiority, H0: mean(d) <= -m, one-sided (`non_inferiority`).
- "most X are Y": an exact binomial test of the share of successes against p0 (`binomial`).
- two groups of different units (no pairing): a two-sample permutation test of the difference of means
  (`two_sample`).
- a pooled statistic (a std over all pairs, an overlap): bootstrap replicates of the statistic itself over resampled
  questions; the two-sided p is twice the smaller tail share of the replicate differences (`bootstrap`).
- any of these between two *trained* models, paired over questions: the same hypothesis once more with the
  training-seed noise added to the questions' (`with_seed_noise`, a Welch t-test on both variances), since a test
  paired over questions asks whether two trained models differ, not whether two recipes do.

Every function returns a `Test`: the observed effect (mean difference, share, ...), its p-value and the number of
units. A randomisation test is exact when 2**n <= `n_resamples`, else seeded Monte Carlo (seed 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np
from scipy import stats

from taser_lib.evaluation.permutation import sign_flip_test

METHODS = ("randomisation", "t-test")


@dataclass(frozen=True)
class Test:
    effect: float       # the observed mean difference (or share, for `binomial`)
    p_value: float
    n: int              # the number of units (keys, trials, replicates)


def _diffs(d: Sequence[float] | np.ndarray) -> np.ndarray:
    d = np.asarray(d, dtype=float)
    if d.ndim != 1 or len(d) < 2:
        raise ValueError(f"a paired test needs 2 or more differences, got {d.size}")
    return d


def one_sided(d: Sequence[float] | np.ndarray, *, greater_than: float | None = None,
              less_than: float | None = None, method: str = "randomisation", n_resamples: int = 10_000) -> float:
    """p of H1: mean(d) > greater_than (or mean(d) < less_than), from paired differences `d`.

    `randomisation`: sign flips of d - bound (scipy's one-sample `permutation_type="samples"`, drawn by
    `permutation.sign_flip_test`, which gives scipy's p-values without its loop over units); `t-test`: the
    one-sample t-test of d against the bound. Constant differences give p = 0 or 1 (no variance)."""
    if (greater_than is None) == (less_than is None):
        raise ValueError("give exactly one of greater_than and less_than")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {METHODS}")
    d = _diffs(d)
    bound = greater_than if greater_than is not None else less_than
    shifted = d - bound
    alternative = "greater" if greater_than is not None else "less"
    if np.allclose(shifted, shifted[0], rtol=0, atol=1e-15):
        value = shifted[0]
        return 0.0 if (value > 0 if alternative == "greater" else value < 0) else 1.0
    if method == "t-test":
        return float(stats.ttest_1samp(shifted, 0.0, alternative=alternative).pvalue)
    return sign_flip_test(shifted, n_resamples=n_resamples, batch=1000, alternative=alternative, seed=0).pvalue


def with_seed_noise(d: Sequence[float] | np.ndarray, seed_variance: float, seed_df: float, *,
                    greater_than: float | None = None, less_than: float | None = None) -> float:
    """p of H1: mean(d) > greater_than (or < less_than), where the paired differences `d` (one per question) come
    from trained runs: besides the questions' noise, var(d) / n, their mean carries the training-seed noise
    `seed_variance` (the variance of the difference of the two sides' means over their seeds, estimated with
    `seed_df` degrees of freedom). A t-test on the sum of both variances, with Welch-Satterthwaite degrees of freedom.
    A question-paired test alone treats the trained weights as fixed: it asks whether these two models differ, not
    whether the two recipes do."""
    if (greater_than is None) == (less_than is None):
        raise ValueError("give exactly one of greater_than and less_than")
    if not seed_variance >= 0 or not seed_df > 0:
        raise ValueError(f"seed noise needs a variance >= 0 and degrees of freedom > 0, got {seed_variance}, {seed_df}")
    d = _diffs(d)
    questions = float(d.var(ddof=1)) / len(d)
    total = questions + seed_variance
    shift = float(d.mean()) - (greater_than if greater_than is not None else less_than)
    if total == 0:
        return 0.0 if (shift > 0 if greater_than is not None else shift < 0) else 1.0
    df = total ** 2 / ((questions ** 2 / (len(d) - 1) if questions else 0.0) +
                       (seed_variance ** 2 / seed_df if seed_variance else 0.0))
    t = shift / math.sqrt(total)
    return float(stats.t.sf(t, df) if greater_than is not None else stats.t.cdf(t, df))


def equivalence(d: Sequence[float] | np.ndarray, margin: float, method: str = "t-test") -> Test:
    """TOST: p < alpha shows -margin < mean(d) < margin."""
    if not margin > 0:
        raise ValueError(f"an equivalence margin must be positive, got {margin}")
    d = _diffs(d)
    p = max(one_sided(d, greater_than=-margin, method=method), one_sided(d, less_than=margin, method=method))
    return Test(float(d.mean()), p, len(d))


def outside_margin(d: Sequence[float] | np.ndarray, margin: float, method: str = "t-test") -> Test:
    """The opposite of equivalence: p < alpha shows mean(d) > margin (or < -margin, on the side the mean lies)."""
    d = _diffs(d)
    if d.mean() >= 0:
        p = one_sided(d, greater_than=margin, method=method)
    else:
        p = one_sided(d, less_than=-margin, method=method)
    return Test(float(d.mean()), p, len(d))


def non_inferiority(d: Sequence[float] | np.ndarray, margin: float, method: str = "randomisation") -> Test:
    """p < alpha shows mean(d) > -margin (A is not worse than B by margin or more), d = A - B."""
    if margin < 0:
        raise ValueError(f"a non-inferiority margin must be >= 0, got {margin}")
    d = _diffs(d)
    return Test(float(d.mean()), one_sided(d, greater_than=-margin, method=method), len(d))


def binomial(successes: Sequence[float] | np.ndarray, p0: float = 0.5) -> Test:
    """Exact two-sided binomial test of the share of successes (values 1 / 0, one per trial) against p0."""
    x = np.asarray(successes, dtype=float)
    if x.ndim != 1 or len(x) < 1 or not np.isin(x, (0.0, 1.0)).all():
        raise ValueError("a binomial test needs one 0/1 value per trial")
    if not 0 < p0 < 1:
        raise ValueError(f"p0 must lie in (0, 1), got {p0}")
    k, n = int(x.sum()), len(x)
    return Test(k / n, float(stats.binomtest(k, n, p0, alternative="two-sided").pvalue), n)


def two_sample(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
               n_resamples: int = 10_000) -> Test:
    """Two-sided permutation test of mean(a) - mean(b) for independent groups (units not paired)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 1 or len(b) < 1 or len(a) + len(b) < 3:
        raise ValueError(f"a two-sample test needs 3 or more values in all, got {len(a)} and {len(b)}")
    effect = float(a.mean() - b.mean())
    if np.allclose(np.concatenate([a, b]), a[0], rtol=0, atol=1e-15):
        return Test(effect, 1.0, len(a) + len(b))
    result = stats.permutation_test((a, b), lambda u, v, axis: np.mean(u, axis=axis) - np.mean(v, axis=axis),
                                    permutation_type="independent", vectorized=True, n_resamples=n_resamples,
                                    batch=1000, alternative="two-sided", rng=np.random.default_rng(0))
    return Test(effect, float(result.pvalue), len(a) + len(b))


def bootstrap(replicate_differences: Sequence[float] | np.ndarray, observed: float) -> Test:
    """Two-sided bootstrap p of a pooled statistic's difference: `replicate_differences` are the difference
    recomputed on B resamples of the questions (paired: the same resample for both sides); p = min(1, 2 * (1 + the
    number of replicates on the far side of 0 from `observed`) / (B + 1))."""
    r = np.asarray(replicate_differences, dtype=float)
    r = r[~np.isnan(r)]
    if len(r) < 20:
        raise ValueError(f"a bootstrap test needs 20 or more replicates, got {len(r)}")
    if observed == 0 or math.isnan(observed):
        return Test(float(observed), 1.0, len(r))
    far = int((r <= 0).sum()) if observed > 0 else int((r >= 0).sum())
    return Test(float(observed), min(1.0, 2 * (1 + far) / (len(r) + 1)), len(r))
