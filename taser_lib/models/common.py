"""What every bi-encoder here shares: pooling, the similarity function and the Tevatron-style forward.

A bi-encoder maps a question batch and a passage batch to vectors (`encode_query`, `encode_passage`), scores them
with `compute_similarity` (dot product, TASER Sec. 2, optionally scaled for cosine training), and its `forward`
returns both sides plus any auxiliary loss the architecture adds (TASER's routing entropy, Eq. 4-5). Losses live in
`taser_lib.losses`; trainers combine the two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from transformers.utils import ModelOutput

from ..losses import masked_lm_loss

Kind = Literal["query", "passage"]
POOLINGS = ("cls", "mean")


def pool(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[CLS] pooling (the papers: the final [CLS] vector, TASER Sec. 2) or mean over real tokens."""
    if pooling == "cls":
        return last_hidden_state[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)
        return (last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")


def checkpoint_pooling(path: str | Path) -> tuple[str, bool] | None:
    """The pooling a sentence-transformers checkpoint was trained with: (pooling, normalize), or None.

    A checkpoint used zero-shot keeps its own pooling: the packaged MiniLM was trained with mean pooling and a
    final L2 normalisation (modules.json lists a Normalize module), and [CLS] pooling would misuse it.
    """
    path = Path(path)
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        return None
    modules = json.loads(modules_file.read_text())
    pooling, normalize = None, False
    for module in modules:
        kind = module.get("type", "")
        if kind.endswith("Pooling"):
            cfg = json.loads((path / module.get("path", "") / "config.json").read_text())
            if cfg.get("pooling_mode_cls_token"):
                pooling = "cls"
            elif cfg.get("pooling_mode_mean_tokens"):
                pooling = "mean"
            else:
                raise ValueError(f"{path}: unsupported sentence-transformers pooling {cfg}")
        elif kind.endswith("Normalize"):
            normalize = True
    return (pooling, normalize) if pooling else None


@dataclass
class RetrieverOutput(ModelOutput):
    """Question and passage representations from one forward, the architecture's auxiliary loss
    (beta * L_ent for learned TASER routing, TASER Eq. 5; zero otherwise) and, when masked inputs were given, the
    masked-LM loss (DE Table 9)."""

    q_reps: torch.Tensor | None = None
    p_reps: torch.Tensor | None = None
    aux_loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None


class BiEncoderMixin:
    """Shared methods of `TaserModel` and `DPRModel`. Subclasses implement `_encode(kind, ...)` returning
    (last_hidden_state, aux_loss) and `_mlm(kind)` returning (MaskedLMHead, word embedding weights) of the tower
    that encodes `kind`, and hold `config.pooling`, `config.normalize`, `config.similarity_scale`,
    `config.mlm_head`."""

    def _encode(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        raise NotImplementedError

    def _mlm(self, kind: Kind):
        raise NotImplementedError

    def masked_lm_loss(self, kind: Kind, input_ids, attention_mask, labels, token_type_ids=None) -> torch.Tensor:
        """BERT's MLM loss of a masked `kind` batch (labels: -100 where not masked; see `losses.mlm_mask`) through
        the tower that encodes `kind`. Needs a model built with `mlm_head=True`."""
        if not getattr(self.config, "mlm_head", False):
            raise ValueError("this model has no masked-LM head: build it with mlm_head=True")
        hidden, _ = self._encode(kind, input_ids, attention_mask, token_type_ids)
        head, word_embeddings = self._mlm(kind)
        return masked_lm_loss(head(hidden, word_embeddings), labels)

    def _pooled(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        hidden, aux = self._encode(kind, input_ids, attention_mask, token_type_ids)
        reps = pool(hidden, attention_mask, self.config.pooling)
        if self.config.normalize:
            reps = F.normalize(reps, dim=-1)
        return reps, aux

    def encode_query(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self._pooled("query", input_ids, attention_mask, token_type_ids)[0]

    def encode_passage(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self._pooled("passage", input_ids, attention_mask, token_type_ids)[0]

    def encode_tokens(self, kind: Kind, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        """Every token's final vector [B, L, d] (for late interaction, see `colbert`)."""
        return self._encode(kind, input_ids, attention_mask, token_type_ids)[0]

    def compute_similarity(self, q_reps: torch.Tensor, p_reps: torch.Tensor) -> torch.Tensor:
        """sim(q, p) = s * q^T p (TASER Sec. 2; s = 1 for dot product, s > 1 to sharpen cosine scores)."""
        return self.config.similarity_scale * q_reps @ p_reps.transpose(0, 1)

    def forward(self, query: dict | None = None, passage: dict | None = None,
                masked_query: dict | None = None, masked_passage: dict | None = None) -> RetrieverOutput:
        """Encode a tokenised question batch and/or passage batch (dicts of input_ids, attention_mask, ...); with
        masked batches (the same dicts plus `labels`) also return the mean of their masked-LM losses. Everything
        goes through this one forward so that DistributedDataParallel sees every parameter used."""
        q_reps = p_reps = None
        aux = []
        if query is not None:
            q_reps, a = self._pooled("query", **query)
            aux.append(a)
        if passage is not None:
            p_reps, a = self._pooled("passage", **passage)
            aux.append(a)
        aux_loss = sum(aux) if aux else None
        mlm = [self.masked_lm_loss(kind, **batch) for kind, batch in (("query", masked_query),
                                                                      ("passage", masked_passage))
               if batch is not None]
        mlm_loss = torch.stack(mlm).mean() if mlm else None
        return RetrieverOutput(q_reps=q_reps, p_reps=p_reps, aux_loss=aux_loss, mlm_loss=mlm_loss)
