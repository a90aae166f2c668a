"""The BM25-hybrid page (TASER Eq. 6, Appendix D, Table A2): for every dense model (the zero-shot start, DPR, TASER
Det-R and TASER_Shared of the in-domain page), dev recall of the dense + α·BM25 hybrid over the paper's grid of α,
one α per model, then test recall alone and as a hybrid at that α, and paired tests of the hybrid against its dense
model.

    >>> page = run(settings("cpu"), results_dir="results/cpu/taser_hybrid")
    >>> print(page.started())           # the starting checkpoint, the runs trained or reused, precision and passages
    >>> print(page.chosen_alphas())     # each model's α, chosen on dev R@20
    >>> page.alpha_figure();            # dev R@20 and R@5 against α, per model
    >>> page.dev_table()                # dev recall of each model alone and at its α
    >>> page.sizes_table()              # the test questions and passages of each QA set
    >>> page.test_figure();             # test R@20 of each model alone and with BM25 at its α
    >>> page.test_table()               # test recall, mean ± std over seeds
    >>> page.tests_table()              # paired tests: each hybrid against its dense model
    >>> page.paper_table()              # Table A2's dense and hybrid rows
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
from ..analyses.baselines import query_length
from ..claims import paper_table
from ..plots import plot_alpha_panels, plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.recipes import RETRIEVERS, variant_runs
from ..tables.cutoffs import cutoff_table, mark_matched_cutoff
from ..tables.hybrid_sweep import alpha_sweep, best_alphas, fused_runs, seed_curves
from ..tables.out_of_domain import attach_passages, bm25_run, dense_runs
from ..tables.seeded import SeededModels, score_seeded_runs, score_seeded_runs_per_query, seed_sources
from ..tables.wide import wide_table
from .common import PageResult, reranking_params

PAGE = "taser_hybrid"
TRAINED = ["dpr", "taser", "shared"]
ORDER = ["bm25"] + [m for name in ["zero-shot", *TRAINED] for m in (name, f"{name}+bm25")]
PAPER_ROWS = ["bm25", "dpr-no-squad", "dpr-no-squad+bm25", "taser", "taser+bm25"]


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def train(s: PageSettings) -> dict[str, list[CachedRun]]:
    """{variant: [run per seed]} of DPR, TASER and TASER_Shared, with the in-domain page's training parameters (the
    same cached runs), trained or read from the run cache."""
    return variant_runs(TRAINED, s.seeds, reranking_params(s), progress=False)


def seeded_models(s: PageSettings, trained: Mapping[str, Sequence[CachedRun]]) -> SeededModels:
    """The encoders of the zero-shot start (seed None) and of every trained run, by label and seed."""
    return SeededModels({"zero-shot": {None: s.model},
                         **{name: {run.seed: run.model_path for run in runs} for name, runs in trained.items()}},
                        device=s.device, precision=s.precision, max_query_length=s.max_query_length,
                        max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size)


def labels() -> dict[str, str]:
    """{model: the label the page shows}."""
    return {"zero-shot": "zero-shot", **{name: RETRIEVERS[name].label for name in TRAINED}}


def qa_stream(s: PageSettings):
    """The streamed QA corpus the questions retrieve from (None: each set brings its own passages)."""
    return (streamed_corpus(s.qa_corpus, s.stream_corpus, data_dir=os.environ.get("TASER_DATA_DIR"),
                            mirror=os.environ.get("TASER_DATA_MIRROR"), progress=False)
            if s.qa_corpus else None)


def load(s: PageSettings, name: str, split: str, stream):
    """The evaluation set `name` at `split` and the page's sizes."""
    return load_evaluation_set(name, split, n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               qa_corpus=None if stream else s.qa_corpus, data_dir=os.environ.get("TASER_DATA_DIR"),
                               mirror=os.environ.get("TASER_DATA_MIRROR"))


def first_stage(s: PageSettings, models: SeededModels, zero_shot, dataset, stream) -> tuple[dict, Any]:
    """({(model, seed): dense run}, BM25's run) over `dataset`, the questions cut at the papers' cap; the corpus
    vectors are kept for the next split with the same passages (SQuAD-open's dev and test share one corpus)."""
    q_len = query_length(dataset, zero_shot, qa_cap=s.max_query_length)
    dense = dense_runs(models, dataset, k=max(s.top_k), query_length=q_len, corpus=stream, keep_vectors=True)
    sparse = bm25_run(dataset, k=max(s.top_k), corpus=stream)
    attach_passages(dataset, [*dense.values(), sparse], stream)  # a set without passages (full: over dpr-wiki)
    return dense, sparse


