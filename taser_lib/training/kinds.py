"""The training kinds: what `kind:` in a config file names, each a config class and the function that trains it.

    >>> from taser_lib.training.kinds import get_kind, load_config, train
    >>> config = load_config("configs/squad_open_distill.yaml")        # kind: distill -> a DistillRunConfig
    >>> result = train(config)                                          # run_distill(config)

`KINDS` is the one table from a kind's name, the YAML/CLI edge, to its objects; the trainers know nothing of it.
A new trainer is one row here: a dataclass with a `kind` and a `loop: LoopConfig` field, and `run(config, *,
progress=True) -> TrainResult`. The other functions here read and write config files (`config_from_dict`,
`load_config`, `default_config`, `default_yaml`); the dataclasses and how plain data becomes one are
`training.config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError, FormatError
from .config import ModelConfig, TrainConfig, _Builder, _key_lines, apply_overrides, to_yaml
from .cross_encoder import CrossEncoderRunConfig, run_cross_encoder
from .distill import DistillRunConfig, run_distill
from .loop import TrainResult
from .mining import run_retriever


@dataclass(frozen=True)
class Kind:
    name: str
    config_class: type
    run: Callable[..., TrainResult]


# `retriever` runs in `mining`: one run, or TASER App. B's two rounds.
KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("retriever", TrainConfig, run_retriever),
    Kind("cross-encoder", CrossEncoderRunConfig, run_cross_encoder),
    Kind("distill", DistillRunConfig, run_distill),
)}


def get_kind(name: str) -> Kind:
    if name not in KINDS:
        raise ConfigError(f"unknown training kind {name!r}; known: {', '.join(sorted(KINDS))}")
    return KINDS[name]


def train(config: Any, *, progress: bool = True) -> TrainResult:
    """Train `config` with its kind's trainer."""
    return get_kind(config.kind).run(config, progress=progress)


def config_from_dict(data: dict[str, Any], path: str = "<config>", lines: dict[str, int] | None = None) -> Any:
    """The config object of `data["kind"]` (default retriever) built from plain data."""
    builder = _Builder(path, lines or {})
    if not isinstance(data, dict):
        raise builder.error("", "a training config must be a mapping")
    kind_name = data.get("kind", "retriever")
    if not isinstance(kind_name, str):
        raise builder.error("kind", f"expected a string, got {kind_name!r}")
    try:
        kind = get_kind(kind_name)
    except ConfigError as err:
        raise builder.error("kind", str(err)) from None
    return builder.dataclass_(kind.config_class, data, "")


def load_config(path: str | Path, output_dir: str | None = None, overrides: Sequence[str] = ()) -> Any:
    """Read a YAML training config (strict: see `training.config`); `output_dir` overrides loop.output_dir and
    `overrides` (`dotted.key=value`, see `apply_overrides`) any other field."""
    from ..data.text import read_text  # strict UTF-8: an undecodable line is a FormatError naming it

    path = Path(path)
    try:
        text = read_text(path)
    except OSError as err:
        raise ConfigError(f"cannot read the training config {path}: {err}") from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from None
    data = data if data is not None else {}
    lines = _key_lines(node) if node else {}
    if overrides:
        if not isinstance(data, dict):
            raise FormatError(path, None, None, "a training config must be a mapping")
        apply_overrides(data, overrides, lines)
    config = config_from_dict(data, str(path), lines)
    if output_dir is not None:
        config.loop.output_dir = str(output_dir)
    return config


def default_config(kind: str = "retriever", arch: str | None = None) -> Any:
    """`kind`'s default config; with `arch`, its model section builds that architecture instead."""
    config = get_kind(kind).config_class()
    if arch is not None:
        if not isinstance(getattr(config, "model", None), ModelConfig):
            raise ConfigError(f"kind {kind!r} has no model section with an arch")
        model = dataclasses.replace(config.model, arch=arch, overrides={})
        config = dataclasses.replace(config, model=model)
    return config


def default_yaml(kind: str = "retriever", arch: str | None = None) -> str:
    """Every field of `kind`'s config with its default and a comment (the model fields of `arch`, default: the
    kind's own default arch)."""
    header = f"# taser train --config FILE: defaults of kind '{kind}'" + (f", arch '{arch}'" if arch else "")
    return header + "\n" + to_yaml(default_config(kind, arch))
