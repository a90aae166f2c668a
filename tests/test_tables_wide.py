"""The page-layout helpers: labels, wide tables and score ranges, on small frames whose answers are known."""
import pandas as pd
import pytest

from taser_book.tables.wide import labelled, score_ranges, wide_table

LONG = pd.DataFrame({"dataset": ["a", "a", "b", "b"], "metric": ["R@20"] * 4, "model": ["dpr", "bm25"] * 2,
                     "value": [80.0, 60.0, 70.0, 65.0]})


def test_labelled_names_each_model_and_keeps_an_unlabelled_one():
    out = labelled(LONG, {"dpr": "DPR"})
    assert list(out["model"]) == ["DPR", "bm25", "DPR", "bm25"]
    assert list(LONG["model"]) == ["dpr", "bm25", "dpr", "bm25"]  # the input is not changed


def test_wide_table_keeps_first_occurrence_order_and_reorders_by_label():
    table = wide_table(LONG, index=["dataset", "metric"], columns="model")
    assert list(table.columns) == ["dpr", "bm25"] and list(table.index.get_level_values(0)) == ["a", "b"]
    ordered = wide_table(LONG, index="dataset", columns="model", labels={"dpr": "DPR"}, order=["bm25", "dpr"])
    assert list(ordered.columns) == ["bm25", "DPR"]
    assert ordered.loc["b", "DPR"] == 70.0


def test_wide_table_names_a_missing_column():
    with pytest.raises(KeyError, match="taser"):
        wide_table(LONG, index="dataset", columns="model", order=["taser"])


def test_wide_table_without_an_index_is_one_row():
    stats = pd.DataFrame({"statistic": ["x", "y"], "value": [0.12345, 2.0]})
    row = wide_table(stats, index=None, columns="statistic", digits=3)
    assert row.shape == (1, 2) and row.loc[0, "x"] == 0.123


def test_score_ranges_measures_where_the_mean_sits():
    scores = pd.DataFrame({"model": ["CA"] * 3 + ["DE"] * 2, "score": [-1.0, 0.0, 4.0, 1.0, 3.0]})
    table = score_ranges(scores)
    assert list(table.index) == ["CA", "DE"]
    assert table.loc["CA", "range"] == 5.0 and table.loc["CA", "mean_over_range"] == pytest.approx(0.2)
    assert table.loc["DE", "mean_over_range"] == 1.0


def test_wide_table_marks_a_cell_no_source_has_and_keeps_a_full_table_numeric():
    partial = LONG.iloc[:3]  # dataset b has no bm25 row
    table = wide_table(partial, index="dataset", columns="model")
    assert table.loc["b", "bm25"] == "–" and table.loc["b", "dpr"] == 70.0
    assert wide_table(partial, index="dataset", columns="model", missing=None)["bm25"].isna().sum() == 1
    assert wide_table(LONG, index="dataset", columns="model").dtypes.eq("float64").all()
