"""int8 encoding for indexing a large corpus on a CPU: a `DenseEncoder` whose linear layers run dynamically quantised.

    >>> encoder = int8_encoder(load_encoder("default"))           # or `taser index ... --precision int8`
    >>> shards = encode_stream_to_shards(encoder, iter_corpus_file("psgs_w100.tsv"), "index/embeddings")

`int8_copy` quantises a copy of the model with PyTorch's dynamic quantisation (`torch.ao.quantization.
quantize_dynamic`): each linear layer's weights are stored as int8, one scale per output channel, and each batch's
activations are quantised on the fly, one scale per tensor; the products run on int8 kernels (VNNI / AMX where the
CPU has them) and come back as float32. Embeddings, layer norms, softmax and pooling stay float32.

Every linear is quantised by default. `keep_fp32` names linears to keep in float32, e.g. `FFN_OUTPUT`, the
feed-forward output projection of every layer, whose inputs (the GELU activations) have a few large values that make
a per-tensor activation scale coarse. Keeping it raised the vectors' cosine to fp32 but did not help retrieval: with
x86's kernels, measured beside other jobs, one pass each, it gave R@1/5/20/100 of 57.57/83.80/93.66/98.08 (minimum
passage cosine 0.968) in 0.93 of fp32's time, against 58.03/84.22/93.84/98.22 (cosine 0.946) in 0.68 of it with
every linear at int8.

int8 is for encoding a corpus to search: never for training (there is no backward through these kernels) and never
for the book's verdicts. Where speed and recall trade off is a measurement, not a rule: the precision benchmark
reports int8's encoding speed-up over fp32 and over `auto`, and its R@1/5/20/100 against fp32's.

Which int8 kernels: PyTorch packs a quantised linear's weights for one engine (fbgemm, oneDNN, or "x86", its own
pick between them) when the copy is made, and the packed weights run on that engine's kernels from then on. A fourth
engine, "onnxruntime" (`speed.onnx_int8`, where onnxruntime and onnx are installed), runs the model as an ONNX
Runtime graph with fused attention and layer norms and int8 weights, one scale per output channel. A fifth,
"inductor" (`speed.inductor_int8`, where torchao and a C++ compiler are), exports the model, quantises it with
torchao's PT2E quantiser for x86 (static activation scales, observed on the first batch it encodes) and compiles it
with Inductor onto oneDNN's int8 linears. Which is fastest depends on the CPU, so `engine=None` (the default) takes the engine a short cached probe measured fastest on
this machine (`int8_engine_probe`: one random BERT layer at the default model's width on a padded batch of 32
inputs of up to 256 tokens, the median of 5 rounds that time every engine in turn), as `auto` precision does;
with `keep_fp32`, its fastest PyTorch engine. The engines round differently, and speed is all the probe weighs. On
a quiet 2-core Xeon with AMX (`taser bench --only precision`, SQuAD-open, questions at fp32; before ONNX Runtime was
an engine, with the probe's earlier, smaller batch) the probe chose oneDNN (13.8 ms against 16.9 for x86 and 17.0 for
fbgemm): R@1/5/20/100 57.53/83.58/93.61/98.27 against fp32's
58.49/84.08/93.75/98.08 in 0.59 of its time; packed for x86 the same corpus gave 58.03/84.22/93.84/98.22 in 0.78 of
it. `engine="x86"` trades that speed for R@1.

PyTorch deprecates eager-mode quantisation in favour of torchao; it still runs in the torch this project pins, and
the warnings it prints on every conversion are silenced here, once, around the conversion.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from . import inductor_int8, onnx_int8
from ..models.encoding import DenseEncoder, _weights_key
from .precision import cached_probe, machine_key

# The suffix of BERT's feed-forward output projection ("layer.N.output.dense"; an attention block's own output,
# "layer.N.attention.output.dense", is not matched), for `keep_fp32`.
FFN_OUTPUT = "output.dense"
PRECISION = "int8"


TORCH_ENGINES = ("fbgemm", "onednn", "x86")  # PyTorch's server-CPU int8 engines (qnnpack is for mobile ARM)
# and ONNX Runtime's (`speed.onnx_int8`) and Inductor's compiled graphs (`speed.inductor_int8`), where installed
ENGINES = (*TORCH_ENGINES, onnx_int8.ENGINE, inductor_int8.ENGINE)
OTHER_ENGINES = {onnx_int8.ENGINE: onnx_int8, inductor_int8.ENGINE: inductor_int8}
ENGINE_PROBE_FILE = "int8-engine-probe.json"
# 2: ONNX Runtime joined the engines; 3: a padded corpus-sized batch (measure_int8_engines); 4: Inductor joined
ENGINE_PROBE_VERSION = 4


def available_engines() -> list[str]:
    """The int8 engines of `ENGINES` this machine has: the PyTorch engines its torch build supports, ONNX
    Runtime's where onnxruntime and onnx are installed, and Inductor's where torchao and a C++ compiler are."""
    torch_engines = [e for e in TORCH_ENGINES if e in torch.backends.quantized.supported_engines]
    return torch_engines + [name for name, module in OTHER_ENGINES.items() if module.available()]


def check_engine(engine: str) -> str:
    if engine not in available_engines():
        raise ConfigError(f"int8 engine must be one of {', '.join(available_engines())}, got {engine!r}")
    return engine


@contextlib.contextmanager
def quantized_engine(engine: str) -> Iterator[None]:
    """Within the block, PyTorch packs quantised weights for `engine` (ONNX Runtime's: nothing to set)."""
    check_engine(engine)
    if engine not in TORCH_ENGINES:
        yield
        return
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


@dataclass(frozen=True)
class EngineProbe:
    """One machine's measurement: median seconds of the probe's forward per int8 engine."""

    machine: str
    seconds: dict[str, float]

    @property
    def choice(self) -> str:
        return min(self.seconds, key=self.seconds.get)

    def fastest(self, among: Sequence[str]) -> str:
        """The fastest of the engines `among` that were measured (the overall choice when none was)."""
        measured = {e: s for e, s in self.seconds.items() if e in among}
        return min(measured, key=measured.get) if measured else self.choice

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "choice": self.choice}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EngineProbe":
        seconds = {str(k): float(v) for k, v in data["seconds"].items()}
        if not seconds or not set(seconds) <= set(ENGINES):
            raise ValueError(f"not an int8 engine probe: {sorted(seconds)}")
        return cls(str(data["machine"]), seconds)


