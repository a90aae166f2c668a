"""Models: TASER (+ routing), DPR, ColBERT, cross-encoder; building (`auto.build_model`), loading and encoding.

Every retriever (dpr, taser, shared, colbert) has `encode_query`, `encode_passage` and `compute_similarity`.

    >>> from taser_lib.models import load_encoder
    >>> enc = load_encoder("default")            # the packaged MiniLM, its own mean pooling, offline
    >>> enc.encode_passages([("Title", "Some passage text.")]).shape
    (1, 384)
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoConfig, AutoModel, AutoTokenizer

from ..errors import TaserError
from .auto import ARCHS, RETRIEVER_ARCHS, build_model, check_overrides, model_fields
from .colbert import ColbertConfig, ColbertModel, maxsim
from .common import (TOKENIZER_FILES, RetrieverOutput, TokenReps, cat_reps, checkpoint_pooling, has_tokenizer,
                     pool)
from .convert import from_microsoft_naming, load_microsoft_taser, to_microsoft_naming
from .cross_encoder import CrossEncoderConfig, CrossEncoderModel
from .dpr import DPRConfig, DPRModel
from .encoding import DenseEncoder, default_device
from .params import PAPER_PARAMS_M, count_parameters, parameter_table
from .taser import ROUTINGS, TaserConfig, TaserLayer, TaserModel
from .weights import (DEFAULT, DEFAULT_DESCRIPTION, TINY, TINY_DESCRIPTION, check_weights_format, default_checkpoint,
                      quiet_loading, resolve_checkpoint, tiny_checkpoint)

# Hugging Face users can load saved models with AutoConfig / AutoModel.
_PAIRS = ((TaserConfig, TaserModel), (DPRConfig, DPRModel), (ColbertConfig, ColbertModel),
          (CrossEncoderConfig, CrossEncoderModel))
for _config, _model in _PAIRS:
    AutoConfig.register(_config.model_type, _config, exist_ok=True)
    AutoModel.register(_config, _model, exist_ok=True)

_SAVED = {config.model_type: model for config, model in _PAIRS}


def load_model(name_or_path: str | Path = "default", allow_pickle: bool = False, **kwargs):
    """A saved TASER / DPR / ColBERT / cross-encoder folder loads as itself; a plain BERT checkpoint loads
    zero-shot as the Siamese (`shared`) encoder with the checkpoint's own pooling."""
    path = resolve_checkpoint(name_or_path, allow_pickle=allow_pickle)
    check_weights_format(path, allow_pickle)
    model_type = json.loads((path / "config.json").read_text()).get("model_type")
    if model_type in _SAVED:
        with quiet_loading():
            return _SAVED[model_type].from_pretrained(path, use_safetensors=not allow_pickle, **kwargs)
    return TaserModel.from_bert(path, routing="shared", num_experts=1, allow_pickle=allow_pickle, **kwargs)


def load_tokenizer(name_or_path: str | Path = "default"):
    path = resolve_checkpoint(name_or_path)
    if not has_tokenizer(path):
        raise TaserError(f"{path} has no tokenizer (none of {', '.join(TOKENIZER_FILES)}): save one there with "
                         f"tokenizer.save_pretrained(...), or pass tokenizer= the checkpoint the model was built from")
    return AutoTokenizer.from_pretrained(path)


def load_encoder(name_or_path: str | Path = "default", *, tokenizer: str | Path | None = None,
                 allow_pickle: bool = False, model_kwargs: dict | None = None, **encoder_kwargs) -> DenseEncoder:
    """A ready `DenseEncoder` (encode_queries / encode_passages) for a saved model or a plain BERT checkpoint."""
    model = load_model(name_or_path, allow_pickle=allow_pickle, **(model_kwargs or {}))
    return DenseEncoder(model, load_tokenizer(tokenizer or name_or_path), **encoder_kwargs)


__all__ = [
    "ARCHS", "ColbertConfig", "ColbertModel", "CrossEncoderConfig", "CrossEncoderModel", "DEFAULT",
    "DEFAULT_DESCRIPTION", "DPRConfig", "DPRModel", "DenseEncoder", "PAPER_PARAMS_M", "RETRIEVER_ARCHS",
    "ROUTINGS", "RetrieverOutput", "TINY", "TINY_DESCRIPTION", "TaserConfig", "TaserLayer", "TaserModel", "TokenReps", "build_model",
    "cat_reps", "check_overrides", "checkpoint_pooling", "count_parameters", "default_checkpoint", "tiny_checkpoint",
    "default_device", "from_microsoft_naming", "load_encoder", "load_microsoft_taser", "load_model",
    "load_tokenizer", "maxsim", "model_fields", "parameter_table", "pool", "resolve_checkpoint",
    "to_microsoft_naming",
]
