"""The capacity page (Figures 1 and 3, Table 2 of "In defense of dual-encoders"): CA, one-hot DE and distilled DE
(DIST) across embedding sizes, the testbed check (does the CA beat the DE on test, and each CA its BM25 order?) and
train and test MRR@10 against size beside the paper's.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_capacity")
    >>> page.training_table()     # every run's steps, its selected step and dev selection metric
    >>> page.testbed_check()      # the CA against both DEs and each CA against its BM25 order, in sentences
    >>> page.testbed_table()      # the same paired tests as a table
    >>> page.mrr_table()          # train and test MRR@10 per size and model, mean ± std over seeds
    >>> page.size_figure()        # Figures 1 and 3: MRR@10 against embedding size, beside the paper's
    >>> page.beside_paper()       # the paper's Table 2 beside ours
    >>> page.claims()             # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from IPython.display import Markdown
from matplotlib.figure import Figure

from taser_lib.evaluation import compare_systems, rerank_per_query, summarise_seeds
from taser_lib.training.distill import rerank_saved_model
from ..claims import paper_table
from ..plots import plot_size_sweep
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.capacity import Size, capacity_table, checkpoint_shape, largest, parse_sizes, size_changes
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.run_tables import run_test_per_query
from ..tables.rerank_tables import first_stage_scores
from ..tables.train_test import comparison_sentence, comparison_table
from ..tables.wide import labelled, wide_table
from .common import PageResult, distill_params

PAGE = "de_capacity"


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def ca_params(s: PageSettings) -> dict[str, Any]:
    """The parameters of the CA runs: the teacher's (`ca_like_teacher`: it trains as the teacher does), else the
    students' sizes."""
    return distill_params(s) if s.ca_like_teacher else {**distill_params(s), "teacher": {}}


def labels(s: PageSettings) -> dict[str, str]:
    """{model name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"ca": "CA", "de": "DE (one-hot)", "dist": f"DIST ({variants[s.distilled].label})",
            "zero-shot": "DE zero-shot (untrained)"}


def sizes(s: PageSettings) -> tuple[list[Size], Size]:
    """(the page's sizes, the largest: the one that stands for the paper's 6-768)."""
    size_list = parse_sizes(s.sizes)
    return size_list, largest(size_list, s.largest_size)


def train(s: PageSettings, size_list: Sequence[Size]) -> tuple[CachedRun, dict[str, dict[tuple[str, int], CachedRun]]]:
    """The CA teacher and {"ca" | "de" | "dist": {(size, seed): run}}: a CA per depth (of each seed of `ca_seeds`,
    one standing for every seed when it has one), a one-hot DE and a DIST per size and seed (trained, or read from
    the run cache)."""
    params, for_ca = distill_params(s), ca_params(s)
    shapes = {"distill": checkpoint_shape(s.model), "cross-encoder": checkpoint_shape(s.cross_encoder_model)}
    on_testbed = [changes.data(dataset=s.testbed)]  # squad-open is the configs' own: every other page's runs
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {"ca": {}, "de": {}, "dist": {}}
    for size in size_list:
        ca_changes = [*on_testbed, *size_changes(size, "cross-encoder", shapes["cross-encoder"])]
        de_changes = [*on_testbed, *size_changes(size, "distill", shapes["distill"])]
        cas = {sd: reranking_run("ca", sd, for_ca, changes=ca_changes, progress=False)
               for sd in (s.ca_seeds or s.seeds)}
        for sd in s.seeds:
            runs["ca"][size.label, sd] = cas.get(sd, next(iter(cas.values())))
            runs["de"][size.label, sd] = reranking_run("de-one-hot", sd, params, teacher=teacher,
                                                       changes=de_changes, progress=False)
            runs["dist"][size.label, sd] = reranking_run(s.distilled, sd, params, teacher=teacher,
                                                         changes=de_changes, progress=False)
    return teacher, runs


def training_table(runs: Mapping[str, Mapping[tuple[str, int], CachedRun]],
                   names: Mapping[str, str]) -> pd.DataFrame:
    """Each distinct run's steps, selected step and dev nDCG@10 (the metric it was selected on)."""
    return pd.DataFrame([{"model": names[m], "size": label, "seed": sd, "run": r.dir.name,
                          "steps": r.result["final_step"], "selected step": r.result["best_step"],
                          "dev nDCG@10 (selection)": round(r.metric, 4)}
                         for m, by in runs.items() for (label, sd), r in by.items()]).drop_duplicates("run")