def measure_int8_engines(*, hidden: int = 384, heads: int = 12, batch: int = 32, length: int = 256, repeats: int = 5,
                         timer: Callable[[], float] = time.perf_counter) -> EngineProbe:
    """Time one random BERT layer of the default model's width, its linears quantised for each available engine
    (`int8_copy`), forward only, on a batch shaped like a corpus encoding's: `batch` inputs padded to `length`
    tokens, each with a seeded number of real tokens between half and all of them (an attention mask). One warm-up
    each, then `repeats` rounds timing every engine in turn; the median per engine.

    The shape matters: on the project's 2-core AMD EPYC (AVX2), quiet, a batch of 8 unpadded 128-token inputs (this
    probe's shape until 2026-11-30) timed PyTorch's x86 engine at 35.7 ms, ONNX Runtime at 37.1 and oneDNN at 60.7,
    while 32 padded inputs of up to 256 tokens timed ONNX Runtime at 250 ms, oneDNN at 293 and x86 at 340; the
    whole model on 64 such inputs ranked them as the latter (2.81, 3.21, 3.44 s)."""
    from transformers import BertConfig, BertModel

    # more words than positions: ONNX Runtime's embedding fusion takes the larger table for the word embeddings
    config = BertConfig(vocab_size=1024, hidden_size=hidden, num_hidden_layers=1, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=max(512, length))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config, add_pooling_layer=False).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch, length), generator=generator)
    real = torch.randint(max(1, length // 2), length + 1, (batch,), generator=generator)
    inputs = {"input_ids": ids, "attention_mask": (torch.arange(length)[None] < real[:, None]).long()}
    nets = {engine: int8_copy(model, engine=engine) for engine in available_engines()}
    with torch.inference_mode():
        for engine, net in list(nets.items()):
            try:
                net(**inputs)  # ONNX Runtime's engine builds its session here
            except Exception as err:  # noqa: BLE001 - an engine that cannot run here is not a choice (warned)
                if engine in TORCH_ENGINES:
                    raise
                del nets[engine]
                warnings.warn(f"int8 engine {engine} left out of the probe: it failed to build or run here "
                              f"({type(err).__name__}: {str(err)[:200]})", RuntimeWarning, stacklevel=2)
        times: dict[str, list[float]] = {engine: [] for engine in nets}
        for _ in range(repeats):  # round-robin: a change in the machine's load falls on every engine alike
            for engine, net in nets.items():
                start = timer()
                net(**inputs)
                times[engine].append(timer() - start)
    seconds = {engine: statistics.median(t) for engine, t in times.items()}
    return EngineProbe(_probe_key(), seconds)


@functools.lru_cache(maxsize=1)
def int8_engine_probe() -> EngineProbe:
    """This machine's engine probe (`measure_int8_engines`, a few seconds), measured once and cached in
    `$TASER_CACHE_DIR/int8-engine-probe.json` under the machine, its threads and torch's version."""
    return cached_probe(ENGINE_PROBE_FILE, measure_int8_engines, EngineProbe.from_dict, key=_probe_key())


def pick_engine(keep_fp32: Sequence[str] = ()) -> str:
    """The engine `int8_copy` packs for when none is given: the probe's fastest, or its fastest PyTorch engine when
    linears are to be kept in float32 (only PyTorch's engines keep some)."""
    probe = int8_engine_probe()
    return probe.fastest(TORCH_ENGINES) if keep_fp32 else probe.choice


def _probe_key() -> str:
    """The machine, its threads, torch's version and the engines there are to measure (installing onnxruntime
    measures again)."""
    return f"{machine_key()} | int8 probe {ENGINE_PROBE_VERSION} | {', '.join(available_engines())}"


def _kept(name: str, keep: Sequence[str]) -> bool:
    return any(name.endswith(suffix) and ".attention." not in f".{name}" for suffix in keep)


def quantised_linears(model: nn.Module, keep_fp32: Sequence[str] = ()) -> list[str]:
    """The names of `model`'s linear layers that `int8_copy` quantises: all but those whose names end in one of
    `keep_fp32` (an attention block's own output projection is never matched by a feed-forward suffix)."""
    return [name for name, module in model.named_modules()
            if isinstance(module, nn.Linear) and not _kept(name, keep_fp32)]


def int8_copy(model: nn.Module, keep_fp32: Sequence[str] = (), engine: str | None = None) -> nn.Module:
    """An eval-mode copy of `model` (left unchanged) whose linears, but those named in `keep_fp32`, are dynamically
    quantised int8 linears packed for `engine` (None: the one `int8_engine_probe` measured fastest here; module
    docstring); for the onnxruntime engine, an `onnx_int8.OnnxInt8Model` of it. CPU only."""
    if next(model.parameters()).device.type != "cpu":
        raise ConfigError("int8 encoding runs on the CPU only (PyTorch's dynamic quantisation has no GPU kernels)")
    engine = engine or pick_engine(keep_fp32)
    if engine == onnx_int8.ENGINE:  # before PyTorch's copy below: the stand-in takes its own float copy
        check_engine(engine)
        return onnx_int8.OnnxInt8Model(model, keep_fp32)
    if engine == inductor_int8.ENGINE:
        check_engine(engine)
        return inductor_int8.InductorInt8Model(model, keep_fp32)
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    clone = copy.deepcopy(model).float().eval()
    spec = {name: per_channel_dynamic_qconfig for name in quantised_linears(clone, keep_fp32)}
    if not spec:
        raise ConfigError(f"{type(model).__name__} has no linear layer to quantise")
    with warnings.catch_warnings(), quantized_engine(engine):  # torch.ao's deprecation notices (module docstring)
        warnings.simplefilter("ignore", category=UserWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)
        warnings.simplefilter("ignore", category=FutureWarning)
        return quantize_dynamic(clone, spec, dtype=torch.qint8)


class Int8Encoder(DenseEncoder):
    """A `DenseEncoder` that encodes with `int8_copy(model)` (kept while the model's weights stay the same); its
    `resolved_precision` is "int8-<engine>" (e.g. "int8-x86", "int8-onnxruntime": the engines round differently),
    which index manifests record, so a folder is never resumed at another precision or on another engine.
    Queries and passages both run quantised; a caller may encode queries with a float encoder of the same model
    (`taser search` does)."""

    def __init__(self, model, tokenizer, *, keep_fp32: Sequence[str] = (), engine: str | None = None, **kwargs):
        if kwargs.pop("precision", PRECISION) not in (PRECISION, "fp32"):
            raise ConfigError("Int8Encoder runs int8; make a DenseEncoder for fp32, bf16 or auto")
        if kwargs.pop("fuse_cpu_linears", None):
            raise ConfigError("oneDNN's fused float linears do not apply to int8 linears")
        super().__init__(model, tokenizer, precision="fp32", fuse_cpu_linears=False, **kwargs)
        if self.device.type != "cpu":
            raise ConfigError(f"int8 encoding runs on the CPU only, not {self.device}")
        self.keep_fp32 = tuple(keep_fp32)
        self._engine = engine if engine is None else check_engine(engine)
        self._int8: tuple[tuple, nn.Module] | None = None

    @property
    def engine(self) -> str:
        """The int8 engine the copy is packed for: the one given, else the probe's choice."""
        return self._engine or pick_engine(self.keep_fp32)

    @property
    def resolved_precision(self) -> str:
        return f"{PRECISION}-{self.engine}"

    def running_model(self) -> nn.Module:
        key = _weights_key(self.model)
        if self._int8 is None or self._int8[0] != key:
            self._int8 = None  # free the stale copy before making the next
            self._int8 = (key, int8_copy(self.model, self.keep_fp32, self.engine))
        return self._int8[1]


def int8_encoder(encoder: DenseEncoder, keep_fp32: Sequence[str] = (), engine: str | None = None) -> Int8Encoder:
    """`encoder`'s model, tokenizer and settings as an `Int8Encoder`."""
    return Int8Encoder(encoder.model, encoder.tokenizer, keep_fp32=keep_fp32, engine=engine,
                       max_query_length=encoder.max_query_length, max_passage_length=encoder.max_passage_length,
                       batch_size=encoder.batch_size, device=encoder.device, show_progress=encoder.show_progress,
                       passage_format=encoder.passage_format)


__all__ = ["ENGINES", "EngineProbe", "FFN_OUTPUT", "Int8Encoder", "TORCH_ENGINES", "available_engines", "check_engine",
           "int8_copy", "int8_encoder", "int8_engine_probe", "measure_int8_engines", "pick_engine", "quantised_linears",
           "quantized_engine"]
