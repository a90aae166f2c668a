"""Passage-encoding throughput of several encoders on the same passages, timed round-robin (TASER Sec. 3: with
deterministic routing each input runs one expert, so TASER encodes at the cost of one BERT, as DPR's passage tower).

    >>> encoding_throughput({"dpr": dpr_encoder, "taser": taser_encoder}, passages, repeats=3)
    ... # model, round, passages, seconds, passages_per_second: one row per encoder and round

Each encoder first encodes a small slice untimed (weights cast, kernels chosen), then all are timed in rounds whose
order rotates (`core.interleaved`), so a load on the machine falls on all of them alike. Compare them by the median
over rounds, or per round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from .core import interleaved

WARMUP_PASSAGES = 8


def encoding_throughput(encoders: Mapping[str, Any], passages: Sequence, repeats: int = 3,
                        device: str | torch.device = "cpu") -> pd.DataFrame:
    """One row per (encoder, round): model, round, passages, seconds, passages_per_second. `encoders` have
    `encode_passages` (a `DenseEncoder`, progress bars off); `passages` are what it takes ((title, text) pairs)."""
    if not passages:
        raise ValueError("no passages to encode")
    if not encoders:
        raise ValueError("no encoders to time")
    for encoder in encoders.values():
        encoder.encode_passages(list(passages[:WARMUP_PASSAGES]))
    calls = {name: (lambda e=encoder: e.encode_passages(passages)) for name, encoder in encoders.items()}
    times, _ = interleaved(calls, repeats, device, warmup=0)
    return pd.DataFrame([{"model": name, "round": i, "passages": len(passages), "seconds": s,
                          "passages_per_second": len(passages) / s}
                         for name, seconds in times.items() for i, s in enumerate(seconds)])
