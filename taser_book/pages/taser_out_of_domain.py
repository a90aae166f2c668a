"""The out-of-domain page (TASER Sec. 4.2, Tables 2 and A4): the DPR, TASER Det-R and TASER_Shared of the in-domain
page, with no further training, beside BM25 and the untrained start on other data (offline SciFact, NFCorpus,
Cranfield and CISI), with paired tests against DPR.

    >>> page = run(settings("cpu"), results_dir="results/cpu/taser_out_of_domain")
    >>> print(page.started())           # the starting checkpoint, the runs, precision and how passages go in
    >>> page.runs_table()               # each trained run's dev selection metric
    >>> page.datasets_table()           # each set's queries, passages, metric and query lengths
    >>> page.ood_figure();              # nDCG@10 (EQ: macro R@20) of every model on every set
    >>> page.paper_figure();            # the paper's Table 2 on its own datasets
    >>> page.retrieval_table()          # every metric, mean ± std over seeds
    >>> page.recall_figure();           # R@100 (EQ: micro R@100)
    >>> page.tests_table()              # paired tests of every model against DPR
    >>> page.beside_table()             # Tables 2 and A4 beside ours
    >>> page.claims()                   # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.datasets.registry import get
from taser_lib.evaluation import compare_systems, summarise_seeds
from taser_lib.models import DEFAULT_DESCRIPTION
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.datasets.streamed import streamed_corpus
from ..analyses.baselines import is_qa, query_length, selection_metric, truncated_queries
from ..claims import paper_table
from ..plots import plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RETRIEVERS, variant_runs
from ..tables.out_of_domain import attach_passages, bm25_run, dense_runs, entity_questions_rows
from ..tables.seeded import SeededModels, score_seeded_runs, score_seeded_runs_per_query, seed_sources
from ..tables.wide import wide_table
from .common import PageResult, reranking_params

PAGE = "taser_out_of_domain"
TRAINED = ["dpr", "taser", "shared"]
SCORES_LABEL = "nDCG@10 (×100) / macro R@20 (%)"


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def train(s: PageSettings) -> dict[str, list[CachedRun]]:
    """{model: [run per seed]} of DPR, TASER and TASER_Shared (and TASER from `cocondenser_model`, when set), with
    the in-domain page's training parameters (the same cached runs), trained or read from the run cache."""
    training = reranking_params(s)
    trained = variant_runs(TRAINED, s.seeds, training, progress=False)
    if s.cocondenser_model:
        trained["taser-cocondenser"] = variant_runs(["taser"], s.seeds, {**training, "model": s.cocondenser_model},
                                                    progress=False)["taser"]
    return trained


def runs_table(trained: Mapping[str, Sequence[CachedRun]]) -> pd.DataFrame:
    """Each run's model, seed and dev selection metric (the checkpoint evaluated here)."""
    return pd.DataFrame([{"model": name, "seed": run_.seed, "dev " + run_.result.get("select_metric", ""): run_.metric}
                         for name, runs in trained.items() for run_ in runs])


def seeded_models(s: PageSettings, trained: Mapping[str, Sequence[CachedRun]]) -> SeededModels:
    """The encoders of the zero-shot start (seed None) and of every trained run, by label and seed."""
    return SeededModels({"zero-shot": {None: s.model},
                         **{name: {run_.seed: run_.model_path for run_ in runs} for name, runs in trained.items()}},
                        device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                        max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)


def qa_stream(s: PageSettings):
    """The streamed QA corpus a question set retrieves from (None: each set brings its own passages)."""
    return (streamed_corpus(s.qa_corpus, s.stream_corpus, data_dir=os.environ.get("TASER_DATA_DIR"),
                            mirror=os.environ.get("TASER_DATA_MIRROR"), progress=False)
            if s.qa_corpus else None)


def paper_shown(paper: pd.DataFrame) -> dict[str, str]:
    """{paper dataset: the metric Table 2 reports for it}."""
    return {"entityquestions": "macro R@20", **{d: "nDCG@10" for d in paper["dataset"].unique()
                                               if d.startswith("beir-")}}


def load(s: PageSettings, name: str, split: str, stream):
    """The evaluation set `name` at `split` and the page's sizes."""
    return load_evaluation_set(name, split, n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               qa_corpus=None if stream else s.qa_corpus, data_dir=os.environ.get("TASER_DATA_DIR"),
                               mirror=os.environ.get("TASER_DATA_MIRROR"))


