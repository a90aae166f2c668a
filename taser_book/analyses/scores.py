"""Score analysis of re-rankers ("In defense of dual-encoders" §3.3, Figures 2, 5-8): the scores a model gives the
positive and negative (query, passage) pairs of a re-ranking set, their centring, the normalised margins
(s(q, d+) - s(q, d-)) / rho, and the summary statistics the scorecard tests.

Input: a re-ranking set (anything with `candidates` {query id: [doc id, ...]} and `qrels()` {query id: {doc id:
grade}}, as `training.reranking.RerankingSet`) and a model's scores of its candidates, either aligned with the
candidate lists ({query id: float array}, what `training.cross_encoder.score_reranking_set` and
`training.distill.score_dual_encoder` return for CA, DE, distilled DE and ColBERT alike) or as a run ({query id:
{doc id: score}}). Output: a tidy frame, one row per (model, query, candidate).

    >>> frame = score_frames(test_set, {"CA": ca_scores, "DE": de_scores, "DIST": dist_scores})
    >>> frame.columns                  # model, query_id, doc_id, label ("pos" / "neg"), score
    >>> centre_scores(frame)           # Fig. 2 / 5: each model's scores shifted to mean zero (Fig. 6: `frame` as is)
    >>> normalised_margins(frame)      # Fig. 2 right / Fig. 8: one row per (positive, negative) pair of a query
    >>> score_summary(frame)           # one row per model: spread, overlap, median margin, mean score, ...
    >>> score_statistics(frame.assign(split="test"), by=("model", "split"), reference="CA")
    ...                                # long: model, split, statistic, value (a `save_result` table)

Definitions (the paper gives words, not formulas; each choice below is a documented option):

- **Positive / negative.** A candidate is positive when the set's qrels grade it > 0, negative otherwise. Only the
  queries with a positive are kept (`rset.qrels()`, as the re-ranking metrics do): the paper considers "for each
  query q in the test set ... the distribution of scores for positive and negative (query, document) pairs
  (q, d+) and (q, d-)".
- **Centring** (Fig. 2: "we apply a constant offset to each model's scores to ensure they are mean zero"): one
  constant per model (per group of `by`), the mean of all its (query, candidate) scores, positives and negatives
  pooled, is subtracted. Fig. 6 is the uncentred frame.
- **Range rho** ("(s(q, d+) - s(q, d-))/rho ... where rho is the maximal score range", §3.3): by default
  (`scale="global"`) one number per model: max - min of all its scores on the set (every candidate of every kept
  query). Read as "the model's range", it puts models with different scales and baseline shifts on one axis: the
  margin is invariant to s -> a s + b (a > 0) of a model's scores, and lies in [-1, 1]. `trim=p` uses the
  (1-p) - p quantile range instead (robust to one outlying score). `scale="query"` uses each query's own range
  (max - min over its candidates), which also removes per-query shifts and scales; the paper does not say which it
  used, and Fig. 2's x-axis (-0.2 to 1.0) fits both.
- **Pairs.** `pairs="all"` (default): every (positive, negative) pair of the same query, one margin each; the
  paper's "margins ... between the positive and negative pairs" names no selection, and every pair is what
  Figure 2's pooled densities compare. `pairs="hardest"`: each positive against its query's highest-scoring
  negative under the model (the margin that decides whether the positive is ranked above every negative).
- **Negative spread** (Fig. 2: DE "has far more diffuse negative scores"): the standard deviation of the negative
  scores pooled over queries (what the densities show) divided by the global rho (`negative_spread`); also their
  inter-quartile range / rho (`negative_iqr`: the width of the peak, insensitive to tails) and the mean over
  queries of each query's negative-score standard deviation / rho (`negative_spread_within`: without the
  between-query shifts).
- **Overlap** (Fig. 2: "a greater overlap in the positive and negative scores"): `overlap` = P(S- > S+) +
  P(S- = S+)/2 for a random negative pair S- and a random positive pair S+ drawn from the pooled densities
  (= 1 - AUC of positives vs negatives; 0 = separated, 0.5 = indistinguishable; invariant to any increasing
  transform of the scores). `overlap_within` draws both from the same query (mean over queries: the ranking's
  own error rate). `overlap_coefficient` is the histogram overlap sum_b min(p+_b, p-_b) of the two densities on
  `bins` equal bins over the model's range (1 = identical, 0 = disjoint; depends on the bins).
- **Margin statistics**: `median_margin`, `mean_margin` and `negative_margin_share` (the share of margins < 0) of
  `normalised_margins` with the chosen pairs and scale.
- **Baseline shift** (Fig. 6: "the DE model scores possess a strong baseline shift over the [CA] model"): each
  model's `mean_score` (its centring offset) and `mean_score_rho` = mean_score / rho (where its scores sit relative
  to zero, in units of its own range); between a model and a `reference`, `baseline_shift` = mean_score(model) -
  mean_score(reference) in raw score units and `baseline_shift_rho` = that shift / rho(reference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pandas as pd
from scipy import stats

from taser_lib.data.types import Candidates, Qrels

COLUMNS: tuple[str, ...] = ("model", "query_id", "doc_id", "label", "score")
PAIRS: tuple[str, ...] = ("all", "hardest")
SCALES: tuple[str, ...] = ("global", "query")
_SCORE_STATISTICS: tuple[str, ...] = (
    "queries", "positives", "negatives", "mean_score", "score_range", "mean_score_rho", "negative_spread",
    "negative_iqr", "negative_spread_within", "overlap", "overlap_within", "overlap_coefficient",
)
_MARGIN_STATISTICS: tuple[str, ...] = ("median_margin", "mean_margin", "negative_margin_share")
STATISTICS: tuple[str, ...] = _SCORE_STATISTICS + _MARGIN_STATISTICS


class ScoredSet(Protocol):
    """What the score analysis reads of a re-ranking set."""

    candidates: Candidates

    def qrels(self) -> Qrels: ...


Scores = Mapping[str, Any]  # {query id: float array aligned with the candidates} or {query id: {doc id: score}}


# --- the tidy frame --------------------------------------------------------------------------------------------------

def _aligned(rset: ScoredSet, scores: Scores, qid: str, model: str) -> np.ndarray:
    docs = rset.candidates[qid]
    value = scores[qid]
    if isinstance(value, Mapping):
        missing = [d for d in docs if d not in value]
        if missing:
            raise ValueError(f"model {model!r}, query {qid!r}: no score for candidates {missing[:3]}")
        out = np.array([value[d] for d in docs], dtype=np.float64)
    else:
        out = np.asarray(value, dtype=np.float64).reshape(-1)
        if len(out) != len(docs):
            raise ValueError(f"model {model!r}, query {qid!r}: {len(out)} scores for {len(docs)} candidates")
    if not np.isfinite(out).all():
        raise ValueError(f"model {model!r}, query {qid!r}: non-finite scores {out[~np.isfinite(out)][:3].tolist()}")
    return out


def score_frame(rset: ScoredSet, scores: Scores, model: str) -> pd.DataFrame:
    """One row per candidate of every query with a positive: model, query_id, doc_id, label ("pos" when the
    qrels grade it > 0, else "neg"), score (float64). Raises ValueError naming the query when scores are missing,
    misaligned or not finite."""
    qrels = rset.qrels()
    qids = [q for q in rset.candidates if any(g > 0 for g in qrels.get(q, {}).values())]
    missing = [q for q in qids if q not in scores]
    if missing:
        raise ValueError(f"model {model!r}: no scores for {len(missing)} queries, e.g. {missing[:3]}")
    rows_q, rows_d, rows_l, rows_s = [], [], [], []
    for qid in qids:
        docs = rset.candidates[qid]
        rel = qrels[qid]
        rows_q += [qid] * len(docs)
        rows_d += list(docs)
        rows_l += ["pos" if rel.get(d, 0) > 0 else "neg" for d in docs]
        rows_s.append(_aligned(rset, scores, qid, model))
    return pd.DataFrame({"model": model, "query_id": rows_q, "doc_id": rows_d, "label": rows_l,
                         "score": np.concatenate(rows_s) if rows_s else np.zeros(0)}, columns=list(COLUMNS))


def score_frames(rset: ScoredSet, scores_by_model: Mapping[str, Scores]) -> pd.DataFrame:
    """`score_frame` of every model on one set, stacked in the mapping's order."""
    return pd.concat([score_frame(rset, s, m) for m, s in scores_by_model.items()], ignore_index=True)


