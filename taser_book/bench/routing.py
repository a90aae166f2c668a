"""Benchmark 3: what TASER's routing costs. Det-R TASER vs the plain BERT it was built from, on the same padded
passage batch, forward only: one expert runs per specialized block, so TASER should cost what BERT costs.

The strawman beside it computes every expert of every specialized block and then keeps the routed one; it lives
here only, to show what that design would cost. At initialisation every expert is a copy of BERT's FFN, so all
three variants must return the same hidden states (checked).
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from taser_lib.models import TaserModel, build_model
from taser_lib.models.routing import DeterministicRouting
from taser_lib.models.weights import load_bert
from . import inputs
from .core import BenchConfig, interleaved, paired_ratio, row, spread
from .hardware import encoder_flops, ffn_flops

NAME = "routing"
TITLE = "TASER routing cost vs plain BERT (forward)"
TARGET_RATIO = 1.05


def _every_expert_forward(layer, hidden_states, attention_mask=None, encoder_hidden_states=None,
                          encoder_attention_mask=None, cache=None, routing_kind=None, routing_mask=None,
                          **kwargs) -> torch.Tensor:
    h, _ = layer.attention(hidden_states, attention_mask, cache=cache, **kwargs)
    outputs = torch.stack([expert(h) for expert in layer.experts])  # I-fold FFN compute
    return outputs[0 if routing_kind == "query" else 1]


@contextmanager
def every_expert(model: TaserModel) -> Iterator[TaserModel]:
    """Det-R as 'compute every expert, then slice' for the duration of the block (the strawman)."""
    if not isinstance(model.config.strategy, DeterministicRouting):
        raise ValueError("the every-expert strawman is written for deterministic routing")
    for layer in model.taser_layers:
        layer.forward = types.MethodType(_every_expert_forward, layer)
    try:
        yield model
    finally:
        for layer in model.taser_layers:
            del layer.forward


def passage_batch(cfg: BenchConfig, n: int, max_length: int = 256) -> dict[str, torch.Tensor]:
    enc = inputs.encoder(cfg)
    batch = enc.tokenizer.pad(enc.tokenize_passages(inputs.passages(cfg, n), max_length), return_tensors="pt")
    return {k: v.to(cfg.device) for k, v in batch.items()}


def run(cfg: BenchConfig) -> dict[str, Any]:
    n, repeats = cfg.pick(64, 4), cfg.pick(10, 1)
    batch = passage_batch(cfg, n)
    bert = load_bert("default")[0].to(cfg.device).eval()
    taser = build_model("taser").to(cfg.device).eval()
    strawman = build_model("taser").to(cfg.device).eval()

    def strawman_forward():
        with every_expert(strawman):
            return strawman.encode_tokens("passage", **batch)

    fns = {"bert": lambda: bert(**batch).last_hidden_state,
           "taser": lambda: taser.encode_tokens("passage", **batch),
           "every_expert": strawman_forward}
    with torch.inference_mode():
        times, out = interleaved(fns, repeats, cfg.device)
    for name in ("taser", "every_expert"):
        if not torch.allclose(out[name], out["bert"], atol=1e-4, rtol=1e-4):
            raise RuntimeError(f"{name} hidden states differ from BERT's at initialisation; the timings compare "
                               "different computations")
    ratio = {name: paired_ratio(times[name], times["bert"]) for name in ("taser", "every_expert")}
    config = taser.config
    specialized = len(config.specialized_layers)
    # The strawman's extra cost predicted from FLOPs: (I - 1) more FFNs in each specialized block, over the
    # padded batch (a padded forward computes on every position).
    lengths = [batch["input_ids"].shape[1]] * n
    extra = sum(ffn_flops(n_tok, config.hidden_size, config.intermediate_size) for n_tok in lengths)
    expected = 1 + specialized * (config.num_experts - 1) * extra / encoder_flops(config, lengths)
    return {
        "rows": [
            row("TASER Det-R / BERT forward time", ratio["taser"]["median"], "x", target=TARGET_RATIO, op="<="),
            row("every-expert strawman / BERT forward time", ratio["every_expert"]["median"], "x"),
        ],
        "measured": {"seconds": times, "seconds_spread": {k: spread(v) for k, v in times.items()},
                     "ratio_to_bert": ratio, "every_expert_expected_ratio_from_flops": expected},
        "sizes": {"passages": n, "padded_length": int(batch["input_ids"].shape[1]), "repeats": repeats,
                  "layers": config.num_hidden_layers, "specialized_layers": config.specialized_layers,
                  "experts": config.num_experts},
        "notes": ["ratio = median over rounds of (variant seconds / BERT seconds), timed back to back",
                  "hidden states of all three variants checked equal (experts are BERT's FFN at initialisation)",
                  f"expected every-expert ratio from FLOPs: {expected:.3f}"],
    }
