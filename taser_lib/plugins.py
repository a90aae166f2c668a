"""Where the optional speed engineering plugs into the core, which never imports it.

`taser_lib.speed` installs itself here when imported (the `taser` command and the book import it; it loads nothing
heavy until first asked). The core asks `speed`:

- `speed.cpu_precision(purpose)`: what precision `auto` means on this CPU for `purpose` (encode | train), "fp32" or
  "bf16". `taser_lib.speed.precision` measures it once per machine. Not installed: fp32.
- `speed.kernels(setting, device, dtype, model, n_batches)`: which kernels each batch of one encode call runs
  (`taser_lib.speed.fused.KernelChoice`: oneDNN's fused linears where this machine measured them faster). Not
  installed: PyTorch's stock kernels (`models.encoding.StockKernels`).

    >>> import taser_lib.speed          # a library user who wants `auto` measured, and fused linears where faster
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Speed:
    """The installed speed engineering; None where the core's plain default applies."""

    cpu_precision: Callable[[str], str] | None = None
    kernels: Callable[..., Any] | None = None


speed = Speed()


def install_speed(*, cpu_precision: Callable[[str], str], kernels: Callable[..., Any]) -> None:
    """Make the core ask these (`taser_lib.speed` calls this when imported)."""
    speed.cpu_precision, speed.kernels = cpu_precision, kernels
