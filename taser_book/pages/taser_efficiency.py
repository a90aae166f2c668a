"""The training-cost page (TASER Sec. 4.1, Table A3): time per epoch and memory of DPR, TASER and TASER_Shared from
their training runs, the bytes training holds, passage-encoding throughput and the benchmark's training step.

    >>> page = run(settings("cpu"), results_dir="results/cpu/taser_efficiency")
    >>> print(page.runs_line())        # the models, the runs (reused or trained), device and memory
    >>> page.epoch_table()             # minutes per epoch (wall and CPU), mean ± std, ratio to DPR
    >>> print(page.paper_line())       # the paper's minutes per epoch and the steps per epoch here
    >>> page.memory_summary()          # peak, growth and start memory per model
    >>> page.memory_runs()             # per run, in training order
    >>> page.state_view()              # weights, gradients and AdamW state from the models
    >>> print(page.throughput_line())  # passages, length, precision, rounds
    >>> page.throughput_table()        # passages per second, median and range, ratio to DPR
    >>> print(page.bench_source())     # where the benchmark's records come from
    >>> page.bench_table()             # the benchmark's training step per model
    >>> page.cost_figure()             # time and memory per model beside DPR
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import summarise_seeds
from taser_lib.models import DEFAULT_DESCRIPTION
from taser_lib.datasets.ready import load_evaluation_set
from ..bench.report import by_name, describe_source, find_results
from ..bench.throughput import encoding_throughput
from ..claims import paper_table
from ..plots import plot_cost_bars
from ..profiles import PageSettings, page_settings
from ..runs.cache import CachedRun
from ..runs.footprint import bert_base_models, memory_table, state_table, usage_table
from ..runs.recipes import RETRIEVERS, variant_runs
from ..scorecard import publish
from ..tables.seeded import SeededModels
from .common import PageResult, reranking_params

PAGE = "taser_efficiency"
TRAINED = ["dpr", "taser", "shared"]
GIB, MINUTE = 2 ** 30, 60
TIME = ["epoch_seconds", "epoch_cpu_seconds", "seconds_per_step", "cpu_seconds_per_step", "steps_per_epoch",
        "steps_timed"]
MEMORY = ["peak_growth_bytes", "peak_bytes", "start_bytes"]
PAPER_RATIO = 11 / 15  # TASER / DPR minutes per epoch (16 V100-32G)


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def labels() -> dict[str, str]:
    return {name: RETRIEVERS[name].label for name in TRAINED}


def train(s: PageSettings) -> dict[str, list[CachedRun]]:
    """{model: its runs, one per seed} (trained, or read from the run cache), with the profile's training parameters
    exactly as the in-domain page passes them: the same cached runs."""
    return variant_runs(TRAINED, s.seeds, reranking_params(s), progress=False)


def usage_rows(usage: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """The long rows (model, seed, metric, value) of `usage` for `metrics`."""
    return usage[usage["metric"].isin(metrics)][["model", "seed", "metric", "value"]].reset_index(drop=True)


def training_state(s: PageSettings, trained: Mapping[str, Sequence[CachedRun]]) -> pd.DataFrame:
    """Bytes of weights, gradients and AdamW state (and all-reduce per step) of the trained models and of BERT-base
    scale ones."""
    ours = state_table({name: runs[0].load() for name, runs in trained.items()}, world_size=s.world_size)
    base = state_table(bert_base_models(), world_size=s.world_size)
    return pd.concat([ours.assign(scale=s.model), base.assign(scale="BERT-base")], ignore_index=True)


@dataclass(frozen=True)
class Throughput:
    """Passage-encoding throughput of each model's first run: the timings, the passages and the encoders' precision."""

    table: pd.DataFrame
    passages: int
    precision: str


def throughput(s: PageSettings, trained: Mapping[str, Sequence[CachedRun]]) -> Throughput:
    """Each model (its first seed's run) encodes the same SQuAD-open test passages, timed in rotating rounds."""
    squad = load_evaluation_set("squad-open", "test", data_dir=os.environ.get("TASER_DATA_DIR"),
                                mirror=os.environ.get("TASER_DATA_MIRROR"))
    passages = [(doc.title, doc.text) for doc in list(squad.corpus.values())[:s.throughput_passages]]
    models = SeededModels({name: {runs[0].seed: runs[0].model_path} for name, runs in trained.items()},
                          device=s.device, precision=s.precision, max_passage_length=s.max_passage_length,
                          batch_size=s.eval_batch_size)
    encoders = {name: models.encoder(name, runs[0].seed) for name, runs in trained.items()}
    table = encoding_throughput(encoders, passages, repeats=s.throughput_rounds, device=s.device)
    return Throughput(table, len(passages), encoders["dpr"].resolved_precision)


def bench_step_table(results: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The benchmark's training step per model: seconds, ratio to DPR with its quartiles, memory (empty without a
    training record)."""
    bench = by_name(results).get("training")
    if not bench:
        return pd.DataFrame()
    m = bench["measured"]
    ratio = {"DPR": {"median": 1.0, "q1": 1.0, "q3": 1.0}, **m["step_time_ratio_to_dpr"]}
    return pd.DataFrame({
        "step seconds (median)": {k: v["median"] for k, v in m["step_seconds_spread"].items()},
        "step time / DPR (median)": {k: v["median"] for k, v in ratio.items()},
        "step time / DPR (q1 - q3)": {k: f"{v['q1']:.2f} - {v['q3']:.2f}" for k, v in ratio.items()},
        "peak training tensor memory (MiB)": {k: v / 2 ** 20 for k, v in m["peak_training_bytes"].items()},
        "weights + grads + AdamW (MiB)": {k: v["total"] / 2 ** 20 for k, v in m["state_bytes"].items()}}).round(2)


@dataclass(frozen=True)
class Efficiency(PageResult):
    """The page's result: its settings, runs and tables (`results_dir`: where they were saved; None: nowhere)."""

    page = PAGE

    settings: PageSettings
    trained: Mapping[str, Sequence[CachedRun]]
    labels: Mapping[str, str]
    usage: pd.DataFrame
    timing: pd.DataFrame
    memory: pd.DataFrame
    state: pd.DataFrame
    speed: Throughput
    bench_results: Sequence[dict[str, Any]]
    bench_folder: str | None
    results_dir: str | os.PathLike | None = None

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        s, usage = self.settings, self.usage
        return publish(results_dir, PAGE,
                       tables={"timing": self.timing, "memory": self.memory, "state_bytes": self.state,
                               "throughput": self.speed.table, "usage": usage},
                       parameters={"profile": s.profile, "model": s.model, "seeds": list(s.seeds),
                                   "batch_size": s.batch_size, "n_train": s.n_train,
                                   "max_passage_length": s.max_passage_length, "precision": s.precision,
                                   "device": sorted(set(usage["device"].astype(str)))},
                       table_parameters={"memory": {"memory": sorted(set(usage["memory"].astype(str)))},
                                         "state_bytes": {"world_size": s.world_size},
                                         "throughput": {"passages": self.speed.passages,
                                                        "rounds": s.throughput_rounds,
                                                        "precision": self.speed.precision}},
                       settings=s)

    def runs_line(self) -> str:
        s, usage = self.settings, self.usage
        runs = ", ".join(f"{self.labels[n]} x {len(r)}" for n, r in self.trained.items())
        reused = sum(run.reused for runs in self.trained.values() for run in runs)
        return (f"models: {DEFAULT_DESCRIPTION if s.model == 'default' else s.model}\n"
                f"runs: {runs} - {reused} reused from the cache; device: "
                f"{', '.join(sorted(set(usage['device'].astype(str))))} | memory: "
                f"{', '.join(sorted(set(usage['memory'].astype(str))))}")

    def epoch_table(self) -> pd.DataFrame:
        """Wall and CPU minutes per epoch, mean ± std over seeds, and each model's ratio to DPR."""
        minutes = self.timing[self.timing["metric"].isin(["epoch_seconds", "epoch_cpu_seconds"])].assign(
            value=lambda f: f["value"] / MINUTE)
        shown = summarise_seeds(minutes, by=["model", "metric"], digits=1)
        dpr_mean = shown[shown["model"] == "dpr"].set_index("metric")["mean"]
        shown["ratio to DPR"] = (shown["mean"] / shown["metric"].map(dpr_mean)).round(3)
        return shown.replace({"metric": {"epoch_seconds": "minutes per epoch (wall)",
                                         "epoch_cpu_seconds": "CPU minutes per epoch (all threads)"}}).pivot_table(
            index="model", columns="metric", values=["mean ± std", "ratio to DPR"], aggfunc="first", sort=False)

    def paper_line(self) -> str:
        paper = paper_table("taser_training_time")
        time_summary = summarise_seeds(self.timing, by=["model", "metric"], digits=2)
        steps = time_summary[time_summary["metric"] == "steps_per_epoch"].set_index("model")["mean"]
        return ("the paper: " + ", ".join(f"{r.label} {r.value:g} min" for r in paper.itertuples())
                + f" -> TASER / DPR = {PAPER_RATIO:.3f} (16 V100-32G, one epoch of training and validation)\n"
                + "steps per epoch here: " + ", ".join(f"{self.labels[m]} {int(n)}" for m, n in steps.items())
                + " (the same data and batch size: the same steps for every model)")

    def memory_summary(self) -> pd.DataFrame:
        memory_gib = summarise_seeds(self.memory.assign(value=self.memory["value"] / GIB), by=["model", "metric"],
                                     digits=2)
        return memory_gib.pivot_table(index="model", columns="metric", values="mean ± std", aggfunc="first",
                                      sort=False)[MEMORY].rename(
            columns=lambda c: c.replace("_bytes", " (GiB)").replace("_", " "))

    def memory_runs(self) -> pd.DataFrame:
        return memory_table(self.usage)

    def state_view(self) -> pd.DataFrame:
        """The training state in millions of parameters and MiB, and each model's total over DPR's at its scale."""
        state, world = self.state, self.settings.world_size
        view = state[["scale", "model", "parameter_count", "parameters", "gradients", "optimizer", "total",
                      "allreduce_bytes_per_step"]].copy()
        view["parameter_count"] = (view["parameter_count"] / 1e6).round(1)
        for column in ["parameters", "gradients", "optimizer", "total", "allreduce_bytes_per_step"]:
            view[column] = (view[column] / 2 ** 20).round(0)
        dpr_total = state[state["model"] == "dpr"].set_index("scale")["total"]
        view["total / DPR"] = (state["total"] / state["scale"].map(dpr_total)).round(3)
        return view.rename(columns={"parameter_count": "params (M)", "parameters": "weights (MiB)",
                                    "gradients": "grads (MiB)", "optimizer": "AdamW (MiB)", "total": "total (MiB)",
                                    "allreduce_bytes_per_step": f"all-reduce per GPU per step at {world} GPUs (MiB)"})

    def throughput_line(self) -> str:
        s = self.settings
        return (f"{self.speed.passages} passages, max {s.max_passage_length} tokens, precision {self.speed.precision}, "
                f"{s.throughput_rounds} rounds")

    def throughput_table(self) -> pd.DataFrame:
        summary = self.speed.table.groupby("model", sort=False)["passages_per_second"].agg(["median", "min", "max"])
        summary["median / DPR"] = (summary["median"] / summary.loc["dpr", "median"]).round(3)
        return summary.round(1)

    def bench_source(self) -> str:
        return "\n".join(describe_source(self.bench_results, self.bench_folder))

    def bench_table(self) -> pd.DataFrame:
        return bench_step_table(self.bench_results)

    def cost_figure(self) -> Figure:
        s = self.settings
        return plot_cost_bars(pd.concat([self.timing, self.memory], ignore_index=True),
                              {"epoch_seconds": ("minutes per epoch (wall)", 1 / MINUTE),
                               "epoch_cpu_seconds": ("CPU minutes per epoch", 1 / MINUTE),
                               "peak_growth_bytes": ("memory training added (GiB)", 1 / GIB)},
                              models=TRAINED, labels=self.labels, baseline="dpr",
                              paper_ratio={"epoch_seconds": {"taser": PAPER_RATIO}},
                              title=f"Training cost per model ({s.profile}; {len(s.seeds)} seed(s))")


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Efficiency:
    """Train (or read from the run cache) the page's runs at `s`, measure throughput, compute its tables and save
    them into `results_dir` (None: nothing saved, and it says so)."""
    trained = train(s)
    usage = usage_table(trained)
    state = training_state(s, trained)
    speed = throughput(s, trained)
    results, folder = find_results(s.bench_dirs)
    page = Efficiency(s, trained, labels(), usage, usage_rows(usage, TIME), usage_rows(usage, MEMORY), state, speed,
                      results, folder, results_dir)
    page.publish(results_dir)
    return page
