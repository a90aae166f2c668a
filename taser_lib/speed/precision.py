"""What precision `auto` means on this CPU: measured once per machine, for encoding and for training.

    >>> from taser_lib.speed.precision import cpu_precision, precision_record
    >>> cpu_precision("train")      # "bf16" where this CPU measured bf16 training faster, else "fp32"

The core's `models.precision.resolve_precision` asks this module (through `taser_lib.plugins`, installed by importing
`taser_lib.speed`) what `auto` means on a CPU. A CPU without native bfloat16 instructions (avx512_bf16 / AMX)
emulates bf16 through float32 and is never faster, so it gets fp32 without a probe; on one with them, a short probe
(`measure_cpu_precision`: a BERT layer at the default model's width, forward for encoding, forward and backward for
training, each in fp32 and bf16, median of 3) picks bf16 for a purpose only where it is at least `MIN_SPEEDUP` times
faster and its outputs keep a cosine of at least `MIN_COSINE` to fp32. A 2-core Xeon that reports avx512_bf16 ran
bf16 encoding at 0.68x fp32: flags alone chose the slower one. The probe runs once per machine (CPU model, cores,
threads, torch version) and is cached in `$TASER_CACHE_DIR/precision-probe.json` (default ~/.cache/taser);
`precision_record()` gives the probe and the choices made in this process, which every result's meta records.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from ..io import atomic_write_json
from ..meta import machine_description
from ..models.precision import autocast
from ..models.weights import ENV_CACHE_DIR, cache_dir  # noqa: F401 (ENV_CACHE_DIR: the tests set it through here)

Resolved = Literal["fp32", "bf16"]
# /proc/cpuinfo flags of native bfloat16 arithmetic: AVX-512 BF16 (AMD Zen 4+, Intel Cooper Lake+) and AMX.
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
MIN_SPEEDUP = 1.1    # bf16 must be this much faster than fp32 to be chosen: a tie would cost accuracy for nothing
MIN_COSINE = 0.999   # the bench's quality bar: bf16 outputs against fp32's
PROBE_VERSION = 2    # part of the cache key: a changed probe measures again (2: fp32 and bf16 timed in turns)
ISA_LIMIT_ENVS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")
BUSY_LOAD = 0.5      # a probe started with more runnable processes per core than this is measured again when quiet
PROBE_FILE = "precision-probe.json"


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


def cpu_precision(purpose: str) -> Resolved:
    """What `auto` means on this CPU for `purpose` (encode | train): what `cpu_precision_probe` measured faster, fp32
    without native bf16 (unprobed); recorded for `precision_record`."""
    choice = cpu_precision_probe().choice(purpose) if cpu_has_native_bf16() else "fp32"
    _CHOICES[purpose] = choice
    return choice


# --- the CPU probe ------------------------------------------------------------------------------------------------

_CHOICES: dict[str, str] = {}  # what `auto` resolved to on the CPU in this process, per purpose


@dataclass(frozen=True)
class PrecisionProbe:
    """One machine's measurement: median seconds per purpose and precision, and the lowest cosine of bf16 outputs
    to fp32's (encoding)."""

    machine: str
    seconds: dict[str, dict[str, float]]  # {"encode": {"fp32": s, "bf16": s}, "train": {...}}
    cosine: float
    load_per_core: float | None = None    # the 1-minute load average per core when it started

    @property
    def busy(self) -> bool:
        """Started on a busy machine (other work on the cores): its times may not hold on a quiet one, so it stands
        in only until a process finds the machine quiet and measures again (`cached_probe`)."""
        return self.load_per_core is not None and self.load_per_core > BUSY_LOAD

    def speedup(self, purpose: str) -> float:
        """fp32 seconds over bf16 seconds: above 1, bf16 is faster."""
        times = self.seconds[purpose]
        return times["fp32"] / times["bf16"]

    def choice(self, purpose: str) -> Resolved:
        ok = self.cosine >= MIN_COSINE and self.speedup(purpose) >= MIN_SPEEDUP
        return "bf16" if ok else "fp32"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "speedup": {p: round(self.speedup(p), 3) for p in self.seconds},
                "choice": {p: self.choice(p) for p in self.seconds}, "busy": self.busy}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrecisionProbe":
        load = data.get("load_per_core")
        return cls(str(data["machine"]), {p: {k: float(v) for k, v in t.items()} for p, t in data["seconds"].items()},
                   float(data["cosine"]), None if load is None else float(load))


def isa_limit() -> str | None:
    """The instruction-set cap oneDNN (torch's CPU kernels for bf16, int8 and fused ops) runs under, when the
    environment sets one: `ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16` on a CPU with AMX makes it a CPU without AMX (its bf16
    matmuls then run at about half fp32's speed). None when unset."""
    for env in ISA_LIMIT_ENVS:
        if os.environ.get(env):
            return os.environ[env].strip().upper()
    return None


def machine_key() -> str:
    """What a probe's answer depends on: the CPU model, its cores, the threads torch uses, torch's version and
    oneDNN's instruction-set cap (a capped AMX CPU is another CPU for bf16)."""
    cpu = machine_description()
    cap = isa_limit()
    return (f"{cpu['cpu']} | {cpu['cpu_cores']} cores | {torch.get_num_threads()} threads | torch {torch.__version__}"
            + (f" | oneDNN <= {cap}" if cap else "") + f" | probe {PROBE_VERSION}")


