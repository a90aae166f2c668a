"""Profile-sized training runs for the notebooks: the recipes, and a profile's parameters turned into one config.

The notebooks of the TASER paper train the same handful of retrievers (DPR, TASER Det-R, TASER_Shared, the learned
routers of Table A1), and those of "In defense of dual-encoders" a CA teacher and students distilled from it, at the
size of the profile they run under. A recipe is Python: a base config of the repository's `configs/` and typed
changes (`runs.changes`) that hold the routing strategy and the loss as objects, each turned into the name a config
file holds (`SequenceRouting.name`, `M3SE.name`) where the change is made:

    >>> from taser_book.runs.recipes import RERANKERS, RETRIEVERS, variant_runs
    >>> RETRIEVERS["seq-r-2"].load().model.overrides
    {'routing': 'sequence', 'num_experts': 2}
    >>> runs = variant_runs(["dpr", "taser"], seeds=[13, 14, 15], params=profile_params)   # trains each once
    >>> runs["taser"][0].load()

This module is the one place that turns a profile's parameters (`taser_book/profiles.yaml`: model, pooling,
precision, lengths, batch size, learning rate, n_train, epochs) into changes of a recipe's config, so that every
notebook asking for "DPR at cpu, seed 14" resolves to the same config and therefore to the same cached run
(`runs.cache.trained_run`). A page's own changes (another dataset, a size, a regulariser) are `changes=`. How the
profile maps onto the config:

- `n_train` training questions for `epochs` epochs become `loop.max_steps = ceil(n_train * epochs / batch_size)`:
  the trainer shuffles the whole training set, so the run sees `n_train * epochs` seeded-random questions.
  `n_train: null` trains `epochs` full epochs.
- `n_queries` / `n_docs` (the evaluation slice) also size the training-time dev evaluation, so smoke stays small:
  `data.dev_questions` and `data.dev_corpus_sample`; null keeps the config's own (a 300-question dev sample).
- `pooling: cls` (the papers' BERT set-up) also sets dot-product scoring (`normalize: false`,
  `similarity_scale: 1`); `pooling: mean` keeps the config's cosine with scale 20 (the packaged model's own).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taser_lib.errors import ConfigError
from taser_lib.models.routing import Routing, SequenceRouting, TokenRouting
from taser_lib.training.kinds import load_config
from taser_lib.training.rerank_losses import (KLDistill, M3SE, MarginMSE, MSE, OneHot, RankDistilB, RerankLoss,
                                              SoftmaxCEDistill)
from . import changes as _changes
from .cache import CachedRun, repository_root, trained_run
from .changes import Change


@dataclass(frozen=True)
class Recipe:
    """One trainable run: a training config of the repository's `configs/` (or an absolute path) and the changes
    made to it. `label`: how tables and figures name it; `paper`: the row of the paper it stands for."""

    name: str
    label: str
    config: str
    changes: tuple[Change, ...] = ()
    paper: str = ""

    def config_path(self, configs_dir: str | Path | None = None) -> Path:
        path = Path(self.config)
        if path.is_absolute():
            return path
        folder = Path(configs_dir) if configs_dir else _configs_dir()
        return folder / path

    def load(self, configs_dir: str | Path | None = None) -> Any:
        """The recipe's config object: its base config with its changes made, checked as a whole."""
        config = load_config(self.config_path(configs_dir))
        return _changes.apply(config, self.changes) if self.changes else config


def _configs_dir() -> Path:
    root = repository_root() or repository_root(Path(__file__).parent)
    if root is None:
        raise ConfigError("the recipes' training configs live in the taser repository's configs/ folder; outside "
                          "it pass configs_dir= (a folder holding squad_open_dpr.yaml, ...)")
    return root / "configs"


def _table(*recipes: Recipe) -> dict[str, Recipe]:
    return {recipe.name: recipe for recipe in recipes}


def learned(name: str, routing: Routing, experts: int) -> Recipe:
    """TASER with learned routing (`routing`: Seq-R or Tok-R, Table A1) over `experts` expert FFNs."""
    routing.check(experts)
    return Recipe(name, f"{routing.label} I={experts}", "squad_open_taser.yaml",
                  (_changes.model_overrides(routing=routing.name, num_experts=experts),),
                  f"TASER {routing.label}, I = {experts}")


