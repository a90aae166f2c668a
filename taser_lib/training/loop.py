"""The training loop every trainer shares: optimiser, schedule, accumulation, checkpoints, resume, evaluation.

A trainer supplies a model, `loss_fn(model, batch) -> (loss, {name: float})`, resumable batches and optional
evaluation callbacks; `run_training` does the rest:

- AdamW (decay off for biases and LayerNorm weights) with linear warm-up then linear decay
  (`transformers.get_linear_schedule_with_warmup`), optional layer-wise learning-rate decay, gradient accumulation,
  gradient clipping, bf16 autocast (`precision`: auto = bf16 on CUDA and on CPUs with native bfloat16, fp32
  elsewhere; the master weights stay float32; the resolved choice is in result.json).
- One optimiser step consumes `grad_accum` consecutive micro-batches of one stream that runs through the epochs
  (an accumulation may span an epoch boundary), so `steps = ceil(epochs * len(batches) / grad_accum)`.
- Checkpoints (`taser_lib.training.checkpoint`) every `checkpoint_every` steps and at the end; started again with
  the same config, the run resumes from the newest one and ends bitwise identical on CPU to an uninterrupted run.
  The loop config (and a caller's `fingerprint`, e.g. the whole training config) is saved in
  `output_dir/run_config.json`; resuming under a different one is refused.
- Evaluation at step 0, every `eval_every` steps and at the end, under a forked RNG so that evaluating never changes
  the training trajectory. Each evaluation appends a row to the learning curve `curve.jsonl` / `curve.csv`:
  step, epoch, lr, train_loss (mean since the previous row), `loss/<name>` (the loss_fn's logged values, means),
  `train/<metric>` (train_evaluate) and `dev/<metric>` (evaluate). The model with the best `dev/<select_metric>`
  is saved to `output_dir/best`; the last one to `output_dir/final` (with the tokenizer, if given).
- A NaN or inf loss or gradient norm stops the run with `NonFiniteLossError` naming the step, before the optimiser
  touches the weights. So do exploded weights: after every optimiser step the largest |w| is checked, and a
  non-finite one, or one past `WEIGHT_GROWTH_LIMIT` times its value at the start of the run, stops the run before a
  checkpoint, best or final model of those weights is written. Every checkpoint on disk therefore holds finite,
  unexploded weights (each records its max |w|); the error names the newest and the one before it (keep_last >= 2)
  and says how to go on: a new run from one of them with a lower learning rate.
- Under torch.distributed the model is wrapped in DistributedDataParallel; every rank trains on its own shard
  (the batches' job), rank 0 evaluates and writes.

Layout of output_dir: run_config.json, checkpoints/checkpoint-*/, curve.jsonl, curve.csv, log.jsonl, best/, final/,
result.json.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel
from ..progress import tqdm
from transformers import get_linear_schedule_with_warmup

from ..errors import ConfigError, TaserError
from ..io import atomic_dir, atomic_write_json, atomic_write_text
from ..meta import run_metadata
from ..models.precision import autocast, check_precision, resolve_precision
from ..models.weights import quiet_loading
from .checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint
from .distributed import all_gather_objects, all_reduce_mean, barrier, get_local_rank, is_distributed, \
    is_main_process
from .usage import UsageMeter

LossFn = Callable[[torch.nn.Module, Any], tuple[torch.Tensor, dict[str, float]]]
EvalFn = Callable[[torch.nn.Module], dict[str, float]]

SELECT_MODES = ("max", "min")
RUN_CONFIG_FILE = "run_config.json"
# The weights count as exploded when their largest |w| passes this many times its value at the start of the run
# (fine-tuning moves weights by far less; a diverging run passes it by orders of magnitude: 2e29 against 7.9).
WEIGHT_GROWTH_LIMIT = 1000.0


def _described(default: Any, help: str) -> Any:
    """A field with its help text (`taser train --print-config` prints it as a comment)."""
    return field(default=default, metadata={"help": help})


@dataclass
class LoopConfig:
    """Optimisation and bookkeeping settings of one training run (per-device batch size)."""

    output_dir: str = field(metadata={"help": "run folder: checkpoints, learning curve, best/ and final/ models "
                                              "(`--output-dir` overrides)"})
    seed: int = _described(42, "seeds data order, negatives sampling, dropout")
    learning_rate: float = _described(2e-5, "peak learning rate (AdamW), reached after warm-up")
    weight_decay: float = _described(0.0, "AdamW weight decay (not on biases and LayerNorm)")
    warmup_ratio: float = _described(0.1, "fraction of the steps with linear warm-up; then linear decay to 0")
    epochs: float = _described(1.0, "passes over the training batches (fractions allowed)")
    max_steps: int | None = _described(None, "optimiser steps; overrides epochs when set (0: only evaluate the "
                                             "starting model)")
    batch_size: int = _described(16, "questions per batch and device")
    grad_accum: int = _described(1, "micro-batches per optimiser step")
    layerwise_lr_decay: float | None = _described(None, "e.g. 0.9: each layer down gets 0.9x the layer above's LR; "
                                                        "null = off")
    max_grad_norm: float | None = _described(2.0, "gradient clipping norm; null = off")
    bf16: bool = _described(True, "older configs' switch: false forces float32 whatever `precision` says")
    precision: str = _described("auto", "fp32 | bf16 | auto: bfloat16 autocast of the forward (master weights stay "
                                        "float32); auto = bf16 on CUDA and on CPUs with native bf16 (avx512_bf16, "
                                        "AMX), else fp32")
    checkpoint_every: int = _described(100, "steps between checkpoints (and one at the end); resumes start from "
                                            "the newest")
    eval_every: int = _described(100, "steps between evaluations (also at step 0 and at the end)")
    keep_last: int = _described(2, "checkpoints kept")
    select_metric: str = _described("R@20", "dev metric choosing output_dir/best")
    select_mode: str = _described("max", "max | min")
    log_every: int = _described(10, "steps between log lines")

    def __post_init__(self):
        positive = {"batch_size": self.batch_size, "grad_accum": self.grad_accum,
                    "checkpoint_every": self.checkpoint_every, "eval_every": self.eval_every,
                    "keep_last": self.keep_last, "log_every": self.log_every}
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"loop.{name} must be a positive integer, got {value!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 0):
            raise ConfigError(f"loop.max_steps must be a non-negative integer or null, got {self.max_steps!r}")
        if self.max_steps is None and not self.epochs > 0:
            raise ConfigError(f"loop.epochs must be > 0, got {self.epochs}")
        if not 0 <= self.warmup_ratio <= 1:
            raise ConfigError(f"loop.warmup_ratio must lie in [0, 1], got {self.warmup_ratio}")
        if not self.learning_rate > 0:
            raise ConfigError(f"loop.learning_rate must be > 0, got {self.learning_rate}")
        if self.layerwise_lr_decay is not None and not 0 < self.layerwise_lr_decay <= 1:
            raise ConfigError(f"loop.layerwise_lr_decay must lie in (0, 1] or be null, got {self.layerwise_lr_decay}")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise ConfigError(f"loop.max_grad_norm must be > 0 or null, got {self.max_grad_norm}")
        if self.select_mode not in SELECT_MODES:
            raise ConfigError(f"loop.select_mode must be one of {SELECT_MODES}, got {self.select_mode!r}")
        check_precision(self.precision, "loop.precision")

    @staticmethod
    def unknown_key_hint(key: str) -> str:
        return " (the learning rate is learning_rate, as in transformers' TrainingArguments)" if key == "lr" else ""

    def resolved_precision(self, device: str | torch.device) -> str:
        """"fp32" or "bf16": what `precision` (and the `bf16` switch) mean on `device`."""
        return resolve_precision(self.precision, device, purpose="train") if self.bf16 else "fp32"


class ResumableBatches(Protocol):
    """Batches of one epoch in a fixed order that depends only on the seed and the epoch.

    Under torch.distributed each rank's object yields that rank's share of every global batch, all ranks the same
    number of batches.
    """

    def __len__(self) -> int:
        """Batches per epoch."""

    def set_epoch(self, epoch: int) -> None:
        """Fix the order of epoch `epoch` (0-based)."""

    def iter_from(self, position: int) -> Iterator[Any]:
        """The current epoch's batches from batch index `position` on."""


