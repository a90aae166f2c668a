"""Long result frames laid out for a page: readable model labels, one row per dataset (or size), one column per
model, and the few derived columns a page shows. A notebook's visible cell is then one call to a function here."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd


def labelled(frame: pd.DataFrame, labels: Mapping[str, str], column: str = "model") -> pd.DataFrame:
    """`frame` with `column`'s names replaced by their labels; a name without a label stays as it is."""
    return frame.assign(**{column: frame[column].map(lambda name: labels.get(name, name))})


def wide_table(frame: pd.DataFrame, index: str | Sequence[str] | None, columns: str | Sequence[str],
               values: str = "value", *, labels: Mapping[str, str] | None = None,
               order: Sequence[str] | None = None, digits: int | None = None,
               missing: str | None = "–") -> pd.DataFrame:
    """One row per `index`, one column per `columns` (first value of each cell, rows and columns in the order they
    first occur). `labels` renames the models (before `order`, which then names labels or names alike); `order`
    keeps and orders the last column level; `index=None` gives one row. A cell with no value (a model one source
    has and the other lacks) reads `missing` (None keeps it NaN); a table without such cells keeps its dtypes."""
    if labels is not None and "model" in frame.columns:
        frame = labelled(frame, labels)
        order = [labels.get(name, name) for name in order] if order is not None else None
    if index is None:
        table = frame.set_index(columns)[values].to_frame().T.reset_index(drop=True)
    else:
        table = frame.pivot_table(index=index, columns=columns, values=values, aggfunc="first", sort=False)
    if order is not None:
        last = table.columns.get_level_values(-1)
        missing = [name for name in order if name not in set(last)]
        if missing:
            raise KeyError(f"wide_table: no column for {missing}; the table has {list(dict.fromkeys(last))}")
        table = table[[c for name in order for c in table.columns if (c[-1] if isinstance(c, tuple) else c) == name]]
    table = table.round(digits) if digits is not None else table
    if missing is not None and table.isna().to_numpy().any():
        table = table.astype(object).where(table.notna(), missing)
    return table


def score_ranges(scores: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """Per model: the lowest, mean and highest score, the range and the mean in units of the range (where the
    scores sit within what the model uses, the paper's Figure 6 reading)."""
    table = scores.groupby("model", sort=False)["score"].agg(["min", "mean", "max"])
    table = table.assign(range=table["max"] - table["min"])
    return table.assign(mean_over_range=table["mean"] / table["range"]).round(digits)
