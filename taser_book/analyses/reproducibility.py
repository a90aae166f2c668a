"""Reproducibility measures of Breuer et al. (SIGIR 2020, "How to Measure the Reproducibility of System-oriented IR
Experiments", https://doi.org/10.1145/3397271.3401036): the Effect Ratio (ER) and the Delta Relative Improvement
(ΔRI), which compare the effect of an "advanced" system over a "baseline" in the original paper with the same effect
in our reproduction.

    >>> effect_ratio(ours_baseline=dpr_per_query, ours_advanced=taser_per_query,
    ...              paper_baseline=0.30, paper_advanced=0.36)       # ER
    >>> delta_relative_improvement(dpr_per_query, taser_per_query, 0.30, 0.36)  # ΔRI
    >>> reproduction(dpr_per_query, taser_per_query, 0.30, 0.36)     # Reproduction(er=..., delta_ri=...)

Notation of the paper: a is the advanced run, b the baseline run, M_j(x) the score of run x on topic j, n the number
of topics; primes mark the reproduced experiment (ours), no prime the original (the paper).

    Δ_j   = M_j(a) − M_j(b)                    per-topic improvement
    ER    = (1/n' Σ_j Δ'_j) / (1/n Σ_j Δ_j)    mean improvement reproduced / mean improvement original
    ARP(x) = 1/n Σ_j M_j(x)                     average retrieval performance
    RI    = (ARP(a) − ARP(b)) / ARP(b)          relative improvement
    ΔRI   = RI − RI'                            original minus reproduced

The formulas follow the reference implementation, the PyPI package `repro-eval` 0.5.0 (Breuer's own),
``repro_eval/measure/overall_effects.py``: ``_er`` yields ``value / mi_orig.get(measure)`` with ``value`` the
reproduced runs' mean of per-topic differences (``mean_improvement(rep_score_a, rep_score_b)``), and ``_DRI`` yields
``ri - rel_improve_rep.get(measure)`` with ``ri`` the original runs' ``(mean_a - mean_b) / mean_b``. The tests
check both functions against repro_eval to 1e-9.

Since the paper we reproduce prints means only, its side is given as two scalars (the original ER's denominator,
the mean of per-topic differences, equals the difference of the means for paired runs). Our side may be per-topic
arrays (paired: same topics, same order), mappings query id -> score (paired by key), or scalars. Per-topic arrays
are accepted on the paper's side too, for when the original runs are available.

numpy only; no pandas, no repro_eval at runtime.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

Scores = Union[float, int, np.floating, Sequence[float], np.ndarray, Mapping[str, float]]

__all__ = ["Reproduction", "delta_relative_improvement", "effect_ratio", "reproduction"]


def _as_array(x: Scores, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim > 1:
        raise ValueError(f"{name}: expected a scalar or a 1-d array of per-topic scores, got shape {arr.shape}")
    if arr.ndim == 1 and arr.size == 0:
        raise ValueError(f"{name}: no topics")
    return arr


def _paired(baseline: Scores, advanced: Scores, side: str) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of one experiment as float arrays (0-d for scalars), paired by key or by position."""
    if isinstance(baseline, Mapping) or isinstance(advanced, Mapping):
        if not (isinstance(baseline, Mapping) and isinstance(advanced, Mapping)):
            raise TypeError(f"{side}: give both baseline and advanced as mappings query id -> score, or neither")
        if set(baseline) != set(advanced):
            only_b, only_a = sorted(set(baseline) - set(advanced)), sorted(set(advanced) - set(baseline))
            raise ValueError(f"{side}: baseline and advanced need the same topics: {len(only_b)} only in baseline "
                             f"(e.g. {only_b[:3]}), {len(only_a)} only in advanced (e.g. {only_a[:3]})")
        if not baseline:
            raise ValueError(f"{side}: no topics")
        keys = sorted(baseline)
        return (np.array([baseline[k] for k in keys], dtype=float),
                np.array([advanced[k] for k in keys], dtype=float))
    b = _as_array(baseline, f"{side}_baseline")
    a = _as_array(advanced, f"{side}_advanced")
    if b.ndim == 1 and a.ndim == 1 and b.shape != a.shape:
        raise ValueError(f"{side}: per-topic baseline and advanced scores are paired and need the same length, "
                         f"got {b.size} and {a.size}")
    return b, a