@dataclass
class TrainResult:
    """What a run ended with. `best_*` is None when no `evaluate` was given; `paths` maps
    run_config, checkpoints, curve_jsonl, curve_csv, log, final, best (when evaluated) and result to files."""

    best_metric: float | None
    best_step: int | None
    final_step: int
    curve: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)  # `usage.UsageMeter.report`: step time, peak memory


class NonFiniteLossError(TaserError):
    """The loss or the gradient norm became NaN or infinite, or the weights exploded (a non-finite weight, or the
    largest |w| past `WEIGHT_GROWTH_LIMIT` times its start value)."""


def max_abs_weight(model: torch.nn.Module) -> float:
    """The largest |w| over the model's parameters (NaN or inf when one is); 0.0 for a model without any."""
    norms = [torch.linalg.vector_norm(p.detach(), ord=math.inf).float() for p in unwrap_model(model).parameters()
             if p.numel()]
    return float(torch.stack(norms).max()) if norms else 0.0


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel wrapper (loss functions reach config and methods through it)."""
    return model.module if isinstance(model, DistributedDataParallel) else model


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


# --- optimiser ------------------------------------------------------------------------------------------------

_LAYER = re.compile(r"(?:^|\.)layer\.(\d+)\.")


def layer_depth(name: str, num_layers: int) -> int:
    """Depth of a parameter for layer-wise LR decay: embeddings 0, Transformer layer i -> i + 1, anything else
    (heads, routers outside layers, final norms) num_layers + 1. DPR's two towers share depths."""
    match = _LAYER.search(name)
    if match:
        return int(match.group(1)) + 1
    if "embeddings" in name:
        return 0
    return num_layers + 1


