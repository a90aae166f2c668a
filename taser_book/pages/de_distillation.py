"""The distillation-losses page (Tables 1, 4, 5 of "In defense of dual-encoders"): one CA teacher, dual-encoder
students trained with each loss (one-hot, MSE, margin MSE, RankDistil-B, M3SE, softmax CE, KL), their re-ranking of
the test candidates, their full retrieval over the test corpus, smaller students and paired tests between the losses.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_distillation")
    >>> print(page.teacher_trained())     # the CA teacher's steps and dev nDCG@10
    >>> page.training_table()             # every run's steps and its dev selection metric
    >>> print(page.questions_compared())  # how many test questions every model is compared on
    >>> page.rerank_table()               # test re-ranking of every model, mean ± std over seeds (Table 1)
    >>> print(page.teacher_leads())       # does the CA lead the one-hot DE here?
    >>> page.paper_figure()               # our test MRR@10 beside the paper's MS MARCO dev MRR@10
    >>> print(page.retrieval_counted())   # the questions and passages of full retrieval (or why it was skipped)
    >>> page.retrieval_table()            # full retrieval of the students, mean ± std over seeds
    >>> print(page.students_trained())    # the smaller students' sizes (or that there are none)
    >>> page.students_table()             # the smaller students' re-ranking (Tables 4, 5)
    >>> page.size_figure()                # test MRR@10 by student size
    >>> page.paper_sizes_table()          # the paper's Tables 4 and 5
    >>> page.tests_table()                # paired randomisation tests between the losses, Holm-corrected
    >>> page.claims()                     # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query, rerank_per_query
from taser_lib.evaluation.query_sets import shared_queries
from taser_lib.models import load_encoder, load_tokenizer
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.training.distill import rerank_saved_model, score_dual_encoder
from taser_lib.training.loop import seed_everything
from taser_lib.training.retriever import build_retriever
from ..analyses.baselines import first_stage_runs, query_length
from ..claims import paper_table
from ..plots import plot_beside_paper, plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RERANKERS, reranking_run
from ..runs.students import size_changes, testbed_changes
from ..tables.rerank_tables import (first_stage_scores, paired_tests, per_query_rows, query_means,
                                    retrieval_per_query, seed_means, seed_summary)
from ..tables.seeded import SeededModels
from .common import PageResult, distill_params, questions_compared, teacher_line

PAGE = "de_distillation"
# our model names (the claims file's) for each re-ranking recipe (runs.recipes.RERANKERS)
SHORT = {"de-one-hot": "de", "de-mse": "mse", "de-margin-mse": "margin-mse", "de-rankdistil-b": "rankdistil-b",
         "de-m3se": "m3se", "de-softmax-ce": "softmax-ce", "de-kl": "kl"}
# the bars beside the paper's, in this order
BARS = ["bm25", "ca", "de", "mse", "margin-mse", "rankdistil-b", "m3se", "softmax-ce", "kl"]
# the paired tests of each family: (a, b), a against b
RERANK_PAIRS = [("m3se", "margin-mse"), ("softmax-ce", "margin-mse"), ("margin-mse", "mse"), ("m3se", "mse"),
                ("softmax-ce", "mse"), ("m3se", "rankdistil-b"), ("softmax-ce", "rankdistil-b"), ("m3se", "de"),
                ("softmax-ce", "de"), ("margin-mse", "de"), ("mse", "de"), ("kl", "softmax-ce"), ("ca", "de"),
                ("ca", "softmax-ce"), ("de", "zero-shot")]
RETRIEVAL_PAIRS = [("m3se", "de"), ("softmax-ce", "de"), ("m3se", "margin-mse"), ("softmax-ce", "margin-mse"),
                   ("margin-mse", "de"), ("de", "zero-shot"), ("de", "bm25")]
SMALL_PAIRS = [("softmax-ce", "de"), ("m3se", "de"), ("margin-mse", "de"), ("mse", "de"), ("kl", "de"),
               ("de", "zero-shot")]
SIZE_BY = ("model", "size", "dataset", "split", "metric")


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def lengths(s: PageSettings) -> dict[str, int]:
    """The lengths and batch size the page scores with."""
    return dict(max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                batch_size=s.eval_batch_size)


def small_seeds(s: PageSettings) -> list[int]:
    """The seeds of the smaller students: `small_seeds`, or else `seeds`."""
    return s.small_seeds or s.seeds


def labels() -> dict[str, str]:
    """{model name: the label the page's tables and figures show}."""
    variants = RERANKERS
    return {"bm25": "BM25", "zero-shot": "zero-shot default", "ca": "CA teacher",
            **{SHORT[n]: variants[n].label for n in SHORT}}


def train(s: PageSettings) -> tuple[CachedRun, dict[str, dict[int, CachedRun]],
                                    dict[tuple[str, str], dict[int, CachedRun]]]:
    """The CA teacher, {loss: {seed: run}} of the profile's students and {(size, loss): {seed: run}} of the smaller
    students (trained, or read from the run cache)."""
    params = distill_params(s)
    on_testbed = testbed_changes(s.testbed)
    teacher = reranking_run("ca", s.seed, params, changes=on_testbed, progress=False)
    runs = {n: {sd: reranking_run(n, sd, params, teacher=teacher, changes=on_testbed, progress=False)
                for sd in s.seeds} for n in s.losses}
    small_runs = {(size, n): {sd: reranking_run(n, sd, params, teacher=teacher, progress=False,
                                                changes=[*on_testbed, *size_changes(size, s.size_source,
                                                                                    model=s.model)])
                              for sd in small_seeds(s)}
                  for size in s.small_sizes for n in s.small_losses}
    return teacher, runs, small_runs


def training_table(s: PageSettings, teacher: CachedRun, runs: Mapping[str, Mapping[int, CachedRun]],
                   small_runs: Mapping[tuple[str, str], Mapping[int, CachedRun]],
                   names: Mapping[str, str]) -> pd.DataFrame:
    """Each run's steps and its dev nDCG@10 (the metric it was selected on)."""
    return pd.DataFrame(
        [{"model": names["ca"], "size": "CA", "seed": s.seed, "steps": teacher.result["final_step"],
          "dev nDCG@10 (selection)": teacher.metric}]
        + [{"model": names[SHORT[n]], "size": "profile model", "seed": sd, "steps": r.result["final_step"],
            "dev nDCG@10 (selection)": r.metric} for n, by in runs.items() for sd, r in by.items()]
        + [{"model": names[SHORT[n]], "size": size, "seed": sd, "steps": r.result["final_step"],
            "dev nDCG@10 (selection)": r.metric} for (size, n), by in small_runs.items() for sd, r in by.items()])


def rerank_rows(s: PageSettings, teacher: CachedRun, runs: Mapping[str, Mapping[int, CachedRun]]):
    """(the students' test set, per-question rows of every model on it): BM25 (the candidates' order), the zero-shot
    default (scored here), the CA and every student (from each run's `test_per_query.csv`)."""
    first = next(iter(runs[s.losses[0]].values()))  # the students' test questions (the teacher may have more)
    test_set = first.config.data.load(progress=False)[first.config.data.test_split]
    where = dict(dataset=s.testbed, split="test")
    rows = per_query_rows("bm25", rerank_per_query(test_set, first_stage_scores(test_set)), **where)
    rows += per_query_rows("zero-shot", rerank_saved_model(s.model, test_set, **lengths(s)), **where)
    rows += per_query_rows("ca", read_per_query(teacher.result["paths"]["test_per_query"]), seed=s.seed, **where)
    for n, by in runs.items():
        for sd, r in by.items():
            rows += per_query_rows(SHORT[n], read_per_query(r.result["paths"]["test_per_query"]), seed=sd, **where)
    return test_set, pd.DataFrame(rows)


def retrieval(s: PageSettings, runs: Mapping[str, Mapping[int, CachedRun]]):
    """(the test set retrieved over, per-question rows of full retrieval) of BM25, the zero-shot default and the
    students of `retrieval_losses` over the whole test corpus; (None, an empty frame) without retrieval or off
    SQuAD-open."""
    if not (s.retrieval and s.testbed == "squad-open"):
        return None, pd.DataFrame()
    test = load_evaluation_set("squad-open", "test", n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               data_dir=os.environ.get("TASER_DATA_DIR"), mirror=os.environ.get("TASER_DATA_MIRROR"))
    encoder_options = dict(device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                           max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)
    zero_shot = load_encoder(s.model, show_progress=False, **encoder_options)
    q_len = query_length(test, zero_shot, qa_cap=s.max_query_length)
    first = first_stage_runs(test, zero_shot, k=max(s.top_k), query_length=q_len)
    retrieval_runs = {("bm25", None): first["bm25"], ("zero-shot", None): first["dense"]}
    students = SeededModels({SHORT[n]: {sd: r.model_path for sd, r in runs[n].items()}
                             for n in s.retrieval_losses if n in runs}, **encoder_options)
    retrieval_runs.update(students.runs(test, k=max(s.top_k), query_length=q_len))
    return test, pd.DataFrame(retrieval_per_query(test, retrieval_runs, k=10, recall_at=(20,),
                                                  label=f"{s.testbed}-retrieval"))


def small_rows(s: PageSettings, small_runs: Mapping[tuple[str, str], Mapping[int, CachedRun]],
               test_set) -> pd.DataFrame:
    """Per-question re-ranking rows of every smaller student and of each size's start ("zero-shot" at that size:
    the default cut to its first L layers, a projection seeded like the run, scored before any step)."""
    where = dict(dataset=s.testbed, split="test")
    rows = []
    for (size, n), by in small_runs.items():
        for sd, r in by.items():
            rows += per_query_rows(SHORT[n], read_per_query(r.result["paths"]["test_per_query"]), seed=sd,
                                   size=size, **where)
    for size, r in {size: next(iter(by.values())) for (size, n), by in small_runs.items()}.items():
        seed_everything(r.config.loop.seed)
        start = build_retriever(r.config.model).to(s.device).eval()
        scores = score_dual_encoder(start, load_tokenizer(r.config.model.name_or_path), test_set, **lengths(s))
        rows += per_query_rows("zero-shot", rerank_per_query(test_set, scores), size=size, **where)
    return pd.DataFrame(rows)


def students_summary(small: pd.DataFrame) -> pd.DataFrame:
    """The smaller students' test metrics by size, mean ± std over seeds (no rows without smaller students)."""
    if len(small):
        return seed_summary(small, by=SIZE_BY)
    return pd.DataFrame(columns=[*SIZE_BY, "value", "std", "n", "mean ± std"])


def significance(s: PageSettings, rerank: pd.DataFrame, retrieved: pd.DataFrame, small: pd.DataFrame,
                 names: Mapping[str, str]) -> pd.DataFrame:
    """Paired randomisation tests of MRR@10 across test questions, Holm-corrected within each family (re-ranking,
    retrieval, each small size); pairs naming a model this profile did not train are left out."""
    families = [("re-ranking", rerank, RERANK_PAIRS)]
    if len(retrieved):
        families.append(("retrieval", retrieved, RETRIEVAL_PAIRS))
    families += [(f"size {size}", small[small["size"] == size], SMALL_PAIRS) for size in s.small_sizes]
    return pd.concat([paired_tests(frame, "MRR@10", pairs, labels=names).assign(family=family)
                      for family, frame, pairs in families if len(frame)], ignore_index=True)


@dataclass(frozen=True)
class Distillation(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    runs: Mapping[str, Mapping[int, CachedRun]]
    small_runs: Mapping[tuple[str, str], Mapping[int, CachedRun]]
    labels: Mapping[str, str]
    training: pd.DataFrame
    before: pd.DataFrame           # every model's per-question rows, before keeping the shared questions
    rerank_rows: pd.DataFrame      # the same on the questions every model re-ranked
    summary: pd.DataFrame
    retrieval_test: Any
    retrieval_rows: pd.DataFrame
    small_rows: pd.DataFrame
    students: pd.DataFrame
    tests: pd.DataFrame
    all_rows: pd.DataFrame
    rerank: pd.DataFrame
    wall: float
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order, in the columns the claims read."""
        return {
            "rerank": self.rerank,
            "rerank_per_query": query_means(self.all_rows),
            "students": self.students[[*SIZE_BY, "value", "std", "n"]],
            "students_per_query": (query_means(self.small_rows, by=SIZE_BY) if len(self.small_rows) else
                                   pd.DataFrame(columns=[*SIZE_BY, "query_id", "value"])),
            "significance": self.tests,
            "training": self.training,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table (`wall_s`: the seconds it took)."""
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seed": s.seed, "seeds": s.seeds, "testbed": s.testbed,
                "losses": s.losses, "retrieval": s.retrieval, "retrieval_losses": s.retrieval_losses,
                "small_sizes": s.small_sizes, "small_losses": s.small_losses, "small_seeds": small_seeds(s),
                "size_source": s.size_source, "top_k": s.top_k, "teacher": self.teacher.dir.name,
                "wall_s": round(self.wall)}

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
            index="model", columns="metric", values="mean ± std", aggfunc="first", sort=False)

    def teacher_leads(self) -> str:
        """Test MRR@10 of the CA, the one-hot DE, the zero-shot default and BM25, and whether the CA leads."""
        s = self.settings
        summary = self.summary
        mrr = summary[(summary["metric"] == "MRR@10") & (summary["dataset"] == s.testbed)].set_index("model")["value"]
        ca_mrr, zero_mrr = mrr["ca"], mrr["zero-shot"]
        de_mrr = mrr.get("de")
        verdict = ("no one-hot DE was trained at this profile" if de_mrr is None else
                   "the teacher leads the one-hot DE" if ca_mrr > de_mrr else
                   "the teacher does NOT lead the one-hot DE: the students copy a weaker ranker")
        return (f"{s.testbed} test MRR@10 ({s.profile} profile): CA {ca_mrr:.3f}, one-hot DE "
                f"{'n/a' if de_mrr is None else f'{de_mrr:.3f}'}, zero-shot default {zero_mrr:.3f}, BM25 "
                f"{mrr['bm25']:.3f} -> {verdict}.")

    def paper_figure(self) -> Figure:
        s = self.settings
        ours = seed_means(self.rerank_rows).assign(value=lambda f: 100 * f["value"])
        paper = paper_table("de_table_1").assign(value=lambda f: 100 * f["value"])
        shown = [m for m in BARS if m in set(ours["model"])]
        return plot_beside_paper(ours, paper, "MRR@10", models=shown, our_dataset=s.testbed,
                                 paper_dataset="msmarco-passage", labels=self.labels, unit="×100",
                                 title=f"Re-ranking MRR@10 x100: {s.testbed} test ({s.profile}) vs MS MARCO dev "
                                       f"(paper)")

    def retrieval_counted(self) -> str:
        """The questions and passages of full retrieval, or why it was skipped."""
        s = self.settings
        if self.retrieval_test is None:
            return f"full retrieval skipped (retrieval={s.retrieval}, testbed={s.testbed})"
        return f"{len(self.retrieval_test.queries)} test questions, {len(self.retrieval_test.corpus)} passages"

    def retrieval_table(self) -> pd.DataFrame | None:
        """Full retrieval of every model, mean ± std over seeds (None: skipped)."""
        if self.retrieval_test is None:
            return None
        summary = seed_summary(self.retrieval_rows)
        return summary.assign(model=summary["model"].map(self.labels)).pivot_table(
            index="model", columns="metric", values="mean ± std", aggfunc="first", sort=False)

    def students_trained(self) -> str:
        """The smaller students' sizes, losses and seeds, or that this profile has none."""
        s = self.settings
        if not len(self.small_rows):
            return "no small students at this profile"
        return (f"smaller students of size {', '.join(s.small_sizes)}: {', '.join(s.small_losses)}, seeds "
                f"{small_seeds(s)}")

    def students_table(self) -> pd.DataFrame | None:
        """The smaller students' test metrics by size, mean ± std over seeds (None: no smaller students)."""
        if not len(self.small_rows):
            return None
        return self.students.assign(model=self.students["model"].map(self.labels)).pivot_table(
            index="model", columns=["size", "metric"], values="mean ± std", aggfunc="first", sort=False)

    def size_figure(self) -> Figure | None:
        """Test MRR@10 by student size: the profile's model beside each smaller size (None: no smaller students)."""
        if not len(self.small_rows):
            return None
        s = self.settings
        bar_models = [SHORT[n] for n in s.small_losses] + ["ca", "zero-shot"]
        base = seed_means(self.rerank_rows[self.rerank_rows["model"].isin(bar_models)])
        bars = pd.concat([base.assign(size="profile model"), seed_means(self.small_rows, by=SIZE_BY)])
        bars = bars.assign(dataset=bars["size"], model=bars["model"].map(self.labels))
        return plot_metric_bars(bars, "MRR@10", title=f"{s.testbed} test MRR@10 by student size ({s.profile} profile)")

    def paper_sizes_table(self) -> pd.DataFrame | None:
        """The paper's Tables 4 and 5, MS MARCO dev (None: no smaller students here)."""
        if not len(self.small_rows):
            return None
        return paper_table("de_tables_4_5").pivot_table(index="label", columns=["dataset", "metric"], values="value",
                                                        sort=False).rename_axis(index="paper (MS MARCO dev)",
                                                                                columns=["size", "metric"])

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Distillation:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    names = labels()
    teacher, runs, small_runs = train(s)
    training = training_table(s, teacher, runs, small_runs, names)
    test_set, before = rerank_rows(s, teacher, runs)
    shared = shared_queries(before)  # every model on the same questions
    retrieval_test, retrieved = retrieval(s, runs)
    small = small_rows(s, small_runs, test_set)
    tests = significance(s, shared, retrieved, small, names)
    all_rows = pd.concat([shared, retrieved], ignore_index=True)
    rerank = seed_summary(all_rows)[["model", "dataset", "split", "metric", "value", "std", "n"]]
    wall = time.perf_counter() - started
    page = Distillation(s, teacher, runs, small_runs, names, training, before, shared, seed_summary(shared),
                        retrieval_test, retrieved, small, students_summary(small), tests, all_rows, rerank, wall,
                        results_dir)
    page.publish(results_dir)
    return page