# The retrievers the TASER notebooks train. Every notebook that names one at one profile and seed gets the same
# cached run: Table 1, Table A1 and Table 2 share their DPR, TASER and TASER_Shared.
RETRIEVERS: dict[str, Recipe] = _table(
    Recipe("dpr", "DPR", "squad_open_dpr.yaml", paper="DPR (two towers, 2x BERT)"),
    Recipe("shared", "TASER_Shared", "squad_open_shared.yaml", paper="TASER_Shared (one tower)"),
    Recipe("taser", "TASER Det-R", "squad_open_taser.yaml", paper="TASER Det-R (Q-FFN / P-FFN, T = 2)"),
    learned("seq-r-2", SequenceRouting(), 2),
    learned("seq-r-4", SequenceRouting(), 4),
    learned("tok-r-2", TokenRouting(), 2),
    learned("tok-r-4", TokenRouting(), 4),
)

def student(arch: str, loss: RerankLoss, label: str) -> Recipe:
    """A student of architecture `arch` (a `model.arch` of the distill config: the paper's DE is `shared`, one
    tower) trained with `loss` on the CA teacher's candidates: `<arch>-<loss>`."""
    name = f"{'de' if arch == 'shared' else arch}-{loss.name}"
    return Recipe(name, label, "squad_open_distill.yaml",
                  (_changes.model(arch=arch), _changes.training(loss=loss.name)))


# Re-ranking runs (kinds cross-encoder and distill): the CA teacher of "In defense of dual-encoders" and students
# distilled from it (`reranking_run`); a student's teacher is the `ca` run of the same profile.
RERANKERS: dict[str, Recipe] = _table(
    Recipe("ca", "CA (cross-attention teacher)", "squad_open_cross_encoder.yaml"),
    student("taser", SoftmaxCEDistill(), "TASER Det-R, softmax CE from CA"),
    student("taser", M3SE(), "TASER Det-R, M3SE from CA"),
    student("taser", OneHot(), "TASER Det-R, one-hot (same groups, no teacher)"),
    student("dpr", OneHot(), "DPR, one-hot (same groups, no teacher)"),
    student("shared", OneHot(), "DE one-hot"),
    student("shared", MSE(), "DE, MSE"),
    student("shared", MarginMSE(), "DE, margin MSE"),
    student("shared", M3SE(), "DE, M3SE"),
    student("shared", SoftmaxCEDistill(), "DE, softmax CE"),
    student("shared", KLDistill(), "DE, KL"),
    student("shared", RankDistilB(), "DE, RankDistil-B"),
    student("colbert", OneHot(), "ColBERT one-hot"),
    student("colbert", SoftmaxCEDistill(), "ColBERT, softmax CE"),
    student("colbert", M3SE(), "ColBERT, M3SE"),
)

def recipe(table: Mapping[str, Recipe], name: str) -> Recipe:
    """`table[name]` (`RETRIEVERS` or `RERANKERS`), or a ConfigError naming the recipes it has."""
    if name not in table:
        what = "retriever" if table is RETRIEVERS else "re-ranking"
        raise ConfigError(f"unknown {what} recipe {name!r}; known: {', '.join(table)}")
    return table[name]


def training_steps(params: Mapping[str, Any]) -> int | None:
    """Optimiser steps for `n_train` questions over `epochs` epochs at `batch_size`; None: whole epochs."""
    n_train = params.get("n_train")
    if n_train is None:
        return None
    return max(1, math.ceil(int(n_train) * float(params.get("epochs", 1)) / int(params["batch_size"])))


