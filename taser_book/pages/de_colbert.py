"""The ColBERT page (Table 7 of "In defense of dual-encoders"): ColBERT students of the CA teacher, one-hot and
distilled, beside the dot-product DE students of the distillation page, on test re-ranking.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_colbert")
    >>> print(page.teacher_summary())      # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()            # the teacher's and every student's steps and dev nDCG@10
    >>> print(page.compared_questions())   # how many test questions every model is compared on
    >>> page.rerank_table()              # test MRR@10 and nDCG@10 of every model, mean ± std over seeds
    >>> print(page.teacher_leads())        # does the CA lead the one-hot DE and the one-hot ColBERT?
    >>> page.paper_figure()              # our test MRR@10 beside the paper's MS MARCO dev MRR@10
    >>> page.tests_table()               # paired randomisation tests over questions, Holm-corrected
    >>> page.claims()                    # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query
from taser_lib.evaluation.query_sets import shared_queries
from ..claims import paper_table
from ..plots import plot_beside_paper
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.students import testbed_changes
from ..tables.rerank_tables import paired_tests, per_query_rows, query_means, seed_means, seed_summary
from .common import PageResult, distill_params, questions_compared, teacher_line

PAGE = "de_colbert"
# {run name: the short name the tables, the paper's tables and the claims use}
SHORT = {"de-one-hot": "de", "de-softmax-ce": "softmax-ce", "de-m3se": "m3se", "colbert-one-hot": "colbert",
         "colbert-m3se": "colbert-m3se", "colbert-softmax-ce": "colbert-softmax-ce"}
ORDER = ("ca", "de", "softmax-ce", "colbert", "colbert-m3se", "colbert-softmax-ce")  # the figure's bars
TESTED = [("colbert", "de"), ("colbert-softmax-ce", "ca"), ("colbert-m3se", "ca"), ("colbert-softmax-ce", "colbert"),
          ("colbert-m3se", "colbert"), ("colbert-softmax-ce", "softmax-ce"), ("softmax-ce", "de"), ("ca", "colbert")]
METRICS = ("MRR@10", "nDCG@10")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels() -> dict[str, str]:
    """{short name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"ca": "CA teacher", **{SHORT[n]: variants[n].label for n in SHORT}}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]]]:
    """The CA teacher and {student: {seed: run}} of the ColBERT and the DE students (trained, or read from the run
    cache)."""
    params = distill_params(s)
    on_testbed = testbed_changes(s.testbed)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {n: {sd: reranking_run(n, sd, params, teacher=teacher, changes=on_testbed, progress=False)
                for sd in s.seeds} for n in [*s.colbert_students, *s.de_students]}
    return teacher, runs


def training_table(s: PageSettings, names: Mapping[str, str], teacher: CachedRun,
                   runs: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """The teacher's and each student's seed, steps and dev nDCG@10 (its selection metric)."""
    return pd.DataFrame(
        [{"model": names["ca"], "seed": s.seed, "steps": teacher.result["final_step"],
          "dev nDCG@10 (selection)": teacher.metric}]
        + [{"model": names[SHORT[n]], "seed": sd, "steps": r.result["final_step"], "dev nDCG@10 (selection)": r.metric}
           for n, by in runs.items() for sd, r in by.items()])


def per_query_frame(s: PageSettings, teacher: CachedRun, runs: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """The CA's and every student's test metrics per question and seed, from their trainers' `test_per_query.csv`
    (before keeping the questions every model has)."""
    where = dict(dataset=s.testbed, split="test")
    rows = per_query_rows("ca", read_per_query(teacher.result["paths"]["test_per_query"]), seed=s.seed, **where)
    for n, by in runs.items():
        for sd, r in by.items():
            rows += per_query_rows(SHORT[n], read_per_query(r.result["paths"]["test_per_query"]), seed=sd, **where)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Colbert(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere);
    `wall_s`: the seconds from the start of the runs to the tables."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[str, Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    before: pd.DataFrame
    rerank_rows: pd.DataFrame
    summary: pd.DataFrame
    tests: pd.DataFrame
    wall_s: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "rerank": self.summary[["model", "dataset", "split", "metric", "value", "std", "n"]],
            "rerank_per_query": query_means(self.rerank_rows),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seed": s.seed, "seeds": s.seeds, "testbed": s.testbed,
                "colbert_students": s.colbert_students, "de_students": s.de_students,
                "teacher": self.teacher.dir.name, "wall_s": round(self.wall_s)}

    def teacher_summary(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.round(4)

    def compared_questions(self) -> str:
        """On how many test questions the models are compared (the same for all, or each model's count)."""
        return questions_compared(self.before, self.rerank_rows, self.labels)

    def rerank_table(self) -> pd.DataFrame:
        return self.summary.assign(model=self.summary["model"].map(self.labels)).pivot_table(
            index="model", columns="metric", values="mean ± std", aggfunc="first", sort=False)

    def teacher_leads(self) -> str:
        """Whether the CA's test MRR@10 leads the one-hot DE's and the one-hot ColBERT's, one line each (of those
        trained)."""
        s = self.settings
        mrr = self.summary[self.summary["metric"] == "MRR@10"].set_index("model")["value"]
        return "\n".join(f"{s.testbed} test MRR@10 ({s.profile}): CA {mrr['ca']:.3f} vs {self.labels[name]} "
                         f"{mrr[name]:.3f}: the teacher {'leads' if mrr['ca'] > mrr[name] else 'does NOT lead'}."
                         for name in ["de", "colbert"] if name in mrr)

    def paper_figure(self) -> Figure:
        s = self.settings
        ours = seed_means(self.rerank_rows).assign(value=lambda f: 100 * f["value"])
        paper = paper_table("de_table_7").assign(value=lambda f: 100 * f["value"])
        paper = pd.concat([paper, paper_table("de_table_1").query("model in ['de', 'softmax-ce']")
                           .assign(value=lambda f: 100 * f["value"])])
        return plot_beside_paper(ours, paper, "MRR@10", models=[m for m in ORDER if m in set(ours["model"])],
                                 our_dataset=s.testbed, paper_dataset="msmarco-passage", labels=self.labels,
                                 unit="×100", title=f"ColBERT and DE students vs the CA: {s.testbed} test "
                                                    f"({s.profile}) and MS MARCO dev (paper)")

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Colbert:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    names = labels()
    teacher, runs = train(s)
    training = training_table(s, names, teacher, runs)
    before = per_query_frame(s, teacher, runs)
    rerank_rows = shared_queries(before)  # every model on the same questions
    summary = seed_summary(rerank_rows)
    tests = pd.concat([paired_tests(rerank_rows, metric, TESTED, labels=names) for metric in METRICS],
                      ignore_index=True)
    page = Colbert(s, teacher, runs, names, training, before, rerank_rows, summary, tests,
                   wall_s=time.perf_counter() - started, results_dir=results_dir)
    page.publish(results_dir)
    return page
