"""Train-versus-test summaries of the dual-encoder pages: the end points of learning curves (Figure 4), paired tests
between models as a table, and one sentence per comparison that the page prints from the computed numbers (the
testbed check: does the CA beat the zero-shot and the one-hot DE on test?).

    >>> curve_endpoints(curves)            # model, split, point (first / last), step, value (mean over seeds), std, n
    >>> curve_endpoints(curves, by=["model", "split", "seed"])   # each seed's own: the claims' paired tests
    >>> comparisons = compare_systems({"ca": ca_dirs, "de": de_dirs, "zero-shot": [zs]}, "MRR@10",
    ...                               pairs=[("ca", "zero-shot"), ("ca", "de")])
    >>> comparison_table(comparisons)      # a, b, mean_a, mean_b, a − b, p (randomisation), p (Holm), questions, ...
    >>> [comparison_sentence(c) for c in comparisons]
    ['test MRR@10: ca 0.612 vs zero-shot 0.585 (+0.027; randomisation p = 0.03, Holm; 150 questions): ca is better']

`curve_endpoints`: for each run (model, seed, split) its first evaluation (the smallest step: step 0, the starting
model, when the loop evaluated there) and its last (the largest step: the end of training, not the selected
checkpoint), then the mean over seeds (none when `by` names the seed column: one row per seed, n = 1). A claim on
"the gap at the end" reads `point == "last"`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from taser_lib.evaluation.significance import Comparison

POINTS = ("first", "last")


def curve_endpoints(curves: pd.DataFrame, by: Sequence[str] = ("model", "split"), *, value: str = "value",
                    step: str = "step", seed: str = "seed") -> pd.DataFrame:
    """One row per (`by`..., point): the first and the last evaluation of each run (see the module docstring),
    averaged over the `seed` column when there is one and `by` does not name it; columns *by, point, step, value,
    std (sample std over seeds; NaN for one seed), n (seeds)."""
    by = list(by)
    missing = [c for c in [*by, value, step] if c not in curves.columns]
    if missing:
        raise KeyError(f"curve_endpoints: no column(s) {missing}; the frame has {list(curves.columns)}")
    if curves.empty:
        raise ValueError("curve_endpoints: the curves are empty")
    frame = curves.dropna(subset=[value])
    runs = [*by, seed] if seed in frame.columns and seed not in by else by
    frame = frame.sort_values(step, kind="stable")
    grouped = frame.groupby(runs, sort=False, dropna=False)
    ends = pd.concat([grouped.head(1).assign(point="first"), grouped.tail(1).assign(point="last")])
    out = (ends.groupby([*by, "point"], sort=False, dropna=False)
           .agg(step=(step, "max"), value=(value, "mean"), std=(value, "std"), n=(value, "size"))
           .reset_index())
    order = {p: i for i, p in enumerate(POINTS)}
    return (out.assign(_o=out["point"].map(order)).sort_values([*by, "_o"], kind="stable")
            .drop(columns="_o").reset_index(drop=True))


def comparison_table(comparisons: Sequence[Comparison], labels: Mapping[str, str] | None = None,
                     digits: int = 4) -> pd.DataFrame:
    """One row per paired comparison (`significance.compare_systems`): a, b (through `labels` when given), their
    means over the shared queries, a − b, the randomisation p-value, the family-corrected one, the number of
    questions and of seeds per side."""
    labels = dict(labels or {})
    rows = []
    for c in comparisons:
        rows.append({"metric": c.metric, "a": labels.get(c.label_a, c.label_a),
                     "b": labels.get(c.label_b, c.label_b),
                     "mean a": round(c.mean_a, digits), "mean b": round(c.mean_b, digits),
                     "a − b": round(c.difference, digits),
                     "p (randomisation)": round(c.randomisation.p_value, digits),
                     f"p ({c.correction})": round(c.p_value, digits), "questions": c.n_queries,
                     "seeds a": len(c.seed_means_a), "seeds b": len(c.seed_means_b)})
    return pd.DataFrame(rows)


def comparison_sentence(c: Comparison, alpha: float = 0.05, labels: Mapping[str, str] | None = None,
                        split: str = "test") -> str:
    """"test MRR@10: CA 0.612 vs zero-shot 0.585 (+0.027; randomisation p = 0.03, holm-adjusted; 150 questions):
    CA is better" -- better / worse when the (corrected) p-value is below `alpha`, else "no difference at
    alpha"."""
    labels = dict(labels or {})
    a, b = labels.get(c.label_a, c.label_a), labels.get(c.label_b, c.label_b)
    p = c.p_value
    adjusted = f", {c.correction}-adjusted" if c.p_adjusted is not None and c.correction != "none" else ""
    if p < alpha:
        verdict = f"{a} is {'better' if c.difference > 0 else 'worse'}"
    else:
        verdict = f"no difference at alpha {alpha:g}"
    return (f"{split} {c.metric}: {a} {c.mean_a:.3f} vs {b} {c.mean_b:.3f} ({c.difference:+.3f}; randomisation "
            f"p = {p:.2g}{adjusted}; {c.n_queries} questions): {verdict}")
