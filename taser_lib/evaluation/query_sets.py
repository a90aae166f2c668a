"""Per-query rows restricted to the queries every model was scored on, so that means and paired tests compare
models on the same questions.

A profile may score models on different query sets: at `cpu`, the shared CA teacher re-ranks every SQuAD-open test
question (2,180) while each student, trained within a CPU budget, re-ranks a seeded sample of 500 of them (the same
500 for every student). `significance.compare_systems` refuses to pair different query sets, rightly; this module
is the explicit step that brings them to the queries they share, and says how many that is.

    >>> rows = shared_queries(rows)           # long rows: model, [seed], dataset, split, metric, query_id, value
    >>> shared_query_counts(before, rows)     # what each model had and what was kept
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

GROUP = ("dataset", "split", "metric")


def _groups(frame: pd.DataFrame, by: Sequence[str]) -> list[str]:
    return [c for c in by if c in frame.columns]


def shared_queries(frame: pd.DataFrame, by: Sequence[str] = GROUP) -> pd.DataFrame:
    """The rows of `frame` whose query_id every model of their group (`by`: dataset, split, metric) has. A model's
    queries are the union over its seeds. Groups of one model are kept whole."""
    if frame.empty:
        return frame.copy()
    missing = {"model", "query_id"} - set(frame.columns)
    if missing:
        raise ValueError(f"shared_queries needs columns model and query_id; missing {sorted(missing)}")
    keys = _groups(frame, by)
    parts = []
    for _, group in (frame.groupby(keys, sort=False, dropna=False) if keys else [(None, frame)]):
        per_model = [set(q) for _, q in group.groupby("model", sort=False)["query_id"]]
        common = set.intersection(*per_model)
        parts.append(group[group["query_id"].isin(common)])
    return pd.concat(parts).sort_index()


def shared_query_counts(before: pd.DataFrame, after: pd.DataFrame, by: Sequence[str] = GROUP) -> pd.DataFrame:
    """Per group and model: the queries it was scored on (`scored`) and those every model shares (`shared`)."""
    keys = [*_groups(before, by), "model"]
    scored = before.groupby(keys, sort=False, dropna=False)["query_id"].nunique().rename("scored")
    shared = after.groupby(keys, sort=False, dropna=False)["query_id"].nunique().rename("shared")
    return pd.concat([scored, shared], axis=1).fillna(0).astype(int).reset_index()
