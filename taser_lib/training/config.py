"""Training configs for `taser train --config FILE`: YAML files mapped onto dataclasses, every default visible.

A config file has a `kind` (default ``retriever``) and the sections that kind's dataclass declares. This module
defines the retriever kind's dataclasses (``retriever``: DPR, TASER with any routing, TASER_Shared or ColBERT,
optionally with TASER App. B hard-negative mining), the sections the other kinds reuse (`ModelConfig`, `LoopConfig`)
and how plain data becomes a dataclass. The kinds themselves, each a config class and the function that trains it,
are one table in `taser_lib.training.kinds`, which also reads and writes config files:

    >>> from taser_lib.training.kinds import default_yaml, load_config
    >>> config = load_config("configs/squad_open_taser.yaml")          # errors name file, line and key
    >>> print(default_yaml("retriever"))                                # the full default config, commented

The model section names `arch`, `name_or_path` and `overrides`: fields of the architecture's Hugging Face config
class, validated by it (`models.auto`); that class, not this module, defines and documents them. Help texts come
from the fields themselves (dataclass field metadata), here and in `LoopConfig`.

Loading is strict: an unknown key, a missing required key or a value of the wrong type is a `FormatError` naming
the file, the line and the dotted key. One tolerance: a float field accepts a numeric string, because YAML 1.1
(PyYAML) reads `2e-5` (no dot) as a string.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import yaml

from ..errors import ConfigError, FormatError
from ..models.auto import RETRIEVER_ARCHS, check_overrides, model_fields
from .loop import LoopConfig


def _help(text: str, **kwargs) -> Any:
    """A dataclass field with a help text (printed as a comment by `default_yaml`)."""
    return field(metadata={"help": text}, **kwargs)


# --- the retriever kind ----------------------------------------------------------------------------------------

SOURCE_FORMATS = ("squad-open", "dpr-json", "beir")


OLD_MODEL_KEYS = ("routing", "shared_blocks", "num_experts", "pooling", "normalize", "similarity_scale",
                  "entropy_weight")


@dataclass
class ModelConfig:
    """A training config's model section: the architecture, the checkpoint it starts from and the fields of the
    architecture's Hugging Face config class to set (`models.auto.model_fields(arch)` lists them with their help;
    that class is the only place they are defined). Each kind admits the archs in `archs`."""

    arch: str = _help("dpr (two towers) | taser (any routing) | shared (one tower, TASER_Shared) | colbert "
                      "(late interaction)", default="taser")
    name_or_path: str = _help("starting checkpoint: 'default' (packaged MiniLM, offline), a folder or a hub name",
                              default="default")
    overrides: dict[str, Any] = _help("fields of the arch's model config, validated by it (below: each with its "
                                      "default)", default_factory=dict)

    archs: ClassVar[tuple[str, ...]] = RETRIEVER_ARCHS

    def __post_init__(self):
        if self.arch not in self.archs:
            raise _keyed(ConfigError(f"model.arch must be one of {self.archs}, got {self.arch!r}"), "arch")
        try:
            self.overrides = check_overrides(self.arch, self.overrides)
        except ConfigError as err:
            raise _keyed(ConfigError(f"model.overrides.{err.key}: {err}"), f"overrides.{err.key}") from None

    @staticmethod
    def unknown_key_hint(key: str) -> str:
        if key in OLD_MODEL_KEYS:
            return (f"; model fields moved under model.overrides (validated by the arch's model config): write "
                    f"`overrides: {{{key}: ...}}` (see `taser train --print-config`)")
        return ""

    @staticmethod
    def not_a_mapping_hint(value: Any) -> str:
        if isinstance(value, str):
            return f"; the model is a section now: write `model: {{arch: ..., name_or_path: {value}}}`"
        return ""


@dataclass
class CrossEncoderModelConfig(ModelConfig):
    """The model section of a cross-encoder run: its BERT body from `name_or_path`, the scoring head fresh."""

    arch: str = _help("cross-encoder (BERT over [CLS] q [SEP] d [SEP], a linear score on [CLS])",
                      default="cross-encoder")

    archs: ClassVar[tuple[str, ...]] = ("cross-encoder",)


def _keyed(err: ConfigError, key: str) -> ConfigError:
    """Tag a validation error with the field it is about (relative to its section), for the file's line."""
    err.key = key
    return err


