"""oneDNN fused linears for CPU inference, used where this machine measured them faster.

On the CPU an eval-mode BERT's linear layers can run as oneDNN fused linears for the duration of an encode call
(`fused_cpu_linears`): the bias, the FFN's GELU and the residual add before each LayerNorm are applied inside the
matrix multiply instead of in extra passes over memory (stock `addmm` first copies the broadcast bias into its
output; GELU and the residual add each read and write the whole activation again). The results equal the stock
forward to float32 rounding (tests/test_bench.py).

Whether that is faster depends on the CPU, so it is measured, not assumed: 1.2x on the 2-core AMD EPYC this was
written on (bf16-capable), 0.86x on another 2-core AMD EPYC without native bf16 (`taser bench --only encoding`,
2026-11-28). `use_fused_linears(None, device, dtype)` (what `DenseEncoder` asks by default) answers with
`cpu_fusion_probe`: a BERT layer of the default model's width, forward in inference mode over padded batches of two
widths, stock against fused, interleaved, median of 3 (a few seconds); fused is chosen only where it is at least `MIN_SPEEDUP` times faster. The probe runs once
per machine, thread count, torch version and dtype, cached in `$TASER_CACHE_DIR/fusion-probe.json` beside the
precision probe (`models.precision.cached_probe`); `fusion_record()` gives what was decided in this process.
"""

from __future__ import annotations

import functools
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

from .precision import DTYPES, cached_probe, machine_key

MIN_SPEEDUP = 1.03   # fused must beat stock by this much: a tie keeps PyTorch's own kernels
PROBE_VERSION = 1
PROBE_FILE = "fusion-probe.json"
_DECIDED: dict[str, bool] = {}  # what `use_fused_linears(None, "cpu", dtype)` decided in this process, per dtype


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




# --- the probe ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FusionProbe:
    """One machine's measurement for one dtype: median seconds of a forward with stock and with fused linears."""

    machine: str
    dtype: str
    seconds: dict[str, float]  # {"stock": s, "fused": s}

    @property
    def speedup(self) -> float:
        """Stock seconds over fused seconds: above 1, fused is faster."""
        return self.seconds["stock"] / self.seconds["fused"]

    @property
    def choice(self) -> bool:
        return self.speedup >= MIN_SPEEDUP

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": round(self.speedup, 3), "fused": self.choice}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "FusionProbe":
        return cls(str(data["machine"]), str(data["dtype"]), {k: float(data["seconds"][k]) for k in ("stock", "fused")})


def measure_cpu_fusion(dtype: str = "fp32", *, hidden: int = 384, layers: int = 1, heads: int = 12, batch: int = 32,
                       lengths: tuple[int, ...] = (128, 48), repeats: int = 3,
                       timer: Callable[[], float] = time.perf_counter) -> FusionProbe:
    """Time a random BERT of the default model's width (`layers` layers) on the CPU in `dtype`, forward in inference
    mode as `DenseEncoder` runs it (a batch per padded width in `lengths`, half of each batch padded to half the
    width), with stock and with fused linears. Rounds alternate after one warm-up
    each; the median of `repeats` rounds. (A fixed shape at a small batch measured fused 1.25x faster on an EPYC
    where encoding real passages ran it 0.86x: the probe has to look like the work.)"""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=512, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=max(512, *lengths))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config, add_pooling_layer=False).eval().to(DTYPES[dtype])
        inputs = []
        for width in lengths:
            mask = torch.ones(batch, width, dtype=torch.long)
            mask[: batch // 2, width // 2:] = 0
            inputs.append({"input_ids": torch.randint(0, config.vocab_size, (batch, width)), "attention_mask": mask})

    def one_round(fused: bool) -> float:
        with torch.inference_mode(), fused_cpu_linears(model, fused):
            start = timer()
            for batch_inputs in inputs:
                model(**batch_inputs)
            return timer() - start

    one_round(False), one_round(True)
    times: dict[str, list[float]] = {"stock": [], "fused": []}
    for _ in range(repeats):
        times["stock"].append(one_round(False))
        times["fused"].append(one_round(True))
    return FusionProbe(machine_key(), dtype, {k: statistics.median(v) for k, v in times.items()})


@functools.lru_cache(maxsize=None)
def cpu_fusion_probe(dtype: str = "fp32") -> FusionProbe:
    """This machine's fusion probe for `dtype` (a second or two), measured once and cached (`cached_probe`)."""
    return cached_probe(PROBE_FILE, lambda: measure_cpu_fusion(dtype), FusionProbe.from_dict,
                        key=f"{machine_key()} | {dtype} | fusion probe {PROBE_VERSION}")


def use_fused_linears(setting: bool | None, device: str | torch.device, dtype: str = "fp32") -> bool:
    """Whether an encode call runs fused linears: `setting` when given; else (auto) only on a CPU where
    `cpu_fusion_probe(dtype)` measured them faster, and only where oneDNN's op exists."""
    if setting is not None:
        return setting
    if torch.device(device).type != "cpu" or _onednn_linear() is None:
        return False
    _DECIDED[dtype] = cpu_fusion_probe(dtype).choice
    return _DECIDED[dtype]


def fusion_record() -> dict[str, Any]:
    """What auto decided about fused linears in this process, per dtype, with the probes behind it: for a result's
    meta."""
    return {"fused": dict(_DECIDED), "probes": {d: cpu_fusion_probe(d).as_dict() for d in _DECIDED}}


__all__ = ["FusionProbe", "MIN_SPEEDUP", "cpu_fusion_probe", "fused_cpu_linears", "fusion_record",
           "measure_cpu_fusion", "use_fused_linears"]