def profile_changes(params: Mapping[str, Any]) -> list[Change]:
    """The changes that size a retriever training config for a profile's parameters (see the module docstring)."""
    out = []
    if params.get("model"):
        out.append(_changes.model(name_or_path=str(params["model"])))
    if params.get("pooling") == "cls":
        out.append(_changes.model_overrides(pooling="cls", normalize=False, similarity_scale=1.0))
    loop = {"precision": "precision", "learning_rate": "learning_rate", "batch_size": "batch_size"}
    data = {"max_query_length": "max_query_length", "max_passage_length": "max_passage_length",
            "eval_batch_size": "eval_batch_size", "dev_questions": "n_queries", "dev_corpus_sample": "n_docs"}
    out.append(_changes.loop(**{field: params[key] for field, key in loop.items() if params.get(key) is not None}))
    out.append(_changes.data(**{field: params[key] for field, key in data.items() if params.get(key) is not None}))
    steps = training_steps(params)
    every = {} if steps is None else {"eval_every": steps if steps <= 10 else math.ceil(steps / 2)}
    # evaluate (and keep a checkpoint) half-way and at the end; a tiny run only at the end
    out.append(_changes.loop(epochs=float(params.get("epochs", 1)), max_steps=steps,
                            **every, **{"checkpoint_every": every["eval_every"]} if every else {}))
    out.append(_changes.data(train_eval_questions=int(params.get("train_eval_questions", 0))))
    return out


def variant_run(name: str, seed: int, params: Mapping[str, Any], *, mined: bool = False,
                changes: Sequence[Change] = (), runs_root: str | Path | None = None,
                configs_dir: str | Path | None = None, progress: bool = True) -> CachedRun:
    """The finished run of variant `name` at this profile and seed (trained now if the cache has none).
    `mined`: TASER App. B's two rounds (the † rows of Table A1); `changes`: the page's own (`runs.changes`)."""
    config = _changes.apply(recipe(RETRIEVERS, name).load(configs_dir),
                      [*profile_changes(params), _changes.mining(enabled=bool(mined)), *changes])
    return trained_run(config, seed=seed, runs_root=runs_root, progress=progress)


def variant_runs(names: Sequence[str], seeds: Sequence[int], params: Mapping[str, Any], **options: Any
                 ) -> dict[str, list[CachedRun]]:
    """{variant: [run per seed]}; each run trained once (see `variant_run`)."""
    return {name: [variant_run(name, seed, params, **options) for seed in seeds] for name in names}


# --- re-ranking runs: the CA teacher and its students ---------------------------------------------------------------

RERANK_LOOP_KEYS = ("batch_size", "eval_every")


