"""int8 encoding through ONNX Runtime: the `onnxruntime` engine of `speed.quantized`.

    >>> encoder = int8_encoder(load_encoder("default"), engine="onnxruntime")   # or the probe's pick (quantized)

`OnnxInt8Model(model)` stands in for a retriever's float model inside `Int8Encoder`: it has the same
`encode_query` / `encode_passage` (and `forward`, for the engine probe's BERT layer), and runs each of them as an
ONNX Runtime session made on its first call. Making one takes a few seconds, in a temporary folder that is removed
afterwards:

1. `torch.onnx.export` (the TorchScript exporter) of that one method, on a float32 copy of the model whose attention
   runs as BERT's eager attention (softmax(QK^T/sqrt(d) + mask) V written out, the graph ONNX Runtime's fusion
   recognises; PyTorch's fused SDPA call exports as a graph it does not). Batch size and length stay dynamic.
2. ONNX Runtime's transformer optimiser (`onnxruntime.transformers.optimizer`, `model_type="bert"`): embedding and
   skip layer norms, bias + GELU, and each layer's attention fused into one op.
3. ONNX Runtime's dynamic quantisation (`onnxruntime.quantization.quantize_dynamic`): each matrix product with a
   weight gets int8 weights, one scale per output channel (as `int8_copy`'s PyTorch linears), and quantises its
   activations per batch; attention's own products, the layer norms and pooling stay float32.

Each session gets PyTorch's thread count (`torch.get_num_threads()`), so `OMP_NUM_THREADS` and
`torch.set_num_threads` govern it as they govern the PyTorch engines.

Why it is there: on the project's 2-core AMD EPYC (AVX2 only), measured beside another job, 400 SQuAD-open passages,
batch 64, length 256, three rounds, its passage vectors came out 1.63x faster than PyTorch float32 (median) against
1.35x for PyTorch's own int8 linears, with a cosine to float32 of 0.993 on average (minimum 0.987) against 0.981
(0.954). Whether it is the faster engine on a given machine is the engine probe's measurement, not a rule.

Models whose method returns something other than one tensor (ColBERT's token vectors) are refused.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..errors import ConfigError

ENGINE = "onnxruntime"
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def available() -> bool:
    """ONNX Runtime and the ONNX package (its quantiser reads models with it) are installed."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


class _Method(nn.Module):
    """One method of a model as a module whose forward takes its inputs positionally (what the exporter traces)."""

    def __init__(self, model: nn.Module, method: str, names: Sequence[str]):
        super().__init__()
        self.model, self.method, self.names = model, method, tuple(names)

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        out = getattr(self.model, self.method)(**dict(zip(self.names, inputs)))
        if not isinstance(out, torch.Tensor):  # a Hugging Face output: its first field (the last hidden state)
            out = out[0] if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple") else out
        if not isinstance(out, torch.Tensor):
            raise ConfigError(f"the {ENGINE} int8 engine runs models whose {self.method} returns one tensor; "
                              f"{type(self.model).__name__}'s returns {type(out).__name__}")
        return out


def _heads_and_width(model: nn.Module) -> tuple[int, int]:
    """BERT's attention heads and hidden size from the model's config (0, 0: let the optimiser find them)."""
    config = getattr(model, "config", None)
    return int(getattr(config, "num_attention_heads", 0) or 0), int(getattr(config, "hidden_size", 0) or 0)


def _eager_copy(model: nn.Module) -> nn.Module:
    clone = copy.deepcopy(model).float().eval()
    setter = getattr(clone, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter("eager")
        except (ValueError, AttributeError, NotImplementedError):  # a model without the switch exports as it is
            pass
    return clone


@contextlib.contextmanager
def _quiet_loggers() -> Iterator[None]:
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(before)


def build_session(model: nn.Module, method: str, example: dict[str, torch.Tensor], threads: int | None = None):
    """An ONNX Runtime session running `model.<method>` with int8 weights (module docstring), for inputs named like
    `example`'s (batch size and length dynamic)."""
    import onnx
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    names = [n for n in INPUTS if example.get(n) is not None]
    wrapped = _Method(model, method, names).eval()
    heads, width = _heads_and_width(model)
    with tempfile.TemporaryDirectory(prefix="taser-onnx-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's notes on traced branches and its own deprecation
        exported, optimised, quantised = (Path(tmp) / f"{stage}.onnx" for stage in ("float", "optimised", "int8"))
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(wrapped, tuple(example[n] for n in names), str(exported), input_names=names,
                              output_names=["output"], opset_version=OPSET, dynamo=False,
                              dynamic_axes={**{n: {0: "batch", 1: "length"} for n in names}, "output": {0: "batch"}})
        with _quiet_loggers():  # the optimiser's fusion notes; the quantiser's advice to pre-process, every time
            optimize_model(str(exported), model_type="bert", num_heads=heads, hidden_size=width,
                           opt_level=1).save_model_to_file(str(optimised))
            quantize_dynamic(str(optimised), str(quantised), weight_type=QuantType.QInt8, per_channel=True,
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        return ort.InferenceSession(str(quantised), options, providers=["CPUExecutionProvider"])


class MethodStandIn(nn.Module):
    """A frozen stand-in for a retriever's float model: `encode_query`, `encode_passage` and `forward` each run by
    `_run(method, inputs)` (an int8 engine's session or graph for that method)."""

    def _run(self, method: str, inputs: dict[str, torch.Tensor | None]) -> torch.Tensor:
        raise NotImplementedError

    def encode_query(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self._run("encode_query", {"input_ids": input_ids, "attention_mask": attention_mask,
                                          "token_type_ids": token_type_ids})

    def encode_passage(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        return self._run("encode_passage", {"input_ids": input_ids, "attention_mask": attention_mask,
                                            "token_type_ids": token_type_ids})

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> torch.Tensor:
        return self._run("forward", {"input_ids": input_ids, "attention_mask": attention_mask,
                                     "token_type_ids": token_type_ids})


class OnnxInt8Model(MethodStandIn):
    """A model's `encode_query`, `encode_passage` and `forward` run by int8 ONNX Runtime sessions (module docstring),
    each made on its first call from a float32 copy taken now (the model itself is left alone). Holds no
    parameters: it is a frozen, inference-only stand-in."""

    def __init__(self, model: nn.Module, keep_fp32: Sequence[str] = ()):
        super().__init__()
        if not available():
            raise ConfigError(f"the {ENGINE} int8 engine needs onnxruntime and onnx: pip install onnxruntime onnx")
        if keep_fp32:
            raise ConfigError(f"keep_fp32 applies to PyTorch's int8 engines, not to {ENGINE}")
        self._float = [_eager_copy(model)]  # a list: not registered as a submodule, so this holds no parameters
        self._sessions: dict[tuple[str, tuple[str, ...]], Any] = {}
        self.config = getattr(model, "config", None)
        self.eval()

    def _run(self, method: str, inputs: dict[str, torch.Tensor | None]) -> torch.Tensor:
        given = {n: v for n, v in inputs.items() if v is not None}
        key = (method, tuple(n for n in INPUTS if n in given))
        if key not in self._sessions:
            self._sessions[key] = build_session(self._float[0], method, given)
        session = self._sessions[key]
        feed = {i.name: given[i.name].cpu().numpy().astype(np.int64) for i in session.get_inputs()}
        return torch.from_numpy(session.run(None, feed)[0])


__all__ = ["ENGINE", "MethodStandIn", "OnnxInt8Model", "available", "build_session"]
