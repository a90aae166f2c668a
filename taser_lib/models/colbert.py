"""ColBERT late interaction on top of any bi-encoder tower ("In defense of dual-encoders", Sec. 4, Table 7;
Khattab & Zaharia 2020): every token keeps its vector and

    s(q, d) = (1/|q|) sum_{i in q} max_{j in d} <E_q,i, E_d,j>

("the average of the maximum query-document token similarities"; ColBERT itself sums, `reduce="sum"`).
Token vectors are projected to `dim` and L2-normalised, as in ColBERT.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .common import BiEncoderMixin


def maxsim(q_tokens: torch.Tensor, q_mask: torch.Tensor, d_tokens: torch.Tensor, d_mask: torch.Tensor,
           reduce: str = "mean") -> torch.Tensor:
    """MaxSim scores [Bq, Bd] between every query and every document; padding never matches or counts."""
    sim = torch.einsum("qid,pjd->qpij", q_tokens, d_tokens)  # [Bq, Bd, Lq, Ld]
    sim = sim.masked_fill(~d_mask.bool()[None, :, None, :], float("-inf"))
    best = sim.max(-1).values * q_mask[:, None, :].to(sim.dtype)  # [Bq, Bd, Lq]
    total = best.sum(-1)
    if reduce == "sum":
        return total
    if reduce == "mean":
        return total / q_mask.sum(-1, keepdim=True).to(sim.dtype)
    raise ValueError(f"reduce must be 'mean' or 'sum', got {reduce!r}")


class ColbertScorer(nn.Module):
    """Late-interaction scoring with the token outputs of a `TaserModel` or `DPRModel`."""

    def __init__(self, encoder: BiEncoderMixin, dim: int = 128, reduce: str = "mean"):
        super().__init__()
        self.encoder = encoder
        self.projection = nn.Linear(encoder.config.hidden_size, dim, bias=False)
        self.reduce = reduce

    def _tokens(self, kind, batch: dict) -> torch.Tensor:
        return F.normalize(self.projection(self.encoder.encode_tokens(kind, **batch)), dim=-1)

    def forward(self, query: dict, passage: dict) -> torch.Tensor:
        """Scores [Bq, Bp] of every query against every passage (in-batch negatives come for free)."""
        return maxsim(self._tokens("query", query), query["attention_mask"],
                      self._tokens("passage", passage), passage["attention_mask"], self.reduce)
