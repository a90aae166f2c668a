"""Rows from finished re-ranking runs (`runs.run_tables`) and the train/test summaries built on them
(`tables.train_test`): which step's train value, which test values, the learning-curve end points, the paired
comparisons and the sentence a page prints from them."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from taser_lib.errors import ConfigError
from taser_lib.evaluation import compare_systems
from taser_lib.evaluation.records import write_per_query
from taser_book.tables.train_test import comparison_sentence, comparison_table, curve_endpoints
from taser_book.runs.cache import CachedRun
from taser_book.runs.capacity import capacity_table, parse_sizes
from taser_book.runs.run_tables import (curve_rows, per_query_rows, run_curve, run_test_per_query,
                                           run_test_value, selected_train_value, train_test_rows)

CURVE = [  # as finished.json holds it: the loop's rows, step 0 first, evaluations every 10 steps
    {"step": 0, "lr": 0.0, "train_loss": None, "train/MRR@10": 0.30, "dev/MRR@10": 0.25, "dev/nDCG@10": 0.40},
    {"step": 10, "lr": 1e-5, "train_loss": 1.2, "train/MRR@10": 0.50, "dev/MRR@10": 0.45, "dev/nDCG@10": 0.60},
    {"step": 20, "lr": 0.0, "train_loss": 0.8, "train/MRR@10": 0.70, "dev/MRR@10": 0.40, "dev/nDCG@10": 0.55},
]


def fake_run(tmp_path, name="distill-0123456789ab", *, curve=CURVE, best_step=10, test=None, seed=13):
    folder = tmp_path / name
    folder.mkdir()
    test = test if test is not None else {"MRR@10": {"q1": 1.0, "q2": 0.5, "q3": 0.0},
                                          "nDCG@10": {"q1": 1.0, "q2": 0.63, "q3": 0.0}}
    paths = {"final": str(folder / "final")}
    if test:
        paths["test_per_query"] = str(write_per_query(folder / "test_per_query.csv", test))
    result = {"best_metric": 0.6, "best_step": best_step, "final_step": curve[-1]["step"] if curve else 0,
              "curve": curve, "paths": paths}
    return CachedRun(folder, "key", None, result)


def test_train_is_the_selected_step_and_test_the_mean_over_queries(tmp_path):
    run = fake_run(tmp_path)
    assert selected_train_value(run) == 0.50  # best_step 10, not the last row (0.70) nor the first
    assert run_test_per_query(run) == {"q1": 1.0, "q2": 0.5, "q3": 0.0}
    assert run_test_value(run) == pytest.approx(0.5)
    assert run_test_value(run, "nDCG@10") == pytest.approx(1.63 / 3)
    rows = train_test_rows(run, model="de", size="6-384", seed=13)
    assert [(r["split"], r["value"]) for r in rows] == [("train", 0.50), ("test", pytest.approx(0.5))]
    assert all(r["model"] == "de" and r["size"] == "6-384" and r["run"] == run.dir.name and r["metric"] == "MRR@10"
               for r in rows)


def test_a_run_without_dev_evaluation_reads_its_final_step(tmp_path):
    run = fake_run(tmp_path, best_step=None)
    assert selected_train_value(run) == 0.70


def test_missing_records_are_named(tmp_path):
    no_train = [{k: v for k, v in row.items() if not k.startswith("train/")} for row in CURVE]
    with pytest.raises(ConfigError, match="no train/MRR@10"):
        selected_train_value(fake_run(tmp_path, "a", curve=no_train))
    with pytest.raises(ConfigError, match="no learning curve"):
        run_curve(fake_run(tmp_path, "b", curve=[]))
    with pytest.raises(ConfigError, match="no test split"):
        run_test_value(fake_run(tmp_path, "c", test={}))
    with pytest.raises(ConfigError, match="selected step 15"):
        selected_train_value(fake_run(tmp_path, "d", best_step=15))
    with pytest.raises(KeyError, match="R@5"):
        run_test_value(fake_run(tmp_path, "e"), "R@5")


def test_per_query_and_curve_rows(tmp_path):
    run = fake_run(tmp_path)
    rows = pd.DataFrame(per_query_rows(run, model="softmax-ce", k=20))
    assert len(rows) == 6 and set(rows["metric"]) == {"MRR@10", "nDCG@10"} and set(rows["k"]) == {20}
    assert rows.loc[(rows["metric"] == "MRR@10") & (rows["query_id"] == "q2"), "value"].item() == 0.5
    curve = pd.DataFrame(curve_rows(run, model="de", seed=13, splits={"train": "train", "dev": "test"}))
    assert list(curve.columns) == ["model", "seed", "step", "split", "value"]
    assert curve[curve["split"] == "test"]["value"].tolist() == [0.25, 0.45, 0.40]
    assert curve[curve["split"] == "train"]["step"].tolist() == [0, 10, 20]
    with pytest.raises(ConfigError, match="no bogus/MRR@10"):
        curve_rows(run, splits={"bogus": "x"})


def test_curve_endpoints_average_each_runs_first_and_last_evaluation():
    rows = []
    for seed, shift in ((1, 0.0), (2, 0.1)):
        for step, train, test in ((0, 0.3, 0.2), (10, 0.6, 0.4), (20, 0.8, 0.4)):
            rows += [{"model": "de", "seed": seed, "step": step, "split": "train", "value": train + shift},
                     {"model": "de", "seed": seed, "step": step, "split": "test", "value": test + shift}]
    rows.append({"model": "ca", "seed": 1, "step": 5, "split": "train", "value": 0.9})  # one evaluation only
    rows.append({"model": "ca", "seed": 1, "step": 0, "split": "train", "value": 0.1})  # out of order
    ends = curve_endpoints(pd.DataFrame(rows).sample(frac=1.0, random_state=0))
    de = ends[ends["model"] == "de"].set_index(["split", "point"])
    assert de.loc[("train", "first"), "value"] == pytest.approx(0.35) and de.loc[("train", "first"), "step"] == 0
    assert de.loc[("train", "last"), "value"] == pytest.approx(0.85) and de.loc[("train", "last"), "step"] == 20
    assert de.loc[("test", "last"), "std"] == pytest.approx(np.std([0.4, 0.5], ddof=1))
    assert set(de["n"]) == {2}
    ca = ends[ends["model"] == "ca"].set_index("point")
    assert ca.loc["first", "value"] == 0.1 and ca.loc["last", "value"] == 0.9 and math.isnan(ca.loc["last", "std"])
    assert list(ends.columns) == ["model", "split", "point", "step", "value", "std", "n"]
    with pytest.raises(KeyError, match="split"):
        curve_endpoints(pd.DataFrame(rows).drop(columns="split"))
    # naming the seed in `by` keeps each seed's own end points (the claims' paired tests over seeds)
    per_seed = curve_endpoints(pd.DataFrame(rows), by=["model", "split", "seed"])
    assert list(per_seed.columns) == ["model", "split", "seed", "point", "step", "value", "std", "n"]
    de_seeds = per_seed[per_seed["model"] == "de"].set_index(["split", "seed", "point"])["value"]
    assert de_seeds[("train", 1, "last")] == pytest.approx(0.8) and de_seeds[("train", 2, "last")] == pytest.approx(0.9)
    assert de_seeds[("test", 2, "first")] == pytest.approx(0.3)
    assert set(per_seed["n"]) == {1} and len(per_seed) == 2 * 2 * 2 + 2


def test_comparisons_as_a_table_and_as_sentences():
    rng = np.random.default_rng(0)
    queries = [f"q{i}" for i in range(60)]
    better = {"MRR@10": {q: float(v) for q, v in zip(queries, rng.uniform(0.5, 1.0, 60))}}
    worse = {"MRR@10": {q: v - 0.3 + float(e) for (q, v), e in zip(better["MRR@10"].items(),
                                                                     rng.uniform(-0.01, 0.01, 60))}}
    noisy = {"MRR@10": {q: v + float(e) for (q, v), e in zip(better["MRR@10"].items(), rng.normal(0, 0.2, 60))}}
    comparisons = compare_systems({"ca": [better], "de": [worse], "zs": [noisy]}, "MRR@10",
                                  pairs=[("ca", "de"), ("de", "ca"), ("ca", "zs")])
    table = comparison_table(comparisons, labels={"ca": "CA"})
    assert table["a"].tolist() == ["CA", "de", "CA"] and table["questions"].tolist() == [60, 60, 60]
    assert table["a − b"].tolist()[:2] == [pytest.approx(0.3, abs=0.01), pytest.approx(-0.3, abs=0.01)]
    assert "p (holm)" in table.columns
    said = [comparison_sentence(c, labels={"ca": "CA"}) for c in comparisons]
    assert said[0].startswith("test MRR@10: CA ") and said[0].endswith("CA is better")
    assert said[1].endswith("de is worse") and f"({comparisons[1].difference:+.3f};" in said[1]
    assert comparisons[1].difference < 0
    assert said[2].endswith("no difference at alpha 0.05") and "holm-adjusted" in said[2]


def test_capacity_table_has_a_train_and_a_test_row_per_run_and_marks_the_largest_size(tmp_path):
    sizes = parse_sizes(["2-64", "6-64", "6-384"])
    shallow_ca = fake_run(tmp_path, "cross-encoder-a", best_step=20)
    deep_ca = fake_run(tmp_path, "cross-encoder-b", best_step=0)
    des = {(s.label, 13): fake_run(tmp_path, f"distill-{s.label}") for s in sizes}
    runs = {"ca": {("2-64", 13): shallow_ca, ("6-64", 13): deep_ca, ("6-384", 13): deep_ca}, "de": des}
    table = capacity_table(runs, sizes)
    assert len(table) == 12 and list(table.columns) == ["model", "size", "layers", "dim", "split", "seed", "value",
                                                        "metric", "run", "largest"]
    ca = table[table["model"] == "ca"].set_index(["size", "split"])
    assert ca.loc[("2-64", "train"), "value"] == 0.70 and ca.loc[("6-64", "train"), "value"] == 0.30
    assert ca.loc[("6-64", "train"), "run"] == ca.loc[("6-384", "test"), "run"] == "cross-encoder-b"
    assert set(table.loc[table["largest"], "size"]) == {"6-384"}
    assert table.loc[table["size"] == "2-64", ["layers", "dim"]].drop_duplicates().values.tolist() == [[2, 64]]
    named = capacity_table(runs, sizes, largest_size=sizes[1])
    assert set(named.loc[named["largest"], "size"]) == {"6-64"}
    with pytest.raises(ConfigError, match="'6-768', which is not one of"):
        capacity_table({"de": {("6-768", 13): des["6-384", 13]}}, sizes)
