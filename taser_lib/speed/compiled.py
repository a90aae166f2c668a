"""Encoding compiled by `torch.compile`: a `DenseEncoder` whose forward runs as Inductor's generated kernels, for
encoding a corpus to search on a CPU.

    >>> encoder = compiled_encoder(load_encoder("default", precision="auto"))   # or `taser index ... --compile`
    >>> vectors = encoder.encode_passages(passages)   # the first batch compiles (30-50 s on 2 cores)

Inductor with `freezing` (`torch._inductor.config.freezing`) treats the weights of the model it compiles as constants,
which lets it pack them once for its CPU kernels and fold what depends on them alone; what else it fuses is Inductor's
choice and was not inspected here. Shapes are compiled dynamic (`dynamic=True`), so the encoder's length-sorted batches
of varying width run one graph and do not recompile per width. The compiled graph is made for the precision the encoder
resolves (a copy of the model at fp32, or its bf16 copy) and made again when the model's weights change; its vectors
match the eager forward's to rounding (`tests/test_compiled.py`: cosine >= 0.9999). Each such remaking is a compilation
that torch's compile cache keeps (`torch._dynamo.config.cache_size_limit` of them per function, 8 by default, beyond
which it runs eagerly).

Measured on a 2-core AMD EPYC with AVX-512 bf16 (SQuAD-open passages, batch 64, up to 256 tokens, the packaged
MiniLM at `auto`, i.e. bf16), eager against compiled in turn, three rounds: compiled took about 0.77 of eager's time;
its first batch, the compilation, took 52 s (29 s in the peers run). `taser bench --only peers` times it beside the
other contenders.

For indexing, never for training (freezing treats the weights as constants, and the compiled graph has no backward);
it needs a C++ compiler on the machine, which Inductor calls.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..models.encoding import DenseEncoder, _weights_key


class CompiledModel(nn.Module):
    """`model`'s `encode_query` and `encode_passage`, each compiled with Inductor (frozen weights, dynamic shapes);
    `model` stays its submodule, so its parameters and shape are still read through this one."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model.eval()
        self._query = torch.compile(model.encode_query, dynamic=True)
        self._passage = torch.compile(model.encode_passage, dynamic=True)

    def _call(self, fn, **inputs: Any):
        import torch._inductor.config as inductor

        with inductor.patch(freezing=True):  # a (re)compilation may happen on any call: freezing on every one
            return fn(**inputs)

    def encode_query(self, **inputs: Any):
        return self._call(self._query, **inputs)

    def encode_passage(self, **inputs: Any):
        return self._call(self._passage, **inputs)


class CompiledEncoder(DenseEncoder):
    """A `DenseEncoder` that runs its resolved-precision model compiled (`CompiledModel`, module docstring); its
    `resolved_precision` is "<fp32|bf16>-compiled", which index manifests record."""

    def __init__(self, model, tokenizer, **kwargs):
        if kwargs.pop("fuse_cpu_linears", None):
            raise ConfigError("a compiled encoder fuses its own linears: fuse_cpu_linears does not apply")
        super().__init__(model, tokenizer, fuse_cpu_linears=False, **kwargs)
        # the eager encoder of the same model picks and keeps the model to compile (fp32, or its bf16 copy)
        self._eager = DenseEncoder(self.model, tokenizer, precision=self.precision, device=self.device)
        self._compiled: tuple[tuple, CompiledModel] | None = None

    @property
    def resolved_precision(self) -> str:
        return f"{self._eager.resolved_precision}-compiled"

    def running_model(self) -> nn.Module:
        base = self._eager.running_model()
        key = (_weights_key(self.model), id(base))
        if self._compiled is None or self._compiled[0] != key:
            self._compiled = None
            # freezing bakes the weights into the graph and the graph is cached by the parameters' identity: the
            # model itself, updated in place, would keep running its old weights, so a copy of it is compiled
            self._compiled = (key, CompiledModel(copy.deepcopy(base) if base is self.model else base))
        return self._compiled[1]


def compiled_encoder(encoder: DenseEncoder) -> CompiledEncoder:
    """`encoder`'s model, tokenizer and settings (its precision included) as a `CompiledEncoder`."""
    return CompiledEncoder(encoder.model, encoder.tokenizer, precision=encoder.precision,
                           max_query_length=encoder.max_query_length, max_passage_length=encoder.max_passage_length,
                           batch_size=encoder.batch_size, device=encoder.device, show_progress=encoder.show_progress,
                           passage_format=encoder.passage_format)


__all__ = ["CompiledEncoder", "CompiledModel", "compiled_encoder"]