def parameter_groups(model: torch.nn.Module, lr: float, weight_decay: float,
                     layerwise_lr_decay: float | None = None) -> list[dict[str, Any]]:
    """AdamW parameter groups: no weight decay for biases and normalisation weights (1-d tensors); with
    `layerwise_lr_decay` d, a parameter at depth k (see `layer_depth`) gets lr * d ** (top - k), `top` being the
    deepest depth the model has (Clark et al. 2020, ELECTRA): the top (a head, else the last layer) trains at `lr`,
    each level below at d times the LR above it. Each group carries `depth` and `names` for inspection."""
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    layers = {int(m.group(1)) for n, _ in params if (m := _LAYER.search(n))}
    num_layers = max(layers) + 1 if layers else 0
    depths = {n: layer_depth(n, num_layers) if layerwise_lr_decay is not None else 0 for n, _ in params}
    top = max(depths.values(), default=0)
    groups: dict[tuple[int, bool], dict[str, Any]] = {}
    for name, param in params:
        depth, decay = depths[name], param.dim() > 1
        if (depth, decay) not in groups:
            scale = layerwise_lr_decay ** (top - depth) if layerwise_lr_decay is not None else 1.0
            groups[depth, decay] = {"params": [], "names": [], "lr": lr * scale, "depth": depth,
                                    "weight_decay": weight_decay if decay else 0.0}
        groups[depth, decay]["params"].append(param)
        groups[depth, decay]["names"].append(name)
    return [groups[k] for k in sorted(groups)]


def total_steps(config: LoopConfig, batches_per_epoch: int) -> int:
    """Optimiser steps of the run: max_steps, else ceil(epochs * batches / grad_accum)."""
    if config.max_steps is not None:
        return config.max_steps
    return max(1, math.ceil(config.epochs * batches_per_epoch / config.grad_accum))


# --- data stream ----------------------------------------------------------------------------------------------

