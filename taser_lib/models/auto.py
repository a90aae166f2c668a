"""Build any architecture from (arch, name_or_path, overrides): the one translation from a training config's model
section to a model.

    >>> model = build_model("taser", "default", routing="sequence", entropy_weight=0.01)
    >>> model = build_model("colbert", "bert-base-uncased", dim=128, similarity_scale=20.0)
    >>> model = build_model("shared", "default", projection_dim=64, num_hidden_layers=3)  # DE capacity axis

The Hugging Face config classes (`TaserConfig`, `DPRConfig`, `ColbertConfig`, `CrossEncoderConfig`) are the only
place model fields are defined, each with its help text (`model_fields`). `overrides` set those fields; what the
checkpoint fixes (hidden size, vocabulary, ...) cannot be overridden, except the two dropout rates and
`num_hidden_layers`, which keeps the checkpoint's first L layers. With `projection_dim` (dpr, taser, shared) the
pooled vector is mapped to that many dimensions by a learned linear projection: together the two give the DE
paper's capacity axis (embedding size x depth) on any checkpoint.
`check_overrides` validates overrides without loading weights: an unknown field, a value of the wrong type or one
the config class refuses is a `ConfigError` whose `.key` names the field.
"""

from __future__ import annotations

import ast
import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

from transformers import BertConfig

from ..errors import ConfigError
from .colbert import ColbertConfig, ColbertModel
from .cross_encoder import CrossEncoderConfig, CrossEncoderModel
from .dpr import DPRConfig, DPRModel
from .routing import routing_strategy
from .taser import TaserConfig, TaserModel

ARCHS = ("dpr", "taser", "shared", "colbert", "cross-encoder")
RETRIEVER_ARCHS = ("dpr", "taser", "shared", "colbert")  # encode_query / encode_passage / compute_similarity
DESCRIPTIONS = {
    "dpr": "two BERT towers, questions and passages (DPR, TASER's baseline)",
    "taser": "one tower with shared and specialized blocks (TASER; any routing)",
    "shared": "one tower for both sides (TASER_Shared, the Siamese encoder; routing fixed to shared)",
    "colbert": "late interaction: token vectors scored by MaxSim (ColBERT, DE Table 7)",
    "cross-encoder": "BERT reading [CLS] q [SEP] d [SEP], a linear score on [CLS] or the mean token (the CA teacher)",
}
CONFIG_CLASSES: dict[str, type] = {"dpr": DPRConfig, "taser": TaserConfig, "shared": TaserConfig,
                                   "colbert": ColbertConfig, "cross-encoder": CrossEncoderConfig}
MODEL_CLASSES: dict[str, type] = {"dpr": DPRModel, "taser": TaserModel, "shared": TaserModel,
                                  "colbert": ColbertModel, "cross-encoder": CrossEncoderModel}
FIXED = {"shared": {"routing": "shared", "num_experts": 1}}  # what an arch name already says
# BERT fields a fine-tuning run may change (the DE paper's Table 9 varies dropout); their help lives here because
# transformers' BertConfig documents its fields in prose only.
BERT_OVERRIDES = {
    "hidden_dropout_prob": "dropout after every sub-layer and on the embeddings; unset = the checkpoint's own",
    "attention_probs_dropout_prob": "dropout on the attention probabilities; unset = the checkpoint's own",
    "num_hidden_layers": "keep only the checkpoint's first L transformer layers (DE capacity sweeps: a stand-in for "
                         "shallower BERTs); unset = all of them",
}
BUILD_ONLY = {"pooling", "normalize", "passage_format"}  # None here means: the checkpoint's own (from_bert's defaults)


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise ConfigError(f"unknown arch {arch!r}; expected one of {ARCHS}")


def _own_fields(config_class: type) -> list[dataclasses.Field]:
    """The fields our config classes add to BertConfig."""
    bert = {f.name for f in dataclasses.fields(BertConfig)}
    return [f for f in dataclasses.fields(config_class) if f.name not in bert]


def model_fields(arch: str) -> dict[str, tuple[Any, str]]:
    """Every field `overrides` may set for `arch`: name -> (default when built from a checkpoint, help), from the
    config class itself; None = the checkpoint's own."""
    _check_arch(arch)
    config_class = CONFIG_CLASSES[arch]
    # the default a build gets: unset pooling / normalize / dropouts follow the checkpoint (None), unless the model
    # class fixes its own (ColBERT normalises token vectors)
    built = getattr(MODEL_CLASSES[arch], "build_defaults", {})
    out = {f.name: (built.get(f.name, None if f.name in BUILD_ONLY else f.default), f.metadata.get("help", ""))
           for f in _own_fields(config_class) if f.name not in FIXED.get(arch, {})}
    out.update({name: (None, text) for name, text in BERT_OVERRIDES.items()})
    return out


