"""oneDNN fused linears for CPU inference, used where this machine measured them faster.

On the CPU an eval-mode BERT's linear layers can run as oneDNN fused linears for the duration of an encode call
(`fused_cpu_linears`): the bias, the FFN's GELU and the residual add before each LayerNorm are applied inside the
matrix multiply instead of in extra passes over memory (stock `addmm` first copies the broadcast bias into its
output; GELU and the residual add each read and write the whole activation again). The results equal the stock
forward to float32 rounding (tests/test_bench.py).

Whether that is faster depends on the CPU, so it is measured, not assumed: 1.2x on the 2-core AMD EPYC this was
written on (bf16-capable), 0.86x and 0.97x on another 2-core AMD EPYC without native bf16 (`taser bench --only
encoding`, 2026-11-28). A synthetic probe did not predict that: one random BERT layer at fixed shapes measured fused
1.28x faster on the machine where encoding real passages ran it at 0.97x. So the choice is measured on the work
itself: `KernelChoice`, what `DenseEncoder` uses at its default (auto), times the first batches of an encode call of
at least `TRIAL_BATCHES` batches under both kernels (one warm-up each, then `TRIAL_PAIRS` adjacent stock/fused pairs
in ABBA order, so the batches' falling widths cancel; seconds per padded token), and runs the rest of the call, and
every later call, with fused linears only where the median pair ratio is at least `MIN_SPEEDUP`. The trial's batches
are real output either way. Its result is kept per machine (CPU, cores, threads, torch), dtype and model shape in
`$TASER_CACHE_DIR/fusion-probe.json` beside the precision probe (`speed.precision`); a call too small for a trial,
on a machine and shape never measured, runs PyTorch's stock kernels. `fusion_record()` gives what auto ran in this
process.
"""

from __future__ import annotations

import statistics
import time
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import GELUActivation
from transformers.models.bert.modeling_bert import BertIntermediate, BertOutput, BertSelfOutput

from .precision import machine_key, read_probe, store_probe



def _onednn_linear():
    """oneDNN's fused linear op (torch.ops.mkldnn._linear_pointwise, what torch.compile uses on CPUs), or None
    where this torch build lacks it."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


def _linear_forward(self, x):
    return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [], "")


def _intermediate_gelu_forward(self, hidden_states):
    dense = self.dense
    return torch.ops.mkldnn._linear_pointwise(hidden_states, dense.weight, dense.bias, "gelu", [], "none")


def _output_forward(self, hidden_states, input_tensor):
    # Dropout is the identity in eval mode, the only mode this forward is installed in.
    dense = self.dense
    summed = torch.ops.mkldnn._linear_pointwise.binary(hidden_states, input_tensor, dense.weight, dense.bias, "add")
    return self.LayerNorm(summed)


def _fused_forward(module: nn.Module):
    if isinstance(module, (BertSelfOutput, BertOutput)):
        return _output_forward
    act = getattr(module, "intermediate_act_fn", None)
    if isinstance(module, BertIntermediate) and isinstance(act, GELUActivation) and act.act is F.gelu:
        return _intermediate_gelu_forward  # exact (erf) GELU, as oneDNN's "gelu" with algorithm "none"
    if type(module) is nn.Linear:
        return _linear_forward
    return None


@contextmanager
def fused_cpu_linears(model: nn.Module, enabled: bool = True) -> Iterator[nn.Module]:
    """Within the block, run an eval-mode model's BERT linears as oneDNN fused linears (module docstring).

    A no-op when not `enabled`, on other devices, in training mode, for weights neither float32 nor bfloat16 (or
    bfloat16 where oneDNN has no bf16 kernels), or where oneDNN's op is missing. Only module instances are patched,
    and the patches are removed on exit, so the model's class and its training forward never change.
    """
    first = next(model.parameters(), None)
    dtype_ok = first is not None and (first.dtype == torch.float32 or (
        first.dtype == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported()))
    usable = (enabled and dtype_ok and first.device.type == "cpu" and not model.training
              and _onednn_linear() is not None)
    patched: list[nn.Module] = []
    try:
        if usable:
            for module in model.modules():
                forward = _fused_forward(module)
                if forward is not None and "forward" not in vars(module):
                    module.forward = types.MethodType(forward, module)
                    patched.append(module)
        yield model
    finally:
        for module in patched:
            del module.forward


# --- the choice, measured on the encode call's own batches ---------------------------------------------------------

MIN_SPEEDUP = 1.03   # fused must beat stock by this much: a tie keeps PyTorch's own kernels
TRIAL_PAIRS = 4      # stock/fused pairs of adjacent batches timed
TRIAL_BATCHES = 2 + 2 * TRIAL_PAIRS   # a warm-up of each kernel choice, then the pairs
TRIAL_VERSION = 2    # 1 was the synthetic one-layer probe (`taser bench`'s note of 2026-11-28)
PROBE_FILE = "fusion-probe.json"
_DECIDED: dict[str, dict[str, Any]] = {}   # what auto ran in this process, per "dtype, model shape"


@dataclass(frozen=True)
class FusionTrial:
    """One machine's measurement for one dtype and model shape: per adjacent pair of real batches, stock seconds
    per padded token over fused seconds per padded token (above 1: fused is faster)."""

    machine: str
    dtype: str
    shape: str
    ratios: tuple[float, ...]

    @property
    def speedup(self) -> float:
        return statistics.median(self.ratios)

    @property
    def choice(self) -> bool:
        return self.speedup >= MIN_SPEEDUP

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratios": [round(r, 4) for r in self.ratios], "speedup": round(self.speedup, 3),
                "fused": self.choice}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FusionTrial":
        ratios = tuple(float(r) for r in data["ratios"])
        if not ratios:
            raise ValueError("a fusion trial without ratios")
        return cls(str(data["machine"]), str(data["dtype"]), str(data["shape"]), ratios)


def model_shape(model: nn.Module) -> str:
    """What the kernel choice depends on besides the machine: the model's class, width and number of linears."""
    widths = sorted({m.in_features for m in model.modules() if isinstance(m, nn.Linear)})
    n = sum(_fused_forward(m) is not None for m in model.modules())
    return f"{type(model).__name__}, {n} linears, in-widths {widths}"