@dataclass(frozen=True)
class Evaluated:
    """What the out-of-domain sets gave: every scored row (one per model, seed, dataset and metric; BM25 and the
    zero-shot model: seed <NA>), per-query values (seeds averaged, and per seed) and each set's size."""

    seeded: pd.DataFrame
    per_query: list[dict]
    per_query_seeds: list[dict]
    sizes: pd.DataFrame


def evaluate(s: PageSettings, models: SeededModels, zero_shot, stream) -> Evaluated:
    """BM25, the zero-shot start and every trained run on each of `ood_datasets` (its test split, or its default
    split without one), queries cut at no token (QA sets: at most the papers' cap)."""
    rows, per_query, per_query_seeds, sizes = [], [], [], []
    for name in s.ood_datasets:
        info = get(name)
        split = "test" if "test" in info.splits else info.default_split
        dataset = load(s, name, split, stream)
        own_passages = len(dataset.corpus)  # a streamed question set gets just its retrieved passages below
        q_len = query_length(dataset, zero_shot, qa_cap=s.max_query_length)  # cuts no query (QA: at most the cap)
        runs = dense_runs(models, dataset, k=max(s.top_k), query_length=q_len, corpus=stream)
        runs[("bm25", None)] = bm25_run(dataset, k=max(s.top_k), corpus=stream)
        attach_passages(dataset, runs.values(), stream)  # only a set without passages of its own (EQ over dpr-wiki)
        rows += score_seeded_runs(dataset, runs, s.top_k)
        if is_qa(dataset):  # EntityQuestions: macro (over relations) and micro R@20, R@100
            rows += entity_questions_rows(dataset, runs)
        per_query += score_seeded_runs_per_query(dataset, runs)  # seeds averaged per query: the claims' paired tests
        per_query_seeds += score_seeded_runs_per_query(dataset, runs, average=False)
        sizes.append({"dataset": name, "split": split, "queries": len(dataset.queries),
                      "passages": own_passages or stream.n_docs, "metric": selection_metric(dataset),
                      "longest query (tokens)": query_length(dataset, zero_shot), "query length": q_len,
                      "queries truncated": truncated_queries(dataset, zero_shot, q_len)})
    seeded = pd.DataFrame(rows)
    seeded["seed"] = seeded["seed"].astype("Int64")  # BM25 and the zero-shot model have none
    return Evaluated(seeded, per_query, per_query_seeds, pd.DataFrame(sizes))


def retrieval_table(seeded: pd.DataFrame) -> pd.DataFrame:
    """Every model's metrics per dataset, mean (`value`) and std over seeds."""
    summary = summarise_seeds(seeded, by=["model", "dataset", "split", "metric"], digits=1)
    return summary.rename(columns={"mean": "value", "n": "seeds"}).round({"value": 2, "std": 2})


def significance_table(evaluated: Evaluated, order: Sequence[str]) -> pd.DataFrame:
    """Paired tests over the queries of every model against DPR on each dataset's selection metric, Holm over one
    dataset's comparisons."""
    tests = []
    for row in evaluated.sizes.itertuples():
        sources = seed_sources(evaluated.per_query_seeds, dataset=row.dataset)
        family = {m: sources[m] for m in ["dpr", *[m for m in order if m != "dpr"]] if m in sources}
        tests += [{"dataset": row.dataset, **c.as_dict()} for c in compare_systems(family, row.metric, baseline="dpr")]
    return pd.DataFrame(tests)


