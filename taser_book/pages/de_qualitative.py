"""The qualitative page (Tables 3, 10 and 11 of "In defense of dual-encoders"): the test pairs the CA scores low and
the one-hot DE high, with tests of the paper's two observations about them, and two distilled students' top-5 lists
side by side on the questions where their MRR@10 differs most.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_qualitative")
    >>> print(page.teacher_summary())   # the CA teacher's steps and dev nDCG@10
    >>> page.overview_table()         # test MRR@10 of every model
    >>> print(page.scored_counts())   # how many questions and pairs were scored, shown and tested
    >>> page.disagreements_table()    # Table 3: the pairs the CA scores low and the DE high
    >>> page.summary_table()          # the tests of "most are not relevant" and "high token overlap"
    >>> page.scatter_figure()         # the DE's normalised score against the CA's, every pair
    >>> print(page.agreement())       # on how many questions the two students agree, and whom the others favour
    >>> page.side_by_side()           # Tables 10 and 11: the students' top-5 lists side by side
    >>> page.claims()                 # the paper's observations beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query
from taser_lib.models import default_device
from taser_lib.training.cross_encoder import score_reranking_set
from taser_lib.training.distill import score_dual_encoder
from ..analyses.disagreement import (agreement_counts, disagreeing_queries, disagreement_per_query,
                                     disagreement_summary, disagreements, top_k_side_by_side, with_text)
from ..analyses.scores import score_frames
from ..plots.disagreement import plot_disagreement_scatter
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.students import testbed_changes
from ..tables.disagreement import summary_table
from .common import PageResult, reinit_params, teacher_line

PAGE = "de_qualitative"
TABLE_3 = ["query", "passage", "label", "CA (0-1)", "DE (0-1)", "discrepancy"]


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    s = page_settings(PAGE, profile, overrides)
    if len(s.students) != 2:
        raise ValueError(f"students names the two students shown side by side, got {s.students}")
    return s


def lengths(s: PageSettings) -> dict[str, int]:
    """The scoring lengths and batch size a DE scores with."""
    return dict(max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                batch_size=s.eval_batch_size)


def labels(s: PageSettings) -> dict[str, str]:
    """{student: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {n: variants[n].label for n in {s.de_student, *s.students}}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, CachedRun]]:
    """The CA teacher and {student: run} of the one-hot DE and the two students (trained, or read from the run
    cache)."""
    params = reinit_params(s)
    on_testbed = testbed_changes(s.testbed)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {n: reranking_run(n, s.seed, params, teacher=teacher, changes=on_testbed, progress=False)
            for n in dict.fromkeys([s.de_student, *s.students])}
    return teacher, runs


def training_table(teacher: CachedRun, runs: Mapping[str, CachedRun]) -> pd.DataFrame:
    """Each run's steps and the step it selected on dev."""
    return pd.DataFrame([{"model": name, "steps": r.result["final_step"], "selected step": r.result.get("best_step")}
                         for name, r in {"ca": teacher, **runs}.items()])


def mrr_per_question(teacher: CachedRun, runs: Mapping[str, CachedRun]) -> dict[str, dict[str, float]]:
    """{model: {test question: MRR@10}} of the CA and every student, from their trainers' `test_per_query.csv`."""
    return {"ca": read_per_query(teacher.result["paths"]["test_per_query"])["MRR@10"],
            **{n: read_per_query(r.result["paths"]["test_per_query"])["MRR@10"] for n, r in runs.items()}}


