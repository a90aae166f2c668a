"""Precision (issue 13, section 1): `fp32 | bf16 | auto` resolved per device, the bf16 encoder, the trainers'
autocast, and the resolved choice recorded in results."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from taser_lib.errors import ConfigError
from taser_lib.models import DenseEncoder, build_model, load_tokenizer
from taser_lib.models.precision import autocast, resolve_precision
from taser_lib.speed import precision as P
from taser_lib.speed.precision import cpu_flags
from taser_lib.training.loop import LoopConfig, run_training


def test_resolve_precision_explicit_and_invalid():
    for device in ("cpu", "cuda", "meta"):
        assert resolve_precision("fp32", device) == "fp32"
        assert resolve_precision("bf16", device) == "bf16"
    with pytest.raises(ConfigError, match="fp32, bf16, auto"):
        resolve_precision("fp16", "cpu")


@pytest.mark.parametrize("native", [True, False])
def test_auto_on_cpu_follows_native_bf16(native, monkeypatch):
    monkeypatch.setattr(P, "cpu_has_native_bf16", lambda: native)
    faster = P.PrecisionProbe("m", {"encode": {"fp32": 2.0, "bf16": 1.0}, "train": {"fp32": 2.0, "bf16": 1.0}}, 1.0)
    monkeypatch.setattr(P, "cpu_precision_probe", lambda: faster)  # where bf16 is native, it measured faster here
    assert resolve_precision("auto", "cpu") == ("bf16" if native else "fp32")
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16" if native else "fp32")
    assert resolve_precision("auto", "meta") == "fp32"  # any other device: fp32


@pytest.mark.parametrize("supported", [True, False])
def test_auto_on_cuda_is_bf16_where_supported(supported, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: supported)
    assert resolve_precision("auto", "cuda") == ("bf16" if supported else "fp32")


def test_cpu_flags_and_native_detection(tmp_path, monkeypatch):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\nmodel name\t: X\n")
    assert {"avx512_bf16", "avx512f"} <= cpu_flags(str(info))
    assert cpu_flags(str(tmp_path / "absent")) == set()
    # This machine: the answer agrees with /proc/cpuinfo's flags or torch's own check.
    expected = bool(cpu_flags() & set(P.NATIVE_BF16_FLAGS)) or torch.cpu._is_avx512_bf16_supported() \
        or torch.cpu._is_amx_tile_supported()
    assert P.cpu_has_native_bf16() == expected


def test_autocast_context():
    x = torch.ones(2, 3)
    w = torch.ones(4, 3)
    with autocast("bf16", "cpu"):
        assert torch.nn.functional.linear(x, w).dtype == torch.bfloat16
    with autocast("fp32", "cpu"):
        assert torch.nn.functional.linear(x, w).dtype == torch.float32
    with pytest.raises(ConfigError):
        autocast("auto", "cpu")


# ---- the encoder ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_bert_with_tokenizer):
    return tiny_bert_with_tokenizer


PASSAGES = [("Hamlet", "Hamlet is a tragedy by William Shakespeare."), ("", "Paris is the capital of France."),
            ("Bees", "Bees make honey from nectar collected from flowers.")]


@pytest.mark.parametrize("arch", ["taser", "dpr", "shared"])
def test_bf16_encoder_matches_fp32_and_leaves_the_model_fp32(arch, tiny):
    model = build_model(arch, tiny, **({"shared_blocks": 1} if arch == "taser" else {}))
    tok = load_tokenizer(tiny)
    fp32 = DenseEncoder(model, tok, device="cpu", show_progress=False)
    bf16 = DenseEncoder(model, tok, device="cpu", show_progress=False, precision="bf16")
    assert fp32.resolved_precision == "fp32" and bf16.resolved_precision == "bf16"
    a, b = fp32.encode_passages(PASSAGES), bf16.encode_passages(PASSAGES)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    assert not np.array_equal(a, b)  # bf16 really ran
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.99
    q32, q16 = fp32.encode_queries(["who wrote hamlet"]), bf16.encode_queries(["who wrote hamlet"])
    assert float((q32 * q16).sum() / np.linalg.norm(q32) / np.linalg.norm(q16)) > 0.99
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the caller's model is untouched


def test_bf16_copy_is_reused_until_the_weights_change(tiny):
    model = build_model("shared", tiny)
    enc = DenseEncoder(model, load_tokenizer(tiny), device="cpu", show_progress=False, precision="bf16")
    first = enc.running_model()
    assert enc.running_model() is first and next(first.parameters()).dtype == torch.bfloat16
    before = enc.encode_passages(PASSAGES)
    with torch.no_grad():  # an optimizer step updates weights in place
        for p in model.parameters():
            p.mul_(1.5)
    second = enc.running_model()
    assert second is not first
    assert not np.allclose(before, enc.encode_passages(PASSAGES))
    assert DenseEncoder(model, load_tokenizer(tiny), device="cpu", precision="fp32").running_model() is model


def test_encoder_rejects_an_unknown_precision(tiny):
    with pytest.raises(ConfigError, match="precision"):
        DenseEncoder(build_model("shared", tiny), load_tokenizer(tiny), device="cpu", precision="half")


# ---- the trainers ---------------------------------------------------------------------------------------------------

class Batches:
    def __len__(self):
        return 4

    def set_epoch(self, epoch):
        pass

    def iter_from(self, position):
        for i in range(position, 4):
            yield {"input_ids": torch.randint(1, 100, (2, 5), generator=torch.Generator().manual_seed(i))}


def test_loop_config_precision():
    assert LoopConfig(output_dir="x").precision == "auto"
    with pytest.raises(ConfigError, match="loop.precision"):
        LoopConfig(output_dir="x", precision="fp16")
    assert LoopConfig(output_dir="x", precision="bf16").resolved_precision("cpu") == "bf16"
    assert LoopConfig(output_dir="x", precision="bf16", bf16=False).resolved_precision("cpu") == "fp32"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_runs_the_forward_at_its_precision_and_records_it(precision, tmp_path):
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=16), add_pooling_layer=False)
    seen = []  # the dtype a linear layer computes in (the output LayerNorm is float32 under autocast either way)
    model.encoder.layer[0].intermediate.dense.register_forward_hook(lambda mod, args, out: seen.append(out.dtype))

    def loss_fn(m, batch):
        hidden = m(input_ids=batch["input_ids"]).last_hidden_state
        return (hidden.float()[:, 0] - 1).pow(2).mean(), {}

    config = LoopConfig(output_dir=str(tmp_path / "run"), max_steps=2, precision=precision, learning_rate=1e-3,
                        checkpoint_every=2, eval_every=2)
    run_training(model, loss_fn, Batches(), config, progress=False)
    assert set(seen) == {torch.bfloat16 if precision == "bf16" else torch.float32}
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights stay fp32
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["precision"] == precision
    saved = json.loads((tmp_path / "run" / "run_config.json").read_text())
    assert saved["config"]["loop"]["precision"] == precision


# --- auto by measurement (issue 25) ------------------------------------------------------------------------------

def stub_timer(durations: list[float]):
    """A clock whose successive start/stop pairs last `durations` (in the probe's order: encoding's fp32 and bf16
    in turns, each repeat, then training's)."""
    ticks, now = [], 0.0
    for d in durations:
        ticks += [now, now + d]
        now += d + 1.0
    return iter(ticks).__next__


TINY_PROBE = dict(hidden=32, layers=1, heads=2, batch=2, length=8, repeats=3)


@pytest.mark.parametrize("faster, expected", [("bf16", "bf16"), ("fp32", "fp32")])
def test_the_probe_picks_the_precision_it_measured_faster(faster, expected):
    fp32, bf16 = (0.3, 0.1) if faster == "bf16" else (0.1, 0.3)
    timer = stub_timer([fp32, bf16] * 3 * 2)
    probe = P.measure_cpu_precision(timer=timer, **TINY_PROBE)
    assert probe.choice("encode") == probe.choice("train") == expected
    assert probe.speedup("encode") == pytest.approx(3.0 if faster == "bf16" else 1 / 3)
    assert probe.cosine >= P.MIN_COSINE  # a random layer's bf16 outputs stay close to fp32's
    record = probe.as_dict()
    assert P.PrecisionProbe.from_dict(record) == probe and record["choice"]["encode"] == expected


def test_a_small_gain_or_a_quality_loss_keeps_fp32():
    close = P.PrecisionProbe("m", {"encode": {"fp32": 1.0, "bf16": 0.95}, "train": {"fp32": 1.0, "bf16": 0.5}}, 1.0)
    assert close.choice("encode") == "fp32" and close.choice("train") == "bf16"   # 1.05x is under MIN_SPEEDUP
    lossy = P.PrecisionProbe("m", {"encode": {"fp32": 1.0, "bf16": 0.5}, "train": {"fp32": 1.0, "bf16": 0.5}}, 0.99)
    assert lossy.choice("encode") == lossy.choice("train") == "fp32"


def test_auto_on_a_native_bf16_cpu_follows_the_cached_probe(tmp_path, monkeypatch):
    monkeypatch.setenv(P.ENV_CACHE_DIR, str(tmp_path))
    monkeypatch.setattr(P, "cpu_has_native_bf16", lambda: True)
    measured = []
    slower = P.PrecisionProbe("x", {"encode": {"fp32": 1.0, "bf16": 1.5}, "train": {"fp32": 1.0, "bf16": 0.5}}, 1.0)
    monkeypatch.setattr(P, "measure_cpu_precision", lambda: measured.append(1) or slower)
    key = {"value": "Xeon | 2 cores | 2 threads | torch 2.13 | probe 1"}
    monkeypatch.setattr(P, "machine_key", lambda: key["value"])
    P.cpu_precision_probe.cache_clear()
    try:
        assert resolve_precision("auto", "cpu") == "fp32"                   # bf16 measured slower for encoding
        assert resolve_precision("auto", "cpu", purpose="train") == "bf16"  # and faster for training
        assert P.precision_record()["auto"] == {"encode": "fp32", "train": "bf16"}
        assert len(measured) == 1 and key["value"] in json.loads((tmp_path / P.PROBE_FILE).read_text())
        P.cpu_precision_probe.cache_clear()
        assert resolve_precision("auto", "cpu") == "fp32" and len(measured) == 1   # read from the cache
        key["value"] = "Xeon | 2 cores | 2 threads | torch 2.14 | probe 1"          # torch changed: measure again
        P.cpu_precision_probe.cache_clear()
        resolve_precision("auto", "cpu")
        assert len(measured) == 2 and len(json.loads((tmp_path / P.PROBE_FILE).read_text())) == 2
        (tmp_path / P.PROBE_FILE).write_text("{not json")                          # a damaged cache: measured around
        P.cpu_precision_probe.cache_clear()
        assert resolve_precision("auto", "cpu") == "fp32" and len(measured) == 3
    finally:
        P.cpu_precision_probe.cache_clear()
    with pytest.raises(ConfigError, match="purpose"):
        resolve_precision("auto", "cpu", purpose="index")


def test_without_native_bf16_auto_is_fp32_without_a_probe(monkeypatch):
    monkeypatch.setattr(P, "cpu_has_native_bf16", lambda: False)
    monkeypatch.setattr(P, "measure_cpu_precision", lambda: pytest.fail("emulated bf16 needs no probe"))
    P.cpu_precision_probe.cache_clear()
    assert resolve_precision("auto", "cpu", purpose="train") == "fp32"
    assert P.precision_record()["probe"] is None


def test_the_probe_takes_turns_so_a_burst_of_load_slows_both_alike():
    # the second round is slowed 3x (another process woke up): in turns, each precision has one slow round of
    # three, and the medians still say bf16 is 2x faster; timed one precision after the other, a burst this long
    # would have slowed all of one precision's rounds
    timer = stub_timer([0.2, 0.1, 0.6, 0.3, 0.2, 0.1] * 2)
    probe = P.measure_cpu_precision(timer=timer, **TINY_PROBE)
    assert probe.speedup("encode") == pytest.approx(2.0) and probe.speedup("train") == pytest.approx(2.0)


def test_a_busy_machines_probe_is_shared_until_a_quiet_process_measures_again(tmp_path, monkeypatch):
    monkeypatch.setenv(P.ENV_CACHE_DIR, str(tmp_path))
    loads = iter([1.5, 1.2, 0.1, 0.1, 0.9])  # per core: busy probe, busy reader, quiet reader (+ its probe), busy
    monkeypatch.setattr(P, "load_per_core", lambda: next(loads))
    timer = stub_timer([0.3, 0.1] * 3 * 2 * 2 * 2)
    measured = []

    def probe():
        measured.append(1)
        return P.measure_cpu_precision(timer=timer, **TINY_PROBE)

    def cached():
        return P.cached_probe(P.PROBE_FILE, probe, P.PrecisionProbe.from_dict, key="k")

    busy = cached()                                   # measured on a busy machine, and cached
    assert busy.busy and busy.choice("encode") == "bf16" and len(measured) == 1
    assert json.loads((tmp_path / P.PROBE_FILE).read_text())["k"]["busy"] is True
    assert cached().busy and len(measured) == 1       # another process of the busy machine: no second probe
    quiet = cached()                                  # the machine is quiet now: measured again, replacing it
    assert not quiet.busy and len(measured) == 2
    assert json.loads((tmp_path / P.PROBE_FILE).read_text())["k"]["load_per_core"] == 0.1
    assert not cached().busy and len(measured) == 2   # a quiet probe is never replaced, busy or not


def test_a_onednn_isa_cap_is_another_machine(monkeypatch):
    for env in P.ISA_LIMIT_ENVS:
        monkeypatch.delenv(env, raising=False)
    plain = P.machine_key()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_bf16")
    assert P.isa_limit() == "AVX512_CORE_BF16"
    assert P.machine_key() != plain and "AVX512_CORE_BF16" in P.machine_key()