@dataclass
class DataSource:
    format: str = _help("squad-open (prepared benchmark) | dpr-json (DPR retriever json, plain or .gz) | beir "
                        "(qrels dataset: its split's judged queries and relevant docs, BM25 negatives from its corpus)",
                        default="squad-open")
    split: str = _help("squad-open, beir: train | dev | test (ignored for dpr-json)", default="train")
    path: str | None = _help("dpr-json: the file; squad-open: the prepared folder (null = the data directory's, "
                             "prepared if missing); beir: a BEIR folder or zip, a prepared folder or a registered "
                             "NAME", default=None)

    def __post_init__(self):
        if self.format not in SOURCE_FORMATS:
            raise ConfigError(f"data source format must be one of {SOURCE_FORMATS}, got {self.format!r}")
        if self.format in ("dpr-json", "beir") and not self.path:
            raise ConfigError(f"a {self.format} data source needs a path")


@dataclass
class RetrieverDataConfig:
    train: list[DataSource] = _help(
        "training sets; several = multi-set training (each batch from one set, DPR-style)",
        default_factory=lambda: [DataSource("squad-open", "train")])
    dev: DataSource | None = _help("dev set for R@K and checkpoint selection (null: no evaluation)",
                                   default_factory=lambda: DataSource("squad-open", "dev"))
    hard_negatives: int = _help("hard negatives per question in a batch (DPR: 1); besides in-batch negatives",
                                default=1)
    hard_negative_pool: int | None = _help(
        "each question's hard negatives are drawn from its first n (best first; 1 = DPR paper's top BM25 "
        "negative); null = all (DPR's code samples from the whole list)", default=None)
    shuffle_positives: bool = _help("sample the positive among a question's positives each epoch "
                                    "(false: always the first, DPR's default)", default=False)
    bm25_negatives: int = _help("examples without hard negatives get the top-n BM25 passages without an answer "
                                "(squad-open; DPR's P1); 0 = never", default=1)
    max_query_length: int = _help("tokens per question", default=32)
    max_passage_length: int = _help("tokens per passage ([CLS] title [SEP] text [SEP])", default=160)
    dev_questions: int | None = _help("evaluate on a seeded sample of this many dev questions (null: all)",
                                      default=None)
    dev_corpus_sample: int | None = _help(
        "dev corpus = the dev questions' positives and hard negatives + this many seeded random corpus passages "
        "(R@K then overstates full-corpus R@K); null = the whole corpus", default=None)
    train_eval_questions: int = _help("training questions (seeded sample) scored like dev for the train learning "
                                      "curve; 0 = none", default=200)
    eval_ks: list[int] = _help("R@K cut-offs reported", default_factory=lambda: [1, 5, 20, 100])
    eval_batch_size: int = _help("encoding batch size during evaluation", default=64)

    def __post_init__(self):
        if not self.train:
            raise ConfigError("data.train needs at least one training set")
        for name in ("max_query_length", "max_passage_length", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"data.{name} must be positive, got {getattr(self, name)}")
        if self.hard_negative_pool is not None and self.hard_negative_pool < self.hard_negatives:
            raise ConfigError(f"data.hard_negative_pool ({self.hard_negative_pool}) must be >= data.hard_negatives "
                              f"({self.hard_negatives}) or null")
        for name in ("hard_negatives", "bm25_negatives", "train_eval_questions"):
            if getattr(self, name) < 0:
                raise ConfigError(f"data.{name} must be >= 0, got {getattr(self, name)}")
        if not self.eval_ks or min(self.eval_ks) < 1:
            raise ConfigError(f"data.eval_ks must be positive cut-offs, got {self.eval_ks}")


