"""Fused CPU linears are used where this machine measured them faster (`models.fused`): the probe's choice with a
stubbed timer both ways, its cache per machine and dtype, and the encoder following it."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from taser_lib.models import fused as Fu
from taser_lib.models import load_encoder


def stub_timer(stock: float, fused: float):
    """A timer under which every stock forward lasts `stock` seconds and every fused one `fused` (the probe alternates
    stock, fused after one warm-up of each; each forward reads the clock twice)."""
    ticks = itertools.count()
    clock = {"t": 0.0}

    def timer():
        i = next(ticks)
        if i % 2:  # the end of a forward: advance by that forward's duration
            clock["t"] += stock if (i // 2) % 2 == 0 else fused
        return clock["t"]
    return timer


@pytest.mark.parametrize("stock, fused, chosen", [(1.0, 0.8, True), (1.0, 1.2, False), (1.0, 0.99, False)])
def test_the_probe_chooses_fused_only_where_it_measured_faster(stock, fused, chosen):
    probe = Fu.measure_cpu_fusion(hidden=32, layers=1, heads=2, batch=2, lengths=(8,), repeats=3,
                                  timer=stub_timer(stock, fused))
    assert probe.seconds == {"stock": pytest.approx(stock), "fused": pytest.approx(fused)}
    assert probe.choice is chosen
    assert Fu.FusionProbe.from_dict(json.loads(json.dumps(probe.as_dict()))) == probe


def test_auto_follows_the_cached_probe_per_machine_and_dtype(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path))
    measured = []
    monkeypatch.setattr(Fu, "measure_cpu_fusion", lambda dtype="fp32": measured.append(dtype) or Fu.FusionProbe(
        "m", dtype, {"stock": 1.0, "fused": 2.0 if dtype == "fp32" else 0.5}))
    key = {"value": "EPYC | 2 cores | 2 threads | torch 2.13 | probe 1"}
    monkeypatch.setattr(Fu, "machine_key", lambda: key["value"])
    import taser_lib.models.precision as P
    monkeypatch.setattr(P, "machine_key", lambda: key["value"])
    Fu.cpu_fusion_probe.cache_clear()
    try:
        if Fu._onednn_linear() is None:
            pytest.fail("this torch build has no oneDNN fused linear: the auto path cannot be tested here")
        assert Fu.use_fused_linears(None, "cpu", "fp32") is False    # measured slower: stock kernels
        assert Fu.use_fused_linears(None, "cpu", "bf16") is True     # measured faster in bf16
        assert Fu.use_fused_linears(True, "cpu") is True and Fu.use_fused_linears(False, "cpu", "bf16") is False
        assert Fu.use_fused_linears(None, "cuda") is False
        assert Fu.fusion_record()["fused"] == {"fp32": False, "bf16": True}
        assert measured == ["fp32", "bf16"] and len(json.loads((tmp_path / Fu.PROBE_FILE).read_text())) == 2
        Fu.cpu_fusion_probe.cache_clear()
        Fu.use_fused_linears(None, "cpu", "fp32")
        assert measured == ["fp32", "bf16"]                            # read from the cache
        key["value"] = "EPYC | 2 cores | 2 threads | torch 2.14 | probe 1"   # torch changed: measured again
        Fu.cpu_fusion_probe.cache_clear()
        Fu.use_fused_linears(None, "cpu", "fp32")
        assert measured == ["fp32", "bf16", "fp32"]
    finally:
        Fu.cpu_fusion_probe.cache_clear()
        Fu._DECIDED.clear()


def test_the_encoder_gives_the_same_vectors_with_either_kernel_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(Fu, "measure_cpu_fusion", lambda dtype="fp32": Fu.FusionProbe("m", dtype, {"stock": 1.0,
                                                                                                   "fused": 0.5}))
    Fu.cpu_fusion_probe.cache_clear()
    texts = ["who wrote hamlet", "the capital of france is paris"]
    encoder = load_encoder("tiny")
    encoder.show_progress = False
    out = {}
    for setting in (None, True, False):
        encoder.fuse_cpu_linears = setting
        out[setting] = encoder.encode_queries(texts)
    np.testing.assert_allclose(out[True], out[False], atol=1e-5)
    np.testing.assert_allclose(out[None], out[False], atol=1e-5)
    Fu.cpu_fusion_probe.cache_clear()
    Fu._DECIDED.clear()
