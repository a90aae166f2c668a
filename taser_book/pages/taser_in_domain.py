"""The in-domain page (TASER Tables 1 and A2): DPR, TASER Det-R and TASER_Shared trained on SQuAD-open, beside BM25,
the untrained start and each dense model's BM25 hybrid (Eq. 6, α chosen on dev), with paired tests over questions.

    >>> s = settings("cpu")
    >>> print(starting_model(s))       # the checkpoint every model starts from
    >>> page = run(s, results_dir="results/cpu/taser_in_domain")
    >>> page.training_table()          # each run's steps, selected step, dev R@20, speed and parameters
    >>> page.retrieval_table()         # test recall of every model, mean ± std over seeds
    >>> page.paper_figures();          # test R@20 and the deciding cutoff, ours beside the paper's SQuAD column
    >>> page.cutoffs_table()           # the cutoff whose corpus share is closest to the paper's R@20
    >>> print(page.hybrid_gains())     # what BM25 adds to DPR and to TASER at R@20
    >>> page.tests_table()             # paired randomisation tests over questions, Holm-corrected
    >>> page.claims()                  # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.datasets.registry import get
from taser_lib.evaluation import summarise_seeds
from taser_lib.models import DEFAULT_DESCRIPTION, count_parameters, load_encoder
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.datasets.streamed import streamed_corpus
from ..analyses.baselines import choose_hybrid_alpha, first_stage_runs, query_length
from ..claims import paper_table
from ..plots import plot_beside_paper
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RETRIEVERS, variant_run
from ..tables.cutoffs import cutoff_table, mark_matched_cutoff
from ..tables.rerank_tables import paired_tests
from ..tables.seeded import SeededModels, hybrid_runs, score_seeded_runs, score_seeded_runs_per_query
from .common import PageResult, reranking_params

PAGE = "taser_in_domain"
TRAINED = ["dpr", "taser", "shared"]
PAIRS = [("taser", "dpr"), ("shared", "dpr"), ("taser", "shared"), ("dpr", "bm25"), ("taser", "bm25"),
         ("dpr+bm25", "dpr"), ("taser+bm25", "taser"), ("dpr+bm25", "taser+bm25")]
SHOWN = ["bm25", "dpr", "taser", "shared", "dpr+bm25", "taser+bm25", "shared+bm25"]  # beside the paper's

Runs = Mapping[str, Mapping[int, CachedRun]]


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def starting_model(s: PageSettings) -> str:
    """The sentence naming the checkpoint every model starts from."""
    return f"starting model: {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}"


def labels(s: PageSettings) -> dict[str, str]:
    """{model: the label the page shows}, the coCondenser TASER (TASER*) last when the profile trains it."""
    variants = RETRIEVERS
    names = {"bm25": "BM25", "zero-shot": "zero-shot", **{v: variants[v].label for v in TRAINED},
             **{f"{v}+bm25": variants[v].label + " + BM25" for v in TRAINED}}
    if s.cocondenser_model:
        names["taser-cocondenser"], names["taser-cocondenser+bm25"] = "TASER*", "TASER* + BM25"
    return names


def train(s: PageSettings) -> dict[str, dict[int, CachedRun]]:
    """{model: {seed: run}} of DPR, TASER, TASER_Shared (and TASER from `cocondenser_model`, when set), trained or
    read from the run cache."""
    params = reranking_params(s)
    runs = {name: {seed: variant_run(name, seed, params, progress=False) for seed in s.seeds} for name in TRAINED}
    if s.cocondenser_model:
        runs["taser-cocondenser"] = {seed: variant_run("taser", seed, {**params, "model": s.cocondenser_model},
                                                       progress=False)
                                     for seed in s.seeds}
    return runs


def training_table(runs: Runs, names: Mapping[str, str]) -> pd.DataFrame:
    """Each run's steps, selected step, dev R@20 on its sampled corpus, seconds per step and parameters."""
    return pd.DataFrame([{"model": names[name], "seed": seed, "steps": run_.result["final_step"],
                          "best step": run_.result["best_step"], "dev R@20 (sampled corpus)": 100 * run_.metric,
                          "s/step": run_.result.get("usage", {}).get("seconds_per_step"),
                          "parameters (M)": count_parameters(run_.load()) / 1e6}
                         for name, by_seed in runs.items() for seed, run_ in by_seed.items()])


@dataclass(frozen=True)
class Evaluated:
    """What the test sets gave: every scored row (one per model, seed, dataset and cutoff, with `decides`),
    per-question recall per seed, each dense model's α per dataset and {dataset: passages}."""

    seed_rows: pd.DataFrame
    per_query_seeds: pd.DataFrame
    alphas: pd.DataFrame
    n_passages: dict[str, int]


