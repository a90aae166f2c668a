"""The distilled-TASER page (beyond the papers): a cross-attention teacher distilled into TASER Det-R students (softmax
CE, M3SE, and one-hot on the same candidate groups as the control), beside the one-hot DPR and TASER of the retriever
trainer and the zero-shot start, on SQuAD-open re-ranking and retrieval.

    >>> page = run(settings("cpu"), results_dir="results/cpu/taser_distilled")
    >>> print(page.teacher_summary())      # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()            # the teacher's and every student's steps and dev nDCG@10
    >>> print(page.compared_questions())   # how many test questions every model is re-ranked on
    >>> page.rerank_table()              # test re-ranking metrics of every model, mean ± std over seeds
    >>> page.retrieval_table()           # retrieval over the whole test corpus, mean ± std over seeds
    >>> page.bars_figure()               # re-ranking MRR@10 and retrieval R@5 side by side
    >>> page.tests_table()               # paired randomisation tests over questions, Holm-corrected
    >>> page.claims()                    # the page's claims, with their verdicts
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query, summarise_seeds
from taser_lib.evaluation.query_sets import shared_queries
from taser_lib.models import load_encoder
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.training.distill import rerank_saved_model
from ..analyses.baselines import first_stage_runs, query_length
from ..plots import plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run, variant_run
from ..tables.rerank_tables import paired_tests
from ..tables.seeded import SeededModels, score_seeded_runs, score_seeded_runs_per_query
from .common import PageResult, distill_params, questions_compared, reranking_params, teacher_line

PAGE = "taser_distilled"
RETRIEVERS = ("dpr", "taser")  # the retriever trainer's one-hot references


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels(s: PageSettings) -> dict[str, str]:
    """{model name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"ca": "CA teacher", "zero-shot": "zero-shot", "dpr": "DPR (retriever trainer)",
            "taser": "TASER Det-R (retriever trainer)", **{n: variants[n].label for n in s.students}}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]], dict[str, dict[int, CachedRun]]]:
    """The CA teacher, {student: {seed: run}} and {one-hot retriever: {seed: run}} (trained, or read from the run
    cache)."""
    params = distill_params(s)
    teacher = reranking_run("ca", s.seed, params, progress=False)
    students = {n: {sd: reranking_run(n, sd, params, teacher=teacher, progress=False) for sd in s.seeds}
                for n in s.students}
    retrievers = {v: {sd: variant_run(v, sd, reranking_params(s), progress=False) for sd in s.seeds}
                  for v in RETRIEVERS}
    return teacher, students, retrievers


