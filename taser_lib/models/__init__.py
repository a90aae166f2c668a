"""Encoders: TASER (+ routing), DPR, cross-encoder, ColBERT scorer; loading and encoding.

    >>> from taser_lib.models import load_encoder
    >>> enc = load_encoder("default")            # the packaged MiniLM, its own mean pooling, offline
    >>> enc.encode_passages([("Title", "Some passage text.")]).shape
    (1, 384)
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoTokenizer

from .colbert import ColbertScorer, maxsim
from .common import RetrieverOutput, checkpoint_pooling, pool
from .convert import from_microsoft_naming, load_microsoft_taser, to_microsoft_naming
from .cross_encoder import CrossEncoderConfig, CrossEncoderModel
from .dpr import DPRConfig, DPRModel
from .encoding import DenseEncoder, default_device
from .params import PAPER_PARAMS_M, count_parameters, parameter_table
from .taser import ROUTINGS, TaserConfig, TaserLayer, TaserModel
from .weights import DEFAULT, DEFAULT_DESCRIPTION, check_weights_format, default_checkpoint, resolve_checkpoint

ARCHS = ("dpr", "taser", "shared", "cross-encoder")

# Hugging Face users can load saved models with AutoConfig / AutoModel.
for _config, _model in ((TaserConfig, TaserModel), (DPRConfig, DPRModel), (CrossEncoderConfig, CrossEncoderModel)):
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)

_SAVED = {TaserConfig.model_type: TaserModel, DPRConfig.model_type: DPRModel,
          CrossEncoderConfig.model_type: CrossEncoderModel}


def build_model(arch: str, name_or_path: str | Path = "default", **kwargs):
    """A fresh model of `arch` initialised from a plain BERT checkpoint.

    arch: ``dpr`` | ``taser`` (kwargs: routing, shared_blocks, num_experts) | ``shared`` | ``cross-encoder``.
    """
    if arch == "dpr":
        return DPRModel.from_bert(name_or_path, **kwargs)
    if arch == "taser":
        return TaserModel.from_bert(name_or_path, **kwargs)
    if arch == "shared":
        return TaserModel.from_bert(name_or_path, routing="shared", num_experts=1, **kwargs)
    if arch == "cross-encoder":
        return CrossEncoderModel.from_bert(name_or_path, **kwargs)
    raise ValueError(f"unknown arch {arch!r}; expected one of {ARCHS}")


def load_model(name_or_path: str | Path = "default", allow_pickle: bool = False, **kwargs):
    """A saved TASER / DPR / cross-encoder folder loads as itself; a plain BERT checkpoint loads zero-shot as the
    Siamese (`shared`) encoder with the checkpoint's own pooling."""
    path = resolve_checkpoint(name_or_path, allow_pickle=allow_pickle)
    check_weights_format(path, allow_pickle)
    model_type = json.loads((path / "config.json").read_text()).get("model_type")
    if model_type in _SAVED:
        return _SAVED[model_type].from_pretrained(path, use_safetensors=not allow_pickle, **kwargs)
    return TaserModel.from_bert(path, routing="shared", num_experts=1, allow_pickle=allow_pickle, **kwargs)


def load_tokenizer(name_or_path: str | Path = "default"):
    return AutoTokenizer.from_pretrained(resolve_checkpoint(name_or_path))


def load_encoder(name_or_path: str | Path = "default", *, tokenizer: str | Path | None = None,
                 allow_pickle: bool = False, model_kwargs: dict | None = None, **encoder_kwargs) -> DenseEncoder:
    """A ready `DenseEncoder` (encode_queries / encode_passages) for a saved model or a plain BERT checkpoint."""
    model = load_model(name_or_path, allow_pickle=allow_pickle, **(model_kwargs or {}))
    return DenseEncoder(model, load_tokenizer(tokenizer or name_or_path), **encoder_kwargs)


__all__ = [
    "ARCHS", "ColbertScorer", "CrossEncoderConfig", "CrossEncoderModel", "DEFAULT", "DEFAULT_DESCRIPTION",
    "DPRConfig", "DPRModel", "DenseEncoder", "PAPER_PARAMS_M", "ROUTINGS", "RetrieverOutput", "TaserConfig",
    "TaserLayer", "TaserModel", "build_model", "checkpoint_pooling", "count_parameters", "default_checkpoint",
    "default_device", "from_microsoft_naming", "load_encoder", "load_microsoft_taser", "load_model",
    "load_tokenizer", "maxsim", "parameter_table", "pool", "resolve_checkpoint", "to_microsoft_naming",
]
