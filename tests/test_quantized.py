"""The int8 encoder for indexing (taser_lib.speed.quantized), its engine probe, and `--precision int8` in
`taser encode` / `taser index`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from taser_book.cli import main
from taser_lib.errors import ConfigError
from taser_lib.models import DenseEncoder, build_model, load_tokenizer
from taser_lib.speed import inductor_int8, onnx_int8
from taser_lib.speed import quantized as Q
from taser_lib.speed.quantized import FFN_OUTPUT, Int8Encoder, int8_copy, int8_encoder, quantised_linears

TORCH_ENGINE = Q.available_engines()[0]  # a PyTorch engine: every torch build has one of fbgemm, onednn, x86
ONNX = pytest.mark.skipif(not onnx_int8.available(), reason="onnxruntime and onnx are not installed")
INDUCTOR = pytest.mark.skipif(not inductor_int8.available(), reason="torchao or a C++ compiler is missing")
PASSAGES = [("Hamlet", "Hamlet is a tragedy by William Shakespeare."), ("", "Paris is the capital of France."),
            ("Bees", "Bees make honey from nectar collected from flowers.")]


@pytest.fixture(scope="module")
def tiny(tiny_bert_with_tokenizer):
    return tiny_bert_with_tokenizer


def trained_like(arch: str, tiny) -> torch.nn.Module:
    """`arch` from the tiny BERT; for Det-R TASER, whose two experts start as the block's FFN, with its Q-FFN made to
    differ, as training would, so that a query graph and a passage graph must each follow their own side."""
    model = build_model(arch, tiny, **({"shared_blocks": 1} if arch == "taser" else {}))
    experts = [p for n, p in model.named_parameters() if ".experts.0." in n]
    assert bool(experts) == (arch == "taser")
    with torch.no_grad():
        for p in experts:
            p.mul_(1.5)
    return model


def follows_fp32(fp32: DenseEncoder, int8: DenseEncoder, arch: str) -> np.ndarray:
    """Checks that an int8 engine's passages and questions follow fp32's (cosine > 0.98) and, for Det-R TASER, that
    its questions ran the Q-FFN (a passage-side graph would not reproduce the fp32 queries); fp32's passages."""
    a, b = fp32.encode_passages(PASSAGES), int8.encode_passages(PASSAGES)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    assert not np.array_equal(a, b) and cosines(a, b).min() > 0.98
    questions = ["who wrote hamlet", "capital of france"]
    q8, q32 = int8.encode_queries(questions), fp32.encode_queries(questions)
    assert cosines(q8, q32).min() > 0.98
    if arch == "taser":
        assert not np.allclose(fp32.encode_passages([("", q) for q in questions]), q32, atol=1e-4)
    return a


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_every_linear_is_quantised_unless_kept_and_kept_means_the_feed_forward_output(tiny):
    model = build_model("taser", tiny, shared_blocks=1)
    every = [n for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    assert quantised_linears(model) == every  # by default every linear
    names = quantised_linears(model, keep_fp32=(FFN_OUTPUT,))
    kept = sorted(set(every) - set(names))
    assert kept and all(n.endswith(".output.dense") and ".attention." not in n for n in kept)
    assert any(n.endswith("attention.output.dense") for n in names)
    assert any(".experts." in n for n in kept)  # an expert's feed-forward output is a feed-forward output too
    copy = int8_copy(model, keep_fp32=(FFN_OUTPUT,))  # the probe's fastest PyTorch engine: only those keep some
    assert all(type(copy.get_submodule(n)) is torch.nn.Linear for n in kept)
    assert all(isinstance(copy.get_submodule(n), torch.ao.nn.quantized.dynamic.Linear) for n in names)


@pytest.mark.parametrize("arch", ["taser", "dpr", "shared"])
def test_int8_vectors_follow_fp32_and_the_model_is_left_alone(arch, tiny):
    model = build_model(arch, tiny, **({"shared_blocks": 1} if arch == "taser" else {}))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tok = load_tokenizer(tiny)
    fp32 = DenseEncoder(model, tok, device="cpu", show_progress=False, precision="fp32")
    int8 = int8_encoder(fp32, engine=TORCH_ENGINE)  # the structure checked below is PyTorch's; ONNX Runtime's below
    assert isinstance(int8, Int8Encoder) and int8.resolved_precision == f"int8-{TORCH_ENGINE}"
    a, b = fp32.encode_passages(PASSAGES), int8.encode_passages(PASSAGES)
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    assert not np.array_equal(a, b)  # the quantised linears really ran
    assert cosines(a, b).min() > 0.95
    q = int8.encode_queries(["who wrote hamlet"])
    assert cosines(q, fp32.encode_queries(["who wrote hamlet"])).min() > 0.95
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    running = int8.running_model()
    assert running is not model and running is int8.running_model()  # kept while the weights stay the same
    quantised = [m for m in running.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert len(quantised) == len(quantised_linears(model))


@pytest.mark.parametrize("engine", [None, *Q.available_engines()])
def test_the_int8_copy_is_made_again_when_the_weights_change(engine, tiny):
    model = build_model("shared", tiny)
    enc = Int8Encoder(model, load_tokenizer(tiny), device="cpu", show_progress=False, engine=engine)
    first, vectors = enc.running_model(), enc.encode_passages(PASSAGES)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    assert enc.running_model() is not first
    assert not np.allclose(vectors, enc.encode_passages(PASSAGES))


def test_int8_refuses_what_it_cannot_do(tiny):
    model, tok = build_model("shared", tiny), load_tokenizer(tiny)
    with pytest.raises(ConfigError, match="int8"):
        Int8Encoder(model, tok, device="cpu", precision="bf16")
    with pytest.raises(ConfigError, match="fused"):
        Int8Encoder(model, tok, device="cpu", fuse_cpu_linears=True)
    with pytest.raises(ConfigError, match="CPU only"):
        int8_copy(model.to("meta"))


def test_cli_encode_and_index_at_int8(tiny, tmp_path, capsys):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "title": "T", "text": f"passage number {i}"}) + "\n"
                              for i in range(5)))
    assert main(["encode", str(corpus), "--model", str(tiny), "--out", str(tmp_path / "emb"), "--shard-size", "2",
                 "--precision", "int8", "--device", "cpu"]) == 0
    assert "at int8" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "emb" / "manifest.json").read_text())
    assert manifest["precision"] == f"int8-{Q.pick_engine()}" and manifest["n_docs"] == 5  # the engine too
    # the folder holds int8 vectors: resuming it at another precision would mix them, and is refused
    assert main(["encode", str(corpus), "--model", str(tiny), "--out", str(tmp_path / "emb"), "--shard-size", "2",
                 "--precision", "fp32", "--device", "cpu"]) != 0
    assert main(["index", str(corpus), "--retriever", "dense", "--model", str(tiny), "--out", str(tmp_path / "idx"),
                 "--precision", "int8", "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "idx" / "taser_index.json").read_text())["precision"] == f"int8-{Q.pick_engine()}"
    # search encodes queries only: int8 is not one of its precisions
    with pytest.raises(SystemExit):
        main(["search", str(corpus), "--retriever", "dense", "--out", str(tmp_path / "run"), "--precision", "int8"])


# ---- which int8 kernels: the engine probe ----------------------------------------------------------------------------

def stub_timer(durations: list[float]):
    """A clock whose successive start/stop pairs last `durations`."""
    ticks, now = [], 0.0
    for d in durations:
        ticks += [now, now + d]
        now += d + 1.0
    return iter(ticks).__next__


@pytest.mark.parametrize("fastest", Q.available_engines())
def test_the_engine_probe_picks_the_engine_it_measured_fastest(fastest):
    engines = Q.available_engines()
    timer = stub_timer([0.1 if e == fastest else 0.3 for _ in range(3) for e in engines])  # rounds of every engine
    probe = Q.measure_int8_engines(hidden=32, heads=2, batch=2, length=8, repeats=3, timer=timer)
    assert set(probe.seconds) == set(engines) and probe.choice == fastest
    assert probe.seconds[fastest] == pytest.approx(0.1)
    record = probe.as_dict()
    assert Q.EngineProbe.from_dict(record) == probe and record["choice"] == fastest
    with pytest.raises(ValueError):
        Q.EngineProbe.from_dict({"machine": "m", "seconds": {"qnnpack": 0.1}})


def test_the_engine_probe_is_cached_per_machine_and_torch(tmp_path, monkeypatch):
    from taser_lib.speed import precision as P

    monkeypatch.setenv(P.ENV_CACHE_DIR, str(tmp_path))
    measured = []
    engine = Q.available_engines()[0]
    monkeypatch.setattr(Q, "measure_int8_engines", lambda: measured.append(1) or Q.EngineProbe("m", {engine: 0.1}))
    key = {"value": "Xeon | 2 cores | 2 threads | torch 2.13 | probe 1"}
    monkeypatch.setattr(Q, "machine_key", lambda: key["value"])
    Q.int8_engine_probe.cache_clear()
    try:
        assert Q.int8_engine_probe().choice == engine and len(measured) == 1
        Q.int8_engine_probe.cache_clear()
        assert Q.int8_engine_probe().choice == engine and len(measured) == 1      # read from the cache
        key["value"] = "Xeon | 2 cores | 2 threads | torch 2.14 | probe 1"         # torch changed: measure again
        Q.int8_engine_probe.cache_clear()
        Q.int8_engine_probe()
        assert len(measured) == 2 and len(json.loads((tmp_path / Q.ENGINE_PROBE_FILE).read_text())) == 2
    finally:
        Q.int8_engine_probe.cache_clear()


def test_an_explicit_engine_packs_for_it_and_a_bad_one_is_refused(tiny):
    model, tok = build_model("shared", tiny), load_tokenizer(tiny)
    fp32 = DenseEncoder(model, tok, device="cpu", show_progress=False, precision="fp32").encode_passages(PASSAGES)
    before = torch.backends.quantized.engine
    for engine in Q.available_engines():
        enc = Int8Encoder(model, tok, device="cpu", show_progress=False, engine=engine)
        assert enc.engine == engine
        assert cosines(fp32, enc.encode_passages(PASSAGES)).min() > 0.95
        assert torch.backends.quantized.engine == before  # the global setting is restored
    with pytest.raises(ConfigError, match="engine"):
        Int8Encoder(model, tok, device="cpu", engine="qnnpack")
    with pytest.raises(ConfigError, match="engine"):
        int8_copy(model, engine="gpu")


# ---- the onnxruntime engine (taser_lib.speed.onnx_int8) ------------------------------------------------------------

def test_onnxruntime_is_an_engine_exactly_when_it_is_installed():
    assert (onnx_int8.ENGINE in Q.available_engines()) == onnx_int8.available()
    assert set(Q.available_engines()) <= set(Q.ENGINES)


@ONNX
@pytest.mark.parametrize("arch", ["taser", "dpr", "shared"])
def test_onnxruntime_int8_vectors_follow_fp32_and_the_model_is_left_alone(arch, tiny):
    # Det-R TASER's Q-FFN and P-FFN differ: each side is its own graph, so queries and passages must each follow
    model = trained_like(arch, tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tok = load_tokenizer(tiny)
    fp32 = DenseEncoder(model, tok, device="cpu", show_progress=False, precision="fp32")
    int8 = int8_encoder(fp32, engine="onnxruntime")
    follows_fp32(fp32, int8, arch)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    running = int8.running_model()
    assert isinstance(running, onnx_int8.OnnxInt8Model) and running is int8.running_model()
    assert int8.resolved_precision == "int8-onnxruntime"
    assert not list(running.parameters())  # a frozen stand-in: nothing for an optimiser or .to() to touch
    assert len(running._sessions) == 2  # one session per side, made once
    int8.encode_passages(PASSAGES[:1])
    assert len(running._sessions) == 2


@ONNX
def test_onnxruntime_refuses_what_it_cannot_do(tiny):
    model = build_model("shared", tiny)
    with pytest.raises(ConfigError, match="keep_fp32"):
        int8_copy(model, keep_fp32=(FFN_OUTPUT,), engine="onnxruntime")
    tokens = load_tokenizer(tiny)(["who wrote hamlet"], return_tensors="pt")
    with pytest.raises(ConfigError, match="returns one tensor"):  # ColBERT's token vectors are no single vector
        onnx_int8.OnnxInt8Model(build_model("colbert", tiny)).encode_passage(**tokens)
    # without an engine, keeping linears in float32 takes the fastest PyTorch engine, whatever the probe's overall pick
    kept = int8_copy(model, keep_fp32=(FFN_OUTPUT,))
    assert any(isinstance(m, torch.ao.nn.quantized.dynamic.Linear) for m in kept.modules())


# ---- the inductor engine (taser_lib.speed.inductor_int8) ----------------------------------------------------------

def test_inductor_is_an_engine_exactly_when_it_is_available():
    assert (inductor_int8.ENGINE in Q.available_engines()) == inductor_int8.available()


@INDUCTOR
def test_inductor_int8_vectors_follow_fp32_each_side_its_own_graph(tiny):
    """Det-R TASER (its Q-FFN made to differ, as training would): each side runs its own compiled int8 graph, made
    once on its first batch and kept for batches of other sizes and lengths; the model is left alone."""
    model = trained_like("taser", tiny)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fp32 = DenseEncoder(model, load_tokenizer(tiny), device="cpu", show_progress=False, precision="fp32")
    int8 = int8_encoder(fp32, engine="inductor")
    assert int8.resolved_precision == "int8-inductor"
    a = follows_fp32(fp32, int8, "taser")
    running = int8.running_model()
    assert isinstance(running, inductor_int8.InductorInt8Model) and running is int8.running_model()
    assert not list(running.parameters()) and len(running._graphs) == 2
    c = int8.encode_passages(PASSAGES[:1] + PASSAGES)  # another batch size and length: the same graph
    assert len(running._graphs) == 2 and cosines(c[1:], a).min() > 0.98
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


@INDUCTOR
def test_inductor_refuses_what_it_cannot_do(tiny):
    with pytest.raises(ConfigError, match="keep_fp32"):
        int8_copy(build_model("shared", tiny), keep_fp32=(FFN_OUTPUT,), engine="inductor")
    tokens = load_tokenizer(tiny)(["who wrote hamlet"], return_tensors="pt")
    with pytest.raises(ConfigError, match="returns one tensor"):
        inductor_int8.InductorInt8Model(build_model("colbert", tiny)).encode_passage(**tokens)


def test_the_probe_picks_among_the_engines_asked_for():
    probe = Q.EngineProbe("m", {"x86": 0.3, "fbgemm": 0.2, "onnxruntime": 0.1})
    assert probe.choice == "onnxruntime" and probe.fastest(Q.TORCH_ENGINES) == "fbgemm"
    assert Q.EngineProbe("m", {"onnxruntime": 0.1}).fastest(Q.TORCH_ENGINES) == "onnxruntime"  # none measured


@ONNX
def test_an_onnxruntime_engine_that_fails_to_build_is_left_out_of_the_probe_with_a_warning(monkeypatch):
    # e.g. a torch without the TorchScript exporter, or onnx and onnxruntime versions that do not match
    def broken(*args, **kwargs):
        raise RuntimeError("exporter gone")

    monkeypatch.setattr(onnx_int8, "build_session", broken)
    with pytest.warns(RuntimeWarning, match="onnxruntime left out of the probe"):
        probe = Q.measure_int8_engines(hidden=32, heads=2, batch=2, length=8, repeats=1)
    assert "onnxruntime" not in probe.seconds and set(probe.seconds) <= set(Q.ENGINES) - {"onnxruntime"}
    assert probe.seconds and probe.choice != "onnxruntime"
