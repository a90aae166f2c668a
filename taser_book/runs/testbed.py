"""The testbed probe: where does "In defense of dual-encoders"' premise appear on an offline testbed?

The paper's claims about distillation rest on one premise: a cross-attention (CA) re-ranker, trained on the same
questions, generalises better than a dual encoder (DE) trained with one-hot labels. Whether that holds depends on
the testbed: how many training questions there are, and how close the starting checkpoint already is to the task
(the offline default, all-MiniLM-L6-v2, was trained for retrieval on NQ, SQuAD and MS MARCO pairs; its CA starts
with a fresh scoring head). The probe trains a CA and a one-hot DE at several training-set sizes on each testbed,
re-ranks the same test questions with both, and measures the three preconditions the dual-encoder pages need:

- the CA leads the one-hot DE on test (paired randomisation test over the test questions, per seed);
- the CA trained past its initialisation (selected step > 0, best dev above step 0);
- the one-hot DE moved from its starting checkpoint (paired test of the DE against the zero-shot checkpoint).

    >>> points = probe_points({"squad-open": [200, 1000, 2000], "wikiqa": [200, None]}, seeds=[13])
    >>> runs = probe_runs(points, params, n_queries={"squad-open": 500, "wikiqa": None},
    ...                   shared_teacher={"n_train": 2000, "n_queries": None})
    >>> rows = probe_rows(runs, params)        # per-query MRR@10 / nDCG@10 of CA, DE and the zero-shot start
    >>> gaps = probe_gaps(rows)                # per testbed, size and seed: CA - DE and DE - zero-shot, tested
    >>> trained = probe_training(runs)         # per run: steps, selected step, dev at step 0 and at best

Every run is a `recipes.reranking_run` (the run cache): the CA on SQuAD-open at the pages' teacher size is the
pages' shared teacher, and a one-hot DE on SQuAD-open at the students' size is the pages' own one-hot student, so
the probe and the pages share their runs. A one-hot DE reads no teacher score (its group is a positive and sampled
BM25 negatives); `reranking_run` still takes a teacher, which only names the candidate lists: the shared teacher on
SQuAD-open, the probe's own CA of the same size elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd

from taser_lib.evaluation.query_sets import shared_queries
from taser_lib.evaluation.records import read_per_query
from ..tables.rerank_tables import paired_tests, per_query_rows
from .cache import CachedRun
from taser_lib.training.distill import rerank_saved_model
from .recipes import reranking_run
from .students import testbed_changes

CA, DE, START = "ca", "de", "zero-shot"
PACKAGED = "packaged"
METRICS: tuple[str, ...] = ("MRR@10", "nDCG@10")


@dataclass(frozen=True)
class ProbePoint:
    """One probe setting: a testbed, the training questions both models see (None: every one) and a seed."""

    testbed: str
    n_train: int | None
    seed: int
    reinit: int = 0  # top transformer layers re-initialised in the starting checkpoint of both models (0: none)

    @property
    def size_label(self) -> str:
        return "all" if self.n_train is None else str(self.n_train)

    @property
    def start_label(self) -> str:
        return PACKAGED if not self.reinit else f"top {self.reinit} re-initialised"


def probe_points(sizes: Mapping[str, Sequence[int | None]], seeds: Sequence[int],
                 reinit: Mapping[str, Sequence[int | None]] | None = None, reinit_layers: int = 2) -> list[ProbePoint]:
    """Every (testbed, size, seed) of `sizes` ({testbed: [n_train, ...]}, None meaning every training question)
    from the checkpoint as it is, and every one of `reinit` (the same shape) from it with its top `reinit_layers`
    layers re-initialised."""
    points = [ProbePoint(testbed, None if n is None else int(n), int(seed))
              for testbed, ns in sizes.items() for n in ns for seed in seeds]
    return points + [ProbePoint(testbed, None if n is None else int(n), int(seed), int(reinit_layers))
                     for testbed, ns in (reinit or {}).items() for n in ns for seed in seeds]


def reinitialised_checkpoint(name_or_path: str, layers: int, *, seed: int = 0,
                             root: str | Path | None = None) -> Path:
    """A copy of BERT checkpoint `name_or_path` whose top `layers` transformer layers are re-initialised as BERT
    initialises them (normal(0, initializer_range) weights, zero biases, unit LayerNorms; torch seed `seed`), with
    its tokenizer files: a start from which neither a CA nor a DE is a trained retriever, while the lower layers keep
    what pre-training learnt. A sentence-transformers checkpoint's module files (modules.json, the pooling folder) come
    along, so a DE built from the copy pools and normalises as one built from the checkpoint does (the packaged
    MiniLM: mean pooling, cosine); without them it would fall back to [CLS] pooling and a dot product. Written once
    under `<runs root>/checkpoints/` (the run cache fingerprints a checkpoint folder by its content, so the runs that
    start from it are cached like any other)."""
    import torch
    from transformers import BertModel

    from taser_lib.io import atomic_dir
    from taser_lib.models.weights import resolve_checkpoint
    from .cache import default_runs_root

    source = resolve_checkpoint(name_or_path)
    stem = "default" if str(name_or_path) == "default" else Path(str(name_or_path)).name
    where = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:8]  # two folders named "best" differ
    target = Path(root or default_runs_root()) / "checkpoints" / f"{stem}-{where}-top{layers}-reinit-seed{seed}"
    kept = _kept_files(source)
    if (target / "config.json").is_file() and all((target / name).exists() for name in kept):
        return target  # (a copy written before the module files came along lacks them, and is written again)
    model = BertModel.from_pretrained(str(source), add_pooling_layer=False)
    if not 0 < layers <= model.config.num_hidden_layers:
        raise ValueError(f"re-initialise 1 to {model.config.num_hidden_layers} layers, got {layers}")
    generator = torch.Generator().manual_seed(seed)
    std = model.config.initializer_range
    with torch.no_grad():  # by hand: transformers' own _init_weights skips weights it has loaded
        for layer in model.encoder.layer[-layers:]:
            for module in layer.modules():
                if isinstance(module, torch.nn.Linear):
                    module.weight.copy_(torch.randn(module.weight.shape, generator=generator) * std)
                    if module.bias is not None:
                        module.bias.zero_()
                elif isinstance(module, torch.nn.LayerNorm):
                    module.weight.fill_(1.0)
                    module.bias.zero_()
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        for name in kept:
            if (source / name).is_dir():
                shutil.copytree(source / name, tmp / name)
            else:
                shutil.copy2(source / name, tmp / name)
    return target


_SENTENCE_TRANSFORMERS_FILES = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json")


def _kept_files(source: Path) -> list[str]:
    """What a re-initialised copy takes from `source` besides its weights: the tokenizer files and, for a
    sentence-transformers checkpoint, its module list, its settings and each module's folder (the pooling's)."""
    names = [f.name for f in source.iterdir()
             if f.is_file() and f.name.startswith(("tokenizer", "special_tokens", "vocab"))]
    names += [name for name in _SENTENCE_TRANSFORMERS_FILES if (source / name).is_file()]
    if (source / "modules.json").is_file():
        names += [m["path"] for m in json.loads((source / "modules.json").read_text())
                  if m.get("path") and (source / m["path"]).is_dir()]
    return sorted(set(names))


def _params(params: Mapping[str, Any], n_train: int | None, n_queries: int | None) -> dict[str, Any]:
    return {**params, "n_train": n_train, "n_queries": n_queries, "teacher": {}}


def probe_runs(points: Iterable[ProbePoint], params: Mapping[str, Any], *, n_queries: Mapping[str, int | None],
               shared_teacher: Mapping[str, Any] | None = None, teacher_seed: int = 13,
               progress: bool = False) -> dict[ProbePoint, dict[str, CachedRun]]:
    """{point: {"ca": run, "de": run}}: the CA and the one-hot DE trained on `point.n_train` questions of
    `point.testbed` with `point.seed`. `params` are a profile's re-ranking parameters (those the dual-encoder pages
    pass to `reranking_run`; n_train, n_queries and teacher are set here); `n_queries` caps each testbed's test
    questions (None: all). On SQuAD-open, `shared_teacher` (the pages' `teacher_params`, e.g. {"n_train": 2000,
    "n_queries": None}) sizes the CA at its own n_train like the pages' teacher (seed `teacher_seed` is that very
    run), and that teacher names the candidate lists of every one-hot DE there (module docstring)."""
    shared = None
    if shared_teacher:
        shared = reranking_run(CA, teacher_seed, {**params, **shared_teacher, "teacher": {}}, progress=progress)
    out: dict[ProbePoint, dict[str, CachedRun]] = {}
    for point in points:
        on_testbed = testbed_changes(point.testbed)
        queries = n_queries.get(point.testbed)
        on_shared = shared is not None and point.testbed == "squad-open"
        if point.reinit:  # both models from the re-initialised checkpoint
            begin = str(reinitialised_checkpoint(params.get("model", "default"), point.reinit))
            ca = reranking_run(CA, point.seed, {**_params(params, point.n_train, queries),
                                                "cross_encoder_model": begin}, changes=on_testbed, progress=progress)
            de = reranking_run("de-one-hot", point.seed, {**_params(params, point.n_train, queries), "model": begin},
                               teacher=shared if on_shared else ca, changes=on_testbed, progress=progress)
            out[point] = {CA: ca, DE: de}
            continue
        if on_shared and point.n_train == shared_teacher.get("n_train"):
            ca_params = {**params, **shared_teacher, "teacher": {}}
        else:
            ca_params = _params(params, point.n_train, queries)
        ca = reranking_run(CA, point.seed, ca_params, changes=on_testbed, progress=progress)
        de = reranking_run("de-one-hot", point.seed, _params(params, point.n_train, queries),
                           teacher=shared if on_shared else ca, changes=on_testbed, progress=progress)
        out[point] = {CA: ca, DE: de}
    return out


def setting_label(dataset: str, n_train: str, start: str = PACKAGED) -> str:
    """The probe setting's name in tables and verdicts: "squad-open, 1000 questions", "wikiqa, all questions",
    "squad-open, 1000 questions, top 2 re-initialised"."""
    return f"{dataset}, {n_train} questions" + ("" if start == PACKAGED else f", {start}")


def _test_set(run: CachedRun):
    config = run.config
    return config.data.load(progress=False)[config.data.test_split]


def probe_rows(runs: Mapping[ProbePoint, Mapping[str, CachedRun]], *, start_model: str = "default",
               max_query_length: int = 32, max_passage_length: int = 192, batch_size: int = 64) -> pd.DataFrame:
    """Per-query rows (model, seed, dataset, n_train, start, metric, query_id, value) of every probe run's test
    re-ranking, and of the DE's starting checkpoint (model "zero-shot": `start_model`, or the re-initialised copy)
    on the same test questions; `n_train` is the size label ("all": every training question), `start` the start's
    label ("packaged", "top 2 re-initialised")."""
    rows: list[dict] = []
    starts: dict[tuple, list[dict]] = {}
    for point, by_model in runs.items():
        where = dict(dataset=point.testbed, n_train=point.size_label, start=point.start_label)
        for name, run in by_model.items():
            rows += per_query_rows(name, read_per_query(run.result["paths"]["test_per_query"]), seed=point.seed,
                                   **where)
        test = _test_set(by_model[DE])
        begin = str(by_model[DE].config.model.name_or_path) if point.reinit else start_model
        key = (point.testbed, begin, tuple(sorted(test.candidates)))
        if key not in starts:
            starts[key] = per_query_rows(START, rerank_saved_model(begin, test, max_query_length=max_query_length,
                                                                   max_passage_length=max_passage_length,
                                                                   batch_size=batch_size), **where)
        rows += [{**r, "n_train": point.size_label, "seed": point.seed} for r in starts[key]]
    frame = pd.DataFrame(rows)
    return frame.drop_duplicates(["model", "seed", "dataset", "n_train", "start", "metric", "query_id"],
                                 ignore_index=True)


def probe_gaps(rows: pd.DataFrame, metric: str = "MRR@10") -> pd.DataFrame:
    """Per testbed, training size and seed, on the questions all three models re-ranked: the CA and one-hot DE
    and the starting checkpoint's `metric`, CA − DE and DE − start with their paired randomisation p-values and
    95% confidence intervals (paired t), and the number of questions. Columns: setting, dataset, n_train, start, seed, questions,
    ca, de, zero-shot, ca − de, ca − de CI low / high, p (ca vs de), de − zero-shot, its CI, p (de vs zero-shot)."""
    out = []
    for (dataset, n_train, start, seed), part in rows[rows["metric"] == metric].groupby(
            ["dataset", "n_train", "start", "seed"], sort=False):
        part = shared_queries(part.assign(seed=None), by=("metric",))
        tests = paired_tests(part, metric, [(CA, DE), (DE, START)], correction="none").set_index(["a", "b"])
        row: dict[str, Any] = {"setting": setting_label(dataset, n_train, start), "dataset": dataset,
                               "n_train": n_train, "start": start, "seed": int(seed),
                               "questions": int(tests["queries"].iloc[0])}
        row.update({CA: tests.loc[(CA, DE), "mean a"], DE: tests.loc[(CA, DE), "mean b"],
                    START: tests.loc[(DE, START), "mean b"]})
        for a, b in ((CA, DE), (DE, START)):
            t = tests.loc[(a, b)]
            row.update({f"{a} − {b}": t["a − b"], f"{a} − {b} CI low": t["CI low"],
                        f"{a} − {b} CI high": t["CI high"], f"p ({a} vs {b})": t["p (randomisation)"]})
        out.append(row)
    return pd.DataFrame(out)


def probe_training(runs: Mapping[ProbePoint, Mapping[str, CachedRun]]) -> pd.DataFrame:
    """Per probe run: dataset, n_train, seed, model, the training questions sampled (before those that cannot form
    a group are left out), steps, selected step, the dev selection metric at step 0 and at
    the selected step, and whether it trained past its initialisation (selected step > 0 and dev above step 0)."""
    out = []
    sizes: dict[tuple[str, str], int] = {}
    for point, by_model in runs.items():
        key = (point.testbed, point.size_label)
        if key not in sizes:
            config = by_model[CA].config
            sizes[key] = len(config.data.load(progress=False)[config.data.train_split])
        for name, run in by_model.items():
            result = run.result
            metric = f"dev/{result.get('select_metric', 'nDCG@10')}"
            curve = {p["step"]: p.get(metric) for p in result.get("curve", []) if p.get(metric) is not None}
            start, best, step = curve.get(0), result.get("best_metric"), int(result.get("best_step") or 0)
            out.append({"setting": setting_label(point.testbed, point.size_label, point.start_label),
                        "dataset": point.testbed, "n_train": point.size_label, "start": point.start_label,
                        "seed": point.seed, "model": name,
                        "train questions": sizes[key], "steps": int(result.get("final_step") or 0), "selected step": step,
                        "dev at step 0": start, "dev selected": best,
                        "trained": int(step > 0 and start is not None and best is not None and best > start)})
    return pd.DataFrame(out)


def probe_display(gaps: pd.DataFrame, training: pd.DataFrame | None = None, digits: int = 3) -> pd.DataFrame:
    """`probe_gaps` as the page shows it, narrow enough for the column: one row per setting and seed, test MRR@10
    of the CA, the one-hot DE and its start, each difference with its 95% interval, the p-values, and (with
    `training`) the selected step of each model."""
    def interval(prefix: str) -> pd.Series:
        return (gaps[prefix].map(f"{{:+.{digits}f}}".format) + " [" + gaps[f"{prefix} CI low"].map(
            f"{{:+.{digits}f}}".format) + ", " + gaps[f"{prefix} CI high"].map(f"{{:+.{digits}f}}".format) + "]")

    out = pd.DataFrame({"setting": gaps["setting"], "seed": gaps["seed"], "questions": gaps["questions"],
                        "CA": gaps[CA].round(digits), "DE": gaps[DE].round(digits),
                        "DE's start": gaps[START].round(digits), "CA − DE [95% CI]": interval(f"{CA} − {DE}"),
                        "p (CA vs DE)": gaps[f"p ({CA} vs {DE})"].map("{:.2g}".format),
                        "DE − start [95% CI]": interval(f"{DE} − {START}"),
                        "p (DE vs start)": gaps[f"p ({DE} vs {START})"].map("{:.2g}".format)})
    if training is not None:
        steps = training.pivot_table(index=["setting", "seed"], columns="model", values="selected step",
                                     aggfunc="first")
        for name, label in ((CA, "CA step"), (DE, "DE step")):
            out[label] = [int(steps.loc[(s, sd), name]) for s, sd in zip(out["setting"], out["seed"])]
    return out


def probe_questions(training: pd.DataFrame) -> dict[tuple[str, str], int]:
    """(dataset, n_train label) -> the number of questions its runs trained on, for `plot_probe_gap`."""
    return {(row.dataset, row.n_train): row["train questions"] for _, row in training.iterrows()}


def probe_training_table(training: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """`probe_training` as the page shows it: the setting stands for dataset, size and start."""
    return training.drop(columns=["dataset", "n_train", "start"]).round(digits)
