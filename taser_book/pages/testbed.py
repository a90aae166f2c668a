"""The testbed page: where "In defense of dual-encoders"' premise (a CA trained on the same questions leads a
one-hot DE) appears on the offline testbeds, before any student is judged.

    >>> page = run(settings("cpu"), results_dir="results/cpu/testbed")
    >>> page.preconditions()       # the three preconditions, met or not per setting, with the measured numbers
    >>> page.gap_figure()          # CA − DE against the number of training questions
    >>> page.numbers()             # test MRR@10 of CA, DE and the DE's start, the differences and their tests
    >>> page.training_table()      # each run's steps, selected step and dev metric

The experiment itself (the probe's runs, per-query rows and paired tests) is `taser_book.runs.testbed`; this module
ties it to the page's settings, saves the page's two tables (`probe_gaps`, `probe_training`) and shows them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..plots.testbed import plot_probe_gap
from ..profiles import PageSettings, page_settings
from ..results import save_result
from ..runs.cache import CachedRun
from ..runs.testbed import (ProbePoint, probe_display, probe_gaps, probe_points, probe_questions, probe_rows,
                            probe_runs, probe_training, probe_training_table)
from ..scorecard import notebook_preconditions
from .common import reranking_params

PAGE = "testbed"


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def probe_params(s: PageSettings) -> dict[str, Any]:
    """The re-ranking parameters of every probe run (their sizes are the probe's own: `runs.testbed.probe_runs`)."""
    return reranking_params(s, sizes=("n_docs",), extra=("cross_encoder_model",))


@dataclass(frozen=True)
class Testbed:
    """The page's result: its settings, the probe's runs, and its two tables (`runs.testbed.probe_gaps`,
    `runs.testbed.probe_training`); `results_dir` is where they were saved (None: nowhere)."""

    settings: PageSettings
    runs: Mapping[ProbePoint, Mapping[str, CachedRun]]
    gaps: pd.DataFrame
    training: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def save(self, results_dir: str | os.PathLike | None) -> None:
        """`probe_gaps` (with the page's parameters) and `probe_training` into `results_dir` (None: nothing)."""
        save_result(results_dir, "probe_gaps", self.gaps, parameters={**self.settings.as_dict(),
                                                                       **probe_params(self.settings)})
        save_result(results_dir, "probe_training", self.training)

    def preconditions(self) -> pd.DataFrame:
        """The preconditions the page measures, each met or not per setting with its numbers (from the saved
        tables; without a results folder, what each says)."""
        return notebook_preconditions(PAGE, self.results_dir)

    def gap_figure(self) -> Figure:
        return plot_probe_gap(self.gaps, questions=probe_questions(self.training),
                              title=f"CA − one-hot DE on the test questions ({self.settings.profile} profile)")

    def numbers(self) -> pd.DataFrame:
        return probe_display(self.gaps, self.training)

    def training_table(self) -> pd.DataFrame:
        return probe_training_table(self.training)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Testbed:
    """Train (or read from the run cache) every probe run at `s`, compute the page's tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    points = probe_points(s.probe_sizes, s.seeds, reinit=s.probe_reinit, reinit_layers=s.reinit_layers)
    runs = probe_runs(points, probe_params(s), n_queries=s.probe_queries, shared_teacher=s.teacher_params or None,
                      teacher_seed=s.seed)
    lengths = dict(max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                   batch_size=s.eval_batch_size)
    training = probe_training(runs)
    page = Testbed(s, runs, gaps=probe_gaps(probe_rows(runs, start_model=s.model, **lengths)), training=training,
                   results_dir=results_dir)
    page.save(results_dir)
    return page
