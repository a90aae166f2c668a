"""Where two re-rankers disagree ("In defense of dual-encoders" Table 3 and Tables 10, 11), as readable tables.

- **Pairs** (Table 3: "pairs that the CA model scores low, but the DE model scores high"): `disagreements` ranks the
  (query, candidate) pairs of a score frame (`analyses.scores.score_frames`: model, query_id, doc_id, label,
  score) by how much higher one model places them than the other. The two models' scores live on different scales
  (a CA logit, a DE cosine times 20) and the DE's carry a baseline shift (Fig. 6), so each model's scores are first
  put on [0, 1]: `method="range"` (default) maps its minimum over the whole set to 0 and its maximum to 1 (the
  paper's rho, §3.3, as `scores.normalised_margins` uses it); `method="percentile"` uses each score's percentile
  rank among the model's scores on the set (robust to outliers; ties share their mean rank). The discrepancy is
  high - low of those numbers, in [-1, 1]. The paper does not say how it measured the discrepancy; it printed
  pairs from distinct queries, which `per_query` (default 1) enforces.
- **Queries** (Appendix C.11: the queries where the two students' MRR@10 differ): `agreement_counts` and
  `disagreeing_queries` over two models' per-query values.
- **Top-k lists side by side** (Tables 10, 11): `top_k_side_by_side`, one row per (query, rank), one column per
  model, each cell the passage's title and text (cut to `width` characters), relevant passages marked.
- **Token overlap** (Table 3: the pairs "typically involve strong token overlap between the query and passage"):
  `token_overlap` is the share of a query's distinct word tokens (lower-cased runs of letters and digits, English
  stop words left out) that occur in the passage's title or text; `disagreement_summary` compares the overlap of
  the disagreement pairs with that of every negative and every positive pair, and gives the share of negatives
  among the pairs ("in most of these cases, the passage is not relevant"). `disagreement_per_query` gives the same
  statistics one row per question (each question gives one pair), for the scorecard's paired tests: whether the
  pair is a negative (a sign test of "most are negatives" against 0.5), and its overlap beside the mean overlap of
  the same question's other negatives (a paired test of "more overlap than a typical negative").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

METHODS: tuple[str, ...] = ("range", "percentile")
RELEVANT_MARK = "✔ "
_WORD = re.compile(r"[a-z0-9]+")
# English function words (a short list: the question words and articles a query shares with any passage)
STOP_WORDS = frozenset("""a an and are as at be by did do does for from had has have how in is it its of on or
that the their this to was were what when where which who whom whose why will with""".split())


def normalised_scores(frame: pd.DataFrame, method: str = "range") -> pd.Series:
    """Each model's scores on [0, 1] over the whole frame (see the module docstring), aligned with `frame`."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    missing = [c for c in ("model", "score") if c not in frame.columns]
    if missing:
        raise KeyError(f"score frame has no column(s) {missing}; it has {list(frame.columns)}")
    grouped = frame.groupby("model", sort=False)["score"]
    if method == "percentile":
        return grouped.rank(method="average", pct=True)
    low, high = grouped.transform("min"), grouped.transform("max")
    span = (high - low).where(high > low, 1.0)
    return (frame["score"] - low) / span


def disagreements(frame: pd.DataFrame, low: str, high: str, n: int = 10, *, method: str = "range",
                  per_query: int | None = 1, label: str | None = None) -> pd.DataFrame:
    """The `n` (query, candidate) pairs that model `high` places highest relative to model `low` (Table 3: low =
    CA, high = DE), largest discrepancy first. `per_query` caps the pairs taken from one query (None: no cap);
    `label` ("pos" / "neg") keeps only positives or negatives. Columns: query_id, doc_id, label, `<low> score`,
    `<high> score`, `<low> (0-1)`, `<high> (0-1)`, discrepancy."""
    models = set(frame["model"])
    for name in (low, high):
        if name not in models:
            raise KeyError(f"model {name!r} is not in the score frame (it has {sorted(models)})")
    if low == high:
        raise ValueError("low and high must be two different models")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if label is not None and label not in ("pos", "neg"):
        raise ValueError(f"label must be 'pos', 'neg' or None, got {label!r}")
    scored = frame[frame["model"].isin([low, high])].assign(norm=lambda f: normalised_scores(f, method))
    keys = ["query_id", "doc_id"]
    a = scored[scored["model"] == low].set_index(keys)
    b = scored[scored["model"] == high].set_index(keys)
    if len(a.index.intersection(b.index)) != len(a) or len(a) != len(b):
        raise ValueError(f"models {low!r} and {high!r} must score the same (query, candidate) pairs")
    b = b.loc[a.index]
    if (a["label"] != b["label"]).any():
        raise ValueError(f"models {low!r} and {high!r} disagree on the labels of the same pairs")
    out = pd.DataFrame({"label": a["label"], f"{low} score": a["score"], f"{high} score": b["score"],
                        f"{low} (0-1)": a["norm"], f"{high} (0-1)": b["norm"],
                        "discrepancy": b["norm"] - a["norm"]}).reset_index()
    if label is not None:
        out = out[out["label"] == label]
    out = out.sort_values(["discrepancy", "query_id", "doc_id"], ascending=[False, True, True], kind="stable")
    if per_query is not None:
        if per_query < 1:
            raise ValueError(f"per_query must be >= 1 or None, got {per_query}")
        out = out.groupby("query_id", sort=False).head(per_query)
    return out.head(n).reset_index(drop=True)


