"""`taser bench`: the quick suite runs end to end and writes valid records; the pieces it measures with are right
(FLOP formula, timing statistics, memory and state accounting, the strawman, the numpy search, the reference
matcher). The full benchmark never runs here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertModel

from taser_book.bench import NAMES, format_table, load_results, machine_line, summary_rows
from taser_book.bench.core import PeakMemory, interleaved, paired_ratio, row, spread
from taser_book.bench.hardware import bert_layer_flops, encoder_flops
from taser_book.bench.matching import reference_has_answer
from taser_book.bench.routing import every_expert
from taser_book.bench.search import numpy_top_k, recall_at_k
from taser_book.bench.training import state_bytes
from taser_book.cli import main
from taser_lib.data.answers import has_answer
from taser_lib.models import TaserConfig, TaserModel, build_model
from taser_lib.speed.fused import fused_cpu_linears

ROW_KEYS = {"metric", "value", "unit", "op", "target", "met"}
# Metrics that carry the targets, per benchmark: (metric, op, target).
TARGETS = {
    "encoding": [("speed-up over sentence-transformers", ">=", 2.2), ("min cosine(ours, theirs)", ">", 0.999),
                 ("min cosine(ours, our fp32)", ">=", 0.999),
                 ("int8 (indexing) speed-up over sentence-transformers", ">=", 2.0)],
    "precision": [*[(f"|R@{k} bf16 - fp32|", "<=", 0.2) for k in (1, 5, 20, 100)],
                  ("min cosine(bf16, fp32) passages", ">=", 0.999),
                  *[(f"|R@{k} int8 - fp32|", "<=", 0.5) for k in (1, 5, 20, 100)]],
    "hardware": [("fraction of matmul peak at length 256", ">=", 0.7)],
    "routing": [("TASER Det-R / BERT forward time", "<=", 1.05)],
    "training": [("TASER / DPR step time", "<=", 1.0), ("TASER / DPR params+grads+Adam bytes", "<=", 0.6),
                 ("DPR bf16 step speed-up over fp32", ">=", 1.5)],
    "matching": [("speed-up over per-pair reference", ">=", 10.0), ("decisions identical to reference", ">=", 1.0)],
    "search": [],
    "scaling": [("streamed indexing: peak RAM growth, largest over corpus sizes", "<=", None)],  # bound: shard size
}


def _stringified_numbers(obj) -> list[str]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _stringified_numbers(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _stringified_numbers(v)]
    if isinstance(obj, str):
        try:
            float(obj)
        except ValueError:
            return []
        return [obj]
    return []


# ---- the quick suite, end to end ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def quick_results(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("bench")
    rc = main(["bench", "--quick", "--no-progress", "--out", str(out), "--mirror", str(shared_data),
               "--data-dir", str(out / "data")])
    return rc, out


@pytest.mark.slow
def test_quick_bench_writes_every_record(quick_results, capsys):
    rc, out = quick_results
    assert rc == 0
    assert sorted(p.stem for p in out.glob("*.json")) == sorted(NAMES)
    results = load_results(out)
    assert [r["benchmark"] for r in results] == list(NAMES)
    for result in results:
        assert {"benchmark", "title", "quick", "rows", "measured", "sizes", "notes", "meta"} <= set(result)
        assert result["quick"] is True
        assert {"versions", "git_revision", "device", "wall_seconds", "load_average_before"} <= set(result["meta"])
        assert result["meta"]["device"]["type"] == "cpu"
        assert result["rows"], result["benchmark"]
        for r in result["rows"]:
            assert set(r) == ROW_KEYS
            assert np.isfinite(r["value"]), r
            assert (r["met"] is None) == (r["target"] is None)
        targeted = [(r["metric"], r["op"], r["target"]) for r in result["rows"] if r["target"] is not None]
        expected = TARGETS[result["benchmark"]]
        assert [t[:2] for t in targeted] == [t[:2] for t in expected]
        assert all(e[2] is None or t[2] == e[2] for t, e in zip(targeted, expected))
    # Every number was written as a JSON number (a numpy scalar would have been stringified by default=str).
    for result in results:
        assert not _stringified_numbers(result["measured"]), result["benchmark"]
    # No temporary files left behind by the atomic writes.
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_quick_bench_correctness_checks_hold(quick_results):
    """Whatever the timings, the checks that do not depend on speed must pass even at quick sizes."""
    by_name = {r["benchmark"]: r for r in load_results(quick_results[1])}
    metric = {(name, r["metric"]): r for name, res in by_name.items() for r in res["rows"]}
    assert metric["encoding", "min cosine(ours, theirs)"]["met"]  # same model, same pooling, same inputs
    assert metric["matching", "decisions identical to reference"]["value"] == 1.0
    # TASER Det-R from MiniLM: 2 specialized blocks of 6 add 2 FFNs; DPR is 2 full towers (Table A3's logic).
    training = by_name["training"]["measured"]
    assert training["parameters"]["DPR"] == 2 * training["parameters"]["TASER_Shared"]
    held = training["state_bytes"]["TASER"]
    assert held["gradients"] == held["parameters"] and held["optimizer"] >= 2 * held["parameters"]
    assert by_name["search"]["measured"]["random"]["numpy_recall_at_100"] == pytest.approx(1.0)
    scaling = by_name["scaling"]["measured"]["encode"]["cpu"]
    assert scaling["measured"] == [True, False, False]  # quick: 10 measured, 20 and 50 extrapolated
    memory = by_name["scaling"]["measured"]["memory"]
    assert memory["sizes"] == [2_000, 8_000] and len(memory["stream_peak_mib"]) == len(memory["load_peak_mib"]) == 2
    assert max(memory["stream_peak_mib"]) <= memory["bound_mib"]
    # bf16 vs fp32 encoding: vectors agree; the training bench names the float32 ops of a bf16 step
    assert metric["precision", "min cosine(bf16, fp32) passages"]["met"]
    assert metric["encoding", "min cosine(ours, our fp32)"]["met"]
    assert by_name["training"]["measured"]["float32_ops_in_bf16_step"]


@pytest.mark.slow
def test_printed_table_and_scaling_plot(quick_results):
    pytest.importorskip("matplotlib")
    from taser_book.plots.bench import plot_scaling

    results = load_results(quick_results[1])
    table = format_table(results)
    assert table.splitlines()[0].startswith("machine: ") and "torch" in table.splitlines()[0]
    assert "auto precision" in table.splitlines()[0]   # the choice `auto` made here, and on what grounds
    assert table.splitlines()[2].split() == ["benchmark", "metric", "measured", "target", "met?"]
    assert ">= 2.2" in table and "<= 0.6" in table
    assert plot_scaling(None) is None   # no scaling benchmark among the results: no figure
    fig = plot_scaling(next(r for r in results if r["benchmark"] == "scaling"))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    memory_ax = fig.axes[1]  # the measured RAM-vs-corpus-size panel
    assert memory_ax.get_xscale() == "log" and len(memory_ax.get_lines()) >= 3


@pytest.mark.slow
def test_opt_in_bf16_training_quality_runs_quick(tmp_path, shared_data, capsys):
    """The opt-in benchmark is not in the suite; named, its quick mode runs the whole path in seconds."""
    from taser_book.bench import OPT_IN

    assert "bf16_training_quality" in OPT_IN and "bf16_training_quality" not in NAMES
    rc = main(["bench", "--quick", "--no-progress", "--only", "bf16_training_quality", "--out", str(tmp_path),
               "--mirror", str(shared_data), "--data-dir", str(tmp_path / "data")])
    assert rc == 0
    (result,) = load_results(tmp_path)
    assert result["benchmark"] == "bf16_training_quality"
    assert result["measured"]["resolved"] == {"fp32": "fp32", "bf16": "bf16"}
    assert set(result["measured"]["recall_points"]["bf16"]) == {"R@1", "R@5", "R@20", "R@100"}
    assert all(r["target"] is None for r in result["rows"])  # one seed in quick mode: no noise, no target


def test_cli_rejects_unknown_benchmark_and_missing_gpu(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--only", "nonsense", "--out", str(tmp_path)])
    if not torch.cuda.is_available():
        assert main(["bench", "--device", "cuda", "--out", str(tmp_path)]) == 2
        assert "no GPU" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


# ---- the FLOP formula ----------------------------------------------------------------------------------------------

def test_layer_flops_hand_computed():
    # n=3 tokens, h=2, f=4: Q,K,V 3*(2*3*2*2)=72, output 2*3*2*2=24, scores 2*3*3*2=36, values 36,
    # FFN 2*3*2*4 + 2*3*4*2 = 96.
    assert bert_layer_flops(3, 2, 4) == 72 + 24 + 36 + 36 + 96
    # n=1: 24 + 8 + 4 + 4 + 32.
    assert bert_layer_flops(1, 2, 4) == 72
    config = BertConfig(num_hidden_layers=2, hidden_size=2, intermediate_size=4, num_attention_heads=1)
    assert encoder_flops(config, [3, 1]) == 2 * (264 + 72)


@pytest.mark.parametrize("n_tokens", [1, 7, 16])
def test_layer_flops_match_torch_flop_counter(n_tokens):
    """torch's FlopCounterMode counts every matmul of a real BERT forward (eager attention, so the score and
    value products are matmuls it sees); on one unpadded sequence it must equal the formula."""
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=24, max_position_embeddings=32, attn_implementation="eager")
    model = BertModel(config, add_pooling_layer=False).eval()
    ids = torch.randint(0, 50, (1, n_tokens))
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    assert counter.get_total_flops() == encoder_flops(config, [n_tokens])


def test_the_reranker_step_counts_match_torch_flop_counter():
    """The CA's and ColBERT's forward FLOPs as the training bench counts them equal torch's count of a real forward on
    unpadded inputs (eager attention), up to the few the counts leave out: the CA's score head (2 x hidden per pair)."""
    from taser_book.bench.training import colbert_step_flops, cross_encoder_step_flops
    from taser_lib.models.colbert import ColbertConfig, ColbertModel
    from taser_lib.models.cross_encoder import CrossEncoderConfig, CrossEncoderModel

    shape = dict(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24,
                 max_position_embeddings=32, attn_implementation="eager")
    ca = CrossEncoderModel(CrossEncoderConfig(**shape, pooling="mean")).eval()
    ids = torch.randint(0, 50, (6, 11))
    pairs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        ca(**pairs)
    counted = cross_encoder_step_flops(ca.config, pairs)
    assert counter.get_total_flops() == counted["forward"] + 2 * 6 * 16 and counted["step"] == 3 * counted["forward"]

    colbert = ColbertModel(ColbertConfig(**shape, dim=8)).eval()
    q, p = torch.randint(0, 50, (3, 5)), torch.randint(0, 50, (4, 9))
    batch = {"query": {"input_ids": q, "attention_mask": torch.ones_like(q)},
             "passage": {"input_ids": p, "attention_mask": torch.ones_like(p)}}
    with FlopCounterMode(display=False) as counter, torch.inference_mode():
        out = colbert(query=batch["query"], passage=batch["passage"])
        colbert.compute_similarity(out.q_reps, out.p_reps)
    assert counter.get_total_flops() == colbert_step_flops(colbert.config, batch)["forward"]


