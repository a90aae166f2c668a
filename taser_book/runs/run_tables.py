"""Tidy rows from finished re-ranking runs (`recipes.reranking_run`: the CA teacher and its DE students), for the
tables of the dual-encoder pages.

    >>> train_test_rows(run, model="de", size="6-384", seed=13)       # Table 2: one train and one test row
    >>> per_query_rows(run, model="softmax-ce", k=20, seed=13)         # Table 6: one row per test query and metric
    >>> curve_rows(run, model="de", seed=13)                           # Fig. 4: one row per evaluation and split

What each number is (the runs record them; nothing is re-scored here):

- **test**: the selected model's (best dev `select_metric`) re-ranking value on the run's test split, the mean
  over the test queries of the per-query values in `test_per_query.csv` (queries with a relevant candidate: the
  re-ranking metrics' own convention), i.e. the `test_metrics.json` aggregate.
- **train**: the same model's value on the run's training slice -- `training.train_eval_queries` questions sampled
  (with the run's seed) from the questions it trained on -- as the training loop evaluated it at the selected step
  (`curve.csv`, column `train/<metric>` of the row with `step == best_step`). That is the paper's "train MRR@10"
  (the model scored on data it was fitted to), on a sample of the training questions: its noise is that of
  `train_eval_queries` questions, which the page states.
- **curve**: every row of `curve.csv` (step 0, each `loop.eval_every` steps, the end), the training slice as split
  `train` and the dev queries as split `dev`, the held-out curve (`splits` renames them, e.g. dev -> test as in
  Figure 4, whose "test" is MS MARCO's dev set).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from taser_lib.errors import ConfigError
from taser_lib.evaluation.records import read_per_query, select_metric
from .cache import CachedRun

CURVE_SPLITS = {"train": "train", "dev": "dev"}


def _paths(run: CachedRun) -> Mapping[str, str]:
    return run.result.get("paths", {})


def run_test_per_query(run: CachedRun, metric: str = "MRR@10") -> dict[str, float]:
    """{query id: value} of the run's selected model on its test split (`test_per_query.csv`)."""
    path = _paths(run).get("test_per_query")
    if not path:
        raise ConfigError(f"{run.dir}: the run re-ranked no test split (data.test_split is null): no test values")
    return select_metric(read_per_query(path), metric, path)


def run_test_value(run: CachedRun, metric: str = "MRR@10") -> float:
    """The mean of `run_test_per_query` (see the module docstring)."""
    values = run_test_per_query(run, metric)
    if not values:
        raise ConfigError(f"{run.dir}: no test query has a {metric} value")
    return math.fsum(values.values()) / len(values)


def run_curve(run: CachedRun) -> pd.DataFrame:
    """The run's learning curve (the rows of `curve.csv`: step, epoch, lr, train_loss, train/<metric>,
    dev/<metric>, ...) as a frame sorted by step."""
    curve = run.result.get("curve") or []
    if not curve:
        raise ConfigError(f"{run.dir}: the run recorded no learning curve (no evaluation ran)")
    return pd.DataFrame(curve).sort_values("step", kind="stable").reset_index(drop=True)


def selected_train_value(run: CachedRun, metric: str = "MRR@10") -> float:
    """`train/<metric>` at the selected step (`best_step`; the final step for a run without dev evaluation)."""
    curve = run_curve(run)
    column = f"train/{metric}"
    if column not in curve.columns:
        raise ConfigError(f"{run.dir}: its learning curve has no {column} (training.train_eval_queries was 0?); "
                          f"it has {[c for c in curve.columns if '/' in c]}")
    step = run.result.get("best_step")
    if step is None:
        step = run.result.get("final_step")
    rows = curve[(curve["step"] == step) & curve[column].notna()]
    if rows.empty:
        raise ConfigError(f"{run.dir}: no {column} at the selected step {step}")
    return float(rows[column].iloc[-1])


def train_test_rows(run: CachedRun, metric: str = "MRR@10", **columns: Any) -> list[dict[str, Any]]:
    """Two rows, `{**columns, split: train | test, metric, value, run}`: the selected model's value on the training
    slice and on the test split (module docstring); `run` is the run folder's name (rows of a shared run, such as
    the CA of every embedding size of one depth, show it)."""
    base = {**columns, "metric": metric, "run": run.dir.name}
    return [{**base, "split": "train", "value": selected_train_value(run, metric)},
            {**base, "split": "test", "value": run_test_value(run, metric)}]


def per_query_rows(run: CachedRun, metrics: Sequence[str] = ("MRR@10", "nDCG@10"), **columns: Any
                   ) -> list[dict[str, Any]]:
    """`{**columns, metric, query_id, value}` for every test query and metric of the run."""
    rows = []
    for metric in metrics:
        rows += [{**columns, "metric": metric, "query_id": qid, "value": value}
                 for qid, value in run_test_per_query(run, metric).items()]
    return rows


def curve_rows(run: CachedRun, metric: str = "MRR@10", splits: Mapping[str, str] | None = None,
               **columns: Any) -> list[dict[str, Any]]:
    """`{**columns, step, split, value}` for each evaluation of the run's learning curve and each of `splits`
    (column prefix -> split name; default train -> train, dev -> dev). A prefix the curve lacks is an error."""
    splits = dict(splits or CURVE_SPLITS)
    curve = run_curve(run)
    rows = []
    for prefix, name in splits.items():
        column = f"{prefix}/{metric}"
        if column not in curve.columns:
            raise ConfigError(f"{run.dir}: its learning curve has no {column}; it has "
                              f"{[c for c in curve.columns if '/' in c]}")
        part = curve[["step", column]].dropna()
        rows += [{**columns, "step": int(step), "split": name, "value": float(value)}
                 for step, value in zip(part["step"], part[column])]
    return rows