class _Stream:
    """Micro-batches across epochs, with the position (epoch, next batch index) a checkpoint records."""

    def __init__(self, batches: ResumableBatches, epoch: int = 0, position: int = 0):
        self.batches, self.epoch, self.position = batches, epoch, position
        self.per_epoch = len(batches)
        self._it: Iterator[Any] | None = None

    def next(self) -> Any:
        if self._it is None:
            if self.position >= self.per_epoch:
                self.epoch, self.position = self.epoch + 1, 0
            self.batches.set_epoch(self.epoch)
            self._it = iter(self.batches.iter_from(self.position))
        try:
            batch = next(self._it)
        except StopIteration:
            raise RuntimeError(f"the batches of epoch {self.epoch} ended at index {self.position}, but len() "
                               f"promised {self.per_epoch}") from None
        self.position += 1
        if self.position == self.per_epoch:
            self._it = None
        return batch

    @property
    def fractional_epoch(self) -> float:
        return self.epoch + self.position / self.per_epoch

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position, "batches_per_epoch": self.per_epoch}


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor of a (nested dict / list / tuple) batch to `device`."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


# --- files ----------------------------------------------------------------------------------------------------

def _run_config(config: LoopConfig, batches_per_epoch: int, fingerprint: dict[str, Any] | None) -> dict[str, Any]:
    loop = asdict(config)
    loop.pop("output_dir")  # the same run may be reached by another path
    # JSON round trip so that tuples and lists compare equal with what a resume reads back
    return json.loads(json.dumps({"loop": loop, "batches_per_epoch": batches_per_epoch,
                                  "fingerprint": fingerprint or {}}, default=str))


def _differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            where = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(f"{where}: {old.get(key, '<absent>')!r} -> {new.get(key, '<absent>')!r}")
            else:
                out.extend(_differences(old[key], new[key], where))
        return out
    return [] if old == new else [f"{prefix}: {old!r} -> {new!r}"]


def _check_or_write_run_config(output_dir: Path, current: dict[str, Any], resuming: bool) -> None:
    path = output_dir / RUN_CONFIG_FILE
    if resuming:
        if not path.is_file():
            raise ConfigError(f"{output_dir} holds checkpoints but no {RUN_CONFIG_FILE}: cannot check that this run "
                              f"has the same config; use a new output_dir")
        saved = json.loads(path.read_text(encoding="utf-8"))
        diffs = _differences(saved.get("config"), current)
        if diffs:
            raise ConfigError(f"refusing to resume the run in {output_dir} with a different config "
                              f"(saved in {path}): " + "; ".join(diffs) +
                              ". Use the original config, or a new output_dir to start a new run.")
    elif is_main_process():
        atomic_write_json(path, {"config": current, "metadata": run_metadata()})


def _read_jsonl(path: Path, max_step: int) -> list[dict[str, Any]]:
    """Rows with step <= max_step (rows past the checkpoint a resumed run restarts from are redone)."""
    if not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["step"] <= max_step]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows))


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def _save_model(path: Path, model: torch.nn.Module, tokenizer: Any | None) -> None:
    with atomic_dir(path) as tmp, quiet_loading():  # no "Writing model shards" bar on stderr / in notebooks
        unwrap_model(model).save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)


# --- the loop -------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _forked_rng() -> Iterator[None]:
    """Run evaluation without consuming the training RNG streams (python, numpy, torch CPU and CUDA)."""
    py, np_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(np_state)


def _is_better(value: float, best: float | None, mode: str) -> bool:
    if best is None:
        return True
    return value > best if mode == "max" else value < best