# ---- statistics and the result record ------------------------------------------------------------------------------

def test_spread_and_paired_ratio():
    s = spread([4.0, 1.0, 3.0, 2.0])
    assert (s["median"], s["q1"], s["q3"], s["min"], s["max"], s["n"]) == (2.5, 1.75, 3.25, 1.0, 4.0, 4)
    # Per-round ratios 2, 3, 4 (not the ratio of medians 6/2 = 3 by accident: the rounds differ).
    r = paired_ratio([2.0, 6.0, 12.0], [1.0, 2.0, 3.0])
    assert r["median"] == 3.0 and r["min"] == 2.0 and r["max"] == 4.0
    with pytest.raises(ValueError):
        paired_ratio([1.0], [1.0, 2.0])
    with pytest.raises(ValueError):
        spread([])


def test_interleaved_rotates_the_order():
    calls = []
    fns = {name: (lambda name=name: calls.append(name) or name) for name in "abc"}
    times, last = interleaved(fns, repeats=3, device="cpu", warmup=1)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")
    assert last == {"a": "a", "b": "b", "c": "c"}
    assert all(len(t) == 3 and min(t) >= 0 for t in times.values())


def test_rows_and_table():
    assert row("x", 1.31, target=1.3)["met"] is True
    assert row("x", 1.29, target=1.3)["met"] is False
    assert row("x", 1.05, target=1.05, op="<=")["met"] is True
    assert row("x", 0.999, target=0.999, op=">")["met"] is False
    info = row("x", 5.0, "s")
    assert info["met"] is None and info["op"] is None
    with pytest.raises(ValueError):
        row("x", 1.0, target=1.0, op="==")
    results = [{"benchmark": "b", "rows": [row("speed", 2.0, "x", target=1.5), info]}]
    rows = summary_rows(results)
    assert rows[0]["target"] == ">= 1.5" and rows[0]["met"] is True
    assert rows[1]["target"] == "" and rows[1]["met"] is None
    lines = format_table(results).splitlines()
    assert lines[0] == "machine: (no results)" or lines[0].startswith("machine: ")
    assert lines[4].split()[-1] == "yes" and lines[5].split()[-1] == "s"
    meta = {"device": {"type": "cpu", "name": "Xeon", "cores": 2, "torch_threads": 2}, "versions": {"torch": "2.13"},
            "precision": {"auto": {"encode": "fp32"}, "native_bf16": True,
                          "probe": {"speedup": {"encode": 0.68, "train": 1.09},
                                    "choice": {"encode": "fp32", "train": "fp32"}}}}
    assert machine_line([{**results[0], "meta": meta}]) == (
        "machine: Xeon (2 cores, 2 torch threads), torch 2.13; auto precision: encode fp32, train fp32 (measured "
        "bf16 over fp32: encode 0.68x, train 1.09x)")
    gpu = {"device": {"type": "cuda", "name": "NVIDIA H200"}, "versions": {"torch": "2.11.0"},
           "precision": {"auto": {}, "native_bf16": True, "probe": None}}   # no probe on a GPU: the rule
    assert machine_line([{**results[0], "meta": gpu}]) == (
        "machine: NVIDIA H200, torch 2.11.0; auto precision: bf16 (the rule on a GPU with bf16)")


