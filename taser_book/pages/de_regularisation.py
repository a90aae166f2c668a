"""The regularisation page (Tables 8 and 9 of "In defense of dual-encoders"): the one-hot DE with label smoothing α
and with other regularisers (embedding dropout, token dropout, an auxiliary masked-LM loss, focal loss), each model's
train and test MRR@10 and paired tests against the baseline.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_regularisation")
    >>> print(page.teacher_trained())        # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()                # every run's steps and its dev selection metric
    >>> print(page.questions_counted())      # how many training and test questions are scored
    >>> page.smoothing_table()               # train and test MRR@10 against α, mean ± std over seeds (Table 8)
    >>> page.paper_smoothing_table()         # the paper's Table 8
    >>> page.smoothing_figure()              # the same beside the paper's
    >>> page.regularisers_table()            # train and test MRR@10 and their gap per regulariser (Table 9)
    >>> page.paper_regularisers_table()      # the paper's Table 9
    >>> page.regularisers_figure()           # the same as bars
    >>> page.tests_table()                   # paired randomisation tests against the baseline, Holm-corrected
    >>> page.claims()                        # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query, rerank_per_query
from taser_lib.evaluation.query_sets import shared_queries
from taser_lib.models import default_device
from taser_lib.training.cross_encoder import score_reranking_set
from taser_lib.training.distill import rerank_saved_model
from ..claims import paper_table
from ..plots import plot_metric_bars
from ..plots.scores import plot_size_sweep
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import reranking_run
from ..runs.students import testbed_changes
from ..tables.rerank_tables import paired_tests, per_query_rows, query_means, seed_means, seed_summary
from .common import PageResult, distill_params, teacher_line

PAGE = "de_regularisation"
SMOOTH_BY = ("model", "alpha", "dataset", "split", "metric")
REG_BY = ("model", "strategy", "dataset", "split", "metric")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def lengths(s: PageSettings) -> dict[str, int]:
    """The lengths and batch size the page scores with."""
    return dict(max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                batch_size=s.eval_batch_size)


def strategies(s: PageSettings) -> dict[str, list]:
    """{regulariser: the changes of the one-hot DE it trains with} (Table 9's rows)."""
    return {"baseline": [], "embedding-dropout": [changes.training(embedding_dropout=s.embedding_dropout)],
            "token-dropout": [changes.training(token_dropout=s.token_dropout)],
            "mlm": [changes.training(mlm_weight=s.mlm_weight)], "focal": [changes.training(loss="focal")]}


def labels(s: PageSettings) -> dict[str, str]:
    """{regulariser (or "ca"): the label the page's tables and figures show}."""
    return {"baseline": "baseline DE (one-hot)", "embedding-dropout": f"embedding dropout {s.embedding_dropout}",
            "token-dropout": f"token dropout {s.token_dropout}", "mlm": f"MLM loss x{s.mlm_weight}",
            "focal": "focal loss", "ca": "CA teacher (reference)"}


def smoothing(alpha: float) -> list:
    """The changes of label smoothing `alpha` (alpha 0: none, the one-hot DE itself, every page's cached run)."""
    return [] if alpha == 0 else [changes.training(label_smoothing=alpha)]


def train(s: PageSettings) -> tuple[CachedRun, dict[float, dict[int, CachedRun]], dict[str, dict[int, CachedRun]]]:
    """The CA teacher, {α: {seed: run}} and {regulariser: {seed: run}} of the one-hot DE (trained, or read from the
    run cache)."""
    known = strategies(s)
    unknown = [r for r in s.regularisers if r not in known]
    assert not unknown, f"unknown regularisers {unknown}; known: {list(known)}"
    params = distill_params(s)
    on_testbed = testbed_changes(s.testbed)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)

    def de_run(sd, extra):
        return reranking_run("de-one-hot", sd, params, teacher=teacher, changes=[*on_testbed, *extra],
                             progress=False)

    smoothed = {a: {sd: de_run(sd, smoothing(a)) for sd in s.seeds} for a in s.alphas}
    regularised = {r: {sd: de_run(sd, known[r]) for sd in s.seeds} for r in s.regularisers}
    return teacher, smoothed, regularised