def evaluate(s: PageSettings, runs: Runs) -> Evaluated:
    """BM25, the untrained start and every trained run on each QA set's test split, alone and as a hybrid with
    BM25 at the α chosen on dev R@20 (all seeds pooled; 1.0 without a dev split)."""
    data_dir, mirror = os.environ.get("TASER_DATA_DIR"), os.environ.get("TASER_DATA_MIRROR")
    encoder_options = dict(device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                           max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)
    zero_shot = load_encoder(s.model, show_progress=False, **encoder_options)
    models = SeededModels({name: {seed: run_.model_path for seed, run_ in by_seed.items()}
                           for name, by_seed in runs.items()}, **encoder_options)
    qa_stream = streamed_corpus(s.qa_corpus, None, data_dir=data_dir, mirror=mirror) if s.qa_corpus else None

    rows, per_query, alphas, n_passages = [], [], [], {}
    for name in s.qa_datasets:
        sets = {split: load_evaluation_set(name, split, n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                                           qa_corpus=None if qa_stream else s.qa_corpus, data_dir=data_dir,
                                           mirror=mirror)
                for split in ("dev", "test") if split in get(name).splits}
        found = {}
        for split, dataset in sets.items():
            q_len = query_length(dataset, zero_shot, qa_cap=s.max_query_length)
            base = first_stage_runs(dataset, zero_shot, k=max(s.top_k), query_length=q_len, corpus=qa_stream)
            found[split] = {("bm25", None): base["bm25"], ("zero-shot", None): base["dense"],
                            **models.runs(dataset, k=max(s.top_k), query_length=q_len)}
        for dense in ["zero-shot", *runs]:
            keys = [k for k in found["test"] if k[0] == dense]
            if "dev" in found:
                choice = choose_hybrid_alpha([(sets["dev"], {"dense": found["dev"][k],
                                                             "bm25": found["dev"][("bm25", None)]})
                                              for k in keys])
                alpha = choice.alpha
            else:
                alpha = 1.0  # no dev split: Eq. 6 unweighted
            alphas.append({"dataset": name, "model": dense, "alpha": alpha})
            found["test"].update(hybrid_runs({k: found["test"][k] for k in keys}, found["test"][("bm25", None)],
                                             alpha, k=max(s.top_k)))
        rows += score_seeded_runs(sets["test"], found["test"], s.top_k)
        per_query += score_seeded_runs_per_query(sets["test"], found["test"], average=False,
                                                 recall_at=tuple(s.top_k))
        n_passages[name] = (qa_stream.n_docs if qa_stream else None) or len(sets["test"].corpus)
    return Evaluated(mark_matched_cutoff(pd.DataFrame(rows), n_passages, s.top_k), pd.DataFrame(per_query),
                     pd.DataFrame(alphas), n_passages)


def summary_table(seed_rows: pd.DataFrame) -> pd.DataFrame:
    """Test recall of every model per dataset and cutoff, mean ± std over seeds."""
    return summarise_seeds(seed_rows, by=["model", "dataset", "split", "metric"], digits=1)


def significance_table(s: PageSettings, evaluated: Evaluated, cutoffs: pd.DataFrame,
                       names: Mapping[str, str]) -> pd.DataFrame:
    """Paired randomisation tests over the test questions of `PAIRS`, at R@20 and the deciding cutoff, per
    dataset."""
    per_query_seeds = evaluated.per_query_seeds
    decides = dict(zip(cutoffs["dataset"], cutoffs["metric"]))
    return pd.concat([paired_tests(per_query_seeds[per_query_seeds["dataset"] == name], metric, PAIRS, labels=names)
                      .assign(dataset=name)
                      for name in s.qa_datasets for metric in dict.fromkeys(["R@20", decides[name]])],
                     ignore_index=True)