@dataclass(frozen=True)
class TestbedCheck:
    """The testbed check: the CA of the largest size against the zero-shot and the one-hot DE (`checks`), each
    size's CA against its BM25 order (`first_stage`, labelled by `first_stage_labels`), the table of both and
    whether the CA beats both DEs."""

    checks: list
    first_stage: dict
    first_stage_labels: dict[str, str]
    table: pd.DataFrame
    beats: bool


def testbed_check(s: PageSettings, runs: Mapping[str, Mapping[tuple[str, int], CachedRun]],
                  size_list: Sequence[Size], top: Size, names: Mapping[str, str]) -> TestbedCheck:
    """Paired randomisation tests on the students' test questions (per-question MRR@10 averaged over seeds): the
    largest CA against the untrained DE and the one-hot DE, the one-hot DE against its start (Holm over the three),
    then each size's CA against the BM25 order it re-ranks (Holm over the distinct CAs)."""
    first = runs["de"][top.label, s.seeds[0]]  # the students' test questions (a CA trained as the teacher has more)
    test_set = first.config.data.load(progress=False)[first.config.data.test_split]
    zero_shot = rerank_saved_model(s.model, test_set, max_query_length=s.max_query_length,
                                   max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)
    questions = set(zero_shot["MRR@10"])  # the students' test questions: a CA trained as the teacher re-ranked more

    def on_questions(run):
        return {"MRR@10": {q: v for q, v in run_test_per_query(run).items() if q in questions}}

    cas = {runs["ca"][top.label, sd].dir: runs["ca"][top.label, sd] for sd in s.seeds}.values()  # one run once
    systems = {"ca": [on_questions(r) for r in cas],
               "de": [on_questions(runs["de"][top.label, sd]) for sd in s.seeds], "zero-shot": [zero_shot]}
    checks = compare_systems(systems, "MRR@10", pairs=[("ca", "zero-shot"), ("ca", "de"), ("de", "zero-shot")])
    table = comparison_table(checks, names).assign(testbed=s.testbed, size=top.label)
    beats = all(c.difference > 0 and c.p_value < 0.05 for c in checks if c.label_a == "ca")
    # each size's CA against the first-stage (BM25) order of the candidates it re-ranks; sizes of one depth share a CA
    first_stage_order = {"MRR@10": {q: v for q, v in rerank_per_query(test_set, first_stage_scores(test_set))["MRR@10"]
                                    .items() if q in questions}}
    ca_sets = {z.label: {runs["ca"][z.label, sd].dir.name: runs["ca"][z.label, sd] for sd in s.seeds}
               for z in size_list}
    ca_key = {label: "+".join(sorted(rs)) for label, rs in ca_sets.items()}
    first_stage = {c.label_a: c for c in compare_systems(
        {**{ca_key[label]: [on_questions(r) for r in rs.values()] for label, rs in ca_sets.items()},
         "bm25": [first_stage_order]}, "MRR@10", baseline="bm25")}
    first_stage_labels = {"bm25": "BM25 order (first stage)",
                          **{key: "CA of " + ", ".join(lb for lb in ca_key if ca_key[lb] == key)
                             for key in first_stage}}
    table = pd.concat([table] + [
        comparison_table([first_stage[ca_key[z.label]]], {ca_key[z.label]: "CA", "bm25": first_stage_labels["bm25"]})
        .assign(testbed=s.testbed, size=z.label) for z in size_list], ignore_index=True)
    return TestbedCheck(checks, first_stage, first_stage_labels, table, beats)


def mrr_table(runs: Mapping[str, Mapping[tuple[str, int], CachedRun]], size_list: Sequence[Size],
              top: Size) -> tuple[pd.DataFrame, set[str]]:
    """(train and test MRR@10 of every run, one row per run and split; the test questions every model re-ranked):
    the test values are over those questions."""
    mrr = capacity_table(runs, size_list, largest_size=top)
    per_question = {r.dir.name: run_test_per_query(r) for by in runs.values() for r in by.values()}
    shared = set.intersection(*map(set, per_question.values()))  # the CA as teacher re-ranks every test question
    tested = mrr["split"] == "test"
    mrr.loc[tested, "value"] = [sum(per_question[r][q] for q in shared) / len(shared) for r in mrr.loc[tested, "run"]]
    return mrr, shared