def training_table(smoothed: Mapping[float, Mapping[int, CachedRun]],
                   regularised: Mapping[str, Mapping[int, CachedRun]], names: Mapping[str, str]) -> pd.DataFrame:
    """Each run's steps and its dev nDCG@10 (the metric it was selected on)."""
    return pd.DataFrame(
        [{"run": f"label smoothing {a}", "seed": sd, "steps": r.result["final_step"],
          "dev nDCG@10 (selection)": r.metric} for a, by in smoothed.items() for sd, r in by.items()]
        + [{"run": names[g], "seed": sd, "steps": r.result["final_step"], "dev nDCG@10 (selection)": r.metric}
           for g, by in regularised.items() for sd, r in by.items()])


def train_test_rows(s: PageSettings, teacher: CachedRun, smoothed: Mapping[float, Mapping[int, CachedRun]],
                    regularised: Mapping[str, Mapping[int, CachedRun]]):
    """(the training questions scored, per-question rows of the smoothed DEs, of the regularised DEs and the CA):
    each model's train MRR (`n_train_eval` training questions, a seeded sample, scored here) and test MRR (its
    trainer's `test_per_query.csv`); the CA's rows on the students' questions only."""
    reference = next(iter({**smoothed, **regularised}.values()))[s.seeds[0]]  # the students' questions
    sets = reference.config.data.load(progress=False)
    train_slice = sets[reference.config.data.train_split].sample(s.n_train_eval, s.seed)
    where = dict(dataset=s.testbed)

    def train_test(run):
        return {"train": rerank_saved_model(run.model_path, train_slice, **lengths(s)),
                "test": read_per_query(run.result["paths"]["test_per_query"])}

    ca_model = teacher.load().to(default_device()).eval()
    ca_train = rerank_per_query(train_slice, score_reranking_set(
        ca_model, teacher.tokenizer(), train_slice, max_length=teacher.config.training.max_length,
        batch_size=s.eval_batch_size, progress=False))
    ca = {"train": ca_train, "test": read_per_query(teacher.result["paths"]["test_per_query"])}
    smooth_rows, reg_rows = [], []
    for a, by in smoothed.items():
        for sd, r in by.items():
            for split, values in train_test(r).items():
                smooth_rows += per_query_rows("de", values, seed=sd, alpha=float(a), split=split, **where)
    for g, by in regularised.items():
        for sd, r in by.items():
            for split, values in train_test(r).items():
                reg_rows += per_query_rows("de", values, seed=sd, strategy=g, split=split, **where)
    for split, values in ca.items():
        reg_rows += per_query_rows("ca", values, seed=s.seed, strategy="ca", split=split, **where)
    return train_slice, pd.DataFrame(smooth_rows), shared_queries(pd.DataFrame(reg_rows))


def significance(s: PageSettings, smooth_rows: pd.DataFrame, reg_rows: pd.DataFrame,
                 names: Mapping[str, str]) -> pd.DataFrame:
    """Paired randomisation tests of test MRR@10 across questions: every α against α = 0 and every regulariser
    against the baseline, Holm-corrected within each table."""
    test_smooth = smooth_rows[smooth_rows["split"] == "test"]
    test_smooth = test_smooth.assign(model="alpha " + test_smooth["alpha"].astype(str))
    test_reg = reg_rows[reg_rows["split"] == "test"].assign(model=lambda f: f["strategy"])
    return pd.concat([
        paired_tests(test_smooth, "MRR@10", [(f"alpha {float(a)}", "alpha 0.0") for a in s.alphas if a != 0])
        .assign(table="label smoothing"),
        paired_tests(test_reg, "MRR@10", [(g, "baseline") for g in s.regularisers if g != "baseline"],
                     labels=names)
        .assign(table="regularisers")], ignore_index=True)


def paper_train_test(name: str) -> pd.DataFrame:
    """The paper's table `name` (8 or 9): train and test MRR@10 per row."""
    return (paper_table(name).pivot_table(index="label", columns="dataset", values="value", sort=False)
            [["train", "test"]].rename_axis("paper (MS MARCO)"))


