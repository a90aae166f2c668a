"""ColBERT late interaction ("In defense of dual-encoders", Sec. 4, Table 7; Khattab & Zaharia 2020): every token
keeps its vector, projected to `dim` and L2-normalised as in ColBERT, and

    s(q, d) = (1/|q|) sum_{i in q} max_{j in d} <E_q,i, E_d,j>

("the average of the maximum query-document token similarities"; ColBERT itself sums, `reduce: sum`), times
`similarity_scale` (an inverse temperature: averaged cosines lie in [-1, 1] and give a flat softmax unscaled).

`ColbertModel` is a retriever like the others: `encode_query` / `encode_passage` return `TokenReps` (token vectors
and their mask), `compute_similarity` is MaxSim, and the retriever and distillation trainers train it unchanged.
Its tower is a `TaserModel`'s: with the default `routing: shared` it is plain BERT (one tower for questions and
passages, as ColBERT), and any TASER routing gives ColBERT on a TASER tower. Built from any BERT checkpoint
(`ColbertModel.from_bert`, `models.auto.build_model("colbert", ...)`); the projection starts fresh. ColBERT's
[Q] / [D] marker tokens and query augmentation with [MASK] are left out.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from .common import Kind, TokenReps, described, normalize_field
from .taser import TaserConfig, TaserModel

REDUCES = ("mean", "sum")


def maxsim(q_tokens: torch.Tensor, q_mask: torch.Tensor, d_tokens: torch.Tensor, d_mask: torch.Tensor,
           reduce: str = "mean") -> torch.Tensor:
    """MaxSim scores [Bq, Bd] between every query and every document; padding never matches or counts."""
    sim = torch.einsum("qid,pjd->qpij", q_tokens, d_tokens)  # [Bq, Bd, Lq, Ld]
    sim = sim.masked_fill(~d_mask.bool()[None, :, None, :], float("-inf"))
    best = sim.max(-1).values.masked_fill(~q_mask.bool()[:, None, :], 0.0)  # [Bq, Bd, Lq]
    total = best.sum(-1)
    if reduce == "sum":
        return total
    if reduce == "mean":
        return total / q_mask.sum(-1, keepdim=True).to(sim.dtype)
    raise ValueError(f"reduce must be one of {REDUCES}, got {reduce!r}")


class ColbertConfig(TaserConfig):
    """A TASER config (the tower; `routing: shared` = plain BERT) plus ColBERT's projection and reduction."""

    model_type = "taser-colbert"
    routing: str = described("shared", "the tower: shared (plain BERT, ColBERT) | deterministic | sequence | "
                                       "token (ColBERT on a TASER tower)")
    num_experts: int = described(1, "I: expert FFNs per specialized block of a TASER tower (unset: 1 for shared "
                                    "routing, else 2)")
    normalize: bool = normalize_field(default=True)
    dim: int = described(128, "size of the projected token vectors (ColBERT: 128)")
    projection_dim: int | None = described(None, "not used by ColBERT (its token vectors are projected to `dim`); "
                                                 "must stay null")
    reduce: str = described("mean", "mean (the DE paper: average over query tokens) | sum (ColBERT) of the "
                                    "per-query-token maxima")

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if self.dim < 1:
            raise ConfigError(f"dim must be >= 1, got {self.dim}")
        if self.reduce not in REDUCES:
            raise ConfigError(f"reduce must be one of {REDUCES}, got {self.reduce!r}")
        if self.projection_dim is not None:
            raise ConfigError(f"projection_dim is not a ColBERT field (its token vectors are projected to `dim`), "
                              f"got {self.projection_dim}")


class ColbertModel(TaserModel):
    """ColBERT: `encode_query` / `encode_passage` return `TokenReps`; `compute_similarity` is s * MaxSim."""

    config_class = ColbertConfig
    build_defaults = {"normalize": True}  # from_bert: ColBERT's normalised token vectors, whatever the checkpoint

    def _add_modules(self, config: ColbertConfig) -> None:
        self.projection = nn.Linear(config.hidden_size, config.dim, bias=False)

    def _represent(self, kind: Kind, input_ids, attention_mask, token_type_ids=None):
        hidden, entropy = self._encode(kind, input_ids, attention_mask, token_type_ids)
        vectors = self.projection(hidden)
        if self.config.normalize:
            vectors = F.normalize(vectors, dim=-1)
        return TokenReps(vectors, attention_mask), entropy

    def compute_similarity(self, q_reps: TokenReps, p_reps: TokenReps) -> torch.Tensor:
        """s * MaxSim of every question against every passage, `[Bq, Bp]` (no parameters: see the base class)."""
        return self.config.similarity_scale * maxsim(q_reps.vectors, q_reps.mask, p_reps.vectors, p_reps.mask,
                                                     self.config.reduce)

    @classmethod
    def from_bert(cls, name_or_path: str | Path = "default", **config_fields) -> "ColbertModel":
        """BERT (or, with a TASER `routing`, a TASER tower initialised as TASER's) from the checkpoint; the
        projection starts fresh. Token vectors are L2-normalised unless `normalize=False`."""
        return super().from_bert(name_or_path, **{**cls.build_defaults, **config_fields})
