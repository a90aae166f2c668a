"""Mean ± std over seeds (`evaluation.seeds`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from taser_lib.evaluation.seeds import MEAN_STD, mean_std, summarise_seeds

ROWS = pd.DataFrame([
    {"model": m, "metric": k, "seed": s, "value": v}
    for m, k, values in (("taser", "R@20", [40.0, 42.0, 44.0]), ("taser", "R@100", [60.0, 61.0, 62.0]),
                         ("dpr", "R@20", [38.0, 39.0]), ("bm25", "R@20", [30.0]))
    for s, v in enumerate(values)
])


def test_summarise_seeds_by_hand():
    out = summarise_seeds(ROWS, by=["model", "metric"], digits=1)
    assert list(out.columns) == ["model", "metric", "mean", "std", "n", MEAN_STD]
    rows = {(r.model, r.metric): r for r in out.itertuples(index=False)}
    assert list(rows) == [("taser", "R@20"), ("taser", "R@100"), ("dpr", "R@20"), ("bm25", "R@20")]  # first seen
    taser = rows[("taser", "R@20")]
    assert (taser.mean, taser.std, taser.n) == (42.0, 2.0, 3)  # sample std (ddof 1) of 40, 42, 44
    assert rows[("dpr", "R@20")].std == pytest.approx(np.std([38.0, 39.0], ddof=1))
    assert rows[("bm25", "R@20")].n == 1 and math.isnan(rows[("bm25", "R@20")].std)
    assert out[MEAN_STD].tolist() == ["42.0 ± 2.0", "61.0 ± 1.0", "38.5 ± 0.7", "30.0"]
    assert MEAN_STD not in summarise_seeds(ROWS, by=["model", "metric"]).columns


def test_a_group_holding_a_seed_twice_is_an_error():
    with pytest.raises(ValueError, match="more than once"):
        summarise_seeds(ROWS, by=["model"])  # would average R@20 with R@100
    assert len(summarise_seeds(ROWS.drop(columns="seed"), by=["model"])) == 3  # no seed column: no check
    with pytest.raises(KeyError, match="dataset"):
        summarise_seeds(ROWS, by=["dataset"])


def test_mean_std_strings():
    assert mean_std(41.234, 0.849) == "41.2 ± 0.8"
    assert mean_std(0.41234, 0.00849, digits=3) == "0.412 ± 0.008"
    assert mean_std(41.2, float("nan")) == mean_std(41.2) == "41.2"
    assert mean_std(float("nan"), 1.0) == "–"