@dataclass(frozen=True)
class Regularisation(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    smoothed: Mapping[float, Mapping[int, CachedRun]]
    regularised: Mapping[str, Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    n_train_questions: int
    smooth_rows: pd.DataFrame
    reg_rows: pd.DataFrame
    smooth_summary: pd.DataFrame
    reg_summary: pd.DataFrame
    tests: pd.DataFrame
    wall: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "smoothing": self.smooth_summary[[*SMOOTH_BY, "value", "std", "n"]],
            "smoothing_per_query": query_means(self.smooth_rows, by=SMOOTH_BY),
            "regularisation": self.reg_summary[[*REG_BY, "value", "std", "n"]],
            "regularisation_per_query": query_means(self.reg_rows, by=REG_BY),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table (`wall_s`: the seconds it took)."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seed": s.seed, "seeds": s.seeds, "testbed": s.testbed,
                "alphas": s.alphas, "regularisers": s.regularisers, "embedding_dropout": s.embedding_dropout,
                "token_dropout": s.token_dropout, "mlm_weight": s.mlm_weight, "n_train_eval": s.n_train_eval,
                "teacher": self.teacher.dir.name, "wall_s": round(self.wall)}

    def teacher_trained(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.round(4)

    def questions_counted(self) -> str:
        """How many training and test questions every model is scored on."""
        n_test = self.smooth_rows.loc[self.smooth_rows["split"] == "test", "query_id"].nunique()
        return f"{self.n_train_questions} training and {n_test} test questions"

    def smoothing_table(self) -> pd.DataFrame:
        mrr = self.smooth_summary[self.smooth_summary["metric"] == "MRR@10"]
        return mrr.pivot_table(index="alpha", columns="split", values="mean ± std", aggfunc="first", sort=False)

    def paper_smoothing_table(self) -> pd.DataFrame:
        return paper_train_test("de_table_8")

    def smoothing_figure(self) -> Figure:
        s = self.settings
        sweep = seed_means(self.smooth_rows, by=SMOOTH_BY).query("metric == 'MRR@10'")
        paper = paper_table("de_table_8")  # Table 8: `model` holds alpha, `dataset` the split
        paper = paper.assign(alpha=paper["model"].astype(float), split=paper["dataset"], model="DE one-hot")
        return plot_size_sweep(sweep.assign(model="DE one-hot"), x="alpha", panel="split", panels=["train", "test"],
                               spread="bars", xlabel="label smoothing alpha", paper=paper,
                               paper_label="paper (MS MARCO)",
                               title=f"{s.testbed}: train and test MRR@10 against label smoothing ({s.profile} "
                                     f"profile)")

    def regularisers_table(self) -> pd.DataFrame:
        mrr = self.reg_summary[self.reg_summary["metric"] == "MRR@10"]
        table = mrr.pivot_table(index="strategy", columns="split", values="value", aggfunc="first", sort=False)
        table["train − test"] = table["train"] - table["test"]
        return table.rename(index=self.labels).round(3)

    def paper_regularisers_table(self) -> pd.DataFrame:
        return paper_train_test("de_table_9")

    def regularisers_figure(self) -> Figure:
        s = self.settings
        bars = seed_means(self.reg_rows, by=REG_BY).query("metric == 'MRR@10'")
        bars = bars.assign(dataset=bars["split"], model=bars["strategy"].map(self.labels))
        return plot_metric_bars(bars, "MRR@10", models=[self.labels[g] for g in [*s.regularisers, "ca"]],
                                title=f"{s.testbed}: train and test MRR@10 per regulariser ({s.profile} profile)")

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Regularisation:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    names = labels(s)
    teacher, smoothed, regularised = train(s)
    training = training_table(smoothed, regularised, names)
    train_slice, smooth_rows, reg_rows = train_test_rows(s, teacher, smoothed, regularised)
    smooth_summary, reg_summary = seed_summary(smooth_rows, by=SMOOTH_BY), seed_summary(reg_rows, by=REG_BY)
    tests = significance(s, smooth_rows, reg_rows, names)
    wall = time.perf_counter() - started
    page = Regularisation(s, teacher, smoothed, regularised, names, training, len(train_slice), smooth_rows,
                          reg_rows, smooth_summary, reg_summary, tests, wall, results_dir)
    page.publish(results_dir)
    return page