def _mean_improvement(baseline: Scores, advanced: Scores, side: str) -> float:
    """1/n Σ_j (M_j(a) − M_j(b)); a scalar on one side is broadcast against the other's topics."""
    b, a = _paired(baseline, advanced, side)
    return float(np.mean(a - b))


def _relative_improvement(baseline: Scores, advanced: Scores, side: str) -> float:
    """RI = (ARP(a) − ARP(b)) / ARP(b), NaN where ARP(b) = 0."""
    b, a = _paired(baseline, advanced, side)
    arp_b, arp_a = float(np.mean(b)), float(np.mean(a))
    if arp_b == 0.0:
        return math.nan
    return (arp_a - arp_b) / arp_b


def effect_ratio(ours_baseline: Scores, ours_advanced: Scores, paper_baseline: Scores,
                 paper_advanced: Scores) -> float:
    """Effect Ratio of Breuer et al. (2020), for reproducibility (same topics as the paper):

        ER = Δ'_ARP / Δ_ARP = (1/n' Σ_j Δ'_j) / (1/n Σ_j Δ_j),   Δ_j = M_j(a) − M_j(b),

    the mean per-topic improvement of our advanced run over our baseline divided by the paper's mean improvement
    (its ``paper_advanced − paper_baseline`` when given as scalars). As in repro_eval's ``overall_effects.ER``:
    ``mean_improvement(rep_a, rep_b) / mean_improvement(orig_a, orig_b)``.

    Reading: ER = 1 the whole effect reproduced; 0 < ER < 1 the same direction but a smaller effect; ER > 1 a larger
    effect; ER = 0 no effect; ER < 0 the effect reversed. NaN where the paper's improvement is 0 (ER undefined;
    repro_eval would divide by zero). NaN in the inputs propagates.
    """
    denom = _mean_improvement(paper_baseline, paper_advanced, "paper")
    num = _mean_improvement(ours_baseline, ours_advanced, "ours")
    if denom == 0.0:
        return math.nan
    return num / denom


def delta_relative_improvement(ours_baseline: Scores, ours_advanced: Scores, paper_baseline: Scores,
                               paper_advanced: Scores) -> float:
    """Delta Relative Improvement of Breuer et al. (2020):

        RI  = (ARP(a) − ARP(b)) / ARP(b),   ARP(x) = 1/n Σ_j M_j(x)
        ΔRI = RI − RI' = RI_paper − RI_ours

    Sign convention (the paper's and repro_eval's ``overall_effects.DRI``, which yields
    ``rel_improve(orig_a, orig_b) − rel_improve(rep_a, rep_b)``): original minus reproduced. ΔRI = 0 the relative
    improvement reproduced exactly; ΔRI > 0 ours is smaller than the paper's; ΔRI < 0 ours is larger.

    NaN where either baseline mean is 0 (RI undefined). NaN in the inputs propagates.
    """
    ri_paper = _relative_improvement(paper_baseline, paper_advanced, "paper")
    ri_ours = _relative_improvement(ours_baseline, ours_advanced, "ours")
    return ri_paper - ri_ours


@dataclass(frozen=True)
class Reproduction:
    """ER and ΔRI of one (baseline, advanced) pair, ours against the paper's."""

    er: float
    delta_ri: float


def reproduction(ours_baseline: Scores, ours_advanced: Scores, paper_baseline: Scores,
                 paper_advanced: Scores) -> Reproduction:
    """Both measures at once: ``Reproduction(er=effect_ratio(...), delta_ri=delta_relative_improvement(...))``."""
    return Reproduction(
        er=effect_ratio(ours_baseline, ours_advanced, paper_baseline, paper_advanced),
        delta_ri=delta_relative_improvement(ours_baseline, ours_advanced, paper_baseline, paper_advanced),
    )
