"""The precision probe and the fused linears left the core for the optional `taser_lib.speed` (issue 49): the core
imports none of it and runs plainly without it (auto is fp32 on a CPU, stock kernels), and with it installed the
encoder and the precision choice give what they gave before the move, bit for bit (the old code run from git).
"""

from __future__ import annotations

import json
import os
import io
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE = "ae77a4c"  # the revision before the move

# Runs under either revision: the same encodes and choices, read from where each revision keeps them.
SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import taser_lib, taser_lib.speed
    from taser_lib.models import load_encoder
    from taser_lib.models.precision import resolve_precision
    try:
        from taser_lib.speed import precision as P, fused as F
    except ImportError:  # before the move
        from taser_lib.models import precision as P, fused as F

    # A quiet probe that picks bf16 for encoding and fp32 for training, and fusion trials that pick fused at fp32 and
    # stock at bf16: stored first, so neither revision measures (a measurement is timing, not code)
    probe = P.PrecisionProbe(P.machine_key(), {"encode": {"fp32": 2.0, "bf16": 1.0},
                                               "train": {"fp32": 1.0, "bf16": 1.0}}, 1.0)
    P.store_probe(P.PROBE_FILE, P.machine_key(), probe)
    shape = F.model_shape(load_encoder("tiny").model)
    for dtype, ratios in (("fp32", (1.2, 1.3)), ("bf16", (0.8, 0.9))):
        F.store_probe(F.PROBE_FILE, F._trial_key(dtype, shape), F.FusionTrial(P.machine_key(), dtype, shape, ratios))

    out = {"file": taser_lib.__file__, "resolved": {}, "encoded": {}}
    for precision in ("fp32", "bf16", "auto"):
        for device in ("cpu", "meta"):
            for purpose in ("encode", "train"):
                out["resolved"][f"{precision} {device} {purpose}"] = resolve_precision(precision, device, purpose)
    texts = [f"question {i} about the river number {i} and its {'long ' * (i % 7)}valley" for i in range(24)]
    passages = [(f"title {i}", f"passage {i} " + "words of text " * (i % 11)) for i in range(24)]
    for precision in ("fp32", "bf16", "auto"):
        for fuse in (None, False, True):
            encoder = load_encoder("tiny", batch_size=2, precision=precision, fuse_cpu_linears=fuse)
            encoder.show_progress = False
            digest = hashlib.sha256(encoder.encode_queries(texts).tobytes())
            digest.update(encoder.encode_passages(passages).tobytes())
            out["encoded"][f"{precision} {fuse}"] = digest.hexdigest()
    out["precision_record"] = P.precision_record()
    out["fusion_record"] = F.fusion_record()
    print(json.dumps(out, sort_keys=True))
""")


def _run(code: str, path: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(path), "TASER_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code], cwd=cache, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_encoder_and_the_precision_choice_are_what_they_were_before_the_move(tmp_path):
    before = tmp_path / "before"
    before.mkdir()
    archive = subprocess.run(["git", "archive", BEFORE, "taser_lib"], cwd=REPO, check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(before, filter="data")
    outputs = []
    for name, path in (("before", before), ("now", REPO)):
        cache = tmp_path / f"cache-{name}"
        cache.mkdir()
        done = _run(SCRIPT, path, cache)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    old, new = outputs
    assert old.pop("file") == str(before / "taser_lib" / "__init__.py") and new.pop("file") == str(
        REPO / "taser_lib" / "__init__.py")  # each ran its own revision
    assert old == new
    # the comparison sees both precisions and both kernel choices
    assert {"fp32", "bf16"} == set(new["resolved"].values())
    assert len(set(new["encoded"].values())) > 1


def test_the_core_runs_without_the_speed_package(tmp_path):
    code = textwrap.dedent("""
        import sys
        from taser_lib.errors import ConfigError
        from taser_lib.models import load_encoder
        from taser_lib.models.precision import resolve_precision
        import taser_lib.training.loop, taser_lib.retrieval, taser_lib.evaluation
        print(sorted(m for m in sys.modules if m.startswith("taser_lib.speed")))
        print(resolve_precision("auto", "cpu"), resolve_precision("auto", "cpu", "train"))
        encoder = load_encoder("tiny", batch_size=2, precision="auto")
        encoder.show_progress = False
        print(encoder.encode_queries(["a question", "another question"]).shape)
        try:
            load_encoder("tiny", fuse_cpu_linears=True).encode_queries(["a question"])
        except ConfigError as err:
            print("error:", err)
        import taser_lib.speed
        from taser_lib.plugins import speed
        print(speed.cpu_precision is not None and speed.kernels is not None)
    """)
    done = _run(code, REPO, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "[]"                       # nothing of taser_lib.speed loaded
    assert lines[1] == "fp32 fp32"                # auto on a CPU without the probe
    assert lines[2].startswith("(2, ")            # it encodes
    assert lines[3].startswith("error: fuse_cpu_linears=True needs the optional speed package")
    assert lines[4] == "True"                     # importing it installs both


def test_a_result_records_the_precision_and_kernel_choices_the_speed_package_made(tmp_path, monkeypatch):
    import pandas as pd

    from taser_book.results import read_meta, save_result
    from taser_lib.models import load_encoder
    from taser_lib.speed import fused, precision

    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path / "cache"))
    fused._DECIDED.clear()
    encoder = load_encoder("tiny", batch_size=2, precision="auto")
    encoder.show_progress = False
    encoder.encode_queries(["a question", "another question"])  # too few batches for a trial: stock, recorded
    save_result(tmp_path / "page", "table", pd.DataFrame({"x": [1]}))
    meta = read_meta(tmp_path / "page")
    assert meta["precision"] == precision.precision_record() and "encode" in meta["precision"]["auto"]
    assert meta["fused_linears"] == fused.fusion_record() and list(meta["fused_linears"]["fused"].values()) == [False]
    fused._DECIDED.clear()
