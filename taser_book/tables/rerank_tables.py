"""Re-ranking results of many models over seeds, tabulated as the dual-encoder notebooks show them ("In defense of
dual-encoders" Tables 1, 4-9, 12): long per-query rows, their mean ± std over seeds, per-query values averaged over
seeds (what the claims' paired tests read), and paired randomisation tests between chosen pairs of models.

    >>> rows = per_query_rows("de", read_per_query(run.result["paths"]["test_per_query"]), seed=13,
    ...                       dataset="squad-open", split="test")
    >>> rows += per_query_rows("bm25", rerank_per_query(test_set, first_stage_scores(test_set)), dataset=...)
    >>> frame = pd.DataFrame(rows)
    >>> seed_summary(frame)     # model, dataset, split, metric, value (mean over seeds), std, n, mean ± std
    >>> query_means(frame)                  # model, dataset, split, metric, query_id, value (mean over seeds)
    >>> paired_tests(frame, "MRR@10", [("m3se", "margin-mse"), ("softmax-ce", "de")])

Conventions:
- A row is one (model, seed, query, metric) value, with any further columns that tell models apart (dataset, split,
  size, alpha, ...): `by` names them. A model without seeds (BM25, a zero-shot model) has seed None.
- A model's number is the mean over its seeds of its per-seed mean over queries; its spread is the sample standard
  deviation of those per-seed means (NaN for one seed).
- A query's value for the paired tests is the mean over the model's seeds (`tables.seeded` explains why).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Dataset, Run
from taser_lib.evaluation.answer_recall import answer_hits, hits_at_k
from taser_book.analyses.baselines import is_qa
from taser_lib.evaluation.metrics import per_query
from .seeded import seed_labels, seed_sources
from taser_lib.evaluation.seeds import summarise_seeds
from taser_lib.evaluation.significance import compare_systems

BY: tuple[str, ...] = ("model", "dataset", "split", "metric")


def first_stage_scores(rset) -> dict[str, np.ndarray]:
    """Scores that keep every query's candidates in their stored (first-stage, e.g. BM25) order: -rank. Re-ranked
    by them, a set scores what its first stage scores (positives the first stage missed sit after its negatives;
    see `training.reranking.from_first_stage`)."""
    return {q: -np.arange(len(docs), dtype=np.float64) for q, docs in rset.candidates.items()}


def per_query_rows(model: str, values: Mapping[str, Mapping[str, float]], *, seed: Any = None,
                   **columns: Any) -> list[dict]:
    """Long rows {model, seed, **columns, metric, query_id, value} of {metric: {query id: value}} (what
    `read_per_query`, `rerank_per_query` and `training.distill.rerank_saved_model` return)."""
    if not values:
        raise ValueError(f"model {model!r}: no per-query values")
    return [{"model": model, "seed": seed, **columns, "metric": metric, "query_id": q, "value": float(v)}
            for metric, by_query in values.items() for q, v in by_query.items()]


def _by(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    by = [c for c in by if c in frame.columns]
    missing = [c for c in ("model", "metric", "query_id", "value") if c not in frame.columns]
    if missing:
        raise KeyError(f"per-query rows need the column(s) {missing}; they have {list(frame.columns)}")
    if "model" not in by or "metric" not in by:
        raise ValueError(f"`by` must include 'model' and 'metric', got {list(by)}")
    return by


def _seed_key(frame: pd.DataFrame) -> pd.Series:
    return seed_labels(frame["seed"]) if "seed" in frame.columns else pd.Series("none", index=frame.index)


def seed_means(frame: pd.DataFrame, by: Sequence[str] = BY) -> pd.DataFrame:
    """One row per group of `by` (the columns of it the frame has) and seed: the mean over its queries."""
    by = _by(frame, by)
    out = (frame.assign(seed=_seed_key(frame)).groupby([*by, "seed"], sort=False, dropna=False)["value"]
           .mean().reset_index())
    return out


def seed_summary(frame: pd.DataFrame, by: Sequence[str] = BY, digits: int = 3) -> pd.DataFrame:
    """One row per group of `by`: value (mean over seeds of the per-seed means over queries), std (over seeds;
    NaN for one seed), n (seeds) and "mean ± std" with `digits` decimals."""
    by = _by(frame, by)
    out = summarise_seeds(seed_means(frame, by), by=by, digits=digits)
    return out.rename(columns={"mean": "value"})


def query_means(frame: pd.DataFrame, by: Sequence[str] = BY) -> pd.DataFrame:
    """One row per group of `by` and query: value = the mean over the model's seeds; `seeds` = how many."""
    by = _by(frame, by)
    out = (frame.groupby([*by, "query_id"], sort=False, dropna=False)["value"].agg(["mean", "count"])
           .reset_index().rename(columns={"mean": "value", "count": "seeds"}))
    return out