def _cut(text: str, width: int | None) -> str:
    text = " ".join(str(text).split())
    if width is None or len(text) <= width:
        return text
    return text[:max(1, width - 1)].rstrip() + "…"


def passage_label(doc: Any, width: int | None = 160) -> str:
    """A passage as one readable line: "title: text", cut to `width` characters (None: whole)."""
    title = getattr(doc, "title", "") or ""
    text = getattr(doc, "text", doc)
    return _cut(f"{title}: {text}" if title else str(text), width)


def with_text(table: pd.DataFrame, rset: Any, *, width: int | None = 160) -> pd.DataFrame:
    """`table` (query_id, doc_id, ...) with the query's text and the passage's title and text (cut to `width`)
    as its first columns: `query`, `passage`."""
    out = table.copy()
    out.insert(0, "passage", [passage_label(rset.corpus[d], width) for d in table["doc_id"]])
    out.insert(0, "query", [rset.queries[q].text for q in table["query_id"]])
    return out


def agreement_counts(a: Mapping[str, float], b: Mapping[str, float], *, tol: float = 1e-9) -> dict[str, int]:
    """Over the queries both have: how many have equal values (within `tol`), how many favour a, how many b
    (Appendix C.11: "the MRR@10 of ... agree on 10; 6 cases favour margin MSE, and 4 ...")."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("the two models have no query in common")
    diff = np.array([a[q] - b[q] for q in common], dtype=float)
    return {"queries": len(common), "agree": int((np.abs(diff) <= tol).sum()), "favour a": int((diff > tol).sum()),
            "favour b": int((diff < -tol).sum())}


def disagreeing_queries(a: Mapping[str, float], b: Mapping[str, float], n: int = 3, *, favour: str = "a",
                        tol: float = 1e-9) -> list[str]:
    """The `n` queries where model a's per-query value exceeds b's the most (`favour="a"`), or b's exceeds a's
    (`"b"`), or either way by the absolute difference (`"either"`); ties by query id. Queries where they agree
    (within `tol`) are never returned, so the list may be shorter than n."""
    if favour not in ("a", "b", "either"):
        raise ValueError(f"favour must be 'a', 'b' or 'either', got {favour!r}")
    common = sorted(set(a) & set(b))
    diff = {q: a[q] - b[q] for q in common}
    if favour == "b":
        diff = {q: -d for q, d in diff.items()}
    elif favour == "either":
        diff = {q: abs(d) for q, d in diff.items()}
    ranked = sorted((q for q in common if diff[q] > tol), key=lambda q: (-diff[q], q))
    return ranked[:n]


def top_k_side_by_side(rset: Any, scores_by_model: Mapping[str, Mapping[str, Sequence[float]]],
                       query_ids: Sequence[str], k: int = 5, *, width: int | None = 120,
                       mark: str = RELEVANT_MARK) -> pd.DataFrame:
    """Tables 10, 11: for each query, its top-k candidates under each model (scores aligned with
    `rset.candidates`, as `score_dual_encoder` returns them), one row per (query, rank) and one column per model;
    a relevant candidate (label > 0) starts with `mark`. Columns: query, rank, then the models in order."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rows = []
    for qid in query_ids:
        if qid not in rset.candidates:
            raise KeyError(f"query {qid!r} is not in the re-ranking set")
        docs, labels = rset.candidates[qid], rset.labels[qid]
        tops = {}
        for model, scores in scores_by_model.items():
            if qid not in scores:
                raise KeyError(f"model {model!r} has no scores for query {qid!r}")
            s = np.asarray(scores[qid], dtype=float)
            if len(s) != len(docs):
                raise ValueError(f"model {model!r}, query {qid!r}: {len(s)} scores for {len(docs)} candidates")
            tops[model] = np.argsort(-s, kind="stable")[:k]
        for rank in range(min(k, len(docs))):
            row = {"query": rset.queries[qid].text, "rank": rank + 1}
            for model, order in tops.items():
                i = order[rank]
                row[model] = (mark if labels[i] > 0 else "") + passage_label(rset.corpus[docs[i]], width)
            rows.append(row)
    return pd.DataFrame(rows, columns=["query", "rank", *scores_by_model])


