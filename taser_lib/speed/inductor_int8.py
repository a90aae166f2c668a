"""int8 encoding compiled by Inductor: the `inductor` engine of `speed.quantized`.

    >>> encoder = int8_encoder(load_encoder("default"), engine="inductor")   # or the probe's pick (quantized)

`InductorInt8Model(model)` stands in for a retriever's float model inside `Int8Encoder`, as `onnx_int8.OnnxInt8Model`
does: the same `encode_query` / `encode_passage` (and `forward`, for the engine probe's BERT layer), each made into
a compiled int8 graph on its first call, in PyTorch 2's export quantisation as torchao ships it:

1. `torch.export.export` of that one method on a float32 copy of the model, batch size and length dynamic.
2. torchao's `prepare_pt2e` with its `X86InductorQuantizer` at its default static configuration: int8 weights with
   one scale per output channel, int8 activations with one scale per tensor, observed on the batch of that first
   call (the calibration), then `convert_pt2e`.
3. `torch.compile` with Inductor's `freezing`, which folds the quantised weights into constants and matches each
   quantise-linear-dequantise pattern to oneDNN's int8 linear (`onednn.qlinear_pointwise`: AMX or VNNI int8 where
   the CPU has them); attention's own products, the layer norms and pooling stay float32.

Static scales are what make it fast (no per-batch scan of the activations), and the first batch decides them: a
corpus encoder's first batch is its longest passages (`DenseEncoder` encodes in length order), whose activations
span at least the range the shorter ones do. Making a graph takes 10-30 s on two cores (the export, the observers'
pass and Inductor's compilation; it needs a C++ compiler, which Inductor calls), so it pays for a corpus, not for a
few passages.

Why it is there: on the project's 2-core Intel Xeon with AMX, one padded batch of 64 random-token inputs of 120-200
tokens, the packaged MiniLM ran 184 passages/s this way against 188 for its bf16 copy compiled and 32 for torchao's
dynamic int8 (`Int8DynamicActivationInt8WeightConfig`) eagerly, 86 compiled; PyTorch's eager dynamic int8 (the other
engines) ran 161/s on SQuAD-open passages in the peers benchmark. Whether it is the faster engine on a given machine
is the engine probe's measurement, not a rule.

Models whose method returns something other than one tensor (ColBERT's token vectors) are refused.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import shutil
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from .onnx_int8 import INPUTS, MethodStandIn, _Method

ENGINE = "inductor"
MAX_BATCH = 1 << 16


def available() -> bool:
    """torchao (its PT2E quantiser) is installed and Inductor has a C++ compiler to call."""
    return importlib.util.find_spec("torchao") is not None and any(shutil.which(c) for c in ("c++", "g++", "clang++"))


@contextlib.contextmanager
def _quiet_torchao() -> Iterator[None]:
    """torchao's import warns once for each of its CUDA extensions that a CPU build of torch cannot load."""
    logger = logging.getLogger("torchao")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def build_graph(model: nn.Module, method: str, example: dict[str, torch.Tensor]):
    """`model.<method>` exported, quantised by torchao's X86 Inductor quantiser with activation scales observed on
    `example` (module docstring), and compiled with frozen weights; for inputs named like `example`'s (batch size and
    length dynamic). Called as graph(*inputs), in `INPUTS` order."""
    import torch._inductor.config as inductor

    with _quiet_torchao():
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

    names = [n for n in INPUTS if example.get(n) is not None]
    example = {n: example[n] for n in names}
    args = tuple(example.values())
    wrapped = _Method(model, method, names).eval()
    config = getattr(model, "config", None)
    longest = int(getattr(config, "max_position_embeddings", 512) or 512)
    batch, length = torch.export.Dim("batch", min=1, max=MAX_BATCH), torch.export.Dim("length", min=2, max=longest)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's and the quantiser's notes, every time
        with torch.inference_mode(False), torch.no_grad():  # export cannot trace inference-mode tensors
            args = tuple(a.clone() for a in args)
            shapes = {"inputs": tuple({0: batch, 1: length} for _ in names)}  # `_Method` takes *inputs
            exported = torch.export.export(wrapped, args, dynamic_shapes=shapes, strict=False).module()
            quantizer = x86.X86InductorQuantizer().set_global(x86.get_default_x86_inductor_quantization_config())
            prepared = prepare_pt2e(exported, quantizer)
            prepared(*args)  # the observers record the activations' ranges: the calibration
            converted = convert_pt2e(prepared)
        with inductor.patch(freezing=True), torch.no_grad():
            graph = torch.compile(converted, dynamic=True)
            graph(*example.values())  # compiles now, under freezing and the caller's inference mode
    return graph


class InductorInt8Model(MethodStandIn):
    """A model's `encode_query`, `encode_passage` and `forward` run by compiled int8 graphs (module docstring), each
    made on its first call from a float32 copy taken now (the model itself is left alone). Holds no parameters: it
    is a frozen, inference-only stand-in."""

    def __init__(self, model: nn.Module, keep_fp32: Sequence[str] = ()):
        super().__init__()
        if not available():
            raise ConfigError(f"the {ENGINE} int8 engine needs torchao and a C++ compiler: pip install torchao")
        if keep_fp32:
            raise ConfigError(f"keep_fp32 applies to PyTorch's eager int8 engines, not to {ENGINE}")
        self._float = [copy.deepcopy(model).float().eval()]  # a list: not a submodule, so this holds no parameters
        self._graphs: dict[tuple[str, tuple[str, ...]], Any] = {}
        self.config = getattr(model, "config", None)
        self.eval()

    def _run(self, method: str, inputs: dict[str, torch.Tensor | None]) -> torch.Tensor:
        import torch._inductor.config as inductor

        given = {n: v.cpu() for n, v in inputs.items() if v is not None}
        key = (method, tuple(n for n in INPUTS if n in given))
        if key not in self._graphs:
            self._graphs[key] = build_graph(self._float[0], method, given)
        # a recompilation (a new guard) keeps the weights frozen; Inductor's int8 lowering warns on each
        with inductor.patch(freezing=True), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return self._graphs[key](*(given[n] for n in key[1]))


__all__ = ["ENGINE", "InductorInt8Model", "available", "build_graph"]
