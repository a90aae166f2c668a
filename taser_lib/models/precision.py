"""Numeric precision of encoding and training: `fp32 | bf16 | auto`, resolved once per device.

    >>> resolve_precision("auto", "cpu")      # "bf16" on a CPU with native bfloat16 (avx512_bf16 / AMX), else "fp32"
    >>> with autocast("bf16", "cpu"): loss = loss_fn(model, batch)   # training: fp32 master weights, bf16 matmuls

`auto` is bf16 on CUDA and on CPUs with native bfloat16 instructions, fp32 elsewhere: on a CPU without them PyTorch
emulates bf16 matmuls through float32 and gains nothing. Training keeps its float32 master weights and runs the
forward under `torch.autocast` (matmuls, linears and attention in bf16; softmax, norms and losses in float32 as
autocast's op lists decide). Encoding, which never updates weights, runs a bfloat16 copy of the model
(`DenseEncoder`), which is faster on the CPU than autocast (no per-call weight casts, and oneDNN's fused bf16
linears apply).
"""

from __future__ import annotations

import contextlib
import functools
from typing import Literal

import torch

from ..errors import ConfigError

PRECISIONS = ("fp32", "bf16", "auto")
Resolved = Literal["fp32", "bf16"]
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}
# /proc/cpuinfo flags of native bfloat16 arithmetic: AVX-512 BF16 (AMD Zen 4+, Intel Cooper Lake+) and AMX.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


def check_precision(precision: str, what: str = "precision") -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"{what} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def cpu_flags(path: str = "/proc/cpuinfo") -> set[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo is missing, e.g. macOS)."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


@functools.lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when the CPU does bfloat16 arithmetic natively: an avx512_bf16 / amx_bf16 flag, or torch's own check."""
    if cpu_flags() & set(NATIVE_BF16_FLAGS):
        return True
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported")]
    return any(check() for check in checks if check is not None)


def resolve_precision(precision: str, device: str | torch.device) -> Resolved:
    """The precision `precision` means on `device`: fp32 and bf16 as given, auto -> bf16 on CUDA and on CPUs with
    native bfloat16 (`cpu_has_native_bf16`), fp32 elsewhere (other devices included)."""
    check_precision(precision)
    if precision != "auto":
        return precision  # type: ignore[return-value]
    kind = torch.device(device).type
    if kind == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if kind == "cpu":
        return "bf16" if cpu_has_native_bf16() else "fp32"
    return "fp32"


def autocast(resolved: str, device: str | torch.device):
    """`torch.autocast` to bfloat16 on the device's type when `resolved` is bf16; a no-op for fp32."""
    if resolved not in DTYPES:
        raise ConfigError(f"autocast needs a resolved precision (fp32 or bf16), got {resolved!r}")
    if resolved == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


__all__ = ["DTYPES", "NATIVE_BF16_FLAGS", "PRECISIONS", "autocast", "check_precision", "cpu_flags",
           "cpu_has_native_bf16", "resolve_precision"]