def dev_sweep(s: PageSettings, models: SeededModels, zero_shot, stream) -> tuple[pd.DataFrame, dict[str, float]]:
    """(dev R@5 and R@20 of every (model, seed) at every α on the pooled dev questions, {model: its chosen α})."""
    dev = {}  # (model, seed) -> [(dev set, {"dense": run, "bm25": run})]
    for name in s.qa_datasets:
        if "dev" not in get(name).splits:
            continue
        dev_set = load(s, name, "dev", stream)
        dense, sparse = first_stage(s, models, zero_shot, dev_set, stream)
        for key, run_ in dense.items():
            dev.setdefault(key, []).append((dev_set, {"dense": run_, "bm25": sparse}))
    sweep = alpha_sweep(dev, qa_ks=(5, 20))
    return sweep, best_alphas(sweep, metric="R@20")


@dataclass(frozen=True)
class Tested:
    """What the test sets gave: every scored row (one per model, seed, dataset and cutoff), per-question recall
    (seeds averaged, and per seed), each set's size and {dataset: passages}."""

    rows: list[dict]
    per_query: list[dict]
    per_query_seeds: list[dict]
    sizes: list[dict]
    n_passages: dict[str, int]


def test_runs(s: PageSettings, models: SeededModels, zero_shot, stream, alphas: Mapping[str, float]) -> Tested:
    """Every model alone, as a hybrid at its α, and BM25 on each QA set's test split (its default split without
    one), scored at every cutoff."""
    rows, per_query, per_query_seeds, sizes, n_passages = [], [], [], [], {}
    for name in s.qa_datasets:
        info = get(name)
        split = "test" if "test" in info.splits else info.default_split
        test = load(s, name, split, stream)
        own_passages = len(test.corpus)
        dense, sparse = first_stage(s, models, zero_shot, test, stream)
        runs = {**dense, **fused_runs(dense, sparse, alphas, k=max(s.top_k)), ("bm25", None): sparse}
        rows += score_seeded_runs(test, runs, s.top_k)
        # R@K per question at every cutoff, seeds averaged: the claim's paired tests (at the deciding cutoff)
        per_query += score_seeded_runs_per_query(test, runs, recall_at=tuple(s.top_k))
        per_query_seeds += score_seeded_runs_per_query(test, runs, average=False, recall_at=tuple(s.top_k))
        n_passages[name] = own_passages or stream.n_docs
        sizes.append({"dataset": name, "split": split, "questions": len(test.queries),
                      "passages": own_passages or stream.n_docs})
    return Tested(rows, per_query, per_query_seeds, sizes, n_passages)


def seeded_table(tested: Tested) -> pd.DataFrame:
    """Every scored row, one per model, seed, dataset and cutoff (BM25 and the zero-shot model: seed <NA>)."""
    seeded = pd.DataFrame(tested.rows)
    seeded["seed"] = seeded["seed"].astype("Int64")  # BM25 and the zero-shot model have none
    return seeded


def retrieval_table(s: PageSettings, seeded: pd.DataFrame, n_passages: Mapping[str, int]) -> pd.DataFrame:
    """Test recall of every model, mean ± std over seeds, with `decides`: the cutoff the claims are judged at."""
    retrieval = (summarise_seeds(seeded, by=["model", "dataset", "split", "metric"], digits=1)
                 .rename(columns={"mean": "value", "n": "seeds"}).round({"value": 2, "std": 2}))
    return mark_matched_cutoff(retrieval, n_passages, s.top_k)


def significance_table(tested: Tested, cutoffs: pd.DataFrame, alphas: Mapping[str, float]) -> pd.DataFrame:
    """Paired tests over questions of each hybrid against its own dense model, at R@20 and the deciding cutoff."""
    tests = []
    for row in tested.sizes:
        sources = seed_sources(tested.per_query_seeds, dataset=row["dataset"])
        for name in ["zero-shot", *TRAINED]:
            pair = {f"{name}+bm25": sources[f"{name}+bm25"], name: sources[name]}
            deciding = cutoffs.set_index("dataset").loc[row["dataset"], "metric"]
            tests += [{"dataset": row["dataset"], "alpha": alphas[name], **c.as_dict()}
                      for metric in dict.fromkeys(["R@20", deciding])
                      for c in compare_systems(pair, metric, baseline=name)]
    return pd.DataFrame(tests)