def reranking_changes(config: Any, params: Mapping[str, Any]) -> list[Change]:
    """The changes that size a `cross-encoder` or `distill` config (`config`, whose own batch size and dev sample
    they read) for a profile's parameters:
    - `n_train` training questions (`data.train_queries`), each with the config's group of candidates, over `epochs`
      epochs: `loop.max_steps = ceil(n_train * epochs / batch_size)` at the config's own batch size (questions per
      step: a CA step costs group_size pairs per question);
    - `n_queries` caps the dev and test queries re-ranked (the dev sample at most the config's own; null: the
      config's dev sample, every test query);
    - the CA starts from `cross_encoder_model` (reading the mean token when the profile's pooling is mean), a
      student from `model` (with the profile's pooling, as `profile_changes`); precision and the lengths as the
      profile says (a CA input holds query and passage, and a student's teacher scores its pairs at that same
      length, so the CA's own score cache is the one read);
    - `rerank_loop` (optional, e.g. `{"batch_size": 32, "eval_every": 100}` at `gpu`): questions per step and steps
      between dev evaluations, in place of the config's own (4 and 20 or 50: sized for a CPU; at 4 questions a step
      every SQuAD-open training question over 3 epochs is 4,554 steps, about 15 minutes a student on an H200).
      Without it the changes are exactly those the committed pages were made with (tests/test_reranking_sizes.py)."""
    kind = config.kind
    if kind not in ("cross-encoder", "distill"):
        raise ConfigError(f"reranking_changes: the config's kind must be cross-encoder or distill, got {kind!r}")
    out = [_changes.loop(precision=params["precision"])] if params.get("precision") else []
    pair = int(params["max_passage_length"]) + int(params.get("max_query_length") or 32) \
        if params.get("max_passage_length") else None
    if kind == "cross-encoder":
        if params.get("cross_encoder_model"):
            out.append(_changes.model(name_or_path=str(params["cross_encoder_model"])))
        if params.get("pooling") == "mean":  # the CA reads the mean token too (models.cross_encoder: MiniLM's [CLS])
            out.append(_changes.model_overrides(pooling="mean"))
        if pair:
            out.append(_changes.training(max_length=pair))
    else:
        if params.get("model"):
            out.append(_changes.model(name_or_path=str(params["model"])))
        if params.get("pooling") == "cls":
            out.append(_changes.model_overrides(pooling="cls", normalize=False, similarity_scale=1.0))
        out.append(_changes.training(**{key: int(params[key]) for key in ("max_query_length", "max_passage_length")
                                       if params.get(key)}))
        if pair:  # the teacher scores pairs as long as it was trained on (its cache)
            out.append(_changes.teacher(max_length=pair))
    n_train, n_queries = params.get("n_train"), params.get("n_queries")
    out.append(_changes.data(train_queries=None if n_train is None else int(n_train)))
    if n_queries is not None:
        own = config.data.dev_queries
        out.append(_changes.data(dev_queries=int(n_queries) if own is None else min(int(n_queries), own),
                                test_queries=int(n_queries)))
    else:
        out.append(_changes.data(test_queries=None))
    sizes = dict(params.get("rerank_loop") or {})
    unknown = sorted(set(sizes) - set(RERANK_LOOP_KEYS))
    if unknown:
        raise ConfigError(f"rerank_loop: unknown key {unknown[0]!r}; expected {', '.join(RERANK_LOOP_KEYS)}")
    batch_size = int(sizes.get("batch_size") or config.loop.batch_size)
    epochs = float(params.get("epochs", 1))
    steps = None if n_train is None else max(1, math.ceil(int(n_train) * epochs / batch_size))
    out.append(_changes.loop(epochs=epochs, max_steps=steps))
    if sizes:
        out.append(_changes.loop(**{key: int(value) for key, value in sizes.items()}))
    return out


def reranking_run(name: str, seed: int, params: Mapping[str, Any], *, teacher: CachedRun | None = None,
                  changes: Sequence[Change] = (), runs_root: str | Path | None = None,
                  configs_dir: str | Path | None = None, progress: bool = True) -> CachedRun:
    """The finished run of re-ranking recipe `name` (`RERANKERS`) at this profile and seed: the CA
    teacher (`ca`) or a student distilled from `teacher` (a finished `ca` run; needed by every loss but one-hot
    and focal, and passed for those too so that a student's groups are the teacher's candidates); `changes`: the
    page's own (`runs.changes`), applied last.
    `params["teacher"]`: the CA's own sizes where they differ from its students' (e.g. `{"n_train": 2000,
    "n_queries": None}`: a teacher trained on more questions than a CPU budget allows each student, and scored on
    every test question)."""
    config = recipe(RERANKERS, name).load(configs_dir)
    if config.kind == "cross-encoder":
        params = {**params, **(params.get("teacher") or {})}
    sized = reranking_changes(config, params)
    if config.kind == "distill":
        if teacher is None:
            raise ConfigError(f"{name}: a distilled student needs teacher= (the finished `ca` run)")
        sized.append(_changes.teacher(model=str(teacher.model_path)))
    config = _changes.apply(config, [*sized, *changes])
    return trained_run(config, seed=seed, runs_root=runs_root, progress=progress)


def entropy_mode_changes(mode: str) -> list[Change]:
    """The change that trains a learned-routing variant (Seq-R, Tok-R) under routing-entropy `mode`
    (`losses.routing_entropy_term`: release | literal | balance). The model's default mode gives no change, so
    that run is the variant's own cached run (an explicit default would change the run's key and train it again)."""
    from taser_lib.losses import ENTROPY_MODES
    from taser_lib.models.taser import TaserConfig

    if mode not in ENTROPY_MODES:
        raise ConfigError(f"entropy mode must be one of {', '.join(ENTROPY_MODES)}, got {mode!r}")
    return [] if mode == TaserConfig.entropy_mode else [_changes.model_overrides(entropy_mode=mode)]