def training_table(s: PageSettings, names: Mapping[str, str], teacher: CachedRun,
                   students: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """The teacher's and each student's seed, steps and dev nDCG@10 (its selection metric)."""
    return pd.DataFrame(
        [{"model": names["ca"], "seed": s.seed, "steps": teacher.result["final_step"],
          "dev nDCG@10 (selection)": teacher.metric}]
        + [{"model": names[n], "seed": sd, "steps": r.result["final_step"], "dev nDCG@10 (selection)": r.metric}
           for n, by in students.items() for sd, r in by.items()])


def rerank_rows(s: PageSettings, teacher: CachedRun, students: Mapping[str, Mapping[int, CachedRun]],
                retrievers: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """Every model's re-ranking metrics per test question and seed, on the students' test questions (the teacher
    may have more): the CA's and the students' from their trainers, the zero-shot start's and the retrievers'
    scored here the same way."""
    first = students[s.students[0]][s.seeds[0]]
    test_set = first.config.data.load(progress=False)[first.config.data.test_split]
    lengths = dict(max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                   batch_size=s.eval_batch_size)
    rows = []

    def add(name, sd, values):
        for metric, by_query in values.items():
            rows.extend({"model": name, "seed": sd, "dataset": "squad-open", "split": "test", "metric": metric,
                         "query_id": q, "value": v} for q, v in by_query.items())

    add("ca", None, read_per_query(teacher.result["paths"]["test_per_query"]))
    add("zero-shot", None, rerank_saved_model(s.model, test_set, **lengths))
    for n, by in students.items():
        for sd, r in by.items():
            add(n, sd, read_per_query(r.result["paths"]["test_per_query"]))
    for v, by in retrievers.items():
        for sd, r in by.items():
            add(v, sd, rerank_saved_model(r.model_path, test_set, **lengths))
    return pd.DataFrame(rows)


def retrieval_tables(s: PageSettings, students: Mapping[str, Mapping[int, CachedRun]],
                     retrievers: Mapping[str, Mapping[int, CachedRun]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(R@K per model and seed, per question and seed) of retrieval over the whole SQuAD-open test corpus: the
    zero-shot start, every student and the one-hot retrievers."""
    test = load_evaluation_set("squad-open", "test", n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               data_dir=os.environ.get("TASER_DATA_DIR"), mirror=os.environ.get("TASER_DATA_MIRROR"))
    encoder_options = dict(device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                           max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)
    zero_shot = load_encoder(s.model, show_progress=False, **encoder_options)
    q_len = query_length(test, zero_shot, qa_cap=s.max_query_length)
    runs = {("zero-shot", None): first_stage_runs(test, zero_shot, k=max(s.top_k), query_length=q_len)["dense"]}
    models = SeededModels({**{n: {sd: r.model_path for sd, r in by.items()} for n, by in students.items()},
                           **{v: {sd: r.model_path for sd, r in by.items()} for v, by in retrievers.items()}},
                          **encoder_options)
    runs.update(models.runs(test, k=max(s.top_k), query_length=q_len))
    return (pd.DataFrame(score_seeded_runs(test, runs, s.top_k)),
            pd.DataFrame(score_seeded_runs_per_query(test, runs, average=False)))


def tested_pairs(s: PageSettings) -> list[tuple[str, str]]:
    """The pairs the page tests: each distilled student against the one-hot student, every student against TASER and
    DPR, the CA against the one-hot student."""
    return ([(n, "taser-one-hot") for n in s.students if n != "taser-one-hot"]
            + [(n, "taser") for n in s.students] + [(n, "dpr") for n in s.students] + [("ca", "taser-one-hot")])


@dataclass(frozen=True)
class TaserDistilled(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere);
    `wall_s`: the seconds from the start of the runs to the saving."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    students: Mapping[str, Mapping[int, CachedRun]]
    retrievers: Mapping[str, Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    rerank_rows: pd.DataFrame
    rerank_seeds: pd.DataFrame
    rerank_per_seed: pd.DataFrame
    rerank_summary: pd.DataFrame
    retrieval_seeds: pd.DataFrame
    retrieval_per_query_seeds: pd.DataFrame
    retrieval_summary: pd.DataFrame
    tests: pd.DataFrame
    wall_s: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        columns = ["model", "dataset", "split", "metric", "value", "std", "n"]
        by_query = ["model", "dataset", "split", "metric", "query_id"]
        return {
            "rerank": self.rerank_summary.rename(columns={"mean": "value"})[columns],
            "rerank_per_query": self.rerank_seeds.groupby(by_query, sort=False)["value"].mean().reset_index(),
            "retrieval": self.retrieval_summary.rename(columns={"mean": "value"})[columns],
            "retrieval_per_query": (self.retrieval_per_query_seeds.groupby(by_query, sort=False)["value"].mean()
                                    .reset_index()),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seeds": s.seeds, "seed": s.seed, "students": s.students,
                "top_k": s.top_k, "teacher": self.teacher.dir.name, "candidates": self.teacher.config.data.candidates,
                "wall_s": round(self.wall_s)}

    def teacher_summary(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.round(4)

    def compared_questions(self) -> str:
        """On how many test questions the models are re-ranked (the same for all, or each model's count)."""
        return questions_compared(self.rerank_rows, self.rerank_seeds, self.labels)

    def rerank_table(self) -> pd.DataFrame:
        summary = self.rerank_summary
        return summary.assign(model=summary["model"].map(self.labels)).pivot_table(
            index="model", columns="metric", values="mean ± std", aggfunc="first", sort=False)

    def retrieval_table(self) -> pd.DataFrame:
        summary = self.retrieval_summary
        return summary.assign(model=summary["model"].map(self.labels)).pivot_table(
            index="model", columns="metric", values="mean ± std", aggfunc="first", sort=False)

    def bars_figure(self) -> Figure:
        s = self.settings
        both = pd.concat([self.rerank_per_seed.query("metric == 'MRR@10'").assign(
                              dataset="re-ranking", value=lambda f: 100 * f["value"]),
                          self.retrieval_seeds.query("metric == 'R@5'").assign(dataset="retrieval")])
        both["model"] = both["model"].map(self.labels)
        return plot_metric_bars(both, {"re-ranking": "MRR@10", "retrieval": "R@5"},
                                models=[self.labels[m] for m in ["zero-shot", *RETRIEVERS, *s.students, "ca"]],
                                ylabel="MRR@10 (×100) / R@5 (%)",
                                title=f"SQuAD-open test: re-ranking MRR@10 (x100) and retrieval R@5 ({s.profile} "
                                      f"profile)")

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> TaserDistilled:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    names = labels(s)
    teacher, students, retrievers = train(s)
    training = training_table(s, names, teacher, students)
    rows = rerank_rows(s, teacher, students, retrievers)
    rerank_seeds = shared_queries(rows)  # every model on the same questions
    per_seed = (rerank_seeds.groupby(["model", "seed", "dataset", "split", "metric"], dropna=False, sort=False)["value"]
                .mean().reset_index())
    rerank_summary = summarise_seeds(per_seed, by=["model", "dataset", "split", "metric"], digits=3)
    retrieval_seeds, retrieval_per_query_seeds = retrieval_tables(s, students, retrievers)
    retrieval_summary = summarise_seeds(retrieval_seeds, by=["model", "dataset", "split", "metric"], digits=1)
    pairs = tested_pairs(s)
    tests = pd.concat([paired_tests(rerank_seeds, "MRR@10", pairs, labels=names),
                       paired_tests(retrieval_per_query_seeds, "R@20", pairs, labels=names)], ignore_index=True)
    page = TaserDistilled(s, teacher, students, retrievers, names, training, rows, rerank_seeds, per_seed,
                          rerank_summary, retrieval_seeds, retrieval_per_query_seeds, retrieval_summary, tests,
                          wall_s=time.perf_counter() - started, results_dir=results_dir)
    page.publish(results_dir)
    return page