@dataclass(frozen=True)
class OutOfDomain(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    trained: Mapping[str, Sequence[CachedRun]]
    runs: pd.DataFrame
    precision: str
    passage_format: str
    paper: pd.DataFrame
    evaluated: Evaluated
    retrieval: pd.DataFrame
    significance: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order."""
        return {
            "retrieval": self.retrieval,
            "retrieval_seeds": self.evaluated.seeded,
            "retrieval_per_query": pd.DataFrame(self.evaluated.per_query),
            "significance": self.significance,
            "datasets": self.evaluated.sizes,
            "runs": self.runs,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s, sizes = self.settings, self.evaluated.sizes
        return {"profile": s.profile, "model": s.model, "cocondenser_model": s.cocondenser_model,
                "pooling": s.pooling, "seeds": list(s.seeds), "seed": s.seed, "n_train": s.n_train,
                "epochs": s.epochs, "n_queries": s.n_queries, "n_docs": s.n_docs,
                "max_passage_length": s.max_passage_length, "max_query_length": s.max_query_length,
                "query_lengths": dict(zip(sizes["dataset"], sizes["query length"].astype(int).tolist())),
                "passage_format": self.passage_format, "precision": self.precision}

    def order(self) -> list[str]:
        """The models in the order the figures and tables show them."""
        return ["bm25", "zero-shot", *self.trained]

    def started(self) -> str:
        """The starting checkpoint (the zero-shot row), the trained runs, the precision and how passages go in."""
        s = self.settings
        return "\n".join([
            f"starting checkpoint (zero-shot row): {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}",
            "trained: " + ", ".join(f"{name} ({RETRIEVERS['taser' if name == 'taser-cocondenser' else name].label}) x "
                                    f"{len(runs)} seed(s)" for name, runs in self.trained.items()),
            f"precision: {self.precision} | passages in: {self.passage_format}"])

    def runs_table(self) -> pd.DataFrame:
        return self.runs

    def datasets_table(self) -> pd.DataFrame:
        return self.evaluated.sizes

    def shown(self) -> dict[str, str]:
        """{dataset: the metric the main figure shows (EQ: macro R@20, the others nDCG@10)}."""
        return {row.dataset: ("macro R@20" if row.metric == "R@20" else "nDCG@10")
                for row in self.evaluated.sizes.itertuples()}

    def ood_figure(self) -> Figure:
        return plot_metric_bars(self.evaluated.seeded, self.shown(), models=self.order(), ylabel=SCORES_LABEL,
                                title=f"Out of domain, no further training ({self.settings.profile}; bars: mean, "
                                      f"whiskers: std over seeds)")

    def paper_figure(self) -> Figure:
        """The paper's Table 2 on its own datasets (no zero-shot or TASER_Shared row there)."""
        return plot_metric_bars(self.paper, paper_shown(self.paper), models=self.order(), ylabel=SCORES_LABEL,
                                title="The paper's Table 2 (its datasets, not ours)")

    def retrieval_table(self) -> pd.DataFrame:
        return wide_table(self.retrieval, index=["dataset", "metric"], columns="model", values="mean ± std",
                          order=self.order())

    def recall_figure(self) -> Figure:
        """R@100 of every model (EQ: micro R@100)."""
        at_100 = {d: ("micro R@100" if m == "macro R@20" else "R@100") for d, m in self.shown().items()}
        return plot_metric_bars(self.evaluated.seeded, at_100, models=self.order(), ylabel="R@100 (%)",
                                title="R@100 out of domain")

    def tests_table(self) -> pd.DataFrame:
        return self.significance[["dataset", "a", "b", "queries", "mean_a", "mean_b", "difference",
                                  "p_randomisation", "p_adjusted", "seed_std_a", "seed_std_b"]].round(4)

    def beside_table(self) -> pd.DataFrame:
        """Tables 2 and A4 (by label) beside our mean values (by model), per dataset and metric."""
        ours = self.retrieval[["model", "dataset", "metric", "value"]].rename(columns={"value": "ours"})
        beside = self.paper.merge(ours, on=["model", "dataset", "metric"], how="left").rename(
            columns={"value": "paper"})
        return beside.pivot_table(index=["dataset", "metric"], columns="label", values="paper", aggfunc="first",
                                  sort=False).join(
            beside.pivot_table(index=["dataset", "metric"], columns="model", values="ours", aggfunc="first",
                               sort=False).add_prefix("ours: ")).round(1)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> OutOfDomain:
    """Train (or read from the run cache) the page's runs at `s`, evaluate them out of domain, compute the tables
    and save them into `results_dir` (None: nothing saved, and it says so)."""
    trained = train(s)
    runs = runs_table(trained)
    models = seeded_models(s, trained)
    zero_shot = models.encoder("zero-shot", None)
    stream = qa_stream(s)
    paper = paper_table("taser_table_2")
    evaluated = evaluate(s, models, zero_shot, stream)
    retrieval = retrieval_table(evaluated.seeded)
    page = OutOfDomain(s, trained, runs, zero_shot.resolved_precision, zero_shot.passage_format, paper, evaluated,
                       retrieval, significance_table(evaluated, ["bm25", "zero-shot", *trained]),
                       results_dir=results_dir)
    page.publish(results_dir)
    return page