@dataclass(frozen=True)
class Hybrid(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    trained: Mapping[str, Sequence[CachedRun]]
    labels: Mapping[str, str]
    precision: str
    passage_format: str
    sweep: pd.DataFrame
    alphas: Mapping[str, float]
    tested: Tested
    seeded: pd.DataFrame
    retrieval: pd.DataFrame
    cutoffs: pd.DataFrame
    significance: pd.DataFrame
    paper: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order."""
        return {
            "retrieval": self.retrieval,
            "retrieval_seeds": self.seeded,
            "retrieval_per_query": mark_matched_cutoff(pd.DataFrame(self.tested.per_query), self.tested.n_passages,
                                                       self.settings.top_k),
            "cutoffs": self.cutoffs,
            "alpha_sweep": self.sweep,
            "alphas": pd.DataFrame([{"model": m, "alpha": a} for m, a in self.alphas.items()]),
            "significance": self.significance,
        }

    def parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table."""
        s = self.settings
        return {"profile": s.profile, "model": s.model, "pooling": s.pooling, "seeds": list(s.seeds), "seed": s.seed,
                "n_train": s.n_train, "epochs": s.epochs, "n_queries": s.n_queries, "n_docs": s.n_docs,
                "max_passage_length": s.max_passage_length, "max_query_length": s.max_query_length,
                "alphas": self.alphas, "passage_format": self.passage_format, "precision": self.precision}

    def started(self) -> str:
        """The starting checkpoint (the zero-shot row), the runs trained or reused, the precision and how passages
        are fed."""
        s, trained = self.settings, self.trained
        return "\n".join([
            f"starting checkpoint (zero-shot row): {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}",
            "trained: " + ", ".join(f"{self.labels[name]} x {len(runs)} seed(s)" for name, runs in trained.items())
            + f" - {sum(run.reused for runs in trained.values() for run in runs)} of "
              f"{sum(len(runs) for runs in trained.values())} runs reused from the cache",
            f"precision: {self.precision} | passages in: {self.passage_format}"])

    def chosen_alphas(self) -> str:
        return "chosen alpha: " + ", ".join(f"{self.labels[m]} {a}" for m, a in self.alphas.items())

    def alpha_figure(self) -> Figure:
        return plot_alpha_panels(self.sweep, self.alphas, metrics=["R@20", "R@5"], labels=self.labels)

    def dev_table(self) -> pd.DataFrame:
        """Dev recall (mean over seeds) of each model alone (α = 0) and at its chosen α."""
        curves = seed_curves(self.sweep)
        chosen = (curves[curves.apply(lambda r: r["alpha"] == self.alphas.get(r["model"]), axis=1)]
                  .assign(choice="chosen alpha"))
        alone = curves[curves["alpha"] == 0.0].assign(choice="dense alone")
        return pd.concat([alone, chosen]).pivot_table(index=["model", "choice"], columns="metric", values="mean",
                                                      aggfunc="first", sort=False).round(2)

    def sizes_table(self) -> pd.DataFrame:
        return pd.DataFrame(self.tested.sizes)

    def test_figure(self) -> Figure:
        """Test R@20 of each model alone and with BM25 at its α, per QA set."""
        return plot_metric_bars(self.seeded, {row["dataset"]: "R@20" for row in self.tested.sizes}, models=ORDER,
                                ylabel="R@20 (%)",
                                title=f"Test R@20: each model alone and with BM25 at its alpha "
                                      f"({self.settings.profile})")

    def test_table(self) -> pd.DataFrame:
        return wide_table(self.retrieval, index=["dataset", "metric"], columns="model", values="mean ± std",
                          order=ORDER)

    def tests_table(self) -> pd.DataFrame:
        return self.significance[["dataset", "metric", "a", "b", "alpha", "queries", "mean_a", "mean_b", "difference",
                                  "ci_low", "ci_high", "p_randomisation"]].round(4)

    def paper_table(self) -> pd.DataFrame:
        """Table A2's BM25, DPR (without SQuAD) and TASER rows, dense and hybrid."""
        return wide_table(self.paper, index=["dataset", "metric"], columns="label")


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Hybrid:
    """Train (or read from the run cache) the page's runs at `s`, sweep α on dev, test every model at its α, and
    save the tables into `results_dir` (None: nothing saved, and it says so)."""
    trained = train(s)
    models = seeded_models(s, trained)
    zero_shot = models.encoder("zero-shot", None)
    stream = qa_stream(s)
    sweep, alphas = dev_sweep(s, models, zero_shot, stream)
    tested = test_runs(s, models, zero_shot, stream, alphas)
    seeded = seeded_table(tested)
    retrieval = retrieval_table(s, seeded, tested.n_passages)
    cutoffs = cutoff_table(tested.n_passages, s.top_k)
    paper = paper_table("taser_table_a2")
    page = Hybrid(s, trained, labels(), zero_shot.resolved_precision, zero_shot.passage_format, sweep, alphas, tested,
                  seeded, retrieval, cutoffs, significance_table(tested, cutoffs, alphas),
                  paper[paper["model"].isin(PAPER_ROWS)], results_dir=results_dir)
    page.publish(results_dir)
    return page
