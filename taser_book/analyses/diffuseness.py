"""How diffuse a re-ranker's negative scores are, in the paper's units ("In defense of dual-encoders", Figs. 2, 5, 7).

The paper shows the diffuseness of negative scores on one shared axis, after "a constant offset to each model's
scores to ensure they are mean zero" (Fig. 2): a centred raw score, one offset per model. The range rho of §3.3
normalises the *margins* only ("normalised margins (s(q,d+) - s(q,d-))/rho"), not the spread. So the spread is
measured here in centred raw units (a standard deviation does not change with the offset), and a scale-free ratio is
given beside it as a second view:

- `negative_std`: the standard deviation (ddof 1) of the negative scores pooled over questions (what the densities
  show; between-question shifts included);
- `negative_std_within`: the mean over questions of each question's negative-score standard deviation;
- `negative_iqr`: the inter-quartile range of the pooled negative scores (the width of the peak);
- `spread_ratio`: the mean over questions of std(negatives) / mean(s(q,d+) - s(q,d-)) over the question's
  (positive, negative) pairs: how wide the negatives are against the gap the model puts between positives and
  negatives (scale-free; a question whose mean margin is <= 0 has no ratio and is left out);
- `overlap`: P(S- > S+) + P(S- = S+)/2 for a negative and a positive drawn from the pooled scores (= 1 - AUC).

Raw units compare models only where their scores share a unit. A CA's logit and a DE's 20·cos trained with the
same softmax cross-entropy at temperature 1 are both log-odds of the positive among the candidates, so their raw
scores are on one axis; the ratio needs no such premise.

A pooled statistic is tested by the bootstrap over questions (`bootstrap_statistics`): B resamples of the question
ids, drawn once and shared by every model (paired), each giving the pooled statistic of every model again.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

SPREAD_STATISTICS: tuple[str, ...] = ("negative_std", "negative_std_within", "negative_iqr", "spread_ratio",
                                      "overlap")
PER_QUERY_SPREAD: tuple[str, ...] = ("negative_std", "spread_ratio")
BOOTSTRAP_STATISTICS: tuple[str, ...] = ("negative_std", "overlap")
_COLUMNS = ("query_id", "label", "score")


def _check(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    missing = [c for c in (*by, *_COLUMNS) if c not in frame.columns]
    if missing:
        raise ValueError(f"the score frame has no column {', '.join(missing)} (see analyses.scores.score_frame)")
    return list(by)


def _per_query(group: pd.DataFrame) -> pd.DataFrame:
    """Per question of one model: its negative-score std and its spread ratio."""
    neg = group[group["label"] == "neg"].groupby("query_id", sort=False)["score"]
    pos_mean = group[group["label"] == "pos"].groupby("query_id", sort=False)["score"].mean()
    out = pd.DataFrame({"negative_std": neg.std(ddof=1), "neg_mean": neg.mean()})
    out["pos_mean"] = pos_mean.reindex(out.index)
    margin = out["pos_mean"] - out["neg_mean"]  # the mean over (pos, neg) pairs of s+ - s-
    out["spread_ratio"] = (out["negative_std"] / margin).where(margin > 0)
    return out[["negative_std", "spread_ratio"]]


def _overlap(pos: np.ndarray, neg: np.ndarray) -> float:
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.sort(pos)
    below = np.searchsorted(order, neg, side="left")
    equal = np.searchsorted(order, neg, side="right") - below
    return float((below + 0.5 * equal).sum() / (len(pos) * len(neg)))


def spread_statistics(frame: pd.DataFrame, *, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Long table: the `by` columns, statistic (SPREAD_STATISTICS), value, in centred raw score units."""
    by = _check(frame, by)
    rows = []
    for key, group in frame.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        scores = group["score"].to_numpy(np.float64)
        is_pos = (group["label"] == "pos").to_numpy()
        pos, neg = scores[is_pos], scores[~is_pos]
        per = _per_query(group)
        q75, q25 = np.quantile(neg, [0.75, 0.25]) if len(neg) else (np.nan, np.nan)
        values = {"negative_std": float(neg.std(ddof=1)) if len(neg) > 1 else float("nan"),
                  "negative_std_within": float(per["negative_std"].mean()),
                  "negative_iqr": float(q75 - q25), "spread_ratio": float(per["spread_ratio"].mean()),
                  "overlap": _overlap(pos, neg)}
        rows += [{**dict(zip(by, key)), "statistic": s, "value": values[s]} for s in SPREAD_STATISTICS]
    return pd.DataFrame(rows, columns=[*by, "statistic", "value"])


