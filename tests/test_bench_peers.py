"""`taser bench --only peers`: the peers' worker builds each sentence-transformers backend it can, says why for each it
cannot, and every contender that ran encodes the same passages as our fp32 encoder. Here the worker runs under this
environment's Python (sentence-transformers without optimum or OpenVINO), at quick sizes: a check of the protocol
and the report, not a measurement."""

from __future__ import annotations

import sys

import pytest

from taser_book.bench import run_benchmark
from taser_book.bench.config import BenchConfig
from taser_book.bench.peers import ENV_PYTHON, FLOAT_PEERS, INT8_PEERS, best, peers_python
from taser_lib.errors import TaserError

pytestmark = pytest.mark.slow


def test_every_peer_runs_or_says_why(monkeypatch, shared_data, tmp_path):
    monkeypatch.setenv(ENV_PYTHON, sys.executable)
    result = run_benchmark("peers", BenchConfig(quick=True, data_dir=str(tmp_path / "data"), mirror=str(shared_data)))
    measured = result["measured"]
    assert set(measured["peers"]) == set(FLOAT_PEERS + INT8_PEERS)
    for name, what in measured["peers"].items():
        if what["ok"]:
            assert name in measured["seconds"] and measured["min_cosine_to_our_fp32"][name] > 0.99
        else:
            assert name not in measured["seconds"] and any(n.startswith(f"{name}: could not be built here: ")
                                                          for n in result["notes"])
    assert measured["peers"]["st_fp32"]["ok"] and measured["min_cosine_to_our_fp32"]["st_fp32"] > 0.9999
    assert measured["best_float"] == best(measured["seconds"], FLOAT_PEERS)
    assert result["rows"][0]["metric"].startswith("ours at auto over their best float backend")
    assert measured["min_cosine_to_our_fp32"]["taser_lib_compiled"] > 0.99 and measured["compile_seconds"] > 0
    assert any(r["metric"].startswith("ours at auto, compiled, over their best float backend") for r in result["rows"])


def test_best_is_the_shortest_median_and_a_missing_environment_says_how_to_make_it(monkeypatch, tmp_path):
    times = {"st_fp32": [3.0, 2.0, 9.0], "st_onnx": [2.5, 2.5, 2.5], "taser_lib": [1.0]}
    assert best(times, ("st_fp32", "st_onnx", "st_openvino")) == "st_onnx"
    assert best(times, ("st_openvino",)) is None
    monkeypatch.setenv(ENV_PYTHON, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(TaserError, match="make peers-env"):
        peers_python()