@dataclass(frozen=True)
class Capacity(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[str, Mapping[tuple[str, int], CachedRun]]
    labels: Mapping[str, str]
    top: Size
    training: pd.DataFrame
    check: TestbedCheck
    mrr: pd.DataFrame
    shared: set[str]
    summary: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {"mrr": self.mrr, "testbed": self.check.table, "training": self.training}

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seeds": s.seeds, "seed": s.seed, "sizes": s.sizes,
                "largest_size": self.top.label, "distilled": s.distilled, "testbed": s.testbed,
                "teacher": self.teacher.dir.name, "ca_like_teacher": s.ca_like_teacher, "ca_seeds": s.ca_seeds,
                "test_questions": len(self.shared)}

    def training_table(self) -> pd.DataFrame:
        return self.training.drop(columns="run")

    def testbed_check(self) -> Markdown:
        """The testbed check in sentences: each paired test and whether this testbed can show the paper's gap."""
        s, check = self.settings, self.check
        return Markdown(f"**Testbed check ({s.testbed}, size {self.top.label}, {s.profile} profile).**\n\n"
                        + "\n".join(f"- {comparison_sentence(c, labels=self.labels)}" for c in check.checks)
                        + "\n\nEach CA against the BM25 order it re-ranks:\n\n"
                        + "\n".join(f"- {comparison_sentence(c, labels=check.first_stage_labels)}"
                                    for c in check.first_stage.values())
                        + "\n\n" + ("The CA beats both DEs on test: this testbed can show the paper's gap."
                                    if check.beats else "The CA does **not** beat both DEs on test here, so this "
                                    "testbed cannot show the paper's CA-DE test gap; the verdicts below say what it "
                                    "shows instead."))

    def testbed_table(self) -> pd.DataFrame:
        return self.check.table

    def mrr_table(self) -> pd.DataFrame:
        return wide_table(self.summary, index="size", columns=["split", "model"], values="mean ± std",
                          labels=self.labels)

    def size_figure(self) -> Figure:
        s = self.settings
        paper_sweep = paper_table("de_table_2").rename(columns={"metric": "split"})  # Table 2's numbers, dashed
        layers_dim = paper_sweep["dataset"].str.split("-", expand=True).astype(int)  # size "L-H": layers, embedding
        paper_sweep = labelled(paper_sweep.assign(layers=layers_dim[0], dim=layers_dim[1]), self.labels)
        return plot_size_sweep(labelled(self.mrr, self.labels), x="dim", row="layers", panels=["train", "test"],
                               log_x=True, xlabel="embedding size", ylabel="MRR@10", paper=paper_sweep,
                               paper_label="paper (MS MARCO)",
                               title=f"Figures 1 and 3 on {s.testbed} re-ranking ({s.profile} profile; rows: layers)")

    def beside_paper(self) -> pd.DataFrame:
        """The paper's Table 2 and ours, train and test MRR@10 per size and model."""
        paper = paper_table("de_table_2").rename(columns={"dataset": "size", "metric": "split"})
        ours = self.summary.assign(source="ours")[["source", "model", "size", "split", "mean ± std"]]
        beside = pd.concat([paper.assign(source="paper", **{"mean ± std": paper["value"].map("{:.3f}".format)})[
            ["source", "model", "size", "split", "mean ± std"]], ours])
        return wide_table(beside, index=["source", "size"], columns=["split", "model"], values="mean ± std",
                          labels=self.labels)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Capacity:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    names = labels(s)
    size_list, top = sizes(s)
    teacher, runs = train(s, size_list)
    training = training_table(runs, names)
    check = testbed_check(s, runs, size_list, top, names)
    mrr, shared = mrr_table(runs, size_list, top)
    page = Capacity(s, teacher, runs, names, top, training, check, mrr, shared,
                    summarise_seeds(mrr, by=["model", "size", "split"], digits=3), results_dir)
    page.publish(results_dir)
    return page