def per_query_spread(frame: pd.DataFrame, *, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """Long table: the `by` columns, query_id, statistic (PER_QUERY_SPREAD), value; NaN rows dropped (a question
    with fewer than two negatives, or a ratio whose mean margin is <= 0)."""
    by = _check(frame, by)
    parts = []
    for key, group in frame.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        per = _per_query(group).rename_axis("query_id").reset_index()
        long = per.melt(id_vars="query_id", var_name="statistic", value_name="value")
        parts.append(long.assign(**dict(zip(by, key))))
    if not parts:
        return pd.DataFrame(columns=[*by, "query_id", "statistic", "value"])
    out = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    return out[[*by, "query_id", "statistic", "value"]].reset_index(drop=True)


def _weighted_std(values: np.ndarray, query_index: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per bootstrap replicate (a row of `counts`: how often each question was drawn), the std (ddof 1) of the
    values of the drawn questions, each question's values repeated as often as it was drawn."""
    n_q = counts.shape[1]
    n = np.bincount(query_index, minlength=n_q).astype(np.float64)
    s = np.bincount(query_index, weights=values, minlength=n_q)
    ss = np.bincount(query_index, weights=values * values, minlength=n_q)
    total, mean_sum, sq_sum = counts @ n, counts @ s, counts @ ss
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (sq_sum - mean_sum * mean_sum / total) / (total - 1)
    return np.sqrt(np.maximum(var, 0.0))


def _weighted_overlap(pos: np.ndarray, pos_q: np.ndarray, neg: np.ndarray, neg_q: np.ndarray,
                      counts: np.ndarray) -> np.ndarray:
    """`_overlap` per replicate, each pair weighted by how often its questions were drawn."""
    values, inverse = np.unique(np.concatenate([pos, neg]), return_inverse=True)
    pos_u, neg_u = inverse[:len(pos)], inverse[len(pos):]
    w_pos, w_neg = counts[:, pos_q], counts[:, neg_q]                       # replicates x items
    by_value = np.zeros((counts.shape[0], len(values)))
    np.add.at(by_value.T, pos_u, w_pos.T)                                   # positive weight at each score value
    below = np.cumsum(by_value, axis=1) - by_value                          # strictly below each value
    u = (w_neg * (below[:, neg_u] + 0.5 * by_value[:, neg_u])).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return u / (w_pos.sum(axis=1) * w_neg.sum(axis=1))


def bootstrap_statistics(frame: pd.DataFrame, *, by: Sequence[str] = ("model",),
                         statistics: Sequence[str] = BOOTSTRAP_STATISTICS, n_resamples: int = 1000,
                         seed: int = 0, average: str | None = None) -> pd.DataFrame:
    """Bootstrap replicates of pooled statistics over questions: long table with the `by` columns, statistic,
    replicate (0 .. n_resamples - 1), value. The question ids are resampled once per replicate (with replacement,
    `seed`) and shared by every group, so two models' replicates are paired. `average`: a column among `by` (e.g.
    "seed") whose groups are averaged within each replicate (each seed of a model scores the same questions)."""
    by = _check(frame, by)
    unknown = [s for s in statistics if s not in BOOTSTRAP_STATISTICS]
    if unknown:
        raise ValueError(f"unknown bootstrap statistic(s) {unknown}; known: {BOOTSTRAP_STATISTICS}")
    if n_resamples < 20:
        raise ValueError(f"n_resamples must be >= 20, got {n_resamples}")
    queries = pd.Index(pd.unique(frame["query_id"]))
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(queries), size=(n_resamples, len(queries)))
    counts = np.zeros((n_resamples, len(queries)))
    np.add.at(counts, (np.repeat(np.arange(n_resamples), len(queries)), draws.ravel()), 1.0)
    parts = []
    for key, group in frame.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        q = queries.get_indexer(group["query_id"])
        scores = group["score"].to_numpy(np.float64)
        is_pos = (group["label"] == "pos").to_numpy()
        for name in statistics:
            if name == "negative_std":
                value = _weighted_std(scores[~is_pos], q[~is_pos], counts)
            else:
                value = _weighted_overlap(scores[is_pos], q[is_pos], scores[~is_pos], q[~is_pos], counts)
            parts.append(pd.DataFrame({**dict(zip(by, key)), "statistic": name,
                                       "replicate": np.arange(n_resamples), "value": value}))
    out = pd.concat(parts, ignore_index=True)
    if average is not None:
        keys = [c for c in by if c != average]
        out = out.groupby([*keys, "statistic", "replicate"], sort=False)["value"].mean().reset_index()
        return out[[*keys, "statistic", "replicate", "value"]]
    return out[[*by, "statistic", "replicate", "value"]]
