"""Benchmark: where a training step's time goes, at fp32 and at bf16 (opt-in: `taser bench --only step_parts`).

The training benchmark finds a bf16 step only about 1.5x an fp32 one on a CPU whose bf16 matrix products run about
15x fp32 (AMX). This benchmark says why. It steps DPR on the training benchmark's batch (`training.training_batch`:
16 SQuAD-open questions, each with its positive and its BM25 negative, at the trainer's lengths) as the trainer
builds it (`training._trainer`: AdamW over the trainer's parameter groups, clipping, autocast at the step's
precision), and times each step in three parts: the forward (under autocast), the backward, and the clipping with
the optimizer's step.

Beside it, in the same round-robin and at both precisions, the same step with one thing changed, each a setting a
user has:

- `no attention dropout`: the model built with `attention_probs_dropout_prob=0` (a `build_model` override). The
  checkpoint drops 10% of the attention probabilities in training; with a dropout, PyTorch's
  `scaled_dot_product_attention` cannot take its fused CPU kernel and runs its math path, which on a CPU computes a
  bf16 attention in float32, and the dropout's mask is one random draw per query-key pair of every head.
- `no dropout`: `hidden_dropout_prob=0` as well.
- `fused AdamW`: `torch.optim.AdamW(..., fused=True)`, one kernel over every parameter instead of torch's default
  implementation on a CPU (a loop of per-parameter ops).
- `compiled forward`: the forward of the same model through `torch.compile` (Inductor, training graphs: its backward
  is compiled too), which fuses the element-wise ops and the dropout's draws into generated kernels; the first step
  compiles (before the timed rounds). The dropout draws other random numbers than eager's, so this is the same
  training, not the same run.

The first two change what is trained (the checkpoint was trained with those dropouts; the papers do not say theirs
was off), so they measure what the dropout costs, not a free speed-up. Each variant's bf16 speed-up is the median of
the per-round ratios fp32 / bf16 of the same variant.

A profile of one step of each precision (`torch.profiler`) gives the time of each family of ops in each part
(`OP_FAMILIES`: matrix products, attention, dropout, casts, other), self time, so the families add up to the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from taser_lib.models.precision import autocast
from taser_lib.training.loop import LoopConfig
from taser_lib.training.retriever import retriever_loss
from .core import BenchConfig, interleaved, paired_ratio, row, spread, synchronize
from .training import PRECISIONS, _trainer, training_batch

NAME = "step_parts"
TITLE = "Where a training step's time goes: DPR at fp32 and bf16, in parts, and with one setting changed"
PARTS = ("forward", "backward", "optimizer")
# name: (build_model overrides, AdamW keyword arguments, whether the forward goes through torch.compile)
VARIANTS: dict[str, tuple[dict[str, Any], dict[str, Any], bool]] = {
    "as the trainer builds it": ({}, {}, False),
    "no attention dropout": ({"attention_probs_dropout_prob": 0.0}, {}, False),
    "no dropout": ({"attention_probs_dropout_prob": 0.0, "hidden_dropout_prob": 0.0}, {}, False),
    "fused AdamW": ({}, {"fused": True}, False),
    "compiled forward": ({}, {}, True),
}
TRAINER = "as the trainer builds it"
# op family: the aten op names it holds (a profiler event's name without "aten::"); the rest is "other"
OP_FAMILIES: dict[str, tuple[str, ...]] = {
    "matrix products": ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear"),
    "attention (softmax, fused kernels)": ("_softmax", "_softmax_backward_data", "_safe_softmax",
                                           "_scaled_dot_product_flash_attention_for_cpu",
                                           "_scaled_dot_product_flash_attention_for_cpu_backward",
                                           "_scaled_dot_product_flash_attention",
                                           "_scaled_dot_product_flash_attention_backward",
                                           "_scaled_dot_product_efficient_attention",
                                           "_scaled_dot_product_efficient_attention_backward"),
    "dropout's random draws": ("bernoulli_", "native_dropout", "uniform_", "rand_like"),
    "casts and copies": ("copy_", "_to_copy", "to", "clone", "contiguous"),
}


def op_family(name: str) -> str:
    """The family (`OP_FAMILIES`) of a profiler event's name, e.g. "aten::addmm" -> "matrix products"."""
    op = name.removeprefix("aten::")
    return next((family for family, ops in OP_FAMILIES.items() if op in ops), "other")


def stepper(model: torch.nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, Any], precision: str,
            device: str, loop: LoopConfig, parts: dict[str, list[float]],
            loss_model: torch.nn.Module | None = None) -> Callable[[], float]:
    """One training step as `training._trainer` takes it, which appends the seconds of each of its `PARTS` to
    `parts` (each part ends with a device synchronisation) and returns the loss; `loss_model`: what computes the
    loss in place of `model` (its compiled form), whose parameters are the model's."""
    loss_model = model if loss_model is None else loss_model

    def step() -> float:
        start = time.perf_counter()
        with torch.profiler.record_function("forward"):
            optimizer.zero_grad(set_to_none=True)
            with autocast(precision, device):
                loss, _ = retriever_loss(loss_model, batch)
            synchronize(device)
        forward = time.perf_counter()
        with torch.profiler.record_function("backward"):
            loss.backward()
            synchronize(device)
        backward = time.perf_counter()
        with torch.profiler.record_function("optimizer"):
            if loop.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), loop.max_grad_norm)
            optimizer.step()
            synchronize(device)
        end = time.perf_counter()
        for name, seconds in zip(PARTS, (forward - start, backward - forward, end - backward)):
            parts[name].append(seconds)
        return float(loss.detach())

    return step


