"""What training a retriever costs (TASER Sec. 4.1, Table A3): the measured usage of finished runs as one table, and
the bytes a model's training state and its gradient synchronisation take, computed from the model.

    >>> usage_table(variant_runs(["dpr", "taser"], seeds, params))    # model, seed, metric, value (+ how measured)
    >>> training_state_bytes(model)     # parameters, gradients, optimizer (AdamW), master weights, total
    >>> allreduce_bytes(training_state_bytes(model)["gradients"], world_size=16)   # sent per GPU per step
    >>> state_table({"dpr": dpr, "taser": taser}, world_size=16)   # one row per model: all of the above
    >>> state_table(bert_base_models(), world_size=16)              # the paper's BERT-base shapes, no weights

Measured usage (`usage.UsageMeter`, stored in each run's `finished.json`): `seconds_per_step` times the optimiser
steps only (forward, backward, update; no evaluation, no checkpoint), and `epoch_seconds` is that times the steps of
one pass over the *whole* training set (`steps_per_epoch`), also when the run trained on a slice. The paper's 11 vs
15 minutes are "one epoch of training and validation"; validation is not in `epoch_seconds`. Memory is the peak of
the training process (`peak_bytes`; on the CPU its resident set, reset when training starts) and what training added
to the memory in use when it started (`peak_growth_bytes`); see `usage.py` for how each device measures it.
`cpu_seconds_per_step` is the process's CPU time per step (all its threads), which a busy machine disturbs much less
than wall time; `epoch_cpu_seconds` (derived here) is that times `steps_per_epoch`. On a GPU the CPU time says little
(the host mostly waits), so there wall time is the measure.

State bytes. Training holds, for every trainable parameter, its value, its gradient and AdamW's two moments
(`exp_avg`, `exp_avg_sq`; PyTorch keeps them in the parameter's dtype, float32 here). This library trains with float32
weights under bf16 autocast, so the float32 weights *are* the master weights (`master_weights` 0). A set-up that
keeps bf16 or fp16 weights (apex O2, DeepSpeed) adds a float32 master copy of each trainable parameter
(`master_weights`) and keeps the moments in float32 (`optimizer_dtype`). Activations are not state: they depend on
the batch, and are the same for DPR and TASER, whose questions and passages go through blocks of the same size.
AdamW also keeps one `step` count per parameter tensor (a 4-byte tensor), left out here.

All-reduce. Data-parallel training (DDP) averages every trainable parameter's gradient across the GPUs after each
backward pass. A ring all-reduce of B bytes over W GPUs sends (and receives) 2 (W - 1) / W * B bytes per GPU
(reduce-scatter, then all-gather). DPR's two towers have twice the gradients of one BERT, so it sends about 2x what
TASER_Shared sends and 218/128 = 1.7x what TASER sends (BERT-base): a gap that a single device never sees.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import torch
from transformers import BertConfig

from taser_lib.models import DPRConfig, DPRModel, TaserConfig, TaserModel

USAGE_METRICS: tuple[str, ...] = ("seconds_per_step", "epoch_seconds", "cpu_seconds_per_step", "epoch_cpu_seconds",
                                  "steps_per_epoch", "steps_timed", "peak_bytes", "peak_growth_bytes", "start_bytes")
ADAM_STATES = 2  # exp_avg and exp_avg_sq per trainable parameter


def usage_table(runs: Mapping[str, Sequence[Any]], metrics: Sequence[str] = USAGE_METRICS) -> pd.DataFrame:
    """Long rows (model, seed, metric, value, device, memory, run) of the measured usage of finished runs
    ({model: [CachedRun, ...]}, e.g. `recipes.variant_runs`): one row per run and metric. A run without a usage
    record (trained before usage was recorded) is an error naming its folder; a metric it lacks is left out."""
    rows = []
    for model, model_runs in runs.items():
        for run in model_runs:
            usage = dict((run.result or {}).get("usage") or {})
            if not usage:
                raise ValueError(f"{model} seed {run.seed}: {run.dir} has no usage record (trained before runs "
                                 f"recorded it); retrain it (force=True or taser reproduce --force)")
            if usage.get("cpu_seconds_per_step") is not None and usage.get("steps_per_epoch"):
                usage["epoch_cpu_seconds"] = usage["cpu_seconds_per_step"] * usage["steps_per_epoch"]
            for metric in metrics:
                value = usage.get(metric)
                if value is None:
                    continue
                rows.append({"model": model, "seed": run.seed, "metric": metric, "value": float(value),
                             "device": usage.get("device"), "memory": usage.get("memory"), "run": str(run.dir)})
    return pd.DataFrame(rows, columns=["model", "seed", "metric", "value", "device", "memory", "run"])


def memory_table(usage: pd.DataFrame, metrics: Sequence[str] = ("start_bytes", "peak_bytes", "peak_growth_bytes"),
                 digits: int = 2) -> pd.DataFrame:
    """`usage_table`'s memory rows as the page shows them: one row per seed and model (in training order), one column
    per metric, in GiB."""
    rows = usage[usage["metric"].isin(metrics)]
    table = rows.pivot_table(index=["seed", "model"], columns="metric", values="value", aggfunc="first", sort=False)
    return (table / 2 ** 30).round(digits).rename(columns=lambda c: c.replace("_bytes", " (GiB)").replace("_", " "))


def training_state_bytes(model: torch.nn.Module, optimizer_dtype: torch.dtype | None = None,
                         master_dtype: torch.dtype = torch.float32) -> dict[str, int]:
    """Bytes training holds between steps, from the model alone (module docstring): `parameters` (all, as stored),
    `gradients` (trainable ones, in their dtype), `optimizer` (AdamW's two moments per trainable parameter, in
    `optimizer_dtype`; None: the parameter's own dtype, as torch.optim.AdamW does), `master_weights` (a
    `master_dtype` copy of each trainable parameter stored in another dtype; 0 for float32 weights), `total`, and
    the counts `parameter_count` / `trainable_count`."""
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]

    def size(p: torch.Tensor, dtype: torch.dtype | None = None) -> int:
        return p.numel() * (torch.empty((), dtype=dtype).element_size() if dtype is not None else p.element_size())

    out = {"parameters": sum(size(p) for p in params),
           "gradients": sum(size(p) for p in trainable),
           "optimizer": ADAM_STATES * sum(size(p, optimizer_dtype) for p in trainable),
           "master_weights": sum(size(p, master_dtype) for p in trainable if p.dtype != master_dtype)}
    out["total"] = sum(out.values())
    out["parameter_count"] = sum(p.numel() for p in params)
    out["trainable_count"] = sum(p.numel() for p in trainable)
    return out


def allreduce_bytes(gradient_bytes: float, world_size: int) -> float:
    """Bytes each GPU sends (and receives) in one ring all-reduce of `gradient_bytes`: 2 (W - 1) / W * bytes."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    return 2 * (world_size - 1) / world_size * gradient_bytes