def _trial_key(dtype: str, shape: str) -> str:
    return f"{machine_key()} | {dtype} | {shape} | fusion trial {TRIAL_VERSION}"


def stored_trial(dtype: str, shape: str) -> FusionTrial | None:
    """This machine's trial for `dtype` and `shape`, from `$TASER_CACHE_DIR/fusion-probe.json`, or None."""
    return read_probe(PROBE_FILE, _trial_key(dtype, shape), FusionTrial.from_dict)


class KernelChoice:
    """Which kernels each batch of one encode call runs: `setting` True/False forces them; None (auto) follows this
    machine's stored trial for the model's dtype and shape, or runs the trial on this call's first `TRIAL_BATCHES`
    batches when it has that many (module docstring), else stock kernels. Use: `fused(b)` before batch b, and
    `observe(b, tokens, seconds)` after its forward."""

    def __init__(self, setting: bool | None, device: str | torch.device, dtype: str, model: nn.Module,
                 n_batches: int, timer: Callable[[], float] = time.perf_counter):
        self.timer, self.dtype, self.trial = timer, dtype, None
        self.shape = model_shape(model)
        self._plan: list[bool] = []
        self._seconds: dict[int, float] = {}
        if setting is not None:
            self.fixed: bool | None = bool(setting)
        elif torch.device(device).type != "cpu" or _onednn_linear() is None:
            self.fixed = False
        elif (trial := stored_trial(dtype, self.shape)) is not None:
            self.trial, self.fixed = trial, trial.choice
            self._record("stored trial")
        elif n_batches >= TRIAL_BATCHES:
            self.fixed = None
            self._plan = [False, True] + [fused for _ in range(TRIAL_PAIRS // 2)
                                          for fused in (False, True, True, False)]
            self._plan += [False, True] * (TRIAL_PAIRS % 2)
        else:
            self.fixed = False
            self._record(f"not measured: fewer than {TRIAL_BATCHES} batches")

    def _record(self, how: str) -> None:
        if self.fixed is not None:
            _DECIDED[f"{self.dtype}, {self.shape}"] = {
                "fused": self.fixed, "how": how, "trial": self.trial.as_dict() if self.trial else None}

    def fused(self, b: int) -> bool:
        return self.fixed if self.fixed is not None else self._plan[b]

    @contextmanager
    def batch(self, model: nn.Module, b: int, tokens: int) -> Iterator[None]:
        """Run batch `b` (of `tokens` padded tokens) of `model` within the block under its kernels, and observe it."""
        with fused_cpu_linears(model, self.fused(b)):
            began = self.timer()
            yield
            self.observe(b, tokens, self.timer() - began)

    def observe(self, b: int, tokens: int, seconds: float) -> None:
        if self.fixed is not None:
            return
        self._seconds[b] = seconds / max(tokens, 1)
        if b + 1 < len(self._plan):
            return
        per_token = [self._seconds[i] for i in range(2, len(self._plan))]
        pairs = [per_token[i:i + 2] for i in range(0, len(per_token), 2)]
        plan = self._plan[2:]
        ratios = []
        for i, (a, z) in enumerate(pairs):
            stock, fused = (a, z) if not plan[2 * i] else (z, a)
            ratios.append(stock / fused if fused > 0 else float("inf"))
        self.trial = FusionTrial(machine_key(), self.dtype, self.shape, tuple(ratios))
        self.fixed = self.trial.choice
        store_probe(PROBE_FILE, _trial_key(self.dtype, self.shape), self.trial)
        self._record("measured in this call")


def use_fused_linears(setting: bool | None, device: str | torch.device, dtype: str, model: nn.Module) -> bool:
    """What later encode calls of `model` run: `setting` when given, else (auto) the stored trial's choice, and
    stock kernels where no trial has been run for this machine, dtype and shape."""
    return KernelChoice(setting, device, dtype, model, n_batches=0).fused(0)


def fusion_record() -> dict[str, Any]:
    """What auto ran in this process, per dtype and model shape, with the trial behind it: for a result's meta."""
    return {"fused": {k: v["fused"] for k, v in _DECIDED.items()}, "decisions": dict(_DECIDED)}


__all__ = ["FusionTrial", "KernelChoice", "MIN_SPEEDUP", "TRIAL_BATCHES", "TRIAL_PAIRS", "fused_cpu_linears",
           "fusion_record", "model_shape", "stored_trial", "use_fused_linears"]
