"""Numeric precision of encoding and training: `fp32 | bf16 | auto`, resolved once per device.

    >>> resolve_precision("auto", "cpu")                     # encoding: bf16 where this CPU measured it faster
    >>> resolve_precision("auto", "cpu", purpose="train")    # training: the same, for forward and backward
    >>> with autocast("bf16", "cpu"): loss = loss_fn(model, batch)   # training: fp32 master weights, bf16 matmuls

`auto` is bf16 on CUDA where supported, fp32 on devices other than CUDA and the CPU. On a CPU it is what the
optional speed package measured faster on this machine (`taser_lib.speed.precision`: fp32 on a CPU without native
bfloat16, else a short probe, cached per machine), once `taser_lib.speed` is imported (the `taser` command and the
book import it; `taser_lib.plugins`); without it, fp32.

Training keeps its float32 master weights and runs the forward under `torch.autocast` (matmuls, linears and
attention in bf16; softmax, norms and losses in float32 as autocast's op lists decide). Encoding, which never
updates weights, runs a bfloat16 copy of the model (`DenseEncoder`), which is faster on the CPU than autocast (no
per-call weight casts, and oneDNN's fused bf16 linears apply).
"""

from __future__ import annotations

import contextlib
from typing import Literal

import torch

from ..errors import ConfigError
from ..plugins import speed

PRECISIONS = ("fp32", "bf16", "auto")
Resolved = Literal["fp32", "bf16"]
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}
PURPOSES = ("encode", "train")


def check_precision(precision: str, what: str = "precision") -> str:
    if precision not in PRECISIONS:
        raise ConfigError(f"{what} must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    return precision


def resolve_precision(precision: str, device: str | torch.device, purpose: str = "encode") -> Resolved:
    """The precision `precision` means on `device` for `purpose` (encode | train): fp32 and bf16 as given; auto ->
    bf16 on CUDA where supported, on a CPU what the installed speed package measured faster (fp32 without it), fp32
    on other devices."""
    check_precision(precision)
    if purpose not in PURPOSES:
        raise ConfigError(f"purpose must be one of {PURPOSES}, got {purpose!r}")
    if precision != "auto":
        return precision  # type: ignore[return-value]
    kind = torch.device(device).type
    if kind == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp32"
    if kind == "cpu":
        return speed.cpu_precision(purpose) if speed.cpu_precision is not None else "fp32"  # type: ignore[return-value]
    return "fp32"


def autocast(resolved: str, device: str | torch.device):
    """`torch.autocast` to bfloat16 on the device's type when `resolved` is bf16; a no-op for fp32."""
    if resolved not in DTYPES:
        raise ConfigError(f"autocast needs a resolved precision (fp32 or bf16), got {resolved!r}")
    if resolved == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


__all__ = ["DTYPES", "PRECISIONS", "PURPOSES", "autocast", "check_precision", "resolve_precision"]
