"""The score-distributions page (Figures 2, 5, 6 and 7 of "In defense of dual-encoders"): the CA teacher, the one-hot
DE and the softmax-CE distilled DE, the scores each gives positive and negative pairs, how diffuse its negatives
are, and the same at initialisation, early in training and at the end.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_score_distributions")
    >>> print(page.teacher_summary())   # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()         # every run's stage, steps, selected step and dev nDCG@10
    >>> print(page.premise())         # does the CA lead the one-hot DE here, as in the paper?
    >>> page.rerank_table()           # test MRR@10 of every model, mean ± std over seeds
    >>> print(page.scored_counts())   # how many questions and candidates the figures score
    >>> page.test_figure()            # Figure 2: test scores, centred, on one shared axis
    >>> page.train_figure()           # Figure 5: the same on training questions
    >>> page.uncentred_figure()       # Figure 6: test scores, uncentred
    >>> page.ranges_table()           # each model's lowest, mean and highest score and its range
    >>> page.spread_table()           # the spread of the negatives, mean ± std over seeds
    >>> page.statistics_table()       # overlap and where the scores sit, mean ± std over seeds
    >>> page.stages_figure()          # Figure 7: at initialisation, early and at the end
    >>> page.stages_table()           # the stages' spread, overlap, mean score / range and MRR@10
    >>> page.claims()                 # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query, rerank_metrics, summarise_seeds
from ..analyses.diffuseness import bootstrap_statistics, per_query_spread, spread_statistics
from ..analyses.scores import per_query_statistics, score_frame, score_statistics
from ..plots import plot_score_densities
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import reranking_run
from ..runs.scoring import STAGES, run_scores, stage_runs, stage_scores
from ..tables.wide import labelled, score_ranges
from .common import PageResult, reinit_params, teacher_line

PAGE = "de_score_distributions"
RECIPES = {"de-one-hot": "DE (one-hot)", "de-softmax-ce": "DIST (softmax CE)"}
LABELS = {"ca": "CA", **RECIPES}
KEPT_STATISTICS = ("overlap_within", "mean_score", "score_range", "mean_score_rho", "baseline_shift_rho")
STAGE_STATISTICS = ("negative_spread", "overlap", "mean_score_rho")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def figure_seed(s: PageSettings) -> int:
    """The students' seed the figures show: the first of `seeds`."""
    return s.seeds[0]


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]], dict[str, dict[str, CachedRun]]]:
    """The CA teacher, {student: {seed: run}} and {model: {stage: run}} of Figure 7 (init, early, final; the DEs'
    at `figure_seed`, sharing one init run), trained or read from the run cache."""
    params = reinit_params(s)
    on_testbed = [] if s.testbed == "squad-open" else [changes.data(dataset=s.testbed)]
    seed = figure_seed(s)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    students = {name: {sd: reranking_run(name, sd, params, teacher=teacher, changes=on_testbed,
                                         progress=False) for sd in s.seeds} for name in RECIPES}
    stages = {"ca": stage_runs("ca", s.seed, params, teacher, early_fraction=s.early_fraction, changes=on_testbed)}
    stages["de-one-hot"] = stage_runs("de-one-hot", seed, params, students["de-one-hot"][seed],
                                      early_fraction=s.early_fraction, teacher=teacher, changes=on_testbed)
    stages["de-softmax-ce"] = stage_runs("de-softmax-ce", seed, params, students["de-softmax-ce"][seed],
                                         early_fraction=s.early_fraction, teacher=teacher, changes=on_testbed,
                                         init=stages["de-one-hot"]["init"])
    return teacher, students, stages