@dataclass
class MiningConfig:
    enabled: bool = _help("TASER App. B: round 1 on the data's (BM25) negatives, then round 2 on negatives "
                          "mined with the round-1 model", default=False)
    depth: int = _help("top-k passages the round-1 model retrieves per training question (paper: 100)",
                       default=100)
    negatives_per_question: int = _help("mined negatives kept per question: the highest-ranked without an answer",
                                        default=10)
    round2_init: str = _help("round-2 starting point: pretrained (model.name_or_path again) | round1",
                             default="pretrained")
    corpus: str | None = _help("dpr-json training data: the passage collection to retrieve from (DPR "
                               "psgs_w100.tsv[.gz]); squad-open uses its own corpus", default=None)
    encode_batch_size: int = _help("encoding batch size for the corpus", default=128)

    def __post_init__(self):
        if self.round2_init not in ("pretrained", "round1"):
            raise ConfigError(f"mining.round2_init must be pretrained or round1, got {self.round2_init!r}")
        if self.depth < 1 or self.negatives_per_question < 1:
            raise ConfigError("mining.depth and mining.negatives_per_question must be positive")


@dataclass
class TrainConfig:
    """A retriever training run (`kind: retriever`)."""

    kind: str = _help("what to train: retriever | cross-encoder | distill (training.kinds)", default="retriever")
    model: ModelConfig = field(default_factory=ModelConfig)
    data: RetrieverDataConfig = field(default_factory=RetrieverDataConfig)
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(output_dir="runs/retriever"))
    mining: MiningConfig = field(default_factory=MiningConfig)

    def __post_init__(self):
        if self.model.arch == "colbert":
            # R@K evaluation and mining search a dense (one vector per passage) index
            if self.data.dev is not None or self.data.train_eval_questions:
                raise _keyed(ConfigError("a colbert retriever has no dense index for R@K evaluation: set data.dev "
                                         "to null and data.train_eval_questions to 0 (score it by re-ranking)"),
                             "model.arch")
            if self.mining.enabled:
                raise _keyed(ConfigError("hard-negative mining retrieves with a dense index; a colbert retriever "
                                         "has none"), "mining.enabled")


LOOP_HELP = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(LoopConfig)}  # from the fields


# --- YAML <-> dataclasses --------------------------------------------------------------------------------------

def _key_lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """Dotted key -> 1-based line, from a composed YAML node (list items as key[i])."""
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            lines[key] = key_node.start_mark.line + 1
            lines.update(_key_lines(value_node, key))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            key = f"{prefix}[{i}]"
            lines[key] = item.start_mark.line + 1
            lines.update(_key_lines(item, key))
    return lines


SET_BY_OVERRIDE = -1  # the line recorded for a key given by --set


