"""The baselines page (the BM25 rows of TASER Tables 1, 2, A2 and A4): BM25, the page's dense model zero-shot and
their hybrid, the hybrid's weight chosen on the QA sets' dev questions.

    >>> page = run(settings("cpu"), results_dir="results/cpu/baselines")
    >>> print(page.encoder_lines())    # the dense model, its precision and how it reads a passage
    >>> print(page.alpha_line())       # the hybrid weight chosen on dev, with dev R@20 per weight
    >>> page.datasets_table()          # each test set: questions, passages, how it is scored, query lengths
    >>> page.test_figure()             # R@20 on the QA sets, nDCG@10 out of domain
    >>> page.paper_figure()            # the paper's Table A2 rows
    >>> page.retrieval_table()         # every metric of every model on every set
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.datasets.registry import get
from taser_lib.models import DEFAULT_DESCRIPTION, load_encoder
from taser_lib.retrieval import fuse
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.datasets.streamed import streamed_corpus
from ..analyses.baselines import (AlphaChoice, choose_hybrid_alpha, first_stage_runs, is_qa, query_length, score_runs,
                                  score_runs_per_query, truncated_queries)
from ..claims import paper_table
from ..plots import plot_metric_bars
from ..profiles import PageSettings, page_settings
from ..scorecard import publish
from ..tables.cutoffs import cutoff_table, mark_matched_cutoff
from ..tables.wide import wide_table
from .common import PageResult

PAGE = "baselines"
PASSAGE_FORMATS = {"pair": "[CLS] title [SEP] text [SEP] (DPR's pair)",
                   "concat": 'one string "title text" (its own, sentence-transformers)'}


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def paper_rows() -> pd.DataFrame:
    """The paper's BM25, DPR (multi-set, without SQuAD) and their hybrid: Ma et al.'s rows of Table A2, named as
    ours (bm25, dense, hybrid)."""
    paper = paper_table("taser_table_a2").replace({"model": {"dpr-no-squad": "dense", "dpr-no-squad+bm25": "hybrid"}})
    return paper[paper["model"].isin(["bm25", "dense", "hybrid"])]


@dataclass(frozen=True)
class Sources:
    """Where the page reads its data: the data directory, the mirror, the streamed QA corpus (None: each set's own
    corpus) and the sizes every set is cut to."""

    s: PageSettings
    data_dir: str | None
    mirror: str | None
    qa_stream: Any

    def load(self, name: str, split: str):
        s = self.s
        return load_evaluation_set(name, split, n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                                   qa_corpus=None if self.qa_stream else s.qa_corpus, data_dir=self.data_dir,
                                   mirror=self.mirror)


def sources(s: PageSettings) -> Sources:
    """The page's data sources, from $TASER_DATA_DIR and $TASER_DATA_MIRROR."""
    data_dir, mirror = os.environ.get("TASER_DATA_DIR"), os.environ.get("TASER_DATA_MIRROR")
    qa_stream = (streamed_corpus(s.qa_corpus, s.stream_corpus, data_dir=data_dir, mirror=mirror)
                 if s.qa_corpus else None)
    return Sources(s, data_dir, mirror, qa_stream)


def hybrid_alpha(s: PageSettings, src: Sources, encoder) -> AlphaChoice:
    """One α for every dataset, chosen by R@20 on the dev questions of the QA sets that have a dev split."""
    dev = []
    for name in s.qa_datasets:
        if "dev" in get(name).splits:
            dev_set = src.load(name, "dev")
            dev.append((dev_set, first_stage_runs(dev_set, encoder, k=max(s.top_k),
                                                  query_length=query_length(dev_set, encoder,
                                                                            qa_cap=s.max_query_length),
                                                  corpus=src.qa_stream)))
    return choose_hybrid_alpha(dev)


@dataclass(frozen=True)
class TestResults:
    """The test sets' scores (`retrieval`, `per_query`), their sizes, and the cutoffs matched to DPR's corpus."""

    retrieval: pd.DataFrame
    per_query: pd.DataFrame
    sizes: pd.DataFrame
    cutoffs: pd.DataFrame


