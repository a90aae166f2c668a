"""The learning-curves page (Figure 4 of "In defense of dual-encoders"): MRR@10 of the CA, the one-hot DE and the
distilled DE on training and held-out questions over training steps.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_learning_curves")
    >>> print(page.teacher_line())     # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()          # every run's steps, evaluations and selected step
    >>> page.curves_figure()           # Figure 4: train (dashed) and test (solid) over steps
    >>> page.endpoints_table()         # where the curves start and end, and the train − test gap at each
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..plots import plot_learning_curves
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.run_tables import curve_rows
from ..scorecard import publish
from ..tables.train_test import curve_endpoints
from .common import PageResult, distill_params, teacher_line

PAGE = "de_learning_curves"
Runs = Mapping[str, Mapping[int, CachedRun]]  # {"ca" | "de" | "dist": {seed: run}}


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels(s: PageSettings) -> dict[str, str]:
    """{curve: the label the page's tables and figures show}."""
    return {"ca": "CA", "de": "DE (one-hot)", "dist": f"DIST ({RERANKERS[s.distilled].label})"}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]]]:
    """The CA teacher and, per seed, the CA, one-hot DE and distilled DE whose curves are drawn (trained, or read
    from the run cache). The compared CAs train and are scored as they are (no teacher sizes of their own);
    squad-open is the configs' own testbed, so these are the same runs as every other page's."""
    params = distill_params(s)
    subject_params = {**params, "teacher": {}}
    on_testbed = [changes.data(dataset=s.testbed)]
    curve_sets = ([] if s.train_eval_queries is None
                  else [changes.training(train_eval_queries=int(s.train_eval_queries))])
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs: dict[str, dict[int, CachedRun]] = {"ca": {}, "de": {}, "dist": {}}
    for sd in s.seeds:
        runs["ca"][sd] = reranking_run("ca", sd, subject_params, changes=[*on_testbed, *curve_sets], progress=False)
        runs["de"][sd] = reranking_run("de-one-hot", sd, params, teacher=teacher,
                                       changes=[*on_testbed, *curve_sets], progress=False)
        runs["dist"][sd] = reranking_run(s.distilled, sd, params, teacher=teacher,
                                         changes=[*on_testbed, *curve_sets], progress=False)
    return teacher, runs


def training_table(runs: Runs, shown: Mapping[str, str]) -> pd.DataFrame:
    """Every run's folder, steps, evaluations, selected step and training questions on its train curve."""
    return pd.DataFrame([{"model": shown[m], "seed": sd, "run": r.dir.name, "steps": r.result["final_step"],
                          "evaluations": len(r.result["curve"]), "selected step": r.result["best_step"],
                          "train questions": r.config.training.train_eval_queries}
                         for m, by in runs.items() for sd, r in by.items()])


def curves_table(runs: Runs) -> pd.DataFrame:
    """MRR@10 of every run at every evaluation, on its training questions ("train") and on dev ("test")."""
    return pd.DataFrame([row for m, by in runs.items() for sd, r in by.items()
                         for row in curve_rows(r, model=m, seed=sd, splits={"train": "train", "dev": "test"})])


@dataclass(frozen=True)
class LearningCurves(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Runs
    labels: Mapping[str, str]
    training: pd.DataFrame
    curves: pd.DataFrame
    summary: pd.DataFrame
    per_seed: pd.DataFrame
    wall_s: float
    results_dir: str | os.PathLike | None = None

    def parameters(self) -> dict[str, Any]:
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seeds": s.seeds, "seed": s.seed, "distilled": s.distilled,
                "testbed": s.testbed, "train_eval_queries": s.train_eval_queries, "teacher": self.teacher.dir.name,
                "wall_s": round(self.wall_s)}

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        return publish(results_dir, PAGE, tables={"summary": self.summary, "curves": self.curves,
                                                  "endpoints": self.per_seed, "training": self.training},
                       parameters=self.parameters(), settings=self.settings)

    def teacher_line(self) -> str:
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.drop(columns="run")

    def curves_figure(self) -> Figure:
        s = self.settings
        return plot_learning_curves(self.curves.assign(model=self.curves["model"].map(self.labels)),
                                    title=f"Figure 4 on {s.testbed} re-ranking ({s.profile} profile)")

    def endpoints_table(self) -> pd.DataFrame:
        """The first and last evaluation per model and split, mean over seeds, and the train − test gap."""
        ends = self.summary.assign(model=self.summary["model"].map(self.labels)).pivot_table(
            index=["model", "point"], columns="split", values="value", sort=False)
        return ends.assign(**{"train − test": ends["train"] - ends["test"]}).round(3)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> LearningCurves:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    shown = labels(s)
    teacher, runs = train(s)
    curves = curves_table(runs)
    page = LearningCurves(s, teacher, runs, shown, training_table(runs, shown), curves,
                          summary=curve_endpoints(curves),
                          per_seed=curve_endpoints(curves, by=["model", "split", "seed"]),
                          wall_s=time.perf_counter() - started, results_dir=results_dir)
    page.publish(results_dir)
    return page