def state_table(models: Mapping[str, torch.nn.Module], world_size: int = 1, **options: Any) -> pd.DataFrame:
    """One row per model: `training_state_bytes` (`options` go to it) and, for data-parallel training on
    `world_size` GPUs, `allreduce_bytes_per_step`: what each GPU sends in the ring all-reduce of the gradients."""
    rows = []
    for name, model in models.items():
        state = training_state_bytes(model, **options)
        rows.append({"model": name, **state, "world_size": world_size,
                     "allreduce_bytes_per_step": allreduce_bytes(state["gradients"], world_size)})
    return pd.DataFrame(rows)


def bert_base_models(base: BertConfig | None = None, shared_blocks: int = 2) -> dict[str, torch.nn.Module]:
    """DPR, TASER Det-R and TASER_Shared with the shapes of `base` (default: BERT-base, `BertConfig()`), built on
    PyTorch's meta device: shapes and dtypes only, no memory, no download (as `models.parameter_table`)."""
    base = base or BertConfig()
    fields = {k: v for k, v in base.to_dict().items() if k not in ("model_type", "architectures")}
    with torch.device("meta"):
        return {"dpr": DPRModel(DPRConfig(**fields)),
                "taser": TaserModel(TaserConfig(**fields, shared_blocks=shared_blocks, num_experts=2,
                                                routing="deterministic")),
                "shared": TaserModel(TaserConfig(**fields, shared_blocks=shared_blocks, num_experts=1,
                                                 routing="shared"))}
