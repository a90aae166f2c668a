"""The normalised-margins page (Figure 2 right, Figure 8 of "In defense of dual-encoders"): the CA teacher, the one-hot
DE and the distilled DEs, their re-ranking and the margins between each question's positive and negative scores.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_margins")
    >>> page.premise()             # does the CA lead the one-hot DE here, as in the paper?
    >>> page.rerank_table()        # test MRR@10 of every model, mean ± std over seeds
    >>> page.margin_figure()       # Figures 2 (right) and 8: normalised margins on shared axes
    >>> page.scores_table()        # median and mean margin, share of negative margins
    >>> page.hardest_figure()      # the same with each question's hardest negative
    >>> page.definitions_table()   # the median margin under each definition of the pairs and the range
    >>> page.tests_table()         # paired randomisation tests over questions, Holm-corrected
    >>> page.claims()              # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import compare_systems, read_per_query, summarise_seeds
from taser_lib.training.distill import rerank_saved_model
from ..analyses.scores import normalised_margins, per_query_statistics, score_frame, score_statistics
from ..plots import plot_margin_histograms
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.scoring import run_scores
from ..tables.rerank_tables import per_query_rows, query_means
from ..tables.seeded import seed_sources
from ..tables.wide import labelled
from .common import PageResult, reinit_params, start_model

PAGE = "de_margins"
MARGIN_STATISTICS = ("median_margin", "mean_margin", "negative_margin_share")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels(s: PageSettings) -> dict[str, str]:
    """{run name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"ca": "CA", "zero-shot": "DE zero-shot (untrained)", "de-one-hot": "DE (one-hot)",
            "de-m3se": "DIST (M3SE)", "de-softmax-ce": "DIST (softmax CE)",
            **{n: variants[n].label for n in s.students if n not in ("de-one-hot", "de-m3se", "de-softmax-ce")}}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]]]:
    """The CA teacher and {student: {seed: run}} (trained, or read from the run cache)."""
    params = reinit_params(s)
    on_testbed = [] if s.testbed == "squad-open" else [changes.data(dataset=s.testbed)]
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {n: {sd: reranking_run(n, sd, params, teacher=teacher, changes=on_testbed, progress=False)
                for sd in s.seeds} for n in s.students}
    return teacher, runs


