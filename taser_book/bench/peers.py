"""Benchmark `peers` (run only when named): passage encoding, ours against sentence-transformers' own fast backends,
in one run.

The peers run as a user installs them, in a separate environment (`make peers-env`: `sentence-transformers[onnx,
openvino]` and `datasets`, which its OpenVINO int8 export calibrates through, beside the packaged model; nothing of this
project), driven by `peers_worker.py` over a pipe: float32 and a bfloat16 cast on PyTorch, `backend="onnx"` as exported
and with `export_optimized_onnx_model(O3)`, its dynamic int8 export for this CPU's instruction set, `backend="openvino"`
and its static int8 export calibrated on the passages themselves (offline: no hub dataset). Ours runs here:
`DenseEncoder` at `auto`, at fp32, our int8 encoder for indexing (`taser_lib.speed.quantized`) and ours at `auto`
compiled by `torch.compile` (`taser_lib.speed.compiled`). All contenders encode the same SQuAD-open passages, as one
"title text" string each (the packaged model's convention), at the same batch size and maximum length, timed round-robin
(`core.interleaved`) after a one-batch warm-up each; a peer's time includes a pipe round trip of a few milliseconds.
Every vector is compared with our fp32 vectors (minimum cosine).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from taser_lib.errors import TaserError
from taser_lib.models import default_checkpoint
from taser_lib.models.encoding import passage_string
from taser_lib.speed.compiled import compiled_encoder
from taser_lib.speed.quantized import int8_encoder
from . import inputs
from .core import BenchConfig, interleaved, paired_ratio, rate, row
from .encoding import cosines

NAME = "peers"
TITLE = "Passage encoding vs sentence-transformers' own backends"
ENV_PYTHON = "TASER_PEERS_PYTHON"
FLOAT_PEERS = ("st_fp32", "st_bf16", "st_onnx", "st_onnx_O3", "st_openvino")
INT8_PEERS = ("st_onnx_int8", "st_openvino_int8")
WORKER = Path(__file__).with_name("peers_worker.py")


def peers_python() -> Path:
    """$TASER_PEERS_PYTHON, else the repository's .venv-peers (`make peers-env`)."""
    chosen = os.environ.get(ENV_PYTHON)
    path = Path(chosen) if chosen else Path(__file__).resolve().parents[2] / ".venv-peers" / "bin" / "python"
    if not path.is_file():
        raise TaserError(f"the peers' Python {path} is missing: run `make peers-env` (a separate environment with "
                         f"sentence-transformers[onnx,openvino]) or set {ENV_PYTHON}")
    return path