def tokens(text: str) -> set[str]:
    """Distinct lower-cased word tokens (runs of letters and digits) of `text`, stop words left out."""
    return {t for t in _WORD.findall(str(text).lower()) if t not in STOP_WORDS}


def token_overlap(query: str, passage: Any) -> float:
    """Share of the query's distinct tokens (`tokens`) found in the passage (its title and text); NaN for a query
    of stop words only."""
    mine = tokens(query)
    if not mine:
        return float("nan")
    theirs = tokens(f"{getattr(passage, 'title', '') or ''} {getattr(passage, 'text', passage)}")
    return len(mine & theirs) / len(mine)


# What each statistic of `disagreement_summary` is, in words (a page's table shows these instead of the names)
SUMMARY_STATISTICS = {
    "pairs": "pairs tested (the largest DE − CA discrepancies, one per question)",
    "negative_share": "share of those pairs whose passage holds no answer",
    "negative_base_rate": "share of every scored pair whose passage holds no answer (a random pick)",
    "overlap_pairs": "share of the question's words in the passage: those pairs",
    "overlap_negatives": "share of the question's words in the passage: every negative",
    "overlap_positives": "share of the question's words in the passage: every positive",
}


def disagreement_summary(frame: pd.DataFrame, pairs: pd.DataFrame, rset: Any) -> pd.DataFrame:
    """Long table (statistic, value) on the disagreement `pairs` (`disagreements`' output) of a score `frame`:
    `pairs`, `negative_share` (share of negatives among them), `negative_base_rate` (the share of negatives among
    every distinct pair of the frame: what a random pick would give), `overlap_pairs` (their mean `token_overlap`), and
    for reference `overlap_negatives` / `overlap_positives` (mean over every distinct negative / positive (query,
    candidate) pair of the frame)."""
    if pairs.empty:
        raise ValueError("no disagreement pairs to summarise")
    unique = frame.drop_duplicates(["query_id", "doc_id"])

    def overlap(rows: pd.DataFrame) -> float:
        values = [token_overlap(rset.queries[q].text, rset.corpus[d]) for q, d in zip(rows["query_id"], rows["doc_id"])]
        return float(np.nanmean(values)) if values else float("nan")

    rows = [("pairs", float(len(pairs))), ("negative_share", float((pairs["label"] == "neg").mean())),
            ("negative_base_rate", float((unique["label"] == "neg").mean())),
            ("overlap_pairs", overlap(pairs)), ("overlap_negatives", overlap(unique[unique["label"] == "neg"])),
            ("overlap_positives", overlap(unique[unique["label"] == "pos"]))]
    return pd.DataFrame(rows, columns=["statistic", "value"])


def disagreement_per_query(frame: pd.DataFrame, pairs: pd.DataFrame, rset: Any) -> pd.DataFrame:
    """Long table (query_id, statistic, value), one row per disagreement pair and statistic, for paired tests over
    questions: `negative` (1.0 when the pair's passage is a negative, else 0.0), `overlap_pair` (its
    `token_overlap`) and `overlap_query_negatives` (the mean overlap of the question's other negatives in `frame`;
    NaN when it has none). `pairs` must hold one pair per question (`disagreements(per_query=1)`)."""
    if pairs.empty:
        raise ValueError("no disagreement pairs to test")
    repeated = pairs["query_id"][pairs["query_id"].duplicated()].unique()
    if len(repeated):
        raise ValueError(f"one pair per question is needed for paired tests; {len(repeated)} question(s) have "
                         f"several, e.g. {repeated[0]!r} (use disagreements(..., per_query=1))")
    unique = frame.drop_duplicates(["query_id", "doc_id"])
    negatives = unique[unique["label"] == "neg"]
    rows = []
    for qid, did, label in zip(pairs["query_id"], pairs["doc_id"], pairs["label"]):
        query = rset.queries[qid].text
        others = negatives[(negatives["query_id"] == qid) & (negatives["doc_id"] != did)]["doc_id"]
        overlaps = [v for v in (token_overlap(query, rset.corpus[d]) for d in others) if not np.isnan(v)]
        rows += [(qid, "negative", float(label == "neg")),
                 (qid, "overlap_pair", token_overlap(query, rset.corpus[did])),
                 (qid, "overlap_query_negatives", float(np.mean(overlaps)) if overlaps else float("nan"))]
    return pd.DataFrame(rows, columns=["query_id", "statistic", "value"])
