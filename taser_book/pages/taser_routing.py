"""The routing page (TASER Table A1): one-tower TASER variants (TASER_Shared, deterministic routing Det-R, learned
routing Seq-R and Tok-R with I = 2 or 4 experts, with and without hard-negative mining) beside the two-tower DPR on
SQuAD-open, what the learned routers do, and Seq-R under each reading of the routing-entropy term.

    >>> s = settings("cpu")
    >>> print(starting_checkpoint(s))      # the checkpoint every variant starts from
    >>> page = run(s, results_dir="results/cpu/taser_routing")
    >>> print(page.trained())              # how many runs the page trained (or read from the run cache)
    >>> print(page.questions_counted())    # the test (and dev) questions and the passages scored
    >>> page.table_a1()                    # Table A1: parameters and recall, mean ± std over seeds, beside the paper
    >>> page.retrieval_figures();          # test R@20 and the deciding cutoff, ours beside Table A1
    >>> page.usage_figure();               # the learned routers' expert usage per specialised block
    >>> page.usage_table()                 # its summary: separation of the two sides, share of the top expert
    >>> print(page.usage_counted())        # the questions and passages the usage counts
    >>> page.top_tokens()                  # the tokens each Tok-R (I = 2) expert takes
    >>> page.entropy_figure();             # routing entropies during training under each entropy option
    >>> page.mode_usage_figure();          # expert usage under each entropy option
    >>> page.entropy_modes_table()         # each option's test R@20, last entropies and usage
    >>> page.cutoffs_table()               # the cutoff whose corpus share is closest to the paper's R@20
    >>> page.claims()                      # the paper's claims beside ours, with their verdicts
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import summarise_seeds
from taser_lib.models import DEFAULT_DESCRIPTION, PAPER_PARAMS_M, count_parameters
from taser_lib.models.params import paper_params_key
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.training.logs import routing_entropy_curve
from ..analyses.routing import expert_usage, token_routing, top_tokens, usage_inputs, usage_summary
from ..claims import paper_table
from ..plots import plot_beside_paper, plot_expert_usage, plot_routing_entropy
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import entropy_mode_changes, variant_run, variant_runs
from ..scorecard import publish
from ..tables.cutoffs import cutoff_table, mark_matched_cutoff
from ..tables.seeded import SeededModels, score_seeded_runs, score_seeded_runs_per_query
from .common import PageResult, reranking_params

PAGE = "taser_routing"
DATASET = "squad-open"  # the variants train on SQuAD-open train (configs/squad_open_*.yaml) at every profile
LOG_EVERY_STEP = [changes.loop(log_every=1)]  # one log line per step for the entropy curves (not part of a run's key)
ID = {"taser": "det-r"}  # table ids: Table A1 calls the default TASER Det-R
LABEL = {"dpr": "DPR", "shared": "TASER_Shared", "det-r": "Det-R", "seq-r-2": "Seq-R I=2", "seq-r-4": "Seq-R I=4",
         "tok-r-2": "Tok-R I=2", "tok-r-4": "Tok-R I=4"}
LABEL |= {f"{k}-hn": f"{v}†" for k, v in LABEL.items()}

Runs = Mapping[str, Sequence[CachedRun]]


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def starting_checkpoint(s: PageSettings) -> str:
    """The sentence naming the checkpoint every variant starts from."""
    return f"starting checkpoint: {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}"


def train(s: PageSettings) -> tuple[dict[str, list[CachedRun]], dict[str, list[CachedRun]], dict[str, list[CachedRun]]]:
    """({variant: [run per seed]} of Table A1's variants, of the mined † variants, {entropy mode: [run per seed]} of
    the entropy variant), trained or read from the run cache."""
    params = reranking_params(s)
    table_runs = variant_runs(s.routing_variants, s.seeds, params, changes=LOG_EVERY_STEP, progress=False)
    mined_runs = variant_runs(s.mining_variants, s.mining_seeds, params, mined=True, changes=LOG_EVERY_STEP,
                              progress=False)
    mode_runs = {mode: [variant_run(s.entropy_variant, seed, params, progress=False,
                                    changes=[*entropy_mode_changes(mode), *LOG_EVERY_STEP])
                        for seed in s.entropy_seeds]
                 for mode in s.entropy_modes}
    return table_runs, mined_runs, mode_runs


def model_paths(s: PageSettings, table_runs: Runs, mined_runs: Runs, mode_runs: Runs
                ) -> tuple[dict[str, dict[int, Any]], dict[str, str], dict[str, dict[int, Any]]]:
    """({table id: {seed: model path}} of the table's models, {entropy mode: the label its runs are scored under},
    {label: {seed: model path}} of the mode runs that are not the table's own (release: scored once, as the
    table's))."""
    paths = {ID.get(n, n): {r.seed: r.model_path for r in runs} for n, runs in table_runs.items()}
    paths |= {ID.get(n, n) + "-hn": {r.seed: r.model_path for r in runs} for n, runs in mined_runs.items()}
    mode_label, mode_paths = {}, {}
    for mode, runs in mode_runs.items():
        by_seed, label = {r.seed: r.model_path for r in runs}, ID.get(s.entropy_variant, s.entropy_variant)
        if any(paths.get(label, {}).get(seed) != path for seed, path in by_seed.items()):
            label = f"{s.entropy_variant} ({mode})"
            mode_paths[label] = by_seed
        mode_label[mode] = label
    return paths, mode_label, mode_paths


def seeded_models(s: PageSettings, paths: Mapping[str, Mapping[int, Any]],
                  mode_paths: Mapping[str, Mapping[int, Any]]) -> SeededModels:
    """The encoders of every scored model, by label and seed."""
    return SeededModels({**paths, **mode_paths}, device=s.device, precision=s.precision,
                        max_query_length=s.max_query_length, max_passage_length=s.max_passage_length,
                        batch_size=s.eval_batch_size)


def load(s: PageSettings, split: str):
    """The SQuAD-open evaluation set of `split` at the page's sizes."""
    return load_evaluation_set(DATASET, split, n_queries=s.n_queries, n_docs=s.n_docs, seed=s.seed,
                               data_dir=os.environ.get("TASER_DATA_DIR"), mirror=os.environ.get("TASER_DATA_MIRROR"))


def retrieval_tables(s: PageSettings, models: SeededModels, paths: Mapping[str, Mapping[int, Any]]
                     ) -> tuple[Any, Any, dict[str, int], pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(test set, dev set or None, {dataset: passages}, every scored row (one per model, seed, split and cutoff,
    rounded), the table models' rows, their mean over seeds, their per-question test recall)."""
    test = load(s, "test")
    test_runs = models.runs(test, k=max(s.top_k), query_length=s.max_query_length)
    rows = score_seeded_runs(test, test_runs, s.top_k)
    dev = None
    if s.score_dev:
        dev = load(s, "dev")
        rows += score_seeded_runs(dev, models.runs(dev, k=max(s.top_k), query_length=s.max_query_length,
                                                   labels=list(paths)), [20])
    n_passages = {DATASET: len(test.corpus)}
    scores = mark_matched_cutoff(pd.DataFrame(rows), n_passages, s.top_k)
    scores["value"] = scores["value"].round(2)
    retrieval_seeds = scores[scores["model"].isin(paths)].reset_index(drop=True)  # one row per seed
    retrieval = mark_matched_cutoff(summarise_seeds(retrieval_seeds, by=["model", "dataset", "split", "metric"])
                                    .rename(columns={"mean": "value", "n": "seeds"}).round({"value": 2, "std": 2}),
                                    n_passages, s.top_k)  # mean over seeds
    per_query = mark_matched_cutoff(pd.DataFrame(score_seeded_runs_per_query(
        test, {k: r for k, r in test_runs.items() if k[0] in paths}, recall_at=tuple(s.top_k))), n_passages, s.top_k)
    return test, dev, n_passages, scores, retrieval_seeds, retrieval, per_query


def parameter_table(models: SeededModels, paths: Mapping[str, Mapping[int, Any]]) -> pd.DataFrame:
    """Each table model's experts and parameter count (millions) beside the paper's."""
    parameters = []
    for label, by_seed in paths.items():
        net = models.encoder(label, next(iter(by_seed))).model
        parameters.append({"model": label, "experts": getattr(net.config, "num_experts", None),
                           "params_m": round(count_parameters(net) / 1e6, 2),
                           "paper_params_m": PAPER_PARAMS_M.get(paper_params_key(net))})
    return pd.DataFrame(parameters).astype({"experts": "Int64"})  # DPR: no experts


def table_a1(s: PageSettings, parameters: pd.DataFrame, retrieval_seeds: pd.DataFrame,
             paper: pd.DataFrame) -> pd.DataFrame:
    """Table A1: each model's parameters and recall (mean ± std over seeds) beside the paper's, by label."""
    summary = summarise_seeds(retrieval_seeds.assign(column=[m if sp == "test" else f"{sp} {m}" for sp, m in
                                                             zip(retrieval_seeds["split"], retrieval_seeds["metric"])]),
                              by=["model", "column"], digits=1)
    theirs = paper.pivot_table(index="model", columns="metric", values="value", sort=False)
    table = (parameters.set_index("model")
             .join(summary.pivot(index="model", columns="column", values="mean ± std")
                   .reindex(columns=["dev R@20", *[f"R@{k}" for k in s.top_k]]))
             .join(theirs.rename(columns={"dev R@20": "paper dev R@20", "R@20": "paper R@20"})
                   [["paper dev R@20", "paper R@20"]]))
    return (table.dropna(axis=1, how="all").rename(index=LABEL)  # no dev column without score_dev
            .rename(columns={"params_m": "params (M)", "paper_params_m": "paper params (M)"}))


def routing_usage(models: SeededModels, paths: Mapping[str, Mapping[int, Any]], questions: Sequence[str],
                  passages: Sequence) -> tuple[list[str], pd.DataFrame]:
    """(the learned-routing models, with and without mining; their expert usage per block, model and seed)."""
    strategy = {label: getattr(models.encoder(label, next(iter(by_seed))).model.config, "strategy", None)
                for label, by_seed in paths.items()}  # a TASER model's routing strategy; None for DPR
    learned = [label for label in paths if strategy[label] is not None and strategy[label].learned]
    usage = pd.concat([expert_usage(models.encoder(label, seed), questions, passages).assign(model=label, seed=seed)
                       for label in learned for seed in paths[label]] or [pd.DataFrame()], ignore_index=True)
    return learned, usage


def tok_r_tokens(models: SeededModels, paths: Mapping[str, Mapping[int, Any]],
                 questions: Sequence[str]) -> pd.DataFrame | None:
    """The tokens each Tok-R (I = 2, first seed) expert takes on the questions (None: no Tok-R I = 2 here)."""
    if "tok-r-2" not in paths:
        return None
    first = next(iter(paths["tok-r-2"]))
    return top_tokens(token_routing(models.encoder("tok-r-2", first), questions, side="question"), n=8)


def entropy_curves(mode_runs: Runs) -> pd.DataFrame:
    """Every entropy-mode run's routing entropies at each training step."""
    return pd.concat([routing_entropy_curve(r.dir).assign(mode=mode, seed=r.seed)
                      for mode, runs in mode_runs.items() for r in runs] or [pd.DataFrame()], ignore_index=True)


def mode_names(s: PageSettings, mode_runs: Runs) -> dict[str, str]:
    """{entropy mode: the label its figure shows}."""
    return {mode: f"{LABEL.get(s.entropy_variant, s.entropy_variant)} ({mode})" for mode in mode_runs}


def entropy_mode_usage(s: PageSettings, models: SeededModels, mode_runs: Runs, mode_label: Mapping[str, str],
                       questions: Sequence[str], passages: Sequence) -> pd.DataFrame:
    """The expert usage of every entropy-mode run, per block, mode and seed."""
    named = mode_names(s, mode_runs)
    return pd.concat([expert_usage(models.encoder(mode_label[mode], r.seed), questions, passages)
                      .assign(model=named[mode], mode=mode, seed=r.seed)
                      for mode, runs in mode_runs.items() for r in runs] or [pd.DataFrame()], ignore_index=True)


def entropy_modes(s: PageSettings, mode_runs: Runs, mode_label: Mapping[str, str], scores: pd.DataFrame,
                  curves: pd.DataFrame, mode_usage: pd.DataFrame) -> pd.DataFrame:
    """Per entropy mode: test R@20 (mean ± std over its seeds), the last per-unit and batch entropies, and the
    usage summary (top expert's share per side, separation)."""
    test_r20 = scores[(scores["split"] == "test") & (scores["metric"] == "R@20") & scores["seed"].isin(s.entropy_seeds)]
    return pd.DataFrame([{
        "mode": mode,
        "test R@20": summarise_seeds(test_r20[test_r20["model"] == mode_label[mode]], by=["model"], digits=1)
        ["mean ± std"][0],
        "last h_unit": curves.loc[curves["mode"] == mode].groupby("seed")["h_unit"].last().mean(),
        "last h_batch": curves.loc[curves["mode"] == mode].groupby("seed")["h_batch"].last().mean(),
        **usage_summary(mode_usage[mode_usage["mode"] == mode])[["top_question", "top_passage", "separation"]].mean(),
    } for mode in mode_runs])


@dataclass(frozen=True)
class Routing(PageResult):
    """The page's result: its settings, runs, models and tables (`results_dir`: where they were saved; None:
    nowhere)."""

    page = PAGE

    settings: PageSettings
    table_runs: Mapping[str, Sequence[CachedRun]]
    mined_runs: Mapping[str, Sequence[CachedRun]]
    mode_runs: Mapping[str, Sequence[CachedRun]]
    paths: Mapping[str, Mapping[int, Any]]
    n_test: int
    n_dev: int | None
    n_passages: Mapping[str, int]
    retrieval: pd.DataFrame
    retrieval_seeds: pd.DataFrame
    per_query: pd.DataFrame
    parameters: pd.DataFrame
    paper: pd.DataFrame
    table: pd.DataFrame
    cutoffs: pd.DataFrame
    n_questions: int
    n_usage_passages: int
    learned: Sequence[str]
    usage: pd.DataFrame
    tokens: pd.DataFrame | None
    curves: pd.DataFrame
    mode_usage: pd.DataFrame
    modes: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables the page saves, in order."""
        return {
            "retrieval": self.retrieval,
            "retrieval_seeds": self.retrieval_seeds,
            "retrieval_per_query": self.per_query,
            "parameters": self.parameters,
            "table_a1": self.table.reset_index(),
            "expert_usage": pd.concat([self.usage, self.mode_usage], ignore_index=True),
            "routing_entropy": self.curves,
            "entropy_modes": self.modes,
            "cutoffs": self.cutoffs,
        }

    def run_parameters(self) -> dict[str, Any]:
        """What the page ran with, recorded beside its first table (with the directory of every run)."""
        s = self.settings
        return {"profile": s.profile, "model": s.model, "pooling": s.pooling, "seeds": s.seeds, "seed": s.seed,
                "n_train": s.n_train, "epochs": s.epochs, "batch_size": s.batch_size,
                "learning_rate": s.learning_rate, "n_queries": s.n_queries, "n_docs": s.n_docs,
                "max_query_length": s.max_query_length, "max_passage_length": s.max_passage_length,
                "precision": s.precision, "routing_variants": s.routing_variants,
                "mining_variants": s.mining_variants, "mining_seeds": s.mining_seeds,
                "entropy_variant": s.entropy_variant, "entropy_modes": s.entropy_modes,
                "entropy_seeds": s.entropy_seeds, "usage_sample": s.usage_sample, "score_dev": s.score_dev,
                "runs": {label: [r.dir.name for r in runs] for label, runs in
                         [*((ID.get(n, n), rs) for n, rs in self.table_runs.items()),
                          *((ID.get(n, n) + "-hn", rs) for n, rs in self.mined_runs.items()),
                          *((f"{s.entropy_variant} ({m})", rs) for m, rs in self.mode_runs.items())]}}

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        return publish(results_dir, PAGE, tables=self.tables(), parameters=self.run_parameters(),
                       settings=self.settings)

    def trained(self) -> str:
        """How many runs the page trained (or read from the run cache)."""
        every = [r for runs in (*self.table_runs.values(), *self.mined_runs.values(), *self.mode_runs.values())
                 for r in runs]
        return f"{len(every)} trained runs"

    def questions_counted(self) -> str:
        """How many test (and dev) questions and passages the recall comes from."""
        return (f"{self.n_test} test questions" + (f", {self.n_dev} dev questions" if self.settings.score_dev else "")
                + f", {self.n_passages[DATASET]} passages")

    def table_a1(self) -> pd.DataFrame:
        return self.table

    def retrieval_figures(self) -> list[Figure]:
        """Test R@20 and every deciding cutoff: ours (dots = seeds) beside Table A1, one figure each."""
        order = [m for m in LABEL if m in self.paths]
        return [plot_beside_paper(self.retrieval_seeds[self.retrieval_seeds["split"] == "test"], self.paper, metric,
                                  models=order, our_dataset=DATASET, paper_dataset="dpr-nq", labels=LABEL, unit="%",
                                  title=f"Test {metric}: ours ({DATASET}, {self.settings.profile} profile, dots = "
                                        f"seeds) and Table A1 (NQ)")
                for metric in dict.fromkeys(["R@20", *self.cutoffs["metric"]])]

    def usage_figure(self) -> Figure | None:
        """The learned routers' expert usage per specialised block (None: no learned router here)."""
        if not len(self.usage):
            return None
        return plot_expert_usage(self.usage.assign(model=[LABEL.get(m, m) for m in self.usage["model"]]),
                                 models=[LABEL.get(m, m) for m in self.learned],
                                 title="Expert usage per specialised block (test questions and passages)")

    def usage_table(self) -> pd.DataFrame | None:
        """The usage summary per model (None: no learned router here)."""
        return usage_summary(self.usage).round(2) if len(self.usage) else None

    def usage_counted(self) -> str:
        return f"{self.n_questions} questions, {self.n_usage_passages} passages"

    def top_tokens(self) -> pd.DataFrame | None:
        """Per block and Tok-R expert, the tokens it takes most (None: no Tok-R I = 2 here)."""
        return self.tokens

    def entropy_figure(self) -> Figure | None:
        """The routing entropies during training under each entropy option (None: no entropy runs)."""
        if not len(self.curves):
            return None
        s = self.settings
        return plot_routing_entropy(self.curves, by="mode", num_experts=2,
                                    smooth=max(1, len(self.curves) // (10 * len(self.mode_runs))),
                                    title=f"{LABEL.get(s.entropy_variant, s.entropy_variant)} under each entropy "
                                          f"option")

    def mode_usage_figure(self) -> Figure | None:
        """Expert usage under each entropy option (None: no entropy runs)."""
        if not len(self.mode_usage):
            return None
        return plot_expert_usage(self.mode_usage, models=list(mode_names(self.settings, self.mode_runs).values()),
                                 title="Expert usage under each entropy option")

    def entropy_modes_table(self) -> pd.DataFrame:
        return self.modes.round(3)

    def cutoffs_table(self) -> pd.DataFrame:
        return self.cutoffs


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Routing:
    """Train (or read from the run cache) the page's runs at `s`, compute its tables and save them into
    `results_dir` (None: nothing saved, and it says so)."""
    table_runs, mined_runs, mode_runs = train(s)
    paths, mode_label, mode_paths = model_paths(s, table_runs, mined_runs, mode_runs)
    models = seeded_models(s, paths, mode_paths)
    test, dev, n_passages, scores, retrieval_seeds, retrieval, per_query = retrieval_tables(s, models, paths)
    parameters = parameter_table(models, paths)
    paper = paper_table("taser_table_a1")
    table = table_a1(s, parameters, retrieval_seeds, paper)
    cutoffs = cutoff_table(n_passages, s.top_k)
    questions, passages = usage_inputs(test, s.usage_sample, seed=s.seed)
    learned, usage = routing_usage(models, paths, questions, passages)
    tokens = tok_r_tokens(models, paths, questions)
    curves = entropy_curves(mode_runs)
    mode_usage = entropy_mode_usage(s, models, mode_runs, mode_label, questions, passages)
    page = Routing(s, table_runs, mined_runs, mode_runs, paths, len(test.queries),
                   len(dev.queries) if dev is not None else None, n_passages, retrieval, retrieval_seeds, per_query,
                   parameters, paper, table, cutoffs, len(questions), len(passages), learned, usage, tokens, curves,
                   mode_usage, entropy_modes(s, mode_runs, mode_label, scores, curves, mode_usage),
                   results_dir=results_dir)
    page.publish(results_dir)
    return page