def _error(key: str, message: str) -> ConfigError:
    err = ConfigError(message)
    err.key = key  # the training config reports the line of this field
    return err


_BUILTIN_TYPES = {"int": int, "float": float, "bool": bool, "str": str, "dict": dict, "list": list}


def _hint(annotation: Any) -> Any:
    """A field's type. The config modules (ours and transformers') write annotations as strings; one built of builtin
    types (`int | None`, `dict[str, int] | None`) is read as that type, one naming anything else (`Literal[...]`,
    `torch.dtype`) as Any."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return _annotation_type(ast.parse(annotation, mode="eval").body)
    except (SyntaxError, LookupError):
        return Any


def _annotation_type(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, ast.Name):
        return _BUILTIN_TYPES[node.id]  # a KeyError for any other name
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _annotation_type(node.left) | _annotation_type(node.right)
    if isinstance(node, ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return _annotation_type(node.value)[tuple(_annotation_type(i) for i in items)]
    raise LookupError(ast.dump(node))


_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _coerce(hint: Any, value: Any, key: str) -> Any:
    """`value` as a field of type `hint` (an int is a valid float; so is a numeric string, as YAML 1.1 reads
    2e-5), or a ConfigError naming the field."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    options = [a for a in args if a is not type(None)] if origin in (typing.Union, types.UnionType) else [hint]
    if value is None and len(options) < len(args):
        return None
    for option in options:
        if option is bool and isinstance(value, bool):
            return value
        if option is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if option is float and isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        if option is str and isinstance(value, str):
            return value
        if option not in _EXPECTED:
            return value
    raise _error(key, f"expected {' or '.join(_EXPECTED.get(o, str(o)) for o in options)}, got {value!r}")


def check_overrides(arch: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Validate `overrides` for `arch` with its config class, without loading weights; returns them with numbers
    as the field's type (an int for a float field becomes a float). Raises `ConfigError` (`.key` = the field)."""
    _check_arch(arch)
    config_class = CONFIG_CLASSES[arch]
    known = model_fields(arch)
    hints = {f.name: _hint(f.type) for f in dataclasses.fields(config_class)}
    checked: dict[str, Any] = {}
    for key, value in overrides.items():
        if key in FIXED.get(arch, {}):
            raise _error(key, f"arch {arch!r} fixes {key} = {FIXED[arch][key]!r}; use arch 'taser' to choose it")
        if key not in known:
            raise _error(key, f"{key!r} is not a field of arch {arch!r} ({config_class.__name__}); it takes "
                              f"{', '.join(known) or 'none'}")
        if value is None and key in BUILD_ONLY | set(BERT_OVERRIDES):
            continue  # the checkpoint's own
        checked[key] = _coerce(hints[key], value, key)
        if key == "num_hidden_layers" and checked[key] < 1:
            raise _error(key, f"num_hidden_layers must be >= 1, got {checked[key]}")
    try:  # the config class's own checks (ranges, combinations), on a BERT-shaped config of default size
        fields = {**checked, **FIXED.get(arch, {})}
        config_class(**{**fields, **_num_experts_default(config_class, fields)})
    except ConfigError as err:
        field_name = next((k for k in checked if k in str(err)), next(iter(checked), "arch"))
        raise _error(field_name, str(err)) from None
    return {k: v for k, v in overrides.items() if k not in checked} | checked


def _num_experts_default(config_class: type, fields: dict[str, Any]) -> dict[str, Any]:
    """from_bert's default for num_experts (1 for shared routing, else 2), for validation."""
    if "num_experts" in fields or not hasattr(config_class, "num_experts"):
        return {}
    return {"num_experts": routing_strategy(fields.get("routing", config_class.routing)).default_experts}


def build_model(arch: str, name_or_path: str | Path = "default", *, allow_pickle: bool = False, **overrides):
    """A fresh model of `arch` initialised from a plain BERT checkpoint (`name_or_path`: 'default' = the packaged
    MiniLM, a folder or a hub name), with `overrides` set on its config class (see `model_fields(arch)`)."""
    overrides = check_overrides(arch, overrides)
    overrides = {k: v for k, v in overrides.items() if not (v is None and k in BERT_OVERRIDES)}
    return MODEL_CLASSES[arch].from_bert(name_or_path, allow_pickle=allow_pickle,
                                         **{**overrides, **FIXED.get(arch, {})})