def _check(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    by = [by] if isinstance(by, str) else list(by)
    missing = [c for c in [*by, "query_id", "label", "score"] if c not in frame.columns]
    if missing:
        raise KeyError(f"score frame has no column(s) {missing}; it has {list(frame.columns)}")
    bad = sorted(set(frame["label"]) - {"pos", "neg"})
    if bad:
        raise ValueError(f"label must be 'pos' or 'neg', got {bad[:3]}")
    if not by:
        raise ValueError("`by` needs at least one column (e.g. 'model')")
    return by


# --- centring and range ----------------------------------------------------------------------------------------------

def score_offsets(frame: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.Series:
    """The centring constant of each group of `by`: the mean of all its scores (positives and negatives)."""
    by = _check(frame, by)
    return frame.groupby(by, sort=False)["score"].mean()


def centre_scores(frame: pd.DataFrame, by: Sequence[str] = ("model",)) -> pd.DataFrame:
    """A copy with each group's scores shifted by one constant to mean zero (Fig. 2 and 5; see the module
    docstring). Ranking, margins, overlap and spread are unchanged; only the location moves."""
    by = _check(frame, by)
    out = frame.copy()
    out["score"] = frame["score"] - frame.groupby(by, sort=False)["score"].transform("mean")
    return out


def _range(values: pd.Series | np.ndarray, trim: float) -> float:
    values = np.asarray(values, dtype=np.float64)
    if trim == 0.0:
        return float(values.max() - values.min())
    lo, hi = np.quantile(values, [trim, 1.0 - trim])
    return float(hi - lo)


def _check_trim(trim: float) -> None:
    if not 0.0 <= trim < 0.5:
        raise ValueError(f"trim must lie in [0, 0.5), got {trim}")


def score_range(frame: pd.DataFrame, by: Sequence[str] = ("model",), trim: float = 0.0) -> pd.Series:
    """rho of each group: max - min of its scores (or the (1-trim) - trim quantile range)."""
    by = _check(frame, by)
    _check_trim(trim)
    return frame.groupby(by, sort=False)["score"].agg(lambda v: _range(v, trim))


# --- margins ---------------------------------------------------------------------------------------------------------

def normalised_margins(frame: pd.DataFrame, *, pairs: str = "all", scale: str = "global",
                       by: Sequence[str] = ("model",), trim: float = 0.0) -> pd.DataFrame:
    """(s(q, d+) - s(q, d-)) / rho for each group of `by` (one row per pair): the `by` columns, query_id, pos_id,
    neg_id, margin (raw difference), rho, normalised_margin.

    `pairs`: "all" (every positive with every negative of its query) or "hardest" (each positive with the query's
    highest-scoring negative under this model). `scale`: "global" (rho = the group's score range) or "query" (the
    query's own range within the group). A rho of 0 (all scores equal) gives NaN. See the module docstring."""
    by = _check(frame, by)
    if pairs not in PAIRS:
        raise ValueError(f"pairs must be one of {PAIRS}, got {pairs!r}")
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    _check_trim(trim)
    keys = [*by, "query_id"]
    doc = frame["doc_id"] if "doc_id" in frame.columns else pd.Series(np.arange(len(frame)), index=frame.index)
    base = frame.assign(doc_id=doc)[[*keys, "doc_id", "label", "score"]]
    pos = base[base["label"] == "pos"].rename(columns={"doc_id": "pos_id", "score": "pos_score"})
    neg = base[base["label"] == "neg"].rename(columns={"doc_id": "neg_id", "score": "neg_score"})
    if pairs == "hardest":
        neg = neg.loc[neg.groupby(keys, sort=False)["neg_score"].idxmax()]
    merged = pos.drop(columns="label").merge(neg.drop(columns="label"), on=keys, how="inner")
    rho_keys = by if scale == "global" else keys
    rho = base.groupby(rho_keys, sort=False)["score"].agg(lambda v: _range(v, trim)).rename("rho").reset_index()
    merged = merged.merge(rho, on=rho_keys, how="left")
    merged["margin"] = merged["pos_score"] - merged["neg_score"]
    with np.errstate(divide="ignore", invalid="ignore"):
        merged["normalised_margin"] = np.where(merged["rho"] > 0, merged["margin"] / merged["rho"], np.nan)
    return merged[[*keys, "pos_id", "neg_id", "margin", "rho", "normalised_margin"]].reset_index(drop=True)


# --- summary statistics ----------------------------------------------------------------------------------------------

def _overlap_pooled(pos: np.ndarray, neg: np.ndarray) -> float:
    """P(S- > S+) + P(S- = S+)/2 over all (positive, negative) pairs, from the ranks (Mann-Whitney U)."""
    if not len(pos) or not len(neg):
        return float("nan")
    ranks = stats.rankdata(np.concatenate([neg, pos]))
    u_neg = ranks[:len(neg)].sum() - len(neg) * (len(neg) + 1) / 2
    return float(u_neg / (len(neg) * len(pos)))


def _overlap_within(group: pd.DataFrame) -> pd.Series:
    """`_overlap_pooled` within each query that has a positive and a negative (ranks within the query)."""
    neg = (group["label"] == "neg").astype(np.float64)
    ranks = group.groupby("query_id", sort=False)["score"].rank(method="average")
    per = pd.DataFrame({"query_id": group["query_id"], "neg": neg, "rank_neg": ranks * neg}).groupby(
        "query_id", sort=False).agg(n=("neg", "size"), n_neg=("neg", "sum"), r_neg=("rank_neg", "sum"))
    per = per[(per["n_neg"] > 0) & (per["n_neg"] < per["n"])]
    u_neg = per["r_neg"] - per["n_neg"] * (per["n_neg"] + 1) / 2
    return u_neg / (per["n_neg"] * (per["n"] - per["n_neg"]))


def _overlap_coefficient(pos: np.ndarray, neg: np.ndarray, bins: int) -> float:
    if not len(pos) or not len(neg):
        return float("nan")
    lo, hi = min(pos.min(), neg.min()), max(pos.max(), neg.max())
    if hi == lo:
        return 1.0
    edges = np.linspace(lo, hi, bins + 1)
    p = np.histogram(pos, edges)[0] / len(pos)
    n = np.histogram(neg, edges)[0] / len(neg)
    return float(np.minimum(p, n).sum())


def _group_stats(group: pd.DataFrame, trim: float, bins: int) -> dict[str, float]:
    scores = group["score"].to_numpy(np.float64)
    is_pos = (group["label"] == "pos").to_numpy()
    pos, neg = scores[is_pos], scores[~is_pos]
    rho = _range(scores, trim) if len(scores) else float("nan")
    inv = 1.0 / rho if rho > 0 else float("nan")
    negs = group[~is_pos]
    per_query_std = negs.groupby("query_id", sort=False)["score"].std(ddof=1).dropna()
    within = _overlap_within(group)
    q75, q25 = (np.quantile(neg, [0.75, 0.25]) if len(neg) else (np.nan, np.nan))
    mean = float(scores.mean()) if len(scores) else float("nan")
    return {
        "queries": float(group["query_id"].nunique()), "positives": float(len(pos)), "negatives": float(len(neg)),
        "mean_score": mean, "score_range": rho, "mean_score_rho": mean * inv,
        "negative_spread": float(neg.std(ddof=1)) * inv if len(neg) > 1 else float("nan"),
        "negative_iqr": float(q75 - q25) * inv,
        "negative_spread_within": float(per_query_std.mean()) * inv if len(per_query_std) else float("nan"),
        "overlap": _overlap_pooled(pos, neg),
        "overlap_within": float(within.mean()) if len(within) else float("nan"),
        "overlap_coefficient": _overlap_coefficient(pos, neg, bins),
    }


def score_summary(frame: pd.DataFrame, *, by: Sequence[str] = ("model",), pairs: str = "all",
                  scale: str = "global", trim: float = 0.0, bins: int = 50) -> pd.DataFrame:
    """One row per group of `by` with every statistic of `STATISTICS` (definitions in the module docstring);
    spreads and `mean_score_rho` use the group's global rho, margins the chosen `pairs` and `scale`."""
    by = _check(frame, by)
    _check_trim(trim)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    rows = []
    for key, group in frame.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        rows.append({**dict(zip(by, key)), **_group_stats(group, trim, bins)})
    out = pd.DataFrame(rows, columns=[*by, *_SCORE_STATISTICS])
    margins = normalised_margins(frame, pairs=pairs, scale=scale, by=by, trim=trim)
    agg = margins.groupby(by, sort=False)["normalised_margin"].agg(
        median_margin="median", mean_margin="mean",
        negative_margin_share=lambda m: float((m.dropna() < 0).mean()) if m.notna().any() else float("nan"))
    out = out.merge(agg.reset_index(), on=by, how="left")
    return out[[*by, *STATISTICS]]


def baseline_shift(frame: pd.DataFrame, model: str, reference: str, *, trim: float = 0.0) -> dict[str, float]:
    """How far `model`'s scores sit from `reference`'s (Fig. 6): {"shift": mean(model) - mean(reference) (raw
    score units), "shift_rho": shift / rho(reference), "mean_score", "reference_mean_score"}."""
    _check(frame, ["model"])
    for name in (model, reference):
        if not (frame["model"] == name).any():
            raise ValueError(f"no scores of model {name!r}; the frame has {list(dict.fromkeys(frame['model']))}")
    mean = frame.loc[frame["model"] == model, "score"].mean()
    ref = frame.loc[frame["model"] == reference, "score"]
    rho = _range(ref, trim)
    shift = float(mean - ref.mean())
    return {"shift": shift, "shift_rho": shift / rho if rho > 0 else float("nan"), "mean_score": float(mean),
            "reference_mean_score": float(ref.mean())}


def score_statistics(frame: pd.DataFrame, *, by: Sequence[str] = ("model",), reference: str | None = None,
                     pairs: str = "all", scale: str = "global", trim: float = 0.0, bins: int = 50) -> pd.DataFrame:
    """`score_summary` as a long table: the `by` columns, statistic, value (what a claims file's quantities
    select, e.g. {model: de, split: test, statistic: negative_spread}). With a `reference` model (`by` must
    include "model"), each model's `baseline_shift` and `baseline_shift_rho` against it are added, within each
    group of the other `by` columns (the reference's own are 0)."""
    by = _check(frame, by)
    wide = score_summary(frame, by=by, pairs=pairs, scale=scale, trim=trim, bins=bins)
    names = list(STATISTICS)
    if reference is not None:
        if "model" not in by:
            raise ValueError("a reference model needs 'model' among the `by` columns")
        others = [c for c in by if c != "model"]
        shifts = []
        for _, row in wide.iterrows():
            group = frame
            for c in others:
                group = group[group[c] == row[c]]
            shifts.append(baseline_shift(group, row["model"], reference, trim=trim))
        wide["baseline_shift"] = [s["shift"] for s in shifts]
        wide["baseline_shift_rho"] = [s["shift_rho"] for s in shifts]
        names += ["baseline_shift", "baseline_shift_rho"]
    long = wide.set_index(by)[names].stack(future_stack=True).rename("value").reset_index()
    return long.rename(columns={long.columns[len(by)]: "statistic"})


# --- per-query statistics (the paired tests over queries) ----------------------------------------------------------

PER_QUERY_STATISTICS: tuple[str, ...] = ("negative_spread", "median_margin", "mean_margin", "mean_score_rho",
                                         "overlap")


def per_query_statistics(frame: pd.DataFrame, *, by: Sequence[str] = ("model",),
                         statistics: Sequence[str] = ("negative_spread", "median_margin"), pairs: str = "all",
                         scale: str = "global", trim: float = 0.0) -> pd.DataFrame:
    """One value per (group of `by`, query) for each of `statistics`, in the units of `score_summary`, so that
    two models can be compared with a paired test over queries: long table with the `by` columns, query_id,
    statistic, value.

    - negative_spread: the standard deviation (ddof 1) of the query's negative scores / the group's global rho
      (its mean over queries is `negative_spread_within`); NaN for a query with fewer than two negatives;
    - median_margin / mean_margin: the median / mean of the query's normalised margins (`normalised_margins` with
      `pairs`, `scale` and `trim`);
    - mean_score_rho: the mean of the query's scores / the group's global rho (where its scores sit relative to
      zero);
    - overlap: the share of the query's (positive, negative) pairs ranked the wrong way, ties counting half (its
      mean over queries is `overlap_within`).
    Rows whose value is NaN are dropped."""
    by = _check(frame, by)
    unknown = [s for s in statistics if s not in PER_QUERY_STATISTICS]
    if unknown:
        raise ValueError(f"unknown per-query statistic(s) {unknown}; known: {PER_QUERY_STATISTICS}")
    _check_trim(trim)
    keys = [*by, "query_id"]
    rho = score_range(frame, by=by, trim=trim).rename("rho").reset_index()
    parts = []
    if "negative_spread" in statistics or "mean_score_rho" in statistics:
        base = frame.merge(rho, on=by, how="left")
        base = base.assign(scaled=base["score"] / base["rho"].where(base["rho"] > 0))  # rho 0: NaN
        if "negative_spread" in statistics:
            neg = base[base["label"] == "neg"]
            parts.append(neg.groupby(keys, sort=False)["scaled"].std(ddof=1).rename("value").reset_index()
                         .assign(statistic="negative_spread"))
        if "mean_score_rho" in statistics:
            parts.append(base.groupby(keys, sort=False)["scaled"].mean().rename("value").reset_index()
                         .assign(statistic="mean_score_rho"))
    wanted = {"median_margin": "median", "mean_margin": "mean"}
    if any(s in statistics for s in wanted):
        margins = normalised_margins(frame, pairs=pairs, scale=scale, by=by, trim=trim)
        grouped = margins.groupby(keys, sort=False)["normalised_margin"]
        for name, how in wanted.items():
            if name in statistics:
                parts.append(grouped.agg(how).rename("value").reset_index().assign(statistic=name))
    if "overlap" in statistics:
        for key, group in frame.groupby(by, sort=False):
            key = key if isinstance(key, tuple) else (key,)
            within = _overlap_within(group)
            parts.append(pd.DataFrame({**dict(zip(by, key)), "query_id": within.index,
                                       "value": within.to_numpy(np.float64), "statistic": "overlap"}))
    if not parts:
        return pd.DataFrame(columns=[*keys, "statistic", "value"])
    out = pd.concat(parts, ignore_index=True).dropna(subset=["value"])
    order = {s: i for i, s in enumerate(statistics)}
    out = out.sort_values("statistic", key=lambda s: s.map(order), kind="stable")
    return out[[*keys, "statistic", "value"]].reset_index(drop=True)