def training_table(s: PageSettings, students: Mapping[str, Mapping[int, CachedRun]],
                   stages: Mapping[str, Mapping[str, CachedRun]]) -> pd.DataFrame:
    """Each run's model, stage, seed, steps, selected step and dev nDCG@10 (its selection metric): the stages'
    runs, then the students' final runs at the other seeds."""
    seed = figure_seed(s)
    return pd.DataFrame(
        [{"model": LABELS[m], "stage": st, "seed": r.seed, "steps": r.result["final_step"],
          "selected step": r.result.get("best_step"), "dev nDCG@10 (selection)": r.metric}
         for m, by_stage in stages.items() for st, r in by_stage.items()]
        + [{"model": LABELS[m], "stage": "final", "seed": sd, "steps": r.result["final_step"],
            "selected step": r.result.get("best_step"), "dev nDCG@10 (selection)": r.metric}
           for m, by_seed in students.items() for sd, r in by_seed.items() if sd != seed])


def mean_mrr(run: CachedRun) -> float:
    """The run's MRR@10 over its whole test split (the mean of its `test_per_query.csv`)."""
    return float(np.mean(list(read_per_query(run.result["paths"]["test_per_query"])["MRR@10"].values())))


def rerank_table(s: PageSettings, teacher: CachedRun, students: Mapping[str, Mapping[int, CachedRun]]) -> pd.DataFrame:
    """Test MRR@10 of the CA and every student, mean ± std over seeds."""
    rerank = pd.DataFrame([{"model": "ca", "seed": s.seed, "value": mean_mrr(teacher)}]
                          + [{"model": m, "seed": sd, "value": mean_mrr(r)} for m, by in students.items()
                             for sd, r in by.items()]).assign(metric="MRR@10", split="test")
    return summarise_seeds(rerank, by=["model", "split", "metric"], digits=3)


def scored_sets(s: PageSettings, students: Mapping[str, Mapping[int, CachedRun]]) -> dict[str, Any]:
    """{"test", "train": a seeded sample of `n_scored` of the students' questions of that split} (the teacher may
    train on more)."""
    reference = next(iter(students.values()))[s.seeds[0]]
    sets = reference.config.data.load(progress=False)
    full = {"test": sets[reference.config.data.test_split], "train": sets[reference.config.data.train_split]}
    return {split: rset.sample(s.n_scored, s.seed) for split, rset in full.items()}


def scored_frame(s: PageSettings, teacher: CachedRun, students: Mapping[str, Mapping[int, CachedRun]],
                 scored: Mapping[str, Any]) -> pd.DataFrame:
    """Every model's scores of every candidate of the scored questions of both splits, one row each."""
    parts = []
    for split, rset in scored.items():
        parts.append(score_frame(rset, run_scores(teacher, rset), "ca").assign(split=split, seed=s.seed))
        parts += [score_frame(rset, run_scores(r, rset), m).assign(split=split, seed=sd)
                  for m, by in students.items() for sd, r in by.items()]
    return pd.concat(parts, ignore_index=True)


