"""Benchmark 1: passage encoding, `DenseEncoder.encode_passages` vs sentence-transformers' `SentenceTransformer.encode`.

Same packaged model (its own mean pooling and L2 normalisation on both sides), same SQuAD-open passages given to
both as (title, text) pairs, same batch size and maximum length. Both are timed round-robin (core.interleaved)
after one untimed warm-up call each on a small slice. On the CPU a third contender, our encoder with PyTorch's stock
kernels (`fuse_cpu_linears=False`), shows what the fused linears of `taser_lib.models.encoding` add.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..models import DenseEncoder, default_checkpoint
from . import inputs
from .core import BenchConfig, interleaved, paired_ratio, rate, row

NAME = "encoding"
TITLE = "Passage encoding vs sentence-transformers"
TARGET_SPEEDUP = 1.3
MIN_COSINE = 0.999


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [n, d] arrays."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(1)


def sentence_transformer(cfg: BenchConfig, max_length: int):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(default_checkpoint()), device=cfg.device, local_files_only=True)
    model.max_seq_length = max_length
    return model


def run(cfg: BenchConfig) -> dict[str, Any]:
    n, batch, max_length, repeats = cfg.pick(2000, 16), cfg.pick(64, 8), 256, cfg.pick(5, 1)
    passages = inputs.passages(cfg, n)
    ours = inputs.encoder(cfg, batch_size=batch, max_passage_length=max_length)
    ours.show_progress = False  # a progress bar inside a timed call would time the terminal too
    theirs = sentence_transformer(cfg, max_length)
    fns = {
        "taser_lib": lambda: ours.encode_passages(passages),
        "sentence_transformers": lambda: theirs.encode(passages, batch_size=batch, convert_to_numpy=True,
                                                       show_progress_bar=False),
    }
    if cfg.device == "cpu":  # what the fused CPU linears add: the same encoder with PyTorch's stock kernels
        stock = DenseEncoder(ours.model, ours.tokenizer, batch_size=batch, max_passage_length=max_length,
                             device=cfg.device, show_progress=False, fuse_cpu_linears=False)
        fns["taser_lib_stock_kernels"] = lambda: stock.encode_passages(passages)
    ours.encode_passages(passages[:batch])  # warm-up on a small slice: a full untimed round would double the time
    theirs.encode(passages[:batch], batch_size=batch, show_progress_bar=False)
    times, out = interleaved(fns, repeats, cfg.device, warmup=0)
    cos = cosines(out["taser_lib"], np.asarray(out["sentence_transformers"], dtype=np.float32))
    speedup = paired_ratio(times["sentence_transformers"], times["taser_lib"])
    fused_gain = (paired_ratio(times["taser_lib_stock_kernels"], times["taser_lib"])
                  if "taser_lib_stock_kernels" in times else None)
    extra = [row("speed-up of fused CPU linears over stock kernels", fused_gain["median"], "x")] if fused_gain else []
    lengths = [len(x) for x in ours.tokenize_passages(passages)["input_ids"]]
    pooling = (ours.model.config.pooling, ours.model.config.normalize)
    return {
        "rows": [
            row("speed-up over sentence-transformers", speedup["median"], "x", target=TARGET_SPEEDUP),
            row("min cosine(ours, theirs)", float(cos.min()), target=MIN_COSINE, op=">"),
            row("taser_lib passages/s", rate(n, times["taser_lib"])["median"], "1/s"),
            row("sentence-transformers passages/s", rate(n, times["sentence_transformers"])["median"], "1/s"),
            *extra,
        ],
        "measured": {
            "seconds": times,
            "passages_per_second": {k: rate(n, v) for k, v in times.items()},
            "speedup": speedup,
            "fused_over_stock": fused_gain,
            "cosine": {"min": float(cos.min()), "mean": float(cos.mean())},
            "tokens": {"total": int(sum(lengths)), "mean": float(np.mean(lengths)), "max": int(max(lengths))},
        },
        "sizes": {"passages": n, "batch_size": batch, "max_length": max_length, "repeats": repeats,
                  "pooling": {"taser_lib": list(pooling),
                              "sentence_transformers": [type(m).__name__ for m in list(theirs)[1:]]}},
        "notes": ["speed-up = median over rounds of (their seconds / our seconds), rounds timed back to back",
                  "both get (title, text) pairs: [CLS] title [SEP] text [SEP]",
                  "on the CPU, taser_lib_stock_kernels is the same encoder with fuse_cpu_linears=False"],
    }