def build(cfg: BenchConfig, batch: dict[str, Any], precision: str, overrides: dict[str, Any],
          adamw: dict[str, Any], compiled: bool = False) -> tuple[Callable[[], float], dict[str, list[float]]]:
    """(step, its parts' seconds) of DPR as `training._trainer` sets it up, built with `overrides` and its AdamW
    given `adamw`; `compiled`: its forward through `torch.compile`."""
    model, optimizer, _ = _trainer("dpr", cfg, batch, precision, adamw=adamw, **overrides)
    parts: dict[str, list[float]] = {name: [] for name in PARTS}
    loss_model = torch.compile(model) if compiled else None
    return stepper(model, optimizer, batch, precision, cfg.device, LoopConfig(output_dir=""), parts, loss_model), parts


def profiled(step: Callable[[], float]) -> dict[str, dict[str, float]]:
    """{part: {op family: self seconds}} of one call of `step` under `torch.profiler` (CPU activity; self times,
    so a part's families add up to the ops it ran)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    out: dict[str, dict[str, float]] = {part: {} for part in PARTS}
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent, part = event.cpu_parent, None
        while parent is not None and part is None:
            part = parent.name if parent.name in PARTS else None
            parent = parent.cpu_parent
        if part is None:
            continue
        family = op_family(event.name)
        out[part][family] = out[part].get(family, 0.0) + event.self_cpu_time_total / 1e6
    return {part: dict(sorted(families.items())) for part, families in out.items()}


def run(cfg: BenchConfig) -> dict[str, Any]:
    questions, repeats = cfg.pick(16, 2), cfg.pick(7, 1)
    batch, shapes, _ = training_batch(cfg, questions)
    variants = {name: v for name, v in VARIANTS.items() if not (cfg.quick and v[2])}  # quick: no compilation
    built = {(variant, p): build(cfg, batch, p, *variants[variant]) for variant in variants for p in PRECISIONS}
    steps = {f"{variant} | {p}": step for (variant, p), (step, _) in built.items()}
    compile_seconds = {}
    for name, step in steps.items():  # the first step allocates Adam's state (and compiles a compiled forward)
        start = time.perf_counter()
        step()
        compile_seconds[name] = time.perf_counter() - start
    for _, parts in built.values():
        for seconds in parts.values():
            seconds.clear()
    times, losses = interleaved(steps, repeats, cfg.device, warmup=0)
    speedup = {variant: paired_ratio(times[f"{variant} | fp32"], times[f"{variant} | bf16"]) for variant in variants}
    over_trainer = {f"{variant} | {p}": paired_ratio(times[f"{TRAINER} | {p}"], times[f"{variant} | {p}"])
                    for variant in variants if variant != TRAINER for p in PRECISIONS}
    parts = {p: {name: spread(seconds) for name, seconds in built[TRAINER, p][1].items()} for p in PRECISIONS}
    families = {p: profiled(built[TRAINER, p][0]) for p in PRECISIONS}
    step_s = {p: spread(times[f"{TRAINER} | {p}"]) for p in PRECISIONS}
    rows = [row(f"DPR bf16 step speed-up over fp32, {variant}", speedup[variant]["median"], "x")
            for variant in variants]
    rows += [row(f"DPR {p} step, {part}", parts[p][part]["median"], "s") for p in PRECISIONS for part in PARTS]
    rows += [row(f"DPR {p} step time, {variant}", spread(times[f"{variant} | {p}"])["median"], "s")
             for variant in variants for p in PRECISIONS]
    return {
        "rows": rows,
        "measured": {"step_seconds": times, "step_seconds_spread": step_s, "bf16_speedup": speedup,
                     "speedup_over_trainer": over_trainer, "part_seconds": parts,
                     "profile_self_seconds": families, "last_loss": losses, "first_step_seconds": compile_seconds},
        "sizes": {**shapes, "hard_negatives": 1, "repeats": repeats, "variants": list(variants)},
        "notes": ["a step as the trainer takes it: zero_grad and the forward under autocast, backward, clipping "
                  "and AdamW's step; each part ends with a device synchronisation",
                  "variants (module docstring): " + "; ".join(
                      f"{name}: overrides {ov or 'none'}, AdamW {ad or 'torch default'}"
                      + (", forward through torch.compile (Inductor)" if compiled else "")
                      for name, (ov, ad, compiled) in variants.items()),
                  "bf16 speed-up = median over rounds of (fp32 step seconds / bf16 step seconds), same variant",
                  "profile: one step of each precision as the trainer builds it, torch.profiler self CPU time of "
                  "each aten op, summed by part and op family (OP_FAMILIES); the profiler's own overhead makes "
                  "these a little longer than the timed steps"],
    }