def test_retrieval(s: PageSettings, src: Sources, encoder, alpha: float) -> TestResults:
    """BM25, dense and their hybrid (weight `alpha`) on every set's test split (or its default split)."""
    rows, per_query_rows, sizes, n_passages = [], [], [], {}
    for name in s.qa_datasets + s.ood_datasets:
        info = get(name)
        split = "test" if "test" in info.splits else info.default_split
        dataset = src.load(name, split)
        own_passages = len(dataset.corpus)  # a streamed question set gets just its retrieved passages below
        q_len = query_length(dataset, encoder, qa_cap=s.max_query_length)  # cuts no query (QA sets: at most the cap)
        runs = first_stage_runs(dataset, encoder, k=max(s.top_k), query_length=q_len, corpus=src.qa_stream)
        runs["hybrid"] = fuse(runs["dense"], runs["bm25"], alpha, k=max(s.top_k))
        rows += score_runs(dataset, runs, s.top_k)
        per_query_rows += score_runs_per_query(dataset, runs, recall_at=tuple(s.top_k))  # the claims' paired tests
        if is_qa(dataset):  # the cutoff whose share of the corpus matches R@20 over DPR's Wikipedia decides
            n_passages[name] = own_passages or src.qa_stream.n_docs
        sizes.append({"dataset": name, "split": split, "queries": len(dataset.queries),
                      "passages": own_passages or src.qa_stream.n_docs,
                      "scored by": "answer recall" if is_qa(dataset) else "qrels",
                      "longest query (tokens)": query_length(dataset, encoder),  # uncapped but for its positions
                      "query length": q_len, "queries truncated": truncated_queries(dataset, encoder, q_len),
                      f"queries cut at {s.max_query_length}": truncated_queries(dataset, encoder,
                                                                                 s.max_query_length)})
    retrieval = pd.DataFrame(rows)
    retrieval["value"] = retrieval["value"].round(2)
    per_query = pd.DataFrame(per_query_rows)
    cutoffs = cutoff_table(n_passages, s.top_k)
    # `decides`: the QA sets' rows at their matched cutoff; the other sets are judged by nDCG@10 and decide nothing
    retrieval, per_query = (mark_matched_cutoff(f, n_passages, s.top_k, others=False) for f in (retrieval, per_query))
    return TestResults(retrieval, per_query, pd.DataFrame(sizes), cutoffs)


@dataclass(frozen=True)
class Baselines(PageResult):
    """The page's result: its settings, the encoder, the hybrid's weight and the test results (`results_dir`: where
    its tables were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    encoder: Any
    choice: AlphaChoice
    test: TestResults
    results_dir: str | os.PathLike | None = None

    def parameters(self) -> dict[str, Any]:
        s, sizes = self.settings, self.test.sizes
        return {"profile": s.profile, "model": s.model, "alpha": self.choice.alpha, "n_queries": s.n_queries,
                "n_docs": s.n_docs, "seed": s.seed, "max_passage_length": s.max_passage_length,
                "max_query_length": s.max_query_length,
                "query_lengths": dict(zip(sizes["dataset"], sizes["query length"].astype(int).tolist())),
                "passage_format": self.encoder.passage_format, "precision": self.encoder.resolved_precision}

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        t = self.test
        return publish(results_dir, PAGE,
                       tables={"retrieval": t.retrieval, "datasets": t.sizes, "retrieval_per_query": t.per_query,
                               "cutoffs": t.cutoffs,
                               "alpha": pd.DataFrame([{"alpha": a, "dev_R@20": v}
                                                      for a, v in self.choice.scores.items()])},
                       parameters=self.parameters(), settings=self.settings)

    def encoder_lines(self) -> str:
        s = self.settings
        return "\n".join([f"dense model: {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}",
                          f"precision: {self.encoder.resolved_precision}",
                          f"passages in: {PASSAGE_FORMATS[self.encoder.passage_format]}"])

    def alpha_line(self) -> str:
        return (f"alpha = {self.choice.alpha} (dev R@20 by alpha: "
                + ", ".join(f"{a}: {100 * v:.1f}" for a, v in self.choice.scores.items()) + ")")

    def datasets_table(self) -> pd.DataFrame:
        return self.test.sizes

    def test_figure(self) -> Figure:
        s = self.settings
        metric = {name: "R@20" if name in s.qa_datasets else "nDCG@10" for name in s.qa_datasets + s.ood_datasets}
        return plot_metric_bars(self.test.retrieval, metric, ylabel="R@20 (%) / nDCG@10 (×100)",
                                title=f"Test: R@20 on the QA sets, nDCG@10 out of domain ({s.profile} profile)")

    def paper_figure(self) -> Figure:
        return plot_metric_bars(paper_rows(), "R@20", models=["bm25", "dense", "hybrid"], ylabel="R@20 (%)",
                                title="The paper's Table A2: BM25, DPR without SQuAD, their hybrid")

    def retrieval_table(self) -> pd.DataFrame:
        return wide_table(self.test.retrieval, index=["dataset", "metric"], columns="model")


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Baselines:
    """Encode, retrieve and score every set at `s`, and save the page's tables into `results_dir` (None: nothing
    saved, and it says so)."""
    encoder = load_encoder(s.model, device=s.device, max_query_length=s.max_query_length,
                           max_passage_length=s.max_passage_length, batch_size=s.eval_batch_size,
                           precision=s.precision, show_progress=False)
    src = sources(s)
    choice = hybrid_alpha(s, src, encoder)
    page = Baselines(s, encoder, choice, test_retrieval(s, src, encoder, choice.alpha), results_dir)
    page.publish(results_dir)
    return page
