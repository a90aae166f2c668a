"""The extra-negatives page (Table 12 of "In defense of dual-encoders"): one-hot and distilled dual-encoders trained
without and with in-batch plus uniformly drawn corpus negatives, their re-ranking of the test candidates, their full
retrieval over the test corpus and paired tests of each student with against without the extra negatives.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_negatives")
    >>> print(page.teacher_trained())      # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()              # every run's steps and its dev selection metric
    >>> print(page.questions_compared())   # how many test questions every model is compared on
    >>> page.rerank_table()                # test re-ranking without / with the extra negatives, mean ± std
    >>> page.paper_rerank_table()          # the paper's Table 12
    >>> page.negatives_figure()            # our test MRR@10 without / with, as bars
    >>> page.paper_figure()                # the paper's Table 12, drawn like ours
    >>> print(page.retrieval_counted())    # the questions and passages of full retrieval (or why it was skipped)
    >>> page.retrieval_table()             # full retrieval without / with, mean ± std over seeds
    >>> page.tests_table()                 # paired randomisation tests, with against without, Holm-corrected
    >>> page.claims()                      # the paper's claims beside ours, with their verdicts
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
from taser_lib.datasets.ready import load_evaluation_set
from ..analyses.baselines import query_length
from ..claims import paper_table
from ..plots import plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.students import testbed_changes
from ..tables.rerank_tables import (paired_tests, per_query_rows, query_means, retrieval_per_query, seed_means,
                                    seed_summary)
from ..tables.seeded import SeededModels
from .common import PageResult, distill_params, questions_compared, teacher_line

PAGE = "de_negatives"
# our model names (the claims file's) for each re-ranking recipe (runs.recipes.RERANKERS)
SHORT = {"de-one-hot": "de", "de-mse": "mse", "de-margin-mse": "margin-mse", "de-rankdistil-b": "rankdistil-b",
         "de-m3se": "m3se", "de-softmax-ce": "softmax-ce", "de-kl": "kl"}
BY = ("model", "negatives", "dataset", "split", "metric")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels() -> dict[str, str]:
    """{model name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"ca": "CA teacher", **{SHORT[n]: variants[n].label for n in SHORT}}


def negatives(s: PageSettings) -> dict[str, list]:
    """{"none": no change, "mined": in-batch negatives and `uniform_negatives` uniformly drawn corpus passages}."""
    return {"none": [], "mined": [changes.training(in_batch_negatives=True,
                                                    uniform_negatives=int(s.uniform_negatives))]}


def train(s: PageSettings) -> tuple[CachedRun, dict[tuple[str, str], dict[int, CachedRun]]]:
    """The CA teacher and {(loss, negatives): {seed: run}} (trained, or read from the run cache)."""
    params = distill_params(s)
    on_testbed = testbed_changes(s.testbed)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {(n, neg): {sd: reranking_run(n, sd, params, teacher=teacher, changes=[*on_testbed, *extra],
                                         progress=False) for sd in s.seeds}
            for n in s.negative_losses for neg, extra in negatives(s).items()}
    return teacher, runs


def training_table(runs: Mapping[tuple[str, str], Mapping[int, CachedRun]],
                   names: Mapping[str, str]) -> pd.DataFrame:
    """Each student run's steps and its dev nDCG@10 (the metric it was selected on)."""
    return pd.DataFrame(
        [{"model": names[SHORT[n]], "negatives": neg, "seed": sd, "steps": r.result["final_step"],
          "dev nDCG@10 (selection)": r.metric} for (n, neg), by in runs.items() for sd, r in by.items()])


def rerank_rows(s: PageSettings, teacher: CachedRun,
                runs: Mapping[tuple[str, str], Mapping[int, CachedRun]]) -> pd.DataFrame:
    """Per-question test rows of the CA and every student (from each run's `test_per_query.csv`)."""
    where = dict(dataset=s.testbed, split="test")
    rows = per_query_rows("ca", read_per_query(teacher.result["paths"]["test_per_query"]), seed=s.seed,
                          negatives="none", **where)
    for (n, neg), by in runs.items():
        for sd, r in by.items():
            rows += per_query_rows(SHORT[n], read_per_query(r.result["paths"]["test_per_query"]), seed=sd,
                                   negatives=neg, **where)
    return pd.DataFrame(rows)


def retrieval(s: PageSettings, runs: Mapping[tuple[str, str], Mapping[int, CachedRun]]):
    """(the test set retrieved over, per-question rows of every student's full retrieval over the whole test
    corpus, their summary over seeds); (None, an empty frame, an empty summary) without retrieval or off
    SQuAD-open."""
    if not (s.retrieval and s.testbed == "squad-open"):
        return None, pd.DataFrame(), pd.DataFrame(columns=[*BY, "value", "std", "n"])
    test = load_evaluation_set("squad-open", "test", n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               data_dir=os.environ.get("TASER_DATA_DIR"), mirror=os.environ.get("TASER_DATA_MIRROR"))
    encoder_options = dict(device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                           max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)
    students = SeededModels({f"{SHORT[n]}|{neg}": {sd: r.model_path for sd, r in by.items()}
                             for (n, neg), by in runs.items()}, **encoder_options)
    q_len = query_length(test, students.encoder(*students.keys()[0]), qa_cap=s.max_query_length)
    found = pd.DataFrame(retrieval_per_query(test, students.runs(test, k=max(s.top_k), query_length=q_len), k=10,
                                             recall_at=(20,), label=f"{s.testbed}-retrieval"))
    rows = found.assign(model=found["model"].str.split("|").str[0], negatives=found["model"].str.split("|").str[1])
    return test, rows, seed_summary(rows, by=BY)


