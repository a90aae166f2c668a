"""int8 encoding for indexing a large corpus on a CPU: a `DenseEncoder` whose linear layers run dynamically quantised.

    >>> encoder = int8_encoder(load_encoder("default"))           # or `taser index ... --precision int8`
    >>> shards = encode_stream_to_shards(encoder, iter_corpus_file("psgs_w100.tsv"), "index/embeddings")

`int8_copy` quantises a copy of the model with PyTorch's dynamic quantisation (`torch.ao.quantization.
quantize_dynamic`): each linear layer's weights are stored as int8, one scale per output channel, and each batch's
activations are quantised on the fly, one scale per tensor; the products run on int8 kernels (VNNI / AMX where the
CPU has them) and come back as float32. Embeddings, layer norms, softmax and pooling stay float32.

Every linear is quantised by default. `keep_fp32` names linears to keep in float32, e.g. `FFN_OUTPUT`, the
feed-forward output projection of every layer, whose inputs (the GELU activations) have a few large values that make
a per-tensor activation scale coarse. Keeping it raises the vectors' cosine to fp32 but did not help retrieval:
on SQuAD-open (3,526 passages, 2,192 test questions, the packaged MiniLM, questions at fp32; measured on a 2-core
Xeon beside other jobs, one pass each) every linear at int8 gave R@1/5/20/100 of 58.03/84.22/93.84/98.22 against fp32's
58.49/84.08/93.75/98.08 (minimum passage cosine 0.946) in 0.68 of fp32's time, and with the feed-forward outputs kept
57.57/83.80/93.66/98.08 (cosine 0.968) in 0.93 of it. `taser bench --only encoding precision` measures both speed
(timed round-robin) and R@K on the machine it runs on.

int8 is for encoding a corpus to search: never for training (there is no backward through these kernels) and never
for the book's verdicts. Where speed and recall trade off is a measurement, not a rule: the precision benchmark
reports int8's encoding speed-up over fp32 and over `auto`, and its R@1/5/20/100 against fp32's.

PyTorch deprecates eager-mode quantisation in favour of torchao; it still runs in the torch this project pins, and
the warnings it prints on every conversion are silenced here, once, around the conversion.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError
from .encoding import DenseEncoder, _weights_key

# The suffix of BERT's feed-forward output projection ("layer.N.output.dense"; an attention block's own output,
# "layer.N.attention.output.dense", is not matched), for `keep_fp32`.
FFN_OUTPUT = "output.dense"
PRECISION = "int8"


def _kept(name: str, keep: Sequence[str]) -> bool:
    return any(name.endswith(suffix) and ".attention." not in f".{name}" for suffix in keep)


def quantised_linears(model: nn.Module, keep_fp32: Sequence[str] = ()) -> list[str]:
    """The names of `model`'s linear layers that `int8_copy` quantises: all but those whose names end in one of
    `keep_fp32` (an attention block's own output projection is never matched by a feed-forward suffix)."""
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and not _kept(name, keep_fp32)]


def int8_copy(model: nn.Module, keep_fp32: Sequence[str] = ()) -> nn.Module:
    """An eval-mode copy of `model` (left unchanged) whose linears, but those named in `keep_fp32`, are dynamically
    quantised int8 linears (module docstring). CPU only."""
    if next(model.parameters()).device.type != "cpu":
        raise ConfigError("int8 encoding runs on the CPU only (PyTorch's dynamic quantisation has no GPU kernels)")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    clone = copy.deepcopy(model).float().eval()
    spec = {name: per_channel_dynamic_qconfig for name in quantised_linears(clone, keep_fp32)}
    if not spec:
        raise ConfigError(f"{type(model).__name__} has no linear layer to quantise")
    with warnings.catch_warnings():  # torch.ao's deprecation notices, printed on every call (module docstring)
        warnings.simplefilter("ignore", category=UserWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=FutureWarning)
        return quantize_dynamic(clone, spec, dtype=torch.qint8)


class Int8Encoder(DenseEncoder):
    """A `DenseEncoder` that encodes with `int8_copy(model)` (kept while the model's weights stay the same); its
    `resolved_precision` is "int8", which index manifests record, so a folder is never resumed at another precision.
    Queries and passages both run quantised; a caller may encode queries with a float encoder of the same model
    (`taser search` does)."""

    def __init__(self, model, tokenizer, *, keep_fp32: Sequence[str] = (), **kwargs):
        if kwargs.pop("precision", PRECISION) not in (PRECISION, "fp32"):
            raise ConfigError("Int8Encoder runs int8; make a DenseEncoder for fp32, bf16 or auto")
        if kwargs.pop("fuse_cpu_linears", None):
            raise ConfigError("oneDNN's fused float linears do not apply to int8 linears")
        super().__init__(model, tokenizer, precision="fp32", fuse_cpu_linears=False, **kwargs)
        if self.device.type != "cpu":
            raise ConfigError(f"int8 encoding runs on the CPU only, not {self.device}")
        self.keep_fp32 = tuple(keep_fp32)
        self._int8: tuple[tuple, nn.Module] | None = None

    @property
    def resolved_precision(self) -> str:
        return PRECISION

    def running_model(self) -> nn.Module:
        key = _weights_key(self.model)
        if self._int8 is None or self._int8[0] != key:
            self._int8 = None  # free the stale copy before making the next
            self._int8 = (key, int8_copy(self.model, self.keep_fp32))
        return self._int8[1]


def int8_encoder(encoder: DenseEncoder, keep_fp32: Sequence[str] = ()) -> Int8Encoder:
    """`encoder`'s model, tokenizer and settings as an `Int8Encoder`."""
    return Int8Encoder(encoder.model, encoder.tokenizer, keep_fp32=keep_fp32,
                       max_query_length=encoder.max_query_length, max_passage_length=encoder.max_passage_length,
                       batch_size=encoder.batch_size, device=encoder.device, show_progress=encoder.show_progress,
                       passage_format=encoder.passage_format)


__all__ = ["FFN_OUTPUT", "Int8Encoder", "int8_copy", "int8_encoder", "quantised_linears"]
