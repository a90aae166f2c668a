"""The K-sweep page (Table 6 of "In defense of dual-encoders"): DE students distilled from the CA teacher's scores of
the K documents it ranks highest per question, for several K, against the one-hot DE on the same documents.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_k_sweep")
    >>> print(page.teacher_line())     # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()          # every student's steps and its selection metric
    >>> page.rerank_table()            # Table 6: test MRR@10 and nDCG@10 against K, mean ± std over seeds
    >>> page.sweep_figure()            # the same against K, with the paper's values dashed
    >>> page.beside_paper()            # the paper's Table 6 (MS MARCO dev) beside ours
    >>> page.tests_table()             # each K against the smallest, each distilled student against one-hot
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import compare_systems, summarise_seeds
from ..claims import paper_table
from ..plots import plot_size_sweep
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.capacity import documents_changes
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.run_tables import per_query_rows
from ..tables.train_test import comparison_table
from ..tables.wide import labelled
from .common import PageResult, distill_params, teacher_line

PAGE = "de_k_sweep"
Runs = Mapping[tuple[str, int, int], CachedRun]  # {(model name, K, seed): run}


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def model_names(s: PageSettings) -> dict[str, str]:
    """{loss variant: the tables' model name} (one-hot, softmax-ce, m3se)."""
    return {loss: loss.removeprefix("de-") for loss in s.losses}


def labels(s: PageSettings) -> dict[str, str]:
    """{model name: the label the page's tables and figures show}."""
    variants, names = RERANKERS, model_names(s)
    return {names[loss]: variants[loss].label for loss in s.losses}


def train(s: PageSettings) -> tuple[CachedRun, dict[tuple[str, int, int], CachedRun]]:
    """The CA teacher and {(model name, K, seed): student} (trained, or read from the run cache); squad-open is the
    configs' own testbed, so these are the same runs as every other page's."""
    params, names = distill_params(s), model_names(s)
    on_testbed = [changes.data(dataset=s.testbed)]
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {(names[loss], k, sd): reranking_run(loss, sd, params, teacher=teacher, progress=False,
                                                changes=[*on_testbed, *documents_changes(k, s.candidates, teacher)])
            for loss in s.losses for k in s.ks for sd in s.seeds}
    return teacher, runs


def training_table(runs: Runs, shown: Mapping[str, str]) -> pd.DataFrame:
    """Every student's run folder, steps and dev nDCG@10 (the selection metric); `shown`: the models' labels."""
    return pd.DataFrame([{"model": shown[m], "K": k, "seed": sd, "run": r.dir.name, "steps": r.result["final_step"],
                          "dev nDCG@10 (selection)": round(r.metric, 4)} for (m, k, sd), r in runs.items()])


def per_query_table(runs: Runs) -> pd.DataFrame:
    """Test MRR@10 and nDCG@10 per question of every run, with its model, K and seed."""
    return pd.DataFrame([row for (m, k, sd), r in runs.items() for row in per_query_rows(r, model=m, k=k, seed=sd)])


def per_seed_table(per_query: pd.DataFrame) -> pd.DataFrame:
    return per_query.groupby(["model", "k", "metric", "seed"], sort=False)["value"].mean().reset_index()


def paper_k_table() -> pd.DataFrame:
    """The paper's Table 6 with K as a number and its models under the page's labels."""
    variants = RERANKERS
    paper = paper_table("de_table_6").rename(columns={"dataset": "k"})
    return paper.assign(k=paper["k"].astype(int), model=paper["model"].map(lambda m: variants[f"de-{m}"].label))


def k_tests(s: PageSettings, runs: Runs, shown: Mapping[str, str]) -> pd.DataFrame:
    """Randomisation tests across test questions on per-question MRR@10 (averaged over seeds), Holm-corrected: each K
    against the smallest for the same loss, and each distilled student against the one-hot DE on the same K."""
    models = model_names(s).values()
    systems = {f"{m} K={k}": [r.dir for (m2, k2, sd), r in runs.items() if (m2, k2) == (m, k)]
               for m in models for k in s.ks}
    pairs = [(f"{m} K={k}", f"{m} K={min(s.ks)}") for m in models for k in s.ks if k != min(s.ks)]
    pairs += [(f"{m} K={k}", f"one-hot K={k}") for m in models if m != "one-hot" and "one-hot" in shown
              for k in s.ks]
    return comparison_table(compare_systems(systems, "MRR@10", pairs=pairs)) if pairs else pd.DataFrame()


@dataclass(frozen=True)
class KSweep(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Runs
    labels: Mapping[str, str]
    training: pd.DataFrame
    per_query: pd.DataFrame
    per_seed: pd.DataFrame
    rerank: pd.DataFrame
    paper: pd.DataFrame
    tests: pd.DataFrame
    wall_s: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "rerank": self.rerank.rename(columns={"mean": "value"})[["model", "k", "metric", "value", "std", "n"]],
            "rerank_per_query": self.per_query.groupby(["model", "k", "metric", "query_id"], sort=False)["value"]
            .mean().reset_index(),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seeds": s.seeds, "seed": s.seed, "ks": s.ks,
                "candidates": s.candidates, "losses": s.losses, "testbed": s.testbed, "teacher": self.teacher.dir.name,
                "wall_s": round(self.wall_s)}

    def teacher_line(self) -> str:
        return f"{teacher_line(self.teacher)}; {self.settings.candidates} candidates per question"

    def training_table(self) -> pd.DataFrame:
        return self.training.drop(columns="run")

    def rerank_table(self) -> pd.DataFrame:
        return self.rerank.assign(model=self.rerank["model"].map(self.labels)).pivot_table(
            index=["model"], columns=["metric", "k"], values="mean ± std", aggfunc="first", sort=False)

    def sweep_figure(self) -> Figure:
        s = self.settings
        return plot_size_sweep(labelled(self.per_seed, self.labels), x="k", panel="metric", log_x=True,
                               xlabel="K (documents per training question)", ylabel="test", paper=self.paper,
                               paper_label="paper (MS MARCO dev)",
                               title=f"Table 6 on {s.testbed} re-ranking, {s.candidates} candidates per question "
                                     f"({s.profile} profile)")

    def beside_paper(self) -> pd.DataFrame:
        """The paper's Table 6 and ours, one row per source and model ("–": a K one side did not run)."""
        beside = pd.concat([self.paper.assign(source="paper", cell=self.paper["value"].map("{:.3f}".format)),
                            self.rerank.assign(source="ours", cell=self.rerank["mean ± std"],
                                               model=self.rerank["model"].map(self.labels))])
        return beside.pivot_table(index=["source", "model"], columns=["metric", "k"], values="cell",
                                  aggfunc="first", sort=False).sort_index(axis=1).fillna("–")

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> KSweep:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    shown = labels(s)
    teacher, runs = train(s)
    training = training_table(runs, shown)
    per_query = per_query_table(runs)
    per_seed = per_seed_table(per_query)
    rerank = summarise_seeds(per_seed, by=["model", "k", "metric"], digits=3)
    page = KSweep(s, teacher, runs, shown, training, per_query, per_seed, rerank, paper_k_table(),
                  k_tests(s, runs, shown), wall_s=time.perf_counter() - started, results_dir=results_dir)
    page.publish(results_dir)
    return page