class _Trainer:
    """State of one `run_training` call (kept in one place so the step, eval and checkpoint code stay short)."""

    def __init__(self, model, loss_fn: LossFn, batches: ResumableBatches, config: LoopConfig,
                 evaluate: EvalFn | None, train_evaluate: EvalFn | None, tokenizer: Any | None,
                 fingerprint: dict[str, Any] | None, progress: bool):
        self.config, self.loss_fn = config, loss_fn
        self.evaluate, self.train_evaluate, self.tokenizer = evaluate, train_evaluate, tokenizer
        self.progress = progress and is_main_process()
        self.out = Path(config.output_dir)
        self.ckpt_dir = self.out / "checkpoints"
        if len(batches) < 1:
            raise ValueError("no training batches: the data holds fewer examples than one batch")
        self.total = total_steps(config, len(batches))
        self.batches_per_epoch = len(batches)

        self.device = torch.device(f"cuda:{get_local_rank()}" if torch.cuda.is_available() else "cpu")
        seed_everything(config.seed)
        model.to(self.device)
        self.model = (DistributedDataParallel(model, device_ids=[self.device.index] if self.device.index is not None
                                              else None, find_unused_parameters=True)
                      if is_distributed() else model)  # learned routing leaves experts without gradients
        groups = parameter_groups(unwrap_model(self.model), config.learning_rate, config.weight_decay,
                                  config.layerwise_lr_decay)
        self.optimizer = torch.optim.AdamW(
            [{k: v for k, v in g.items() if k != "names"} for g in groups], lr=config.learning_rate)
        self.scheduler = get_linear_schedule_with_warmup(
            self.optimizer, num_warmup_steps=int(config.warmup_ratio * self.total), num_training_steps=self.total)
        self.precision = config.resolved_precision(self.device)  # "fp32" | "bf16", recorded in result.json

        self.step = 0
        self.best_metric: float | None = None
        self.best_step: int | None = None
        self.window = {"loss": 0.0, "n": 0, "logs": {}}  # running means since the last curve row
        self.stream = _Stream(batches)
        latest = latest_checkpoint(self.ckpt_dir)
        current = _run_config(config, len(batches), fingerprint)
        _check_or_write_run_config(self.out, current, resuming=latest is not None)
        if latest is not None:
            ckpt = load_checkpoint(latest, self.model, self.optimizer, self.scheduler)
            self.step = ckpt.step
            self.stream = _Stream(batches, ckpt.data_state["epoch"], ckpt.data_state["position"])
            self.best_metric, self.best_step = ckpt.extra["best_metric"], ckpt.extra["best_step"]
            self.window = ckpt.extra["window"]
        # the reference of the weight check: the run's start, also across resumes
        start = ckpt.extra.get("initial_max_abs_weight") if latest is not None else None
        self.initial_weight = float(start) if start is not None else max_abs_weight(self.model)
        self.last_checkpoint = latest
        # A resumed run keeps the rows up to its checkpoint; a fresh start (even over a killed run that never
        # checkpointed) begins new files.
        self.curve = _read_jsonl(self.out / "curve.jsonl", self.step) if latest else []
        if is_main_process():
            _write_jsonl(self.out / "log.jsonl", _read_jsonl(self.out / "log.jsonl", self.step) if latest else [])

    # one optimiser step
    def train_step(self) -> tuple[float, dict[str, float]]:
        cfg, model = self.config, self.model
        self.optimizer.zero_grad(set_to_none=True)
        total, logs = 0.0, {}
        for micro in range(cfg.grad_accum):
            batch = to_device(self.stream.next(), self.device)
            where = f"step {self.step + 1} (epoch {self.stream.epoch}, batch {self.stream.position - 1})"
            sync = micro == cfg.grad_accum - 1 or not isinstance(model, DistributedDataParallel)
            with (contextlib.nullcontext() if sync else model.no_sync()), \
                    autocast(self.precision, self.device):
                loss, micro_logs = self.loss_fn(model, batch)
            value = float(all_reduce_mean(loss.detach().float()))
            if not math.isfinite(value):
                self._diverged(f"the loss is {value} at {where}")
            (loss / cfg.grad_accum).backward()
            total += value / cfg.grad_accum
            for k, v in micro_logs.items():
                logs[k] = logs.get(k, 0.0) + float(v) / cfg.grad_accum
        if logs and is_distributed():  # the loss_fn's values of this rank -> means over ranks
            means = all_reduce_mean(torch.tensor(list(logs.values()), dtype=torch.float64, device=self.device))
            logs = dict(zip(logs, means.tolist()))
        if cfg.max_grad_norm is not None:
            norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
            if not math.isfinite(norm):
                self._diverged(f"the gradient norm is {norm} at step {self.step + 1}")
        self.optimizer.step()
        self.scheduler.step()
        self._check_weights(self.step + 1)
        self.step += 1
        return total, logs

    def _check_weights(self, step: int) -> None:
        """Stop before weights that are non-finite or exploded reach a checkpoint or a saved model."""
        weight = max_abs_weight(self.model)
        reference = self.initial_weight if self.initial_weight > 0 else 1.0
        if not math.isfinite(weight):
            self._diverged(f"a weight is {weight} after step {step}", stepped=True)
        if weight > WEIGHT_GROWTH_LIMIT * reference:
            self._diverged(f"the weights exploded at step {step}: max |w| = {weight:.3g}, {weight / reference:.3g} "
                           f"times its start value {reference:.3g} (limit: {WEIGHT_GROWTH_LIMIT:g} times)",
                           stepped=True)

    def _diverged(self, what: str, stepped: bool = False):
        when = ("training stopped before any checkpoint or model of these weights was written" if stepped
                else "training stopped before the optimiser step")
        kept = list_checkpoints(self.ckpt_dir)
        lr = f"loop.learning_rate, now {self.config.learning_rate:g}"
        if not kept:
            advice = (f"No checkpoint had been written yet: start again with a lower learning rate ({lr}), gradient "
                      f"clipping (loop.max_grad_norm) or checked data")
        else:
            older = f", the one before it {kept[-2]}" if len(kept) > 1 else ""
            start = kept[-2] if len(kept) > 1 else kept[-1]
            weights = start / "model" if (start / "model").is_dir() else start
            advice = (f"The checkpoints kept hold finite weights within the limit: the newest is {kept[-1]}{older}. "
                      f"To go on, start a new run (a new output_dir; this one refuses a changed config) from an older "
                      f"checkpoint's weights, e.g. model.name_or_path: {weights}, with a lower learning rate ({lr}); "
                      f"or enable gradient clipping (loop.max_grad_norm) or check the data")
        raise NonFiniteLossError(f"{what}; {when}. {advice}.")

    def evaluate_now(self) -> None:
        row: dict[str, Any] = {"step": self.step, "epoch": round(self.stream.fractional_epoch, 6),
                               "lr": self.scheduler.get_last_lr()[-1]}
        n = self.window["n"]
        row["train_loss"] = self.window["loss"] / n if n else None
        # sorted: the window may come back from a checkpoint's JSON in another key order
        row.update({f"loss/{k}": v / n for k, v in sorted(self.window["logs"].items())} if n else {})
        model = unwrap_model(self.model)
        results: dict[str, dict[str, float]] = {}
        if is_main_process():
            was_training = model.training
            model.eval()
            with _forked_rng():
                for prefix, fn in (("train", self.train_evaluate), ("dev", self.evaluate)):
                    if fn is not None:
                        results[prefix] = {k: float(v) for k, v in fn(model).items()}
            model.train(was_training)
        results = all_gather_objects(results)[0]  # rank 0's numbers, on every rank
        for prefix, metrics in results.items():
            row.update({f"{prefix}/{k}": v for k, v in metrics.items()})
        self.window = {"loss": 0.0, "n": 0, "logs": {}}
        self.curve.append(row)
        if "dev" in results:
            dev = results["dev"]
            if self.config.select_metric not in dev:
                raise ConfigError(f"loop.select_metric {self.config.select_metric!r} is not among the dev metrics "
                                  f"{sorted(dev)}")
            value = dev[self.config.select_metric]
            if _is_better(value, self.best_metric, self.config.select_mode):
                self.best_metric, self.best_step = value, self.step
                if is_main_process():
                    _save_model(self.out / "best", model, self.tokenizer)
                    atomic_write_json(self.out / "best" / "best.json",
                                      {"step": self.step, self.config.select_metric: value, "row": row})
        if is_main_process():
            _write_jsonl(self.out / "curve.jsonl", self.curve)
            _write_csv(self.out / "curve.csv", self.curve)
        barrier()

    def checkpoint(self) -> None:
        extra = {"best_metric": self.best_metric, "best_step": self.best_step, "window": self.window,
                 "max_abs_weight": max_abs_weight(self.model), "initial_max_abs_weight": self.initial_weight}
        self.last_checkpoint = save_checkpoint(self.ckpt_dir, self.model, self.optimizer, self.scheduler,
                                               self.step, self.stream.state(), extra, keep_last=self.config.keep_last)

    def run(self) -> TrainResult:
        cfg = self.config
        evaluating = self.evaluate is not None or self.train_evaluate is not None
        if evaluating and self.step == 0:
            self.evaluate_now()  # the starting point of the learning curve
        self.model.train()
        bar = tqdm(total=self.total, initial=self.step, desc="train", unit="step", disable=not self.progress,
                   dynamic_ncols=True)
        self.meter = UsageMeter(self.device)
        while self.step < self.total:
            with self.meter:
                loss, logs = self.train_step()
            self.window["loss"] += loss
            self.window["n"] += 1
            for k, v in logs.items():
                self.window["logs"][k] = self.window["logs"].get(k, 0.0) + v
            bar.update(1)
            if self.step % cfg.log_every == 0 or self.step == self.total:
                lr = self.scheduler.get_last_lr()[-1]
                bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}")
                if is_main_process():  # appended, not rewritten: a log line per step must stay cheap
                    with open(self.out / "log.jsonl", "a", encoding="utf-8") as f:
                        f.write(json.dumps({"step": self.step, "epoch": round(self.stream.fractional_epoch, 6),
                                            "lr": lr, "loss": loss, **logs}) + "\n")
            if evaluating and (self.step % cfg.eval_every == 0 or self.step == self.total):
                self.evaluate_now()
            if self.step % cfg.checkpoint_every == 0 or self.step == self.total:
                self.checkpoint()
        bar.close()
        return self.finish()

    def finish(self) -> TrainResult:
        paths = {"run_config": self.out / RUN_CONFIG_FILE, "checkpoints": self.ckpt_dir,
                 "curve_jsonl": self.out / "curve.jsonl", "curve_csv": self.out / "curve.csv",
                 "log": self.out / "log.jsonl", "final": self.out / "final", "result": self.out / "result.json"}
        if self.best_step is not None:
            paths["best"] = self.out / "best"
        steps_per_epoch = math.ceil(self.batches_per_epoch / self.config.grad_accum)
        usage = self.meter.report(steps_per_epoch) if getattr(self, "meter", None) else {}
        result = TrainResult(self.best_metric, self.best_step, self.step, self.curve,
                             {k: str(v) for k, v in paths.items()}, usage)
        if is_main_process():
            _save_model(self.out / "final", self.model, self.tokenizer)
            atomic_write_json(self.out / "result.json", {**asdict(result), "select_metric": self.config.select_metric,
                                                         "precision": self.precision, "metadata": run_metadata()})
        barrier()
        return result


def run_training(model: torch.nn.Module, loss_fn: LossFn, batches: ResumableBatches, config: LoopConfig,
                 evaluate: EvalFn | None = None, train_evaluate: EvalFn | None = None, *,
                 tokenizer: Any | None = None, fingerprint: dict[str, Any] | None = None,
                 progress: bool = True) -> TrainResult:
    """Train `model` (a transformers PreTrainedModel) with `loss_fn` over `batches`; see the module docstring.

    `loss_fn(model, batch)` gets the possibly DDP-wrapped model (call it for the forward, reach config and methods
    through `unwrap_model(model)`) and the batch moved to the device. `evaluate(model)` / `train_evaluate(model)`
    get the bare model in eval mode and return {metric: value}. `tokenizer` is saved beside the best and final
    models; `fingerprint` (JSON-able) joins the loop config in the check that a resumed run is the same run.
    """
    return _Trainer(model, loss_fn, batches, config, evaluate, train_evaluate, tokenizer, fingerprint,
                    progress).run()