class _Builder:
    """Builds nested dataclasses from plain data, raising FormatError(file, line, key) on the first problem."""

    def __init__(self, path: str, lines: dict[str, int]):
        self.path, self.lines = path, lines

    def error(self, key: str, message: str) -> FormatError:
        line, where = self.lines.get(key), key
        while line is None and where:
            where = where.rsplit(".", 1)[0] if "." in where else ""
            line = self.lines.get(where)
        if line == SET_BY_OVERRIDE:
            return FormatError(self.path, None, key or None, f"{message} (given by --set {where}=...)")
        return FormatError(self.path, line, where or key or None, message)

    def dataclass_(self, cls: type, data: Any, where: str) -> Any:
        if not isinstance(data, dict):
            hint = cls.not_a_mapping_hint(data) if hasattr(cls, "not_a_mapping_hint") else ""
            raise self.error(where, f"expected a mapping for {cls.__name__}, got {type(data).__name__}{hint}")
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in dataclasses.fields(cls)}
        for key in data:
            if key not in known:
                hint = cls.unknown_key_hint(key) if hasattr(cls, "unknown_key_hint") else ""
                raise self.error(f"{where}.{key}" if where else str(key),
                                 f"unknown key; {where or 'the top level'} takes {', '.join(known)}{hint}")
        kwargs = {}
        for name, f in known.items():
            key = f"{where}.{name}" if where else name
            if name in data:
                kwargs[name] = self.value(hints[name], data[name], key)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise self.error(where, f"missing required key {key!r}")
        try:
            return cls(**kwargs)
        except ConfigError as err:
            key = getattr(err, "key", None)
            if key is None:
                raise self.error(where, str(err)) from None
            full = f"{where}.{key}" if where else key
            raise self.error(full, str(err).removeprefix(f"{full}: ")) from None

    def value(self, hint: Any, value: Any, key: str) -> Any:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            inner = [a for a in args if a is not type(None)]
            if len(inner) == 1:
                return self.value(inner[0], value, key)
            raise self.error(key, f"unsupported type {hint}")
        if dataclasses.is_dataclass(hint):
            return self.dataclass_(hint, value, key)
        if origin is list:
            if not isinstance(value, list):
                raise self.error(key, f"expected a list, got {value!r}")
            return [self.value(args[0], v, f"{key}[{i}]") for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                raise self.error(key, f"expected a mapping, got {value!r}")
            return {k: self.value(args[1], v, f"{key}.{k}") for k, v in value.items()}
        if hint is bool:
            if not isinstance(value, bool):
                raise self.error(key, f"expected true or false, got {value!r}")
            return value
        if hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(key, f"expected an integer, got {value!r}")
            return value
        if hint is float:
            if isinstance(value, str):  # YAML 1.1 reads 2e-5 as a string
                try:
                    return float(value)
                except ValueError:
                    pass
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(key, f"expected a number, got {value!r}")
            return float(value)
        if hint is str:
            if not isinstance(value, str):
                raise self.error(key, f"expected a string, got {value!r}")
            return value
        if hint is Any:
            return value
        raise self.error(key, f"unsupported type {hint}")


def apply_overrides(data: dict[str, Any], overrides: Sequence[str], lines: dict[str, int]) -> None:
    """Set `dotted.key=value` overrides (each value read as YAML: `null`, `32`, `[1, 5]`) in the config's plain
    data, in place. An overridden key loses its file line (in `lines`), so a bad value is reported as given by
    --set."""
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set expects KEY=VALUE with a dotted key (e.g. loop.max_steps=50), got {item!r}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {item!r}: the value is not YAML: {err}") from None
        node = data
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {'.'.join(parts[:i + 1])} is not a section")
            node = child
        node[parts[-1]] = value
        key = ".".join(parts)
        for known in [k for k in lines if k.startswith(key + ".") or k.startswith(key + "[")]:
            del lines[known]
        lines[key] = SET_BY_OVERRIDE


def config_to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _comments(cls: type) -> dict[str, str]:
    """Help texts of a config dataclass: its fields' own (`_help` metadata)."""
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def _emit_overrides(model: ModelConfig, comment: str, pad: str, out: list[str]) -> None:
    """A model section's overrides, then every other field of the arch's model config as a commented line with
    its default and help, both from the config class."""
    fields = model_fields(model.arch)
    if model.overrides:
        out.append(f"{pad}overrides:{comment}")
        for key, value in model.overrides.items():
            help_text = fields.get(key, (None, ""))[1]
            out.append(f"{pad}  {key}: {_yaml_scalar(value)}" + (f"  # {help_text}" if help_text else ""))
    else:
        out.append(f"{pad}overrides: {{}}{comment}")
    for key, (default, help_text) in fields.items():
        if key not in model.overrides:
            out.append(f"{pad}  # {key}: {_yaml_scalar(default)}  # {help_text}")


def _yaml_scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000, sort_keys=False)
    return text.strip().removesuffix("\n...").strip()


def _emit(obj: Any, indent: int, out: list[str]) -> None:
    pad = " " * indent
    comments = _comments(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        comment = f"  # {comments[f.name]}" if comments.get(f.name) else ""
        if isinstance(obj, ModelConfig) and f.name == "overrides":
            _emit_overrides(obj, comment, pad, out)
        elif dataclasses.is_dataclass(value):
            out.append(f"{pad}{f.name}:{comment}")
            _emit(value, indent + 2, out)
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            out.append(f"{pad}{f.name}:{comment}")
            for item in value:
                out.append(f"{pad}  - {_yaml_scalar(dataclasses.asdict(item))}")
        else:
            rendered = _yaml_scalar(dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value)
            out.append(f"{pad}{f.name}: {rendered}{comment}")


def to_yaml(config: Any) -> str:
    """The config as commented YAML that `load_config` reads back to an equal object."""
    out: list[str] = []
    _emit(config, 0, out)
    return "\n".join(out) + "\n"