def with_seed(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The rows of the CA (trained once) and of the students at `seed`."""
    return frame[(frame["model"] == "ca") | (frame["seed"] == seed)]


def spread_per_seed(s: PageSettings, frame: pd.DataFrame) -> pd.DataFrame:
    """The spread statistics of the negatives per model, split and seed (the teacher with that seed's students)."""
    return pd.concat([spread_statistics(with_seed(frame, sd), by=("model", "split")).assign(seed=sd)
                      for sd in s.seeds], ignore_index=True)


def scores_per_seed(s: PageSettings, frame: pd.DataFrame) -> pd.DataFrame:
    """The score statistics per model, split and seed, the baseline shift against the CA."""
    return pd.concat([score_statistics(with_seed(frame, sd), by=("model", "split"), reference="ca").assign(seed=sd)
                      for sd in s.seeds], ignore_index=True)


def stage_frame(stages: Mapping[str, Mapping[str, CachedRun]], test: Any) -> pd.DataFrame:
    """Every stage's scores of every candidate of the scored test questions, one row each."""
    return pd.concat([score_frame(test, sc, m).assign(stage=st) for m, by_stage in stages.items()
                      for st, sc in stage_scores(by_stage, test).items()], ignore_index=True)


def stage_table(stages: Mapping[str, Mapping[str, CachedRun]], test: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """Per model and stage: the negatives' spread, the overlap, the mean score / range and MRR@10."""
    stage_stats = score_statistics(frame, by=("model", "stage"))
    stage_mrr = pd.DataFrame([{"model": m, "stage": st, "statistic": "MRR@10",
                               "value": rerank_metrics(test, sc, ("MRR@10",))["MRR@10"]}
                              for m, by_stage in stages.items() for st, sc in stage_scores(by_stage, test).items()])
    return pd.concat([stage_stats[stage_stats["statistic"].isin(list(STAGE_STATISTICS))],
                      stage_mrr], ignore_index=True)


@dataclass(frozen=True)
class ScoreDistributions(PageResult):
    """The page's result: its settings, runs, scored questions and tables (`results_dir`: where they were saved;
    None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    students: Mapping[str, Mapping[int, CachedRun]]
    stages: Mapping[str, Mapping[str, CachedRun]]
    training: pd.DataFrame
    rerank: pd.DataFrame
    scored: Mapping[str, Any]
    frame: pd.DataFrame
    spread_per_seed: pd.DataFrame
    spread: pd.DataFrame
    scores_per_seed: pd.DataFrame
    stats: pd.DataFrame
    stage_frame: pd.DataFrame
    stage_table: pd.DataFrame
    scores_per_query: pd.DataFrame
    stages_per_query: pd.DataFrame
    stages_spread: pd.DataFrame
    stages_spread_per_query: pd.DataFrame
    spread_per_query: pd.DataFrame
    spread_bootstrap: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "scores": self.stats.rename(columns={"mean": "value"})[["model", "split", "statistic", "value", "std",
                                                                     "n"]],
            "scores_per_seed": self.scores_per_seed,
            "scores_per_query": self.scores_per_query,
            "stages": self.stage_table,
            "stages_per_query": self.stages_per_query,
            "spread": self.spread.rename(columns={"mean": "value"})[["model", "split", "statistic", "value", "std",
                                                                      "n"]],
            "spread_per_seed": self.spread_per_seed,
            "spread_per_query": self.spread_per_query,
            "spread_bootstrap": self.spread_bootstrap,
            "stages_spread": self.stages_spread,
            "stages_spread_per_query": self.stages_spread_per_query,
            "rerank": self.rerank.rename(columns={"mean": "value"})[["model", "split", "metric", "value", "std", "n"]],
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**reinit_params(s), "model": s.model, "cross_encoder_model": s.cross_encoder_model,
                "reinit_layers": s.reinit_layers, "profile": s.profile, "seed": s.seed, "seeds": s.seeds,
                "testbed": s.testbed, "n_scored": s.n_scored, "early_fraction": s.early_fraction,
                "teacher": self.teacher.dir.name,
                "stage_steps": {m: {st: r.result["final_step"] for st, r in by.items()}
                                for m, by in self.stages.items()}}

    def teacher_summary(self) -> str:
        """The CA teacher's training steps and dev nDCG@10."""
        return teacher_line(self.teacher)

    def training_table(self) -> pd.DataFrame:
        return self.training.round(4)

    def premise(self) -> str:
        """Whether the CA leads the one-hot DE on the test questions here, as in the paper."""
        mrr = self.rerank.set_index("model")["mean"]
        return (f"On {self.settings.testbed} test, the CA re-ranks with MRR@10 {mrr['ca']:.3f}, the one-hot DE with "
                f"{mrr['de-one-hot']:.3f} and DIST with {mrr['de-softmax-ce']:.3f}: the CA "
                + ("leads the DE, as in the paper." if mrr["ca"] > mrr["de-one-hot"] else
                   "does NOT lead the DE here, unlike the paper; the shapes below describe these models, not a gap "
                   "the CA closes."))

    def rerank_table(self) -> pd.DataFrame:
        return self.rerank.assign(model=self.rerank["model"].map(LABELS))[["model", "split", "metric", "mean ± std",
                                                                           "n"]]

    def scored_counts(self) -> str:
        """How many questions and candidates of each split the figures score."""
        return "; ".join(f"{split}: {len(r)} questions, {sum(len(c) for c in r.candidates.values())} candidates"
                         for split, r in self.scored.items())

    def shown(self, split: str) -> pd.DataFrame:
        """The scores the figures show on `split`: the CA's and the students' at `figure_seed`, labelled."""
        shown = labelled(with_seed(self.frame, figure_seed(self.settings)), LABELS)
        return shown[shown["split"] == split]

    def test_figure(self) -> Figure:
        s = self.settings
        return plot_score_densities(self.shown("test"), kde=True, sharex=True,
                                    title=f"Test scores, centred ({s.testbed}, {s.profile} profile; paper: Figure 2)")

    def train_figure(self) -> Figure:
        s = self.settings
        return plot_score_densities(self.shown("train"), kde=True, sharex=True,
                                    title=f"Training scores, centred ({s.testbed}, {s.profile} profile; paper: "
                                          f"Figure 5)")

    def uncentred_figure(self) -> Figure:
        s = self.settings
        return plot_score_densities(self.shown("test"), centred=False,
                                    title=f"Test scores, uncentred ({s.testbed}, {s.profile} profile; paper: "
                                          f"Figure 6)")

    def ranges_table(self) -> pd.DataFrame:
        return score_ranges(self.shown("test"))

    def spread_table(self) -> pd.DataFrame:
        return self.spread.assign(model=lambda f: f["model"].map(LABELS)).pivot_table(
            index=["split", "statistic"], columns="model", values="mean ± std", aggfunc="first", sort=False)

    def statistics_table(self) -> pd.DataFrame:
        stats = self.stats
        return stats[stats["statistic"].isin(list(KEPT_STATISTICS))].assign(
            model=lambda f: f["model"].map(LABELS)).pivot_table(
            index=["split", "statistic"], columns="model", values="mean ± std", aggfunc="first", sort=False)

    def stages_figure(self) -> Figure:
        s = self.settings
        return plot_score_densities(self.stage_frame.assign(model=lambda f: f["model"].map(LABELS)), row="stage",
                                    rows=list(STAGES), sharex=False,
                                    title=f"Test scores during training ({s.testbed}, {s.profile} profile; paper: "
                                          f"Figure 7)")

    def stages_table(self) -> pd.DataFrame:
        return self.stage_table.assign(model=lambda f: f["model"].map(LABELS)).pivot_table(
            index=["statistic", "stage"], columns="model", values="value", sort=False).round(3)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> ScoreDistributions:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    teacher, students, stages = train(s)
    training = training_table(s, students, stages)
    rerank = rerank_table(s, teacher, students)
    scored = scored_sets(s, students)
    frame = scored_frame(s, teacher, students, scored)
    spread_seeds = spread_per_seed(s, frame)
    spread = summarise_seeds(spread_seeds, by=["model", "split", "statistic"], digits=3)
    per_seed = scores_per_seed(s, frame)
    stats = summarise_seeds(per_seed, by=["model", "split", "statistic"], digits=3)
    test = scored["test"]
    stages_frame = stage_frame(stages, test)
    stages_table = stage_table(stages, test, stages_frame)
    per_query = per_query_statistics(frame, by=("model", "split", "seed"),
                                     statistics=("negative_spread", "overlap", "mean_score_rho"))
    page = ScoreDistributions(
        s, teacher, students, stages, training, rerank, scored, frame, spread_seeds, spread, per_seed, stats,
        stages_frame, stages_table,
        scores_per_query=(per_query.groupby(["model", "split", "statistic", "query_id"], sort=False)["value"].mean()
                          .reset_index()),
        stages_per_query=per_query_statistics(stages_frame, by=("model", "stage"), statistics=("negative_spread",)),
        stages_spread=spread_statistics(stages_frame, by=("model", "stage")),
        stages_spread_per_query=per_query_spread(stages_frame, by=("model", "stage")),
        spread_per_query=(per_query_spread(frame, by=("model", "split", "seed"))
                          .groupby(["model", "split", "statistic", "query_id"], sort=False)["value"].mean()
                          .reset_index()),
        spread_bootstrap=bootstrap_statistics(frame, by=("model", "split", "seed"), n_resamples=1000, seed=s.seed,
                                              average="seed"),
        results_dir=results_dir)
    page.publish(results_dir)
    return page
