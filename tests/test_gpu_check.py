"""`make gpu-bundle` / `make gpu-check` (tools/): the model's float16 transit and back, and the check itself at toy
size on this CPU (the smoke profile, one page, the quick bench), its results collected as a GPU node's would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import gpu_bundle  # noqa: E402


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "src" / gpu_bundle.PACKAGE
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pathlib import Path\n"
                                     "def get_model_path():\n    return Path(__file__).parent / 'model'\n")
    (pkg / "model" / "config.json").write_text("{}")
    rng = np.random.default_rng(0)
    save_file({"w": rng.standard_normal((64, 48)).astype(np.float32), "b": np.zeros(48, np.float32),
               "ids": np.arange(10, dtype=np.int64)[None]}, str(pkg / "model" / gpu_bundle.WEIGHTS))
    return pkg


def test_the_model_travels_in_float16_and_comes_back_in_float32(tmp_path):
    source = _package(tmp_path)
    gpu_bundle.pack_model(source, tmp_path / "packed", preset=0)
    packed = sorted(p.name for p in (tmp_path / "packed" / "model").iterdir())
    assert gpu_bundle.WEIGHTS not in packed and "weights.high.xz" in packed
    target = gpu_bundle.unpack_model(tmp_path / "packed", tmp_path / "site")
    before, after = load_file(str(source / "model" / gpu_bundle.WEIGHTS)), load_file(
        str(target / "model" / gpu_bundle.WEIGHTS))
    assert set(before) == set(after)
    assert after["w"].dtype == np.float32 and after["ids"].dtype == np.int64
    np.testing.assert_array_equal(after["ids"], before["ids"])
    np.testing.assert_array_equal(after["b"], before["b"])
    np.testing.assert_allclose(after["w"], before["w"], rtol=1e-3, atol=1e-4)   # one float16 rounding
    assert (target / "__init__.py").is_file() and (target / "model" / "config.json").is_file()
    (tmp_path / "packed" / "model" / "weights.low.xz").write_bytes(
        gpu_bundle.lzma.compress(b"\0" * 10, preset=0))     # a truncated plane is an error, not a silent model
    with pytest.raises(ValueError):
        gpu_bundle.unpack_model(tmp_path / "packed", tmp_path / "site2")


def test_collect_files_the_results_and_names_the_revision(tmp_path):
    made = tmp_path / "made" / "results"
    (made / "gpu" / "de_margins").mkdir(parents=True)
    (made / "gpu" / "de_margins" / "meta.json").write_text(json.dumps({"git_revision": None, "profile": "gpu"}))
    (made / "bench-gpu").mkdir()
    (made / "bench-gpu" / "encoding.json").write_text(json.dumps({"meta": {"git_revision": "0ld+dirty"}}))
    tarball = tmp_path / "results-gpu.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(made, arcname="results")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "REVISION").write_text("abc123\n")
    root = tmp_path / "repo"
    (root / "results" / "gpu" / "de_margins").mkdir(parents=True)
    (root / "results" / "gpu" / "de_margins" / "old.csv").write_text("x")   # replaced, not merged
    assert gpu_bundle.main(["collect", str(tarball), "--root", str(root), "--bundle", str(bundle)]) == 0
    meta = json.loads((root / "results" / "gpu" / "de_margins" / "meta.json").read_text())
    assert meta["git_revision"] == "abc123"
    assert not (root / "results" / "gpu" / "de_margins" / "old.csv").exists()
    bench = json.loads((root / "results" / "bench-gpu" / "encoding.json").read_text())["meta"]
    # the node's copy held an older .git beside the carried files: the carried revision wins, the other is kept
    assert bench == {"git_revision": "abc123", "git_revision_on_device": "0ld+dirty"}


@pytest.fixture(scope="module")
def bundle(shared_data, tmp_path_factory) -> Path:
    """`make gpu-bundle` without the wheels, made once for the two toy checks (the bundle is read, never changed)."""
    out = tmp_path_factory.mktemp("gpu") / "bundle"
    build = subprocess.run([sys.executable, "tools/gpu_bundle.py", "build", "--out", str(out), "--no-wheels",
                            "--preset", "0", "--mirror", str(shared_data)], cwd=REPO, capture_output=True, text=True)
    assert build.returncode in (0, 1), build.stderr   # 1: over the carry limit (said), still a complete bundle
    assert "MiB" in build.stdout and (out / "model" / "model" / "weights.json").is_file()
    return out


@pytest.mark.slow
def test_the_gpu_check_runs_at_toy_size_on_this_cpu(tmp_path, bundle):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_BUNDLE": str(bundle), "GPU_CHECK_SITE": str(tmp_path / "site"),
           "GPU_CHECK_PROFILE": "smoke", "GPU_CHECK_DEVICE": "cpu", "GPU_CHECK_BENCH": "quick",
           "GPU_CHECK_PAGES": "de_margins", "GPU_CHECK_OUT": str(out), "GPU_CHECK_RESULTS": str(tmp_path / "results")}
    run = subprocess.run(["bash", "tools/gpu_check.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"{tmp_path / 'site'}" in run.stdout   # the repacked model was the one loaded
    with tarfile.open(out / "results-smoke.tar.gz") as tar:
        names = tar.getnames()
    assert "results/smoke/de_margins/meta.json" in names and "results/bench-smoke/encoding.json" in names
    meta = json.loads((tmp_path / "results" / "smoke" / "de_margins" / "meta.json").read_text())
    assert meta["profile"] == "smoke"


@pytest.mark.slow
def test_pages_stopped_at_their_limit_still_leave_the_bench_and_the_run_records(tmp_path, bundle):
    """A short slot is tried once: pages that overrun GPU_CHECK_PAGES_TIMEOUT are stopped, and the bench, the
    tarball and the run cache's records (no weights) still come back."""
    runs = tmp_path / "runs"
    (runs / "ca-0123456789ab" / "best").mkdir(parents=True)   # a finished run: its records travel, its model not
    (runs / "ca-0123456789ab" / "finished.json").write_text("{}")
    (runs / "ca-0123456789ab" / "best" / "model.safetensors").write_bytes(b"\0" * 64)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHON": sys.executable, "GPU_BUNDLE": str(bundle), "GPU_CHECK_SITE": str(tmp_path / "site"),
           "GPU_CHECK_PROFILE": "smoke", "GPU_CHECK_DEVICE": "cpu", "GPU_CHECK_BENCH": "quick",
           "GPU_CHECK_PAGES": "de_margins", "GPU_CHECK_OUT": str(out), "GPU_CHECK_RESULTS": str(tmp_path / "results"),
           "GPU_CHECK_PAGES_TIMEOUT": "2", "TASER_RUNS_DIR": str(runs)}
    run = subprocess.run(["bash", "tools/gpu_check.sh"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 124, run.stdout[-3000:] + run.stderr[-3000:]
    assert "pages stopped at their limit (2 s)" in run.stdout
    with tarfile.open(out / "results-smoke.tar.gz") as tar:
        names = tar.getnames()
    assert "results/bench-smoke/encoding.json" in names
    assert not any(n.startswith("results/smoke/") for n in names)   # the stopped page left no result
    with tarfile.open(out / "runs-smoke.tar.gz") as tar:
        records = tar.getnames()
    assert "runs-smoke/ca-0123456789ab/finished.json" in records
    assert not any(n.endswith(".safetensors") for n in records)