def paired_tests(frame: pd.DataFrame, metric: str, pairs: Sequence[tuple[str, str]], *,
                 labels: Mapping[str, str] | None = None, correction: str = "holm", digits: int = 4,
                 **options: Any) -> pd.DataFrame:
    """Paired randomisation tests (and the paired t-test's confidence interval) of model a against model b on
    `metric`, over the queries, per-query values averaged over each model's seeds (`compare_systems`), the p-values
    corrected over the family of `pairs` (Holm by default). Pairs naming a model absent from `frame` are left out
    (a profile that trains fewer models); `frame` must hold one value per (model, seed, query) for `metric`
    (filter other columns such as dataset or size first). `labels` renames the models in the output.
    Columns: metric, a, b, mean a, mean b, a − b, CI low, CI high, p (randomisation), p (<correction>), queries."""
    rows = frame[frame["metric"] == metric]
    if rows.empty:
        return pd.DataFrame(columns=_TEST_COLUMNS(correction))
    duplicated = rows.assign(_seed=_seed_key(rows)).duplicated(["model", "_seed", "query_id"])
    if duplicated.any():
        first = rows[duplicated.to_numpy()].iloc[0]
        raise ValueError(f"model {first['model']!r} has several {metric} values for query {first['query_id']!r} "
                         f"and one seed: filter the rows to one dataset / split / size first")
    systems = seed_sources(rows if "seed" in rows.columns else rows.assign(seed=None), metric=metric)
    kept = [tuple(p) for p in pairs if p[0] in systems and p[1] in systems and p[0] != p[1]]
    if not kept:
        return pd.DataFrame(columns=_TEST_COLUMNS(correction))
    name = labels or {}
    out = []
    for c in compare_systems(systems, metric, pairs=kept, correction=correction, **options):
        out.append({"metric": metric, "a": name.get(c.label_a, c.label_a), "b": name.get(c.label_b, c.label_b),
                    "mean a": round(c.mean_a, digits), "mean b": round(c.mean_b, digits),
                    "a − b": round(c.difference, digits), "CI low": round(c.ci[0], digits),
                    "CI high": round(c.ci[1], digits), "p (randomisation)": round(c.randomisation.p_value, digits),
                    f"p ({correction})": round(c.p_adjusted, digits), "queries": c.n_queries})
    return pd.DataFrame(out, columns=_TEST_COLUMNS(correction))


def _TEST_COLUMNS(correction: str) -> list[str]:
    return ["metric", "a", "b", "mean a", "mean b", "a − b", "CI low", "CI high", "p (randomisation)",
            f"p ({correction})", "queries"]


def answer_reciprocal_ranks(hits: Mapping[str, Sequence[bool]], k: int = 10) -> dict[str, float]:
    """Per query: 1 / the rank of its first answer-bearing passage within the top k (DPR's answer rule, as R@K),
    0 when none is: MRR@k of retrieval on a QA set, whose qrels are its answers."""
    out = {}
    for qid, flags in hits.items():
        first = next((i for i, hit in enumerate(list(flags)[:k]) if hit), None)
        out[qid] = 0.0 if first is None else 1.0 / (first + 1)
    return out


def retrieval_per_query(dataset: Dataset, runs: Mapping[tuple[str, Any], Run], *, k: int = 10,
                        recall_at: Sequence[int] = (20,), label: str | None = None) -> list[dict]:
    """Per-query rows (model, seed, dataset, split, metric, query_id, value; fractions) of full-retrieval runs
    {(model, seed): run} over `dataset`'s corpus: MRR@k and R@K for each K of `recall_at`. On a QA set (queries with
    answers) a passage is relevant when it holds an answer (DPR's rule, as `answer_recall`); otherwise the qrels
    decide (ir-measures RR@k and R@K). Every query of the set gets a value (0 when the run misses it), so runs pair
    query by query."""
    name = label or dataset.name
    rows: list[dict] = []
    if is_qa(dataset):
        matcher = AnswerMatcher(dataset.corpus)
        depth = max([k, *recall_at])
        for (model, seed), run in runs.items():
            hits = answer_hits(matcher, dataset.queries, run, depth, progress=False)
            hits = {q: hits.get(q, []) for q in dataset.queries}
            values = {f"MRR@{k}": answer_reciprocal_ranks(hits, k),
                      **{f"R@{r}": hits_at_k(hits, r) for r in recall_at}}
            rows += per_query_rows(model, values, seed=seed, dataset=name, split=dataset.split)
        return rows
    judged = {q: d for q, d in dataset.qrels.items() if any(g > 0 for g in d.values())}
    measures = [f"MRR@{k}", *(f"R@{r}" for r in recall_at)]
    for (model, seed), run in runs.items():
        found = per_query(run, judged, measures)
        values = {m: {q: found[m].get(q, 0.0) for q in judged} for m in measures}
        rows += per_query_rows(model, values, seed=seed, dataset=name, split=dataset.split)
    return rows