class Worker:
    """The peers' process: builds every contender at start, then encodes on request (`peers_worker.py`)."""

    def __init__(self, python: Path, setup: dict[str, Any], log: Path):
        self.work = Path(setup["work"])
        self.log = open(log, "w", encoding="utf-8")
        self.proc = subprocess.Popen([str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        self.hello = self._ask(setup)

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.flush()
            tail = Path(self.log.name).read_text(encoding="utf-8").strip().splitlines()[-5:]
            raise TaserError("the peers' worker stopped: " + " | ".join(tail))
        return json.loads(line)

    def encode(self, name: str) -> np.ndarray:
        self._ask({"encode": name})
        return np.load(self.work / f"{name}.npy")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)
        self.log.close()


def best(times: dict[str, list[float]], names: tuple[str, ...]) -> str | None:
    """The contender among `names` with the shortest median time."""
    timed = [n for n in names if n in times]
    return min(timed, key=lambda n: float(np.median(times[n]))) if timed else None


def run(cfg: BenchConfig) -> dict[str, Any]:
    if cfg.device != "cpu":
        raise TaserError("the peers benchmark compares CPU backends: run it with --device cpu")
    n, batch, max_length, repeats = cfg.pick(512, 16), cfg.pick(64, 8), 256, cfg.pick(3, 1)
    python = peers_python()
    pairs = inputs.passages(cfg, n)
    strings = [passage_string(t, x) for t, x in pairs]
    ours = inputs.encoder(cfg, batch_size=batch, max_passage_length=max_length, precision="auto")
    ours.show_progress = False
    if ours.passage_format != "concat":
        raise TaserError("the peers benchmark needs a model that reads one string per passage (the default)")
    fp32 = inputs.encoder(cfg, batch_size=batch, max_passage_length=max_length, precision="fp32")
    fp32.show_progress = False
    int8 = int8_encoder(fp32)
    int8.show_progress = False
    compiled = compiled_encoder(ours)
    compiled.show_progress = False
    with tempfile.TemporaryDirectory(prefix="taser-peers-") as tmp:
        work = Path(tmp)
        (work / "passages.json").write_text(json.dumps(strings), encoding="utf-8")
        worker = Worker(python, {"model": str(default_checkpoint()), "work": str(work),
                                 "passages": str(work / "passages.json"), "batch": batch, "max_length": max_length,
                                 "contenders": list(FLOAT_PEERS + INT8_PEERS)}, work / "worker.log")
        try:
            built = worker.hello["built"]
            fns = {"taser_lib": lambda: ours.encode_passages(pairs), "taser_lib_fp32": lambda: fp32.encode_passages(pairs),
                   "taser_lib_int8": lambda: int8.encode_passages(pairs),
                   "taser_lib_compiled": lambda: compiled.encode_passages(pairs)}
            for name, what in built.items():
                if what["ok"]:
                    fns[name] = lambda name=name: worker.encode(name)
            for encoder in (ours, fp32):  # warm-up on one batch (the peers warmed up as they were built)
                encoder.encode_passages(pairs[:batch])
            began = time.perf_counter()  # int8's warm-up may build its graph (the inductor engine), timed apart
            int8.encode_passages(pairs[:batch])
            int8_build_seconds = time.perf_counter() - began
            began = time.perf_counter()  # the compiled encoder's warm-up is its compilation, timed apart
            compiled.encode_passages(pairs[:batch])
            compile_seconds = time.perf_counter() - began
            times, out = interleaved(fns, repeats, "cpu", warmup=0)
        finally:
            worker.close()
    reference = out["taser_lib_fp32"]
    cosine = {name: float(cosines(np.asarray(v, dtype=np.float32), reference).min()) for name, v in out.items()}
    float_best, int8_best = best(times, FLOAT_PEERS), best(times, INT8_PEERS)
    over_float = paired_ratio(times[float_best], times["taser_lib"]) if float_best else None
    over_int8 = paired_ratio(times[int8_best], times["taser_lib_int8"]) if int8_best else None
    compiled_over_float = paired_ratio(times[float_best], times["taser_lib_compiled"]) if float_best else None
    rows = [row(f"passages/s, {name}", rate(n, t)["median"], "1/s") for name, t in times.items()]
    if over_float:
        rows.insert(0, row(f"ours at auto over their best float backend ({float_best})", over_float["median"], "x",
                           target=1.0, op=">"))
    if over_int8:
        rows.insert(1, row(f"our int8 over their best int8 backend ({int8_best})", over_int8["median"], "x",
                           target=1.0, op=">"))
    if compiled_over_float:
        label = f"ours at auto, compiled, over their best float backend ({float_best})"
        rows.insert(2 if over_int8 else 1, row(label, compiled_over_float["median"], "x", target=1.0, op=">"))
    rows += [row(f"min cosine({name}, our fp32)", value) for name, value in cosine.items() if name != "taser_lib_fp32"]
    notes = [f"{name}: could not be built here: {what['why']}" for name, what in built.items() if not what["ok"]]
    notes += [f"{name}: {what['what']}" for name, what in built.items() if what["ok"]]
    notes += [f"ours at auto ran at {ours.resolved_precision}; our int8 on the {int8.engine} engine (its probe's pick); "
              f"its warm-up batch (for the inductor engine: its export, calibration on that batch and compilation) "
              f"took {int8_build_seconds:.1f} s, left out as every contender's warm-up is",
              f"taser_lib_compiled: ours at auto compiled by torch.compile (taser_lib.speed.compiled, Inductor with "
              f"frozen weights); its compilation, {compile_seconds:.0f} s on its warm-up batch, is left out of its "
              f"times, as the peers' model loading and export are",
              "speed-ups are medians over rounds of (their seconds / our seconds), rounds timed back to back; "
              "the peers ran in a separate process of their own environment (the Python below), one at a time"]
    return {
        "rows": rows,
        "measured": {
            "seconds": times,
            "passages_per_second": {k: rate(n, v) for k, v in times.items()},
            "auto_over_best_float": over_float, "best_float": float_best,
            "int8_over_best_int8": over_int8, "best_int8": int8_best,
            "compiled_over_best_float": compiled_over_float, "compile_seconds": compile_seconds,
            "int8_build_seconds": int8_build_seconds,
            "min_cosine_to_our_fp32": cosine,
            "peers": built, "peers_versions": worker.hello["versions"], "peers_python": worker.hello["python"],
            "precision": ours.resolved_precision, "int8_engine": int8.engine,
        },
        "sizes": {"passages": n, "batch_size": batch, "max_length": max_length, "repeats": repeats},
        "notes": notes,
    }