def significance(s: PageSettings, rerank: pd.DataFrame, retrieved: pd.DataFrame,
                 names: Mapping[str, str]) -> pd.DataFrame:
    """Paired randomisation tests of MRR@10 across test questions, each student with against without the extra
    negatives, Holm-corrected per family (re-ranking, retrieval)."""
    def with_negatives(frame):
        return frame.assign(model=frame["model"] + "|" + frame["negatives"])

    named = {f"{m}|{neg}": f"{names[m]} ({neg})" for m in names for neg in negatives(s)}
    pairs = [(f"{SHORT[n]}|mined", f"{SHORT[n]}|none") for n in s.negative_losses]
    families = [("re-ranking", rerank)] + ([("retrieval", retrieved)] if len(retrieved) else [])
    return pd.concat([paired_tests(with_negatives(frame), "MRR@10", pairs, labels=named).assign(family=family)
                      for family, frame in families], ignore_index=True)


@dataclass(frozen=True)
class Negatives(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[tuple[str, str], Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    before: pd.DataFrame           # every model's per-question rows, before keeping the shared questions
    rerank_rows: pd.DataFrame      # the same on the questions every model re-ranked
    summary: pd.DataFrame
    retrieval_test: Any
    retrieval_rows: pd.DataFrame
    retrieval_summary: pd.DataFrame
    tests: pd.DataFrame
    wall: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "rerank": self.summary[[*BY, "value", "std", "n"]],
            "rerank_per_query": query_means(self.rerank_rows, by=BY),
            "retrieval": self.retrieval_summary[[*BY, "value", "std", "n"]],
            "retrieval_per_query": (query_means(self.retrieval_rows, by=BY) if len(self.retrieval_rows) else
                                    pd.DataFrame(columns=[*BY, "query_id", "value"])),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table (`wall_s`: the seconds it took)."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seed": s.seed, "seeds": s.seeds, "testbed": s.testbed,
                "negative_losses": s.negative_losses, "uniform_negatives": s.uniform_negatives,
                "retrieval": s.retrieval, "teacher": self.teacher.dir.name, "wall_s": round(self.wall)}

    def teacher_trained(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.round(4)

    def questions_compared(self) -> str:
        """How many test questions each model is compared on (one number when it is the same for all)."""
        return questions_compared(self.before, self.rerank_rows, self.labels)

    def rerank_table(self) -> pd.DataFrame:
        return self.summary.assign(model=self.summary["model"].map(self.labels)).pivot_table(
            index="model", columns=["metric", "negatives"], values="mean ± std", aggfunc="first", sort=False)

    def paper_rerank_table(self) -> pd.DataFrame:
        return (paper_table("de_table_12").pivot_table(index="label", columns="dataset", values="value", sort=False)
                [["none", "mined"]].rename_axis("paper (MS MARCO MRR@10)"))

    def negatives_figure(self) -> Figure:
        s = self.settings
        bars = seed_means(self.rerank_rows, by=BY).query("metric == 'MRR@10'")
        bars = bars.assign(dataset=bars["model"].map(self.labels), model=bars["negatives"])
        return plot_metric_bars(bars, "MRR@10", models=["none", "mined"],
                                title=f"{s.testbed} test MRR@10 without / with in-batch + {s.uniform_negatives} "
                                      f"uniform negatives ({s.profile})")

    def paper_figure(self) -> Figure:
        """The paper's Table 12 drawn like ours: a group per loss, a bar without / with the extra negatives."""
        paper = paper_table("de_table_12")
        paper = paper.assign(dataset=paper["model"].map(self.labels), model=paper["dataset"])
        return plot_metric_bars(paper, "MRR@10", models=["none", "mined"], ylabel="MRR@10",
                                title="The paper's Table 12 (MS MARCO dev re-ranking)")

    def retrieval_counted(self) -> str:
        """The questions and passages of full retrieval, or why it was skipped."""
        s = self.settings
        if self.retrieval_test is None:
            return f"full retrieval skipped (retrieval={s.retrieval}, testbed={s.testbed})"
        return f"{len(self.retrieval_test.queries)} test questions, {len(self.retrieval_test.corpus)} passages"

    def retrieval_table(self) -> pd.DataFrame | None:
        """Full retrieval of every student without / with, mean ± std over seeds (None: skipped)."""
        if self.retrieval_test is None:
            return None
        summary = self.retrieval_summary
        return summary.assign(model=summary["model"].map(self.labels)).pivot_table(
            index="model", columns=["metric", "negatives"], values="mean ± std", aggfunc="first", sort=False)

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Negatives:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    names = labels()
    teacher, runs = train(s)
    training = training_table(runs, names)
    before = rerank_rows(s, teacher, runs)
    shared = shared_queries(before)  # every model on the same questions
    summary = seed_summary(shared, by=BY)
    retrieval_test, retrieved, retrieval_summary = retrieval(s, runs)
    tests = significance(s, shared, retrieved, names)
    wall = time.perf_counter() - started
    page = Negatives(s, teacher, runs, names, training, before, shared, summary, retrieval_test, retrieved,
                     retrieval_summary, tests, wall, results_dir)
    page.publish(results_dir)
    return page
