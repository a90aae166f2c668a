"""BERT's masked-LM head for the auxiliary MLM loss of a bi-encoder student ("In defense of dual-encoders",
Appendix C.10, Table 9; the head and its weight tying as in Devlin et al. 2019).

The head is BERT's own transform (dense, activation, LayerNorm) and an output bias; the output weights are the
tower's input word embeddings, passed in at call time, so the tie is exact and nothing is stored twice. A checkpoint
that has BERT's pretrained head (``cls.predictions.*``, e.g. bert-base-uncased) starts from it; one without (a
sentence-transformers model such as the offline default) starts from a fresh transform and a zero bias.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import safe_open
from torch import nn
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertPredictionHeadTransform

_PRETRAINED_PREFIXES = ("cls.predictions.", "bert.cls.predictions.")


class MaskedLMHead(nn.Module):
    """logits = transform(h) @ E^T + b, E being the word embeddings the tower reads its input with."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        return self.transform(hidden_states) @ word_embeddings.t() + self.bias


def pretrained_head_state(checkpoint: str | os.PathLike) -> dict[str, torch.Tensor] | None:
    """The state dict of `MaskedLMHead` from a BERT checkpoint folder's safetensors, or None if it has no MLM head
    (the decoder weight is skipped: it is the word embeddings)."""
    weights = Path(checkpoint) / "model.safetensors"
    if not weights.is_file():
        return None
    state = {}
    with safe_open(str(weights), framework="pt") as f:
        for key in f.keys():
            for prefix in _PRETRAINED_PREFIXES:
                if key.startswith(prefix):
                    # old TF-converted checkpoints name LayerNorm's weight and bias gamma and beta
                    name = key[len(prefix):].replace("LayerNorm.gamma", "LayerNorm.weight").replace(
                        "LayerNorm.beta", "LayerNorm.bias")
                    if name == "bias" or name.startswith("transform."):
                        state[name] = f.get_tensor(key)
    return state or None


def init_head(head: MaskedLMHead, checkpoint: str | os.PathLike) -> bool:
    """Load BERT's pretrained head into `head` when `checkpoint` has one; returns whether it did."""
    state = pretrained_head_state(checkpoint)
    if state is None:
        return False
    head.load_state_dict(state, strict=True)
    return True
