"""Fused CPU linears are used where this machine measured them faster on the encoder's own batches
(`speed.fused.KernelChoice`): the trial's choice both ways under a stubbed clock, its store per machine, dtype and
model shape, the small call that runs stock kernels, and the encoder's vectors under every choice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from taser_lib.speed import fused as Fu
from taser_lib.models import load_encoder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path))
    Fu._DECIDED.clear()
    if Fu._onednn_linear() is None:
        pytest.fail("this torch build has no oneDNN fused linear: the auto path cannot be tested here")
    yield tmp_path
    Fu._DECIDED.clear()


@pytest.fixture(scope="module")
def tiny():
    encoder = load_encoder("tiny", batch_size=2)
    encoder.show_progress = False
    return encoder


def run_trial(model, stock: float, fused: float, n_batches: int = Fu.TRIAL_BATCHES, falling: float = 0.0):
    """A KernelChoice driven batch by batch as the encoder drives it, each batch of 100 padded tokens lasting
    `stock` or `fused` seconds, the later ones shorter by `falling` seconds per batch (the widths fall)."""
    choice = Fu.KernelChoice(None, "cpu", "fp32", model, n_batches=n_batches)
    ran = []
    for b in range(n_batches):
        on = choice.fused(b)
        ran.append(on)
        choice.observe(b, 100, (fused if on else stock) - falling * b)
    return choice, ran


@pytest.mark.parametrize("stock, fused, chosen", [(1.0, 0.8, True), (1.0, 1.2, False), (1.0, 0.99, False)])
def test_the_trial_chooses_fused_only_where_the_encoders_batches_ran_faster(cache, tiny, stock, fused, chosen):
    choice, ran = run_trial(tiny.model, stock, fused, n_batches=Fu.TRIAL_BATCHES + 3)
    assert ran[:Fu.TRIAL_BATCHES].count(True) == ran[:Fu.TRIAL_BATCHES].count(False)   # both kernels timed
    assert ran[Fu.TRIAL_BATCHES:] == [chosen] * 3                                      # the rest follow the trial
    assert choice.trial.speedup == pytest.approx(stock / fused)
    assert Fu.FusionTrial.from_dict(json.loads(json.dumps(choice.trial.as_dict()))).ratios == pytest.approx(
        choice.trial.ratios, rel=1e-3)
    assert Fu.fusion_record()["fused"] == {f"fp32, {Fu.model_shape(tiny.model)}": chosen}


def test_the_abba_order_cancels_batches_that_get_shorter(cache, tiny):
    """Equal kernels on batches that shrink by a fifth of their time each: no kernel looks faster."""
    choice, _ = run_trial(tiny.model, 1.0, 1.0, falling=0.05)
    assert choice.trial.speedup == pytest.approx(1.0, abs=0.02) and choice.trial.choice is False


def test_the_trial_is_kept_per_machine_dtype_and_shape_and_a_small_call_never_measures(cache, tiny, monkeypatch):
    key = {"value": "EPYC | 2 cores | 2 threads | torch 2.13 | probe 1"}
    monkeypatch.setattr(Fu, "machine_key", lambda: key["value"])
    small = Fu.KernelChoice(None, "cpu", "fp32", tiny.model, n_batches=Fu.TRIAL_BATCHES - 1)
    assert small.fused(0) is False and small.trial is None                 # never measured: stock kernels
    assert not (cache / Fu.PROBE_FILE).exists()
    run_trial(tiny.model, 1.0, 0.5)
    assert Fu.use_fused_linears(None, "cpu", "fp32", tiny.model) is True     # kept: later calls follow it
    assert Fu.KernelChoice(None, "cpu", "fp32", tiny.model, n_batches=1).fused(0) is True
    assert Fu.use_fused_linears(None, "cpu", "bf16", tiny.model) is False    # another dtype: not measured
    assert Fu.use_fused_linears(False, "cpu", "fp32", tiny.model) is False   # a setting forces either
    assert Fu.use_fused_linears(None, "cuda", "fp32", tiny.model) is False
    key["value"] = "EPYC | 2 cores | 2 threads | torch 2.14 | probe 1"      # torch changed: measured again
    assert Fu.use_fused_linears(None, "cpu", "fp32", tiny.model) is False
    assert len(json.loads((cache / Fu.PROBE_FILE).read_text())) == 1


def test_the_encoder_gives_the_same_vectors_with_either_kernel_choice_and_during_its_trial(cache, tiny):
    texts = [f"question {i} about the capital of country number {i}" for i in range(2 * Fu.TRIAL_BATCHES)]
    out = {}
    for setting in (True, False, None):          # None last: auto runs the trial on this call's batches
        tiny.fuse_cpu_linears = setting
        out[setting] = tiny.encode_queries(texts)
    tiny.fuse_cpu_linears = None
    np.testing.assert_allclose(out[True], out[False], atol=1e-5)
    np.testing.assert_allclose(out[None], out[False], atol=1e-5)
    decided = Fu.fusion_record()["decisions"][f"fp32, {Fu.model_shape(tiny.model)}"]
    assert decided["how"] == "measured in this call" and len(decided["trial"]["ratios"]) == Fu.TRIAL_PAIRS
