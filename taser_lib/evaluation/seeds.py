"""Tables over seeds: "mean ± std over seeds" per model and metric.

    >>> rows = pd.DataFrame([{"model": "taser", "metric": "R@20", "seed": s, "value": v} for s, v in ...])
    >>> summarise_seeds(rows, by=["model", "metric"])           # model, metric, mean, std, n
    >>> summarise_seeds(rows, by=["model", "metric"], digits=1)  # ... and "mean ± std": "41.2 ± 0.8"
"""

from __future__ import annotations

import math
from collections.abc import Sequence

MEAN_STD = "mean ± std"


def mean_std(mean: float, std: float | None = None, digits: int = 1) -> str:
    """"41.2 ± 0.8"; without a spread (one seed: std is NaN or None) the mean alone; NaN mean: "–"."""
    if mean is None or math.isnan(mean):
        return "–"
    if std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def summarise_seeds(frame, by: Sequence[str], value: str = "value", *, seed: str = "seed",
                    digits: int | None = None):
    """One row per group of `by`: the mean, the sample standard deviation (ddof 1; NaN for a single seed) and the
    number n of `value`s; with `digits`, also a "mean ± std" string column (`mean_std`).

    When `frame` has a `seed` column, each group must hold each seed at most once: a repeated seed means `by`
    leaves out a column that tells rows apart (averaging R@1 with R@20, say), and is an error."""
    by = list(by)
    missing = [c for c in [*by, value] if c not in frame.columns]
    if missing:
        raise KeyError(f"summarise_seeds: no column(s) {missing}; the frame has {list(frame.columns)}")
    if not by:
        raise ValueError("summarise_seeds needs at least one `by` column")
    if seed in frame.columns:
        repeated = frame[frame.duplicated([*by, seed], keep=False)]
        if len(repeated):
            first = repeated.iloc[0]
            group = {c: first[c] for c in by}
            raise ValueError(f"group {group} holds {seed} {first[seed]!r} more than once: add the column that "
                             f"tells those rows apart to `by`")
    out = (frame.groupby(by, sort=False, dropna=False)[value].agg(["mean", "std", "count"])
           .rename(columns={"count": "n"}).reset_index())
    if digits is not None:
        out[MEAN_STD] = [mean_std(m, s, digits) for m, s in zip(out["mean"], out["std"])]
    return out