def retrieval_tables(s: PageSettings, summary: pd.DataFrame,
                     evaluated: Evaluated) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the saved recall table, mean over seeds; the saved per-question recall, seeds averaged), with `decides`."""
    retrieval = mark_matched_cutoff(summary.rename(columns={"mean": "value"})[["model", "dataset", "split", "metric",
                                                                                "value", "std", "n"]],
                                    evaluated.n_passages, s.top_k)
    retrieval["value"] = retrieval["value"].round(2)
    per_query_seeds = evaluated.per_query_seeds
    retrieval_per_query = (per_query_seeds.groupby(["model", "dataset", "split", "metric", "query_id"],
                                                   sort=False)["value"].mean().reset_index())
    return retrieval, mark_matched_cutoff(retrieval_per_query, evaluated.n_passages, s.top_k)


@dataclass(frozen=True)
class InDomain(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    runs: Runs
    labels: Mapping[str, str]
    training: pd.DataFrame
    evaluated: Evaluated
    cutoffs: pd.DataFrame
    summary: pd.DataFrame
    tests: pd.DataFrame
    retrieval: pd.DataFrame
    retrieval_per_query: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order."""
        return {
            "retrieval": self.retrieval,
            "retrieval_seeds": self.evaluated.seed_rows,
            "retrieval_per_query": self.retrieval_per_query,
            "significance": self.tests,
            "training": self.training,
            "alpha": self.evaluated.alphas,
            "cutoffs": self.cutoffs,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {**reranking_params(s), "profile": s.profile, "seeds": s.seeds, "seed": s.seed, "top_k": s.top_k,
                "qa_datasets": s.qa_datasets, "qa_corpus": s.qa_corpus, "cocondenser_model": s.cocondenser_model,
                "alphas": self.evaluated.alphas.to_dict("records"),
                "runs": {n: {str(seed): r.dir.name for seed, r in by.items()} for n, by in self.runs.items()}}

    def training_table(self) -> pd.DataFrame:
        return self.training.round(2)

    def retrieval_table(self) -> pd.DataFrame:
        """Test recall of every model (rows, by label) per dataset and cutoff (columns), mean ± std over seeds."""
        order = ["bm25", "zero-shot", *self.runs, *[f"{m}+bm25" for m in ["zero-shot", *self.runs]]]
        table = self.summary.pivot_table(index="model", columns=["dataset", "metric"], values="mean ± std",
                                         aggfunc="first", sort=False).reindex(order)
        table.index = [self.labels.get(m, m) for m in table.index]
        return table

    def paper_figures(self) -> list[Figure]:
        """Test R@20 and every deciding cutoff on the first QA set, ours (dots = seeds) beside the paper's SQuAD
        column (Table A2; its DPR + BM25 row is DPR without SQuAD), one figure each."""
        s = self.settings
        paper = paper_table("taser_table_a2")
        paper.loc[paper["model"] == "dpr-no-squad+bm25", "model"] = "dpr+bm25"  # the only DPR_BM25 row the paper has
        return [plot_beside_paper(self.evaluated.seed_rows, paper, metric, models=SHOWN,
                                  our_dataset=s.qa_datasets[0], paper_dataset="dpr-squad1", labels=self.labels,
                                  unit="%", title=f"Test {metric}: {s.qa_datasets[0]} ({s.profile} profile) beside "
                                                  f"the paper's SQuAD")
                for metric in dict.fromkeys(["R@20", *self.cutoffs["metric"]])]

    def cutoffs_table(self) -> pd.DataFrame:
        return self.cutoffs

    def hybrid_gains(self) -> str:
        """Per QA set, what BM25 adds to DPR and to TASER at test R@20 (mean over seeds), beside the paper's."""
        gain = self.summary[self.summary["metric"] == "R@20"].set_index(["dataset", "model"])["mean"]
        return "\n".join(f"{name}: hybrid gain R@20  DPR {gain[(name, 'dpr+bm25')] - gain[(name, 'dpr')]:+.2f}   "
                         f"TASER {gain[(name, 'taser+bm25')] - gain[(name, 'taser')]:+.2f}   "
                         f"(paper, SQuAD: DPR w/o SQuAD +23.1, TASER◊ +7.5)" for name in self.settings.qa_datasets)

    def tests_table(self) -> pd.DataFrame:
        return self.tests


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> InDomain:
    """Train (or read from the run cache) the page's runs at `s`, evaluate them with BM25 and the hybrids, compute
    the tables and save them into `results_dir` (None: nothing saved, and it says so)."""
    names = labels(s)
    runs = train(s)
    training = training_table(runs, names)
    evaluated = evaluate(s, runs)
    cutoffs = cutoff_table(evaluated.n_passages, s.top_k)
    summary = summary_table(evaluated.seed_rows)
    tests = significance_table(s, evaluated, cutoffs, names)
    retrieval, retrieval_per_query = retrieval_tables(s, summary, evaluated)
    page = InDomain(s, runs, names, training, evaluated, cutoffs, summary, tests, retrieval, retrieval_per_query,
                    results_dir=results_dir)
    page.publish(results_dir)
    return page