# ---- memory and state accounting ----------------------------------------------------------------------------------

def test_peak_memory_counts_tensor_allocations():
    held = torch.ones(10 * 2 ** 20 // 4)  # allocated before: not part of the peak, freeing it lowers the level
    with PeakMemory("cpu") as memory:
        a = torch.empty(30 * 2 ** 20 // 4)  # 30 MiB
        b = torch.empty(20 * 2 ** 20 // 4)  # +20 MiB: the peak, 50 MiB
        del a, b, held
        c = torch.empty(40 * 2 ** 20 // 4)  # 40 MiB, below the earlier 50
        del c
    assert memory.peak_bytes == 50 * 2 ** 20
    assert "profile_memory" in memory.method


def test_state_bytes_counts_params_grads_and_adam_moments():
    model = torch.nn.Linear(3, 2)  # 8 float32 parameters = 32 bytes
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    held = state_bytes(model, optimizer)
    steps = sum(s["step"].numel() * s["step"].element_size() for s in optimizer.state.values())
    assert held["parameters"] == 32 and held["gradients"] == 32
    assert held["optimizer"] == 2 * 32 + steps  # exp_avg and exp_avg_sq, plus Adam's step counters
    assert held["total"] == 32 + 32 + held["optimizer"]


# ---- the routing strawman ------------------------------------------------------------------------------------------

def test_every_expert_strawman_computes_the_same_as_det_r():
    torch.manual_seed(0)
    config = TaserConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                         intermediate_size=24, max_position_embeddings=32, shared_blocks=1)
    model = TaserModel(config).eval()
    with torch.no_grad():  # make the Q-FFN and P-FFN differ, so picking the wrong one would show
        for layer in model.taser_layers:
            layer.experts[1].intermediate.dense.weight.mul_(-1.5)
    ids = torch.randint(0, 50, (2, 9))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        expected = {k: model.encode_tokens(k, ids, mask) for k in ("query", "passage")}
        assert not torch.allclose(expected["query"], expected["passage"])
        with every_expert(model):
            got = {k: model.encode_tokens(k, ids, mask) for k in ("query", "passage")}
        after = model.encode_tokens("passage", ids, mask)
    for kind in expected:
        torch.testing.assert_close(got[kind], expected[kind])
    torch.testing.assert_close(after, expected["passage"])  # the patch is undone
    assert all("forward" not in vars(layer) for layer in model.taser_layers)


# ---- the encoder's fused CPU path (taser_lib.models.encoding), which this benchmark drove ---------------------------

@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-bert")
    config = BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=48, max_position_embeddings=40)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    return path


@pytest.mark.parametrize("arch", ["taser", "dpr"])
def test_fused_cpu_linears_equal_the_stock_forward(arch, tiny_bert_dir):
    torch.manual_seed(0)
    model = build_model(arch, tiny_bert_dir, **({"shared_blocks": 1} if arch == "taser" else {})).eval()
    with torch.no_grad():  # distinct experts / towers, so a wrong routing would show
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ids = torch.randint(5, 60, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0
    with torch.inference_mode():
        stock = {k: model.encode_tokens(k, ids, mask) for k in ("query", "passage")}
        with fused_cpu_linears(model):
            patched = sum("forward" in vars(m) for m in model.modules())
            fused = {k: model.encode_tokens(k, ids, mask) for k in ("query", "passage")}
    assert patched > 0 or not torch.backends.mkldnn.is_available()
    assert not torch.allclose(stock["query"], stock["passage"])
    for kind in stock:
        torch.testing.assert_close(fused[kind], stock[kind], atol=1e-5, rtol=1e-5)
    assert not any("forward" in vars(m) for m in model.modules())  # patches removed


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN has no bf16 kernels here")
def test_fused_cpu_linears_in_bf16_equal_the_stock_bf16_forward(tiny_bert_dir):
    torch.manual_seed(0)
    model = build_model("taser", tiny_bert_dir, shared_blocks=1).eval().to(torch.bfloat16)
    ids = torch.randint(5, 60, (3, 11))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        stock = model.encode_tokens("passage", ids, mask).float()
        with fused_cpu_linears(model):
            assert any("forward" in vars(m) for m in model.modules())
            fused = model.encode_tokens("passage", ids, mask).float()
    torch.testing.assert_close(fused, stock, atol=0.05, rtol=0.05)  # bf16 rounding, in a different order


def test_fused_cpu_linears_leave_training_alone(tiny_bert_dir):
    model = build_model("shared", tiny_bert_dir).train()
    with fused_cpu_linears(model):
        assert not any("forward" in vars(m) for m in model.modules())


# ---- search and matching baselines --------------------------------------------------------------------------------

def test_numpy_top_k_is_exact():
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((500, 8)).astype(np.float32)
    queries = rng.standard_normal((300, 8)).astype(np.float32)  # > one chunk of 256
    scores, rows = numpy_top_k(queries, corpus, 10)
    full = queries @ corpus.T
    expected = np.argsort(-full, axis=1)[:, :10]
    assert np.array_equal(rows, expected)
    assert np.allclose(scores, np.take_along_axis(full, expected, axis=1))


def test_recall_at_k():
    exact = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    found = np.array([[4, 3, 9, -1], [5, 6, 7, 8]])
    assert recall_at_k(found, exact) == pytest.approx((2 / 4 + 1) / 2)


@pytest.mark.parametrize("answers, text", [
    (["PARIS"], "He moved to paris in 1920."),
    (["cat"], "They had to concatenate strings."),
    (["U.S"], "the U.S. army"),
    (["1990"], "in the 1990s"),
    (["Beyoncé"], "Beyonce\u0301 sang."),
])
def test_reference_matcher_agrees_with_the_library(answers, text):
    assert reference_has_answer(answers, text) == has_answer(answers, text)


# ---- faiss-gpu vs CPU faiss (search benchmark, --device cuda) -----------------------------------------------------

def _unit_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_faiss_gpu_comparison_is_skipped_with_a_note_without_a_gpu(monkeypatch):
    faiss = pytest.importorskip("faiss")
    from taser_book.bench import faiss_gpu

    corpus, queries = _unit_vectors(200, 8, 0), _unit_vectors(5, 8, 1)
    out = faiss_gpu.measure("cpu", corpus, queries, "random", quick=True, repeats=1, build_repeats=1)
    assert out["rows"] == [] and out["measured"]["measured"] is False
    assert out["notes"] == [out["measured"]["reason"]]
    assert out["notes"][0].startswith("no GPU: faiss-gpu vs CPU faiss not measured")
    # --device cuda with faiss-cpu (faiss sees no GPU): skipped too, never an error
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0)
    out = faiss_gpu.measure("cuda", corpus, queries, "random", quick=True, repeats=1, build_repeats=1)
    assert out["rows"] == [] and "faiss-gpu" in out["notes"][0] and out["notes"][0].startswith("no GPU")


def test_faiss_gpu_comparison_runs_with_cpu_stand_ins(monkeypatch):
    """faiss's GPU functions replaced by CPU stand-ins (one 'GPU', cloning = identity): the GPU path runs end to
    end and yields its rows; both sides hold the same index, so their recalls agree."""
    faiss = pytest.importorskip("faiss")
    from taser_book.bench import faiss_gpu

    moved = []
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: moved.append(index) or index)
    corpus, queries = _unit_vectors(600, 16, 0), _unit_vectors(20, 16, 1)
    params = {"nlist": 8, "nprobe": 2, "m": 4, "nbits": 4, "train_size": 600}
    out = faiss_gpu.measure("cuda", corpus, queries, "random", quick=True, repeats=2, build_repeats=1,
                            params=params)
    measured = out["measured"]
    assert measured["measured"] is True and measured["errors"] == {}
    assert set(measured["indexes"]) == {"flat", "ivf_flat", "ivfpq"}
    assert len(moved) == 1 + 3  # the warm-up, then one GPU build per index kind
    assert [r["metric"] for r in out["rows"]] == [
        "random: faiss-gpu flat build speed-up over CPU faiss",
        "random: faiss-gpu flat search speed-up over CPU faiss, query batch",
        "random: faiss-gpu flat recall@100 vs CPU flat",
        "random: faiss-gpu IVF-Flat build speed-up over CPU faiss",
        "random: faiss-gpu IVF-Flat search speed-up over CPU faiss, query batch",
        "random: IVF-Flat recall@100 vs exact, CPU faiss",
        "random: IVF-Flat recall@100 vs exact, faiss-gpu",
        "random: faiss-gpu IVF-PQ build speed-up over CPU faiss",
        "random: faiss-gpu IVF-PQ search speed-up over CPU faiss, query batch",
        "random: IVF-PQ recall@100 vs exact, CPU faiss",
        "random: IVF-PQ recall@100 vs exact, faiss-gpu",
    ]
    assert all(np.isfinite(r["value"]) and r["value"] > 0 and r["target"] is None for r in out["rows"])
    for kind, r in measured["indexes"].items():
        assert r["build_seconds"]["cpu"]["n"] == 1 and r["search_seconds"]["gpu"]["n"] == 2
        recall = r["recall_at_k_vs_exact"]
        assert recall["cpu"] == pytest.approx(recall["gpu"]) and 0 < recall["cpu"] <= 1
    assert measured["indexes"]["flat"]["recall_at_k_vs_exact"]["gpu"] == pytest.approx(1.0)
    assert measured["indexes"]["ivf_flat"]["recall_at_k_vs_exact"]["cpu"] < 1  # 2 of 8 lists probed
    assert "nlist=8, nprobe=2" in out["notes"][0]


def test_faiss_gpu_error_on_one_index_is_a_note(monkeypatch):
    faiss = pytest.importorskip("faiss")
    from taser_book.bench import faiss_gpu

    def to_gpu(index, co=None, ngpu=-1):
        if isinstance(index, faiss.IndexIVFPQ):
            raise RuntimeError("Error in GpuIndexIVFPQ: Consider useFloat16LookupTables")
        return index

    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", to_gpu)
    params = {"nlist": 4, "nprobe": 1, "m": 2, "nbits": 4, "train_size": 300}
    out = faiss_gpu.measure("cuda", _unit_vectors(300, 8, 0), _unit_vectors(5, 8, 1), "r", quick=True, repeats=1,
                            build_repeats=1, params=params)
    assert set(out["measured"]["indexes"]) == {"flat", "ivf_flat"}
    assert "useFloat16LookupTables" in out["measured"]["errors"]["ivfpq"]
    assert any(n.startswith("faiss-gpu IVF-PQ not measured") for n in out["notes"])
    assert not any("IVF-PQ" in r["metric"] for r in out["rows"])


def test_ivfpq_moves_to_the_gpu_with_float16_lookup_tables_when_needed(monkeypatch):
    """faiss-gpu holds IVF-PQ's lookup table in 48 KiB of shared memory: the default m=64 x 8 bits (64 KiB as
    float32) must be cloned with useFloat16; small tables and flat indexes keep faiss's defaults."""
    faiss = pytest.importorskip("faiss")
    from taser_lib.retrieval import DenseIndex
    from taser_lib.retrieval.dense import _gpu_cloner_options

    class Options:
        useFloat16 = False

    options = []
    monkeypatch.setattr(faiss, "GpuMultipleClonerOptions", Options, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1)
    monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: options.append(co) or index)
    assert _gpu_cloner_options("ivfpq", {"m": 64, "nbits": 8}).useFloat16 is True
    assert _gpu_cloner_options("ivfpq", {"m": 48, "nbits": 8}) is None  # 48 KiB: fits
    assert _gpu_cloner_options("flat", {}) is None
    index = DenseIndex(384, "ivfpq", use_gpu=True)
    assert index.on_gpu and options[-1].useFloat16 is True
    DenseIndex(384, "flat")  # faiss sees a GPU: flat moves there by default, with faiss's default options
    assert options[-1] is None and len(options) == 2
