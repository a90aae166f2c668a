"""Speed engineering beside the core, optional: what precision `auto` means on this CPU (`precision`: measured once per
machine), oneDNN's fused linears for encoding where this machine measured them faster (`fused`), the int8 encoder
for indexing a corpus (`quantized`: PyTorch's int8 kernels, or ONNX Runtime's where it is installed, `onnx_int8`, or
torchao's PT2E quantisation compiled by Inductor, `inductor_int8`),
each engine measured on this machine before it is chosen, and the float encoder compiled by `torch.compile`
(`compiled`). The core (`taser_lib.models`, `retrieval`, `training`, ...) never imports it; importing it installs its
precision choice and kernel choice where the core asks for them (`taser_lib.plugins`), loading neither until first
asked. The `taser` command and the book import it.

    >>> import taser_lib.speed                                 # `auto` measured, fused linears where faster
    >>> from taser_lib.speed.quantized import int8_encoder
    >>> int8 = int8_encoder(load_encoder(run.model_path))   # passages in int8, questions at fp32
    >>> from taser_lib.speed.compiled import compiled_encoder
    >>> fast = compiled_encoder(load_encoder(run.model_path, precision="auto"))   # `taser index --compile`
"""

from __future__ import annotations

import logging

from ..plugins import install_speed

# torchao (the inductor int8 engine's quantiser; transformers imports it too when it loads a model, once it is
# installed) warns once for each of its CUDA extensions that a CPU build of torch cannot load, and torch warns that
# it registers its enums the old way: both quieted, unless a logging configuration set those loggers' levels
for _name in ("torchao", "torch.utils._pytree"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.ERROR)


def cpu_precision(purpose: str) -> str:
    """`speed.precision.cpu_precision`: what `auto` means on this CPU for `purpose` (encode | train)."""
    from .precision import cpu_precision as choose

    return choose(purpose)


def kernels(setting, device, dtype: str, model, n_batches: int):
    """`speed.fused.KernelChoice` for one encode call."""
    from .fused import KernelChoice

    return KernelChoice(setting, device, dtype, model, n_batches=n_batches)


install_speed(cpu_precision=cpu_precision, kernels=kernels)
