"""Profile-sized training runs for the notebooks: a profile's parameters turned into one training config.

The notebooks of the TASER paper train the same handful of retrievers (DPR, TASER Det-R, TASER_Shared, the learned
routers of Table A1) at the size of the profile they run under. This module is the one place that turns a
profile's parameters (`taser_book/profiles.yaml`: model, pooling, precision, lengths, batch size, learning rate,
n_train, epochs) into dotted overrides of a training config, so that every notebook asking for "DPR at cpu, seed 14"
resolves to the same config and therefore to the same cached run (`runs.cache.trained_run`).

    >>> from taser_book.runs.recipes import variant_runs
    >>> runs = variant_runs(["dpr", "taser"], seeds=[13, 14, 15], params=profile_params)   # trains each once
    >>> runs["taser"][0].load()

The variants themselves are data: `variants.yaml` beside this module (a base config of the repository's `configs/`
and its overrides). How the profile maps onto the config:

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from taser_lib.errors import ConfigError, FormatError
from .cache import CachedRun, repository_root, trained_run

VARIANTS_FILE = Path(__file__).with_name("variants.yaml")


@dataclass(frozen=True)
class Variant:
    """One trainable retriever: a base training config and its overrides."""

    name: str
    label: str
    config: str
    set: dict[str, Any] = field(default_factory=dict)
    paper: str = ""

    def config_path(self, configs_dir: str | Path | None = None) -> Path:
        path = Path(self.config)
        if path.is_absolute():
            return path
        folder = Path(configs_dir) if configs_dir else _configs_dir()
        return folder / path

    def overrides(self) -> list[str]:
        return [f"{key}={_yaml_value(value)}" for key, value in self.set.items()]


def _yaml_value(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def _configs_dir() -> Path:
    root = repository_root() or repository_root(Path(__file__).parent)
    if root is None:
        raise ConfigError("the variants' training configs live in the taser repository's configs/ folder; outside "
                          "it pass configs_dir= (a folder holding squad_open_dpr.yaml, ...)")
    return root / "configs"


def load_variants(path: str | Path = VARIANTS_FILE, section: str = "variants") -> dict[str, Variant]:
    """The variants of a variants file (default: the library's) by name: its retrievers (`section="variants"`) or
    its re-ranking runs (`"reranking"`); a bad entry names its file and key."""
    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = data.get(section) if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise FormatError(path, None, section, f"expected a mapping '{section}: {{name: {{label, config, ...}}}}'")
    variants = {}
    for name, body in entries.items():
        if not isinstance(body, dict) or "config" not in body or "label" not in body:
            raise FormatError(path, None, f"{section}.{name}", "needs at least 'label' and 'config'")
        unknown = set(body) - {"label", "config", "set", "paper"}
        if unknown:
            raise FormatError(path, None, f"{section}.{name}.{sorted(unknown)[0]}", "unknown key")
        variants[name] = Variant(name=name, label=str(body["label"]), config=str(body["config"]),
                                 set=dict(body.get("set") or {}), paper=str(body.get("paper", "")))
    return variants


def variant(name: str, section: str = "variants") -> Variant:
    variants = load_variants(section=section)
    if name not in variants:
        raise ConfigError(f"unknown {section} entry {name!r}; known: {', '.join(variants)} ({VARIANTS_FILE})")
    return variants[name]


def training_steps(params: Mapping[str, Any]) -> int | None:
    """Optimiser steps for `n_train` questions over `epochs` epochs at `batch_size`; None: whole epochs."""
    n_train = params.get("n_train")
    if n_train is None:
        return None
    return max(1, math.ceil(int(n_train) * float(params.get("epochs", 1)) / int(params["batch_size"])))


def profile_overrides(params: Mapping[str, Any]) -> list[str]:
    """Dotted overrides of a retriever training config for a profile's parameters (see the module docstring)."""
    out = []
    if params.get("model"):
        out.append(f"model.name_or_path={params['model']}")
    if params.get("pooling") == "cls":
        out += ["model.overrides.pooling=cls", "model.overrides.normalize=false",
                "model.overrides.similarity_scale=1.0"]
    simple = {"precision": "loop.precision", "learning_rate": "loop.lr", "batch_size": "loop.batch_size",
              "max_query_length": "data.max_query_length", "max_passage_length": "data.max_passage_length",
              "eval_batch_size": "data.eval_batch_size", "n_queries": "data.dev_questions",
              "n_docs": "data.dev_corpus_sample"}
    for key, dotted in simple.items():
        if params.get(key) is not None:
            out.append(f"{dotted}={_yaml_value(params[key])}")
    steps = training_steps(params)
    out.append(f"loop.epochs={float(params.get('epochs', 1))}")
    out.append(f"loop.max_steps={'null' if steps is None else steps}")
    if steps is not None:  # evaluate (and keep a checkpoint) half-way and at the end; a tiny run only at the end
        every = steps if steps <= 10 else math.ceil(steps / 2)
        out += [f"loop.eval_every={every}", f"loop.checkpoint_every={every}"]
    out.append(f"data.train_eval_questions={int(params.get('train_eval_questions', 0))}")
    return out


def variant_run(name: str, seed: int, params: Mapping[str, Any], *, mined: bool = False,
                overrides: Sequence[str] = (), runs_root: str | Path | None = None,
                configs_dir: str | Path | None = None, progress: bool = True) -> CachedRun:
    """The finished run of variant `name` at this profile and seed (trained now if the cache has none).
    `mined`: TASER App. B's two rounds (the † rows of Table A1); `overrides`: further `dotted.key=value`."""
    v = variant(name)
    sets = [*v.overrides(), *profile_overrides(params), f"mining.enabled={'true' if mined else 'false'}",
            *overrides]
    return trained_run(v.config_path(configs_dir), seed=seed, overrides=sets, runs_root=runs_root,
                       progress=progress)


def variant_runs(names: Sequence[str], seeds: Sequence[int], params: Mapping[str, Any], **options: Any
                 ) -> dict[str, list[CachedRun]]:
    """{variant: [run per seed]}; each run trained once (see `variant_run`)."""
    return {name: [variant_run(name, seed, params, **options) for seed in seeds] for name in names}


# --- re-ranking runs: the CA teacher and its students ---------------------------------------------------------------

def reranking_overrides(params: Mapping[str, Any], kind: str) -> list[str]:
    """Dotted overrides of a `cross-encoder` or `distill` config for a profile's parameters:
    - `n_train` training questions (`data.train_queries`), each with the config's group of candidates, over `epochs`
      epochs: `loop.max_steps = ceil(n_train * epochs / batch_size)` at the config's own batch size (questions per
      step: a CA step costs group_size pairs per question);
    - `n_queries` caps the dev and test queries re-ranked (the dev sample at most the config's own; null: the
      config's dev sample, every test query);
    - the CA starts from `cross_encoder_model` (reading the mean token when the profile's pooling is mean), a
      student from `model` (with the profile's pooling, as
      `profile_overrides`); precision and the lengths as the profile says (a CA input holds query and passage, and
      a student's teacher scores its pairs at that same length, so the CA's own score cache is the one read)."""
    if kind not in ("cross-encoder", "distill"):
        raise ConfigError(f"reranking_overrides: kind must be cross-encoder or distill, got {kind!r}")
    out = [f"loop.precision={params['precision']}"] if params.get("precision") else []
    if kind == "cross-encoder":
        if params.get("cross_encoder_model"):
            out.append(f"model.name_or_path={params['cross_encoder_model']}")
        if params.get("pooling") == "mean":  # the CA reads the mean token too (models.cross_encoder: MiniLM's [CLS])
            out.append("model.overrides.pooling=mean")
        if params.get("max_passage_length"):
            out.append(f"training.max_length={int(params['max_passage_length']) + int(params.get('max_query_length') or 32)}")
    else:
        if params.get("model"):
            out.append(f"model.name_or_path={params['model']}")
        if params.get("pooling") == "cls":
            out += ["model.overrides.pooling=cls", "model.overrides.normalize=false",
                    "model.overrides.similarity_scale=1.0"]
        for key in ("max_query_length", "max_passage_length"):
            if params.get(key):
                out.append(f"training.{key}={int(params[key])}")
        if params.get("max_passage_length"):  # the teacher scores pairs as long as it was trained on (its cache)
            pair = int(params["max_passage_length"]) + int(params.get("max_query_length") or 32)
            out.append(f"teacher.max_length={pair}")
    n_train = params.get("n_train")
    out.append(f"data.train_queries={'null' if n_train is None else int(n_train)}")
    if params.get("n_queries") is not None:
        out += [f"data.dev_queries=__cap__:{int(params['n_queries'])}", f"data.test_queries={int(params['n_queries'])}"]
    else:
        out.append("data.test_queries=null")
    out.append(f"loop.epochs={float(params.get('epochs', 1))}")
    if n_train is not None:
        out.append(f"loop.max_steps=__steps__:{int(n_train)}")
    else:
        out.append("loop.max_steps=null")
    return out


def reranking_run(name: str, seed: int, params: Mapping[str, Any], *, teacher: CachedRun | None = None,
                  overrides: Sequence[str] = (), runs_root: str | Path | None = None,
                  configs_dir: str | Path | None = None, progress: bool = True) -> CachedRun:
    """The finished run of re-ranking entry `name` (variants.yaml `reranking`) at this profile and seed: the CA
    teacher (`ca`) or a student distilled from `teacher` (a finished `ca` run; needed by every loss but one_hot
    and focal, and passed for those too so that a student's groups are the teacher's candidates).
    `params["teacher"]`: the CA's own sizes where they differ from its students' (e.g. `{"n_train": 2000,
    "n_queries": None}`: a teacher trained on more questions than a CPU budget allows each student, and scored on
    every test question)."""
    from taser_lib.training.config import load_config

    v = variant(name, section="reranking")
    path = v.config_path(configs_dir)
    config = load_config(path)
    if config.kind == "cross-encoder":
        params = {**params, **(params.get("teacher") or {})}
    sets = [*v.overrides(), *reranking_overrides(params, config.kind)]
    resolved = []
    for item in sets:  # the step count and the dev cap need the config's own batch size and dev sample
        key, _, value = item.partition("=")
        if value.startswith("__steps__:"):
            batch = int(_override_value(sets, "loop.batch_size") or config.loop.batch_size)
            value = str(max(1, math.ceil(int(value.split(":")[1]) * float(params.get("epochs", 1)) / batch)))
        elif value.startswith("__cap__:"):
            own = config.data.dev_queries
            value = str(int(value.split(":")[1]) if own is None else min(int(value.split(":")[1]), own))
        resolved.append(f"{key}={value}")
    if config.kind == "distill":
        if teacher is None:
            raise ConfigError(f"{name}: a distilled student needs teacher= (the finished `ca` run)")
        resolved += [f"teacher.model={teacher.model_path}"]
    return trained_run(path, seed=seed, overrides=[*resolved, *overrides], runs_root=runs_root, progress=progress)


def _override_value(sets: Sequence[str], key: str) -> str | None:
    found = None
    for item in sets:
        k, _, value = item.partition("=")
        if k == key:
            found = value
    return found


def entropy_mode_overrides(mode: str) -> list[str]:
    """The override that trains a learned-routing variant (Seq-R, Tok-R) under routing-entropy `mode`
    (`losses.routing_entropy_term`: release | literal | balance). The model's default mode gives no override, so
    that run is the variant's own cached run (an explicit default would change the run's key and train it again)."""
    from taser_lib.losses import ENTROPY_MODES
    from taser_lib.models.taser import TaserConfig

    if mode not in ENTROPY_MODES:
        raise ConfigError(f"entropy mode must be one of {', '.join(ENTROPY_MODES)}, got {mode!r}")
    return [] if mode == TaserConfig.entropy_mode else [f"model.overrides.entropy_mode={mode}"]