def load_per_core() -> float | None:
    """The 1-minute load average per core (None where the OS has none): how busy the machine is."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return None


def machine_is_busy() -> bool:
    """More than BUSY_LOAD runnable processes per core over the last minute (False where the OS gives no load)."""
    load = load_per_core()
    return load is not None and load > BUSY_LOAD


def probe_cache_path(file: str = PROBE_FILE) -> Path:
    return cache_dir() / file


def measure_cpu_precision(*, hidden: int = 384, layers: int = 1, heads: int = 12, batch: int = 4,
                          length: int = 128, repeats: int = 3,
                          timer: Callable[[], float] = time.perf_counter) -> PrecisionProbe:
    """Time `layers` random BERT layers of the default model's width on the CPU, fp32 against bf16: encoding (a bf16
    copy, forward only, as `DenseEncoder` runs) and training (fp32 weights under bf16 autocast, forward and
    backward, as the training loop runs); after one warm-up each, the two precisions take turns `repeats` times
    (fp32, bf16, fp32, ...), so that load which comes and goes slows both alike; the median of each."""
    from transformers import BertConfig, BertModel

    generator = torch.Generator().manual_seed(0)
    config = BertConfig(vocab_size=512, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                        intermediate_size=4 * hidden, max_position_embeddings=max(512, length))
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = BertModel(config, add_pooling_layer=False)
    ids = torch.randint(0, config.vocab_size, (batch, length), generator=generator)

    def timed(steps: dict[str, Callable[[], Any]]) -> dict[str, float]:
        for step in steps.values():
            step()
        times: dict[str, list[float]] = {name: [] for name in steps}
        for _ in range(repeats):
            for name, step in steps.items():
                start = timer()
                step()
                times[name].append(timer() - start)
        return {name: statistics.median(t) for name, t in times.items()}

    load = load_per_core()
    outputs: dict[str, torch.Tensor] = {}
    low = {"fp32": model.eval(), "bf16": BertModel(config, add_pooling_layer=False).eval()}
    low["bf16"].load_state_dict(model.state_dict())
    low["bf16"].to(torch.bfloat16)
    train_copy = BertModel(config, add_pooling_layer=False).train()  # fp32 weights for both: autocast decides
    train_copy.load_state_dict(model.state_dict())

    def encode(name: str):
        def step():
            with torch.inference_mode():
                outputs[name] = low[name](input_ids=ids).last_hidden_state.float()
        return step

    def train(name: str):
        def step():
            train_copy.zero_grad(set_to_none=True)
            with autocast(name, "cpu"):
                loss = train_copy(input_ids=ids).last_hidden_state.float().pow(2).mean()
            loss.backward()
        return step

    seconds = {"encode": timed({name: encode(name) for name in ("fp32", "bf16")}),
               "train": timed({name: train(name) for name in ("fp32", "bf16")})}
    cosine = torch.nn.functional.cosine_similarity(outputs["fp32"].flatten(0, 1), outputs["bf16"].flatten(0, 1),
                                                   dim=-1).min().item()
    return PrecisionProbe(machine_key(), seconds, round(cosine, 6), None if load is None else round(load, 3))


def _probe_entries(file: str) -> dict[str, Any]:
    try:
        cached = json.loads(probe_cache_path(file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cached if isinstance(cached, dict) else {}


def read_probe(file: str, key: str, parse: Callable[[dict], Any]):
    """The probe result stored under `key` in `$TASER_CACHE_DIR/<file>`, or None (none there, or damaged)."""
    entry = _probe_entries(file).get(key)
    if not isinstance(entry, dict):
        return None
    try:
        return parse(entry)
    except (KeyError, TypeError, ValueError):
        return None


def store_probe(file: str, key: str, result) -> None:
    """Add `result.as_dict()` under `key` to `$TASER_CACHE_DIR/<file>` (atomically); a cache that cannot be written
    is left alone, never an error."""
    try:
        atomic_write_json(probe_cache_path(file), {**_probe_entries(file), key: result.as_dict()})
    except OSError:
        pass


def cached_probe(file: str, measure: Callable[[], Any], parse: Callable[[dict], Any], *, key: str | None = None):
    """A machine probe's result: read from `$TASER_CACHE_DIR/<file>` when it holds one for `key` (default
    `machine_key()`), else `measure()`d now and added to the file (`result.as_dict()`). A result measured on a busy
    machine (`busy`) is cached too, so that the processes of a busy machine (two kernels, test workers) measure once,
    not once each; the first process that finds the machine quiet measures again and replaces it. A quiet result is
    never replaced. A cache that cannot be read or written is measured around, never an error; a damaged entry is
    measured again."""
    key = key or machine_key()
    result = read_probe(file, key, parse)
    if result is not None and getattr(result, "busy", False) and not machine_is_busy():
        result = None  # measured while other work ran, and the machine is quiet now: measure again
    if result is None:
        result = measure()
        store_probe(file, key, result)
    return result


@functools.lru_cache(maxsize=1)
def cpu_precision_probe() -> PrecisionProbe:
    """This machine's probe (`measure_cpu_precision`, a few seconds), measured once and cached (`cached_probe`)."""
    return cached_probe(PROBE_FILE, measure_cpu_precision, PrecisionProbe.from_dict)


def precision_record() -> dict[str, Any]:
    """What `auto` resolved to on the CPU in this process, per purpose, with the probe behind it (None when the CPU
    has no native bf16 or nothing was resolved): for a result's meta."""
    probe = cpu_precision_probe() if _CHOICES and cpu_has_native_bf16() else None
    return {"auto": dict(_CHOICES), "native_bf16": cpu_has_native_bf16(),
            "probe": probe.as_dict() if probe is not None else None}


__all__ = ["MIN_COSINE", "MIN_SPEEDUP", "NATIVE_BF16_FLAGS", "PrecisionProbe", "cached_probe", "cpu_flags",
           "cpu_has_native_bf16", "cpu_precision", "cpu_precision_probe", "isa_limit", "load_per_core", "machine_key",
           "measure_cpu_precision", "precision_record"]