def training_table(s: PageSettings, teacher: CachedRun, runs: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """Each run's steps and the step it selected on dev."""
    return pd.DataFrame([{"model": "ca", "seed": s.seed, "steps": teacher.result["final_step"],
                          "selected step": teacher.result.get("best_step")}]
                        + [{"model": n, "seed": sd, "steps": r.result["final_step"],
                            "selected step": r.result.get("best_step")}
                           for n, by in runs.items() for sd, r in by.items()])


def rerank_tables(s: PageSettings, teacher: CachedRun,
                  runs: Mapping[str, Mapping[int, CachedRun]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(mean ± std over seeds, per question) of test MRR@10 of every run and of the students' starting checkpoint, on
    the questions all of them re-ranked (a teacher trained on more questions re-ranks more)."""
    per_run = [("ca", s.seed, teacher)] + [(n, sd, r) for n, by in runs.items() for sd, r in by.items()]
    values = {(m, sd): read_per_query(r.result["paths"]["test_per_query"])["MRR@10"] for m, sd, r in per_run}
    first = next(iter(next(iter(runs.values())).values()))
    students_test = first.config.data.load(progress=False)[first.config.data.test_split]
    values["zero-shot", s.seed] = rerank_saved_model(start_model(s), students_test,
                                                     max_query_length=s.max_query_length,
                                                     max_passage_length=s.max_passage_length,
                                                     batch_size=s.eval_batch_size)["MRR@10"]
    shared = set.intersection(*(set(v) for v in values.values()))
    rows = pd.DataFrame([row for (m, sd), v in values.items()
                         for row in per_query_rows(m, {"MRR@10": {q: v[q] for q in shared}}, seed=sd, split="test")])
    per_query = query_means(rows, by=("model", "split", "metric"))
    rerank = rows.groupby(["model", "seed", "split", "metric"], sort=False)["value"].mean().reset_index()
    return summarise_seeds(rerank, by=["model", "split", "metric"], digits=3), per_query


def scored_frame(s: PageSettings, teacher: CachedRun, runs: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """Every model's scores of every candidate of `n_scored` test questions (a seeded sample), one row each."""
    test_set = teacher.config.data.load(progress=False)[teacher.config.data.test_split]
    test = test_set.sample(s.n_scored, s.seed)
    return pd.concat([score_frame(test, run_scores(teacher, test), "ca").assign(seed=s.seed)]
                     + [score_frame(test, run_scores(r, test), n).assign(seed=sd) for n, by in runs.items()
                        for sd, r in by.items()], ignore_index=True)


def margin_statistics(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and mean normalised margin and the share of negative margins, per model, mean ± std over seeds."""
    per_seed = score_statistics(frame, by=("model", "seed")).assign(split="test")
    return summarise_seeds(per_seed[per_seed["statistic"].isin(list(MARGIN_STATISTICS))],
                           by=["model", "split", "statistic"], digits=3)


def margin_definitions(frame: pd.DataFrame) -> pd.DataFrame:
    """The median margin per model under each definition: all pairs or the hardest negative, on the model's global
    range or each question's, mean ± std over seeds."""
    definitions = pd.concat([
        score_statistics(frame, by=("model", "seed"), pairs=pairs, scale=scale)
        .query("statistic == 'median_margin'").assign(pairs=pairs, scale=scale)
        for pairs in ("all", "hardest") for scale in ("global", "query")], ignore_index=True)
    return summarise_seeds(definitions, by=["model", "pairs", "scale"], digits=3)


def margin_tests(s: PageSettings, per_query: pd.DataFrame, names: Mapping[str, str]) -> pd.DataFrame:
    """Paired randomisation tests across questions of the per-question median margin (averaged over seeds): every
    student against the CA and every distilled student against the one-hot DE, Holm-corrected."""
    pairs = [(n, "ca") for n in s.students] + [(n, "de-one-hot") for n in s.students if n != "de-one-hot"]
    systems = seed_sources(per_query.rename(columns={"statistic": "metric"}), metric="median_margin")
    return pd.DataFrame([{"a": names[c.label_a], "b": names[c.label_b], "a − b": round(c.difference, 4),
                          "p (randomisation)": round(c.randomisation.p_value, 4), "p (Holm)": round(c.p_adjusted, 4),
                          "questions": c.n_queries}
                         for c in compare_systems(systems, "median_margin",
                                                  pairs=[p for p in pairs if set(p) <= set(systems)])])


@dataclass(frozen=True)
class Margins(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[str, Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    rerank: pd.DataFrame
    rerank_per_query: pd.DataFrame
    frame: pd.DataFrame
    margins: pd.DataFrame
    hardest: pd.DataFrame
    scores: pd.DataFrame
    definitions: pd.DataFrame
    per_query: pd.DataFrame
    tests: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        margins_per_query = (self.per_query.groupby(["model", "statistic", "query_id"], sort=False)["value"].mean()
                             .reset_index().assign(split="test"))[["model", "split", "statistic", "query_id", "value"]]
        return {
            "scores": self.scores.rename(columns={"mean": "value"})[["model", "split", "statistic", "value", "std",
                                                                      "n"]],
            "margins_per_query": margins_per_query,
            "margin_definitions": self.definitions.rename(columns={"mean": "value"})[["model", "pairs", "scale",
                                                                                       "value", "std", "n"]],
            "significance": self.tests,
            "rerank": self.rerank.rename(columns={"mean": "value"})[["model", "split", "metric", "value", "std", "n"]],
            "rerank_per_query": self.rerank_per_query[["model", "split", "metric", "query_id", "value", "seeds"]],
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**reinit_params(s), "model": s.model, "cross_encoder_model": s.cross_encoder_model,
                "reinit_layers": s.reinit_layers, "profile": s.profile, "seed": s.seed, "seeds": s.seeds,
                "testbed": s.testbed, "n_scored": s.n_scored, "students": s.students, "teacher": self.teacher.dir.name}

    def premise(self) -> str:
        """Whether the CA leads the one-hot DE on the test questions here, as in the paper."""
        mrr = self.rerank.set_index("model")["mean"]
        if "de-one-hot" not in mrr:
            return "The one-hot DE is not among this page's students: the premise is not measured here."
        leads = ("leads, as in the paper." if mrr["ca"] > mrr["de-one-hot"] else
                 "does NOT lead here, unlike the paper: the margins below describe these models, not a gap that "
                 "distillation closes.")
        return (f"On {self.settings.testbed} test the CA re-ranks with MRR@10 {mrr['ca']:.3f} and the one-hot DE with "
                f"{mrr['de-one-hot']:.3f}: the CA {leads}")

    def rerank_table(self) -> pd.DataFrame:
        return self.rerank.assign(model=self.rerank["model"].map(self.labels))[["model", "split", "metric",
                                                                                 "mean ± std", "n"]]

    def margin_figure(self) -> Figure:
        s = self.settings
        return plot_margin_histograms(self.margins.assign(model=lambda f: f["model"].map(self.labels)),
                                      value_range=(-1.0, 1.0),
                                      title=f"Normalised margins, test ({s.testbed}, {s.profile} profile; paper: "
                                            f"Figures 2 right, 8)")

    def pairs_counted(self) -> str:
        """How many questions and (positive, negative) pairs per model and seed the margins come from."""
        s = self.settings
        return (f"{self.frame['query_id'].nunique()} test questions, "
                f"{len(self.margins) // (1 + len(s.students) * len(s.seeds))} (positive, negative) pairs per model "
                f"and seed")

    def scores_table(self) -> pd.DataFrame:
        return self.scores.assign(model=lambda f: f["model"].map(self.labels)).pivot_table(
            index="statistic", columns="model", values="mean ± std", aggfunc="first", sort=False)

    def hardest_figure(self) -> Figure:
        s = self.settings
        return plot_margin_histograms(labelled(self.hardest, self.labels), value_range=(-1.0, 1.0),
                                      title=f"Normalised margins to the hardest negative ({s.testbed}, {s.profile} "
                                            f"profile)")

    def definitions_table(self) -> pd.DataFrame:
        return self.definitions.assign(model=lambda f: f["model"].map(self.labels)).pivot_table(
            index=["pairs", "scale"], columns="model", values="mean ± std", aggfunc="first", sort=False)

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Margins:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    names = labels(s)
    teacher, runs = train(s)
    training = training_table(s, teacher, runs)
    rerank, rerank_per_query = rerank_tables(s, teacher, runs)
    frame = scored_frame(s, teacher, runs)
    per_query = per_query_statistics(frame, by=("model", "seed"), statistics=("median_margin",))
    page = Margins(s, teacher, runs, names, training, rerank, rerank_per_query, frame,
                   margins=normalised_margins(frame, by=("model", "seed")),
                   hardest=normalised_margins(frame, by=("model", "seed"), pairs="hardest"),
                   scores=margin_statistics(frame), definitions=margin_definitions(frame), per_query=per_query,
                   tests=margin_tests(s, per_query, names), results_dir=results_dir)
    page.publish(results_dir)
    return page
