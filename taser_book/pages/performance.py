"""The performance page: the library against its peers and the hardware limit, read from the records `taser bench`
writes (`results/bench/<name>.json`); it runs nothing itself.

    >>> page = run(settings("cpu"), results_dir="results/cpu/performance")
    >>> page.source()              # which records were found, where, from when
    >>> page.scaling_figure()      # encoding and exact-search time against corpus size (log-log)
    >>> page.implied_21m()         # those times extrapolated to DPR's 21M passages
    >>> page.summary()             # one row per measured quantity, with its target
    >>> page.spread()              # median, quartiles and extremes of the targeted quantities
    >>> page.machines()            # the same ratios on every machine the benchmarks ran on
    >>> page.step_parts()          # where a DPR training step's time goes, on each machine that measured it
    >>> page.conditions()          # wall time and load averages around each benchmark
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..bench import summary_rows
from ..bench.report import (by_name, conditions_table, describe_source, find_results, implied_21m_table,
                            machines_table, spread_table, step_parts_table, summary_table)
from ..plots.bench import plot_scaling
from ..profiles import PageSettings, page_settings
from ..scorecard import notebook_claims, publish

PAGE = "performance"


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """Where this page reads the benchmark records at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


@dataclass(frozen=True)
class Performance:
    """The page's result: its settings, the benchmark records read and the folder they came from (`results_dir`:
    where its tables were saved; None: nowhere)."""

    settings: PageSettings
    results: Sequence[dict[str, Any]]
    folder: str | None
    results_dir: str | os.PathLike | None = None

    def source(self) -> str:
        return "\n".join(describe_source(self.results, self.folder))

    def scaling_figure(self) -> Figure:
        return plot_scaling(by_name(self.results).get("scaling"))

    def implied_21m(self) -> pd.DataFrame:
        return implied_21m_table(self.results)

    def summary(self) -> pd.DataFrame:
        return summary_table(self.results)

    def spread(self) -> pd.DataFrame:
        return spread_table(self.results)

    def machines(self) -> pd.DataFrame:
        return machines_table(self.settings.bench_dirs[0])

    def step_parts(self) -> pd.DataFrame:
        return step_parts_table(self.settings.bench_dirs[0])

    def conditions(self) -> pd.DataFrame:
        return conditions_table(self.results)

    def claims(self) -> pd.DataFrame:
        """The paper's claims of this page beside ours, judged on the saved tables."""
        return notebook_claims(PAGE, self.results_dir)

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        return publish(results_dir, PAGE,
                       tables={"bench_summary": pd.DataFrame(summary_rows(self.results)),
                               "bench_machines": self.machines().rename_axis("quantity").reset_index(),
                               "bench_step_parts": self.step_parts().rename_axis("quantity").reset_index()},
                       parameters={"profile": self.settings.profile, "source": self.folder,
                                   "quick": any(r["quick"] for r in self.results) if self.results else None},
                       settings=self.settings)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Performance:
    """Read the benchmark records from the first of `s.bench_dirs` that holds any, and save the page's two tables
    into `results_dir` (None: nothing saved, and it says so)."""
    results, folder = find_results(s.bench_dirs)
    page = Performance(s, results, folder, results_dir)
    page.publish(results_dir)
    return page