def overview_table(names: Mapping[str, str], per_query: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Every model's test MRR@10 and the number of questions it is the mean of."""
    return pd.DataFrame([{"model": "CA teacher" if n == "ca" else names[n], "test MRR@10": sum(v.values()) / len(v),
                          "questions": len(v)} for n, v in per_query.items()])


def scored_frame(s: PageSettings, teacher: CachedRun, runs: Mapping[str, CachedRun], scored: Any) -> pd.DataFrame:
    """The CA's and the one-hot DE's scores of every candidate of the `scored` questions, one row per model and
    pair."""
    ca_scores = score_reranking_set(teacher.load().to(default_device()).eval(), teacher.tokenizer(), scored,
                                    max_length=teacher.config.training.max_length, batch_size=s.eval_batch_size,
                                    progress=False)
    de = runs[s.de_student]
    de_scores = score_dual_encoder(de.load().to(default_device()).eval(), de.tokenizer(), scored, **lengths(s))
    return score_frames(scored, {"CA": ca_scores, "DE": de_scores})


def shown_questions(s: PageSettings, per_query: Mapping[str, Mapping[str, float]]) -> tuple[list[str], bool]:
    """(the questions where the two students' MRR@10 differs most, `n_shown` favouring each; whether none did and
    the first `n_shown` questions stand in)."""
    a, b = s.students
    shown = (disagreeing_queries(per_query[a], per_query[b], s.n_shown, favour="a")
             + disagreeing_queries(per_query[a], per_query[b], s.n_shown, favour="b"))
    if not shown:  # the two rank every question alike: show the first questions anyway
        return sorted(per_query[a])[:s.n_shown], True
    return shown, False


def side_by_side(s: PageSettings, names: Mapping[str, str], runs: Mapping[str, CachedRun], test_set: Any,
                 per_query: Mapping[str, Mapping[str, float]], shown: list[str]) -> pd.DataFrame:
    """The two students' top-`top` passages of each shown question side by side, with each student's MRR@10 on
    it."""
    subset = test_set.subset(shown)
    side = top_k_side_by_side(subset, {names[n]: score_dual_encoder(runs[n].load().to(default_device()).eval(),
                                                                     runs[n].tokenizer(), subset, **lengths(s))
                                       for n in s.students}, shown, k=s.top, width=s.passage_width)
    qid_of = {subset.queries[q].text: q for q in shown}
    for n in s.students:
        side[f"MRR@10 {names[n]}"] = [round(per_query[n][qid_of[text]], 3) for text in side["query"]]
    return side


@dataclass(frozen=True)
class Qualitative(PageResult):
    """The page's result: its settings, runs, scored pairs and tables (`results_dir`: where they were saved; None:
    nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[str, CachedRun]
    labels: Mapping[str, str]
    training: pd.DataFrame
    per_query: Mapping[str, Mapping[str, float]]
    overview: pd.DataFrame
    scored: Any
    frame: pd.DataFrame
    tested: pd.DataFrame
    pairs: pd.DataFrame
    summary: pd.DataFrame
    summary_per_query: pd.DataFrame
    table_3: pd.DataFrame
    counts: Mapping[str, Any]
    fallback: bool
    side: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        a, b = self.settings.students
        return {
            "disagreements": self.table_3,
            "disagreement_summary": self.summary,
            "disagreement_per_query": self.summary_per_query,
            "agreement": pd.DataFrame([{"a": a, "b": b, **self.counts}]),
            "top_k": self.side,
            "overview": self.overview,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**reinit_params(s), "model": s.model, "cross_encoder_model": s.cross_encoder_model,
                "reinit_layers": s.reinit_layers, "profile": s.profile, "seed": s.seed, "testbed": s.testbed,
                "de_student": s.de_student, "students": s.students, "n_scored": s.n_scored, "n_pairs": s.n_pairs,
                "n_tested": s.n_tested, "n_shown": s.n_shown, "top": s.top, "teacher": self.teacher.dir.name}

    def teacher_summary(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def overview_table(self) -> pd.DataFrame:
        return self.overview.round(3)

    def scored_counts(self) -> str:
        """How many test questions and pairs both models scored, and how many pairs are shown and tested."""
        return (f"{len(self.scored)} test questions, {len(self.frame) // 2} (question, candidate) pairs scored by "
                f"both; the top {len(self.pairs)} shown, the top {len(self.tested)} tested")

    def disagreements_table(self) -> pd.DataFrame:
        return self.table_3[TABLE_3].round(3)

    def summary_table(self) -> pd.DataFrame:
        return summary_table(self.summary)

    def scatter_figure(self) -> Figure:
        s = self.settings
        return plot_disagreement_scatter(self.frame, "CA", "DE", pairs=self.pairs,
                                         title=f"{s.testbed} test pairs: CA vs {self.labels[s.de_student]} "
                                               f"({s.profile} profile)")

    def agreement(self) -> str:
        """On how many test questions the two students' MRR@10 agree and whom the others favour (and, when none
        tells them apart, that the first questions are shown)."""
        a, b = self.settings.students
        counts, names = self.counts, self.labels
        text = (f"{names[a]} vs {names[b]} over {counts['queries']} test questions: they agree on {counts['agree']}, "
                f"{counts['favour a']} favour {names[a]}, {counts['favour b']} favour {names[b]}")
        if self.fallback:
            text += "\nno question tells the two students apart at this profile; showing the first questions"
        return text

    def side_by_side(self) -> pd.DataFrame:
        return self.side.set_index(["query", "rank"])


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Qualitative:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so). Pandas shows whole cells from then on (the tables'
    passages)."""
    pd.set_option("display.max_colwidth", None)
    names = labels(s)
    teacher, runs = train(s)
    training = training_table(teacher, runs)
    test_set = teacher.config.data.load(progress=False)[teacher.config.data.test_split]
    per_query = mrr_per_question(teacher, runs)
    overview = overview_table(names, per_query)
    scored = test_set.sample(s.n_scored, s.seed)
    frame = scored_frame(s, teacher, runs, scored)
    tested = disagreements(frame, low="CA", high="DE", n=max(s.n_tested, s.n_pairs))
    pairs = tested.head(s.n_pairs)
    summary = disagreement_summary(frame, tested, scored)
    summary_per_query = disagreement_per_query(frame, tested, scored)
    table_3 = with_text(pairs, scored, width=s.passage_width)
    a, b = s.students
    counts = agreement_counts(per_query[a], per_query[b])
    shown, fallback = shown_questions(s, per_query)
    side = side_by_side(s, names, runs, test_set, per_query, shown)
    page = Qualitative(s, teacher, runs, names, training, per_query, overview, scored, frame, tested, pairs, summary,
                       summary_per_query, table_3, counts, fallback, side, results_dir=results_dir)
    page.publish(results_dir)
    return page
