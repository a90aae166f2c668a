"""TASER's learned routing read back: expert usage per specialized block and side (`analyses.routing`), the
routing entropy over training from a run's log (`training.logs`), their figures (`plots.routing`) and the Table A1
row of a model's parameter count (`models.params.paper_params_key`)."""

from __future__ import annotations

import json
import math
import shutil

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

from training_helpers import TOKENIZER_FILES, make_tiny_bert, tiny_config, write_squad_sample  # noqa: E402
from training_helpers import one_thread  # noqa: E402,F401  (fixture)
from taser_lib.data.squad_open import build_squad_open  # noqa: E402
from taser_lib.errors import ConfigError, FormatError  # noqa: E402
from taser_book.analyses.routing import (USAGE_COLUMNS, align_experts, expert_usage, record_routing,  # noqa: E402
                                          token_routing, top_tokens, usage_inputs, usage_summary)
from taser_lib.models import DenseEncoder, DPRModel, TaserModel, default_checkpoint, load_tokenizer  # noqa: E402
from taser_lib.models.params import PAPER_PARAMS_M, paper_params_key  # noqa: E402
from taser_book.plots import plot_expert_usage, plot_routing_entropy  # noqa: E402
from taser_lib.training.logs import read_log, routing_entropy_curve  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")

QUESTIONS = ["who wrote hamlet", "what is the capital city of france and why", "when", "how tall is mount everest"]
PASSAGES = [("Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
            ("Paris", "Paris is the capital and most populous city of France, on the Seine."),
            ("Everest", "Mount Everest is Earth's highest mountain above sea level.")]


@pytest.fixture(scope="module")
def tiny_bert6(tmp_path_factory):
    """A 6-layer tiny BERT with the default model's tokenizer: with T = 2, blocks 3 and 6 are specialized."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tiny-bert6")
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=6, num_attention_heads=4,
                         intermediate_size=64, max_position_embeddings=64), add_pooling_layer=False
              ).save_pretrained(path)
    for name in TOKENIZER_FILES:
        shutil.copy(default_checkpoint() / name, path / name)
    return path


def encoder_for(path, precision="fp32", **fields):
    torch.manual_seed(1)
    model = TaserModel.from_bert(path, passage_format="pair", **fields)
    return DenseEncoder(model, load_tokenizer(path), max_query_length=16, max_passage_length=32, batch_size=2,
                        device="cpu", show_progress=False, precision=precision)


def force_expert(model, per_layer: dict[int, int]) -> None:
    """Routers that send every unit of block `layer` (1-based) to one expert: zero weights, a bias favouring it."""
    with torch.no_grad():
        for index, layer in zip(model.config.specialized_layers, model.taser_layers):
            layer.router.weight.zero_()
            layer.router.bias.fill_(-5.0)
            layer.router.bias[per_layer[index + 1]] = 5.0


def real_tokens(encoder, questions=(), passages=()):
    n = sum(len(ids) for ids in encoder.tokenize_queries(list(questions))) if questions else 0
    if passages:
        n += sum(len(ids) for ids in encoder.tokenize_passages(list(passages))["input_ids"])
    return n


def test_det_r_sends_questions_to_q_ffn_and_passages_to_p_ffn(tiny_bert6):
    usage = expert_usage(encoder_for(tiny_bert6), QUESTIONS, PASSAGES)
    assert list(usage.columns) == USAGE_COLUMNS
    assert sorted(usage["layer"].unique()) == [3, 6]
    for side, expert, n in (("question", 0, len(QUESTIONS)), ("passage", 1, len(PASSAGES))):
        rows = usage[usage["side"] == side]
        assert set(rows.loc[rows["share"] == 1.0, "expert"]) == {expert}
        assert (rows.groupby("layer")["units"].sum() == n).all()   # one unit per sequence, every block
    shared = expert_usage(encoder_for(tiny_bert6, routing="shared"), QUESTIONS, PASSAGES)
    assert set(shared["expert"]) == {0} and (shared["share"] == 1.0).all()


@pytest.mark.parametrize("routing", ["sequence", "token"])
def test_forced_routers_are_read_back_per_block_and_padding_is_not_a_unit(tiny_bert6, routing):
    encoder = encoder_for(tiny_bert6, routing=routing, num_experts=4)
    force_expert(encoder.model, {3: 2, 6: 1})
    usage = expert_usage(encoder, QUESTIONS, PASSAGES)
    assert len(usage) == 2 * 2 * 4  # 2 blocks x 2 sides x 4 experts, unused experts included with share 0
    for layer, expert in ((3, 2), (6, 1)):
        rows = usage[usage["layer"] == layer]
        assert set(rows.loc[rows["share"] == 1.0, "expert"]) == {expert}
        assert set(rows.loc[rows["expert"] != expert, "share"]) == {0.0}
    units = usage.groupby("side")["units"].sum() / 2  # per block
    if routing == "sequence":
        assert units.to_dict() == {"passage": len(PASSAGES), "question": len(QUESTIONS)}
        assert set(usage["unit"]) == {"sequence"}
    else:  # every real token once; the batches are padded (lengths differ), the padding is not counted
        assert units["question"] == real_tokens(encoder, questions=QUESTIONS)
        assert units["passage"] == real_tokens(encoder, passages=PASSAGES)
        assert set(usage["unit"]) == {"token"}


def split_routers(encoder, texts) -> None:
    """Two-expert routers that split `texts` about evenly in every block: random weights, then the bias moved to
    the median logit difference the texts get."""
    logits = {}
    with torch.no_grad():
        for layer in encoder.model.taser_layers:
            layer.router.weight.normal_(0.0, 1.0)
            layer.router.bias.zero_()
    handles = [layer.router.register_forward_hook(lambda m, a, out, i=i: logits.setdefault(i, []).append(out))
               for i, layer in enumerate(encoder.model.taser_layers)]
    encoder.encode_queries(texts)
    for h in handles:
        h.remove()
    with torch.no_grad():  # layer by layer would shift the later blocks' inputs: only the bias changes, after
        for i, layer in enumerate(encoder.model.taser_layers):
            diff = torch.cat([x.reshape(-1, 2) for x in logits[i]])
            layer.router.bias[1] -= float((diff[:, 1] - diff[:, 0]).median()) + 1e-4


def test_seq_r_usage_counts_what_the_experts_actually_compute(tiny_bert6):
    encoder = encoder_for(tiny_bert6, routing="sequence", num_experts=2)
    questions = [f"{w} {x} question about {y}" for w in ("who", "what", "when", "where")
                 for x in ("wrote", "built") for y in ("hamlet", "paris")]
    split_routers(encoder, questions)
    computed = {}
    handles = [expert.register_forward_hook(
        lambda m, args, out, key=(i, e): computed.__setitem__(key, computed.get(key, 0) + args[0].shape[0]))
        for i, layer in zip(encoder.model.config.specialized_layers, encoder.model.taser_layers)
        for e, expert in enumerate(layer.experts)]
    try:
        usage = expert_usage(encoder, questions, [])
    finally:
        for h in handles:
            h.remove()
    for (i, e), n in computed.items():
        assert usage.set_index(["layer", "expert"]).loc[(i + 1, e), "units"] == n
    assert sum(computed.values()) == 2 * len(questions)
    assert len(computed) == 4  # both experts of both blocks got questions


def test_recording_does_not_change_the_embeddings(tiny_bert6):
    encoder = encoder_for(tiny_bert6, routing="token", num_experts=2)
    plain = encoder.encode_passages(PASSAGES)
    with record_routing(encoder) as records:
        hooked = encoder.encode_passages(PASSAGES)
    np.testing.assert_array_equal(plain, hooked)
    assert {r.layer for r in records} == {3, 6} and {r.side for r in records} == {"passage"}
    assert encoder.encode_passages(PASSAGES) is not None and len(records) == 4  # hooks removed on exit (2 x 2)


def test_bf16_encoder_is_recorded_on_the_copy_that_runs(tiny_bert6):
    encoder = encoder_for(tiny_bert6, precision="bf16", routing="sequence", num_experts=2)
    usage = expert_usage(encoder, QUESTIONS, PASSAGES)
    assert usage.groupby(["layer", "side"])["share"].sum().round(6).eq(1.0).all()


def test_refuses_training_mode_and_models_without_specialized_blocks(tiny_bert6):
    encoder = encoder_for(tiny_bert6, routing="sequence", num_experts=2)
    encoder.model.train()
    with pytest.raises(ConfigError, match="evaluation mode"):
        expert_usage(encoder, QUESTIONS, [])
    dpr = DenseEncoder(DPRModel.from_bert(tiny_bert6), load_tokenizer(tiny_bert6), device="cpu",
                       show_progress=False)
    with pytest.raises(ConfigError, match="TaserModel"):
        expert_usage(dpr, QUESTIONS, [])
    with pytest.raises(ConfigError, match="Tok-R"):
        token_routing(encoder_for(tiny_bert6, routing="sequence", num_experts=2), QUESTIONS)


def test_token_routing_adds_up_to_the_usage_and_names_tokens(tiny_bert6):
    encoder = encoder_for(tiny_bert6, routing="token", num_experts=2)
    split_routers(encoder, QUESTIONS)
    tokens = token_routing(encoder, QUESTIONS, side="question")
    usage = expert_usage(encoder, QUESTIONS, [])
    by_expert = tokens.groupby(["layer", "expert"])["count"].sum()
    for row in usage.itertuples():
        assert by_expert.get((row.layer, row.expert), 0) == row.units
    assert {"[CLS]", "[SEP]", "who", "hamlet"} <= set(tokens["token"])
    assert usage["share"].between(0.05, 0.95).all()  # both experts in use
    assert tokens.groupby(["layer", "token"])["share"].sum().round(6).eq(1.0).all()
    top = top_tokens(tokens, n=3, min_count=1)
    assert set(top["layer"]) == {3, 6} and top["tokens"].str.count(",").le(2).all()


# --- routing entropy over training -------------------------------------------------------------------------------

def _write_log(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_entropy_curve_from_a_log_and_from_a_mined_runs_final_round(tmp_path):
    rows = [{"step": s, "epoch": s / 10, "lr": 1e-5, "loss": 1.0, "l_sim": 1.0, "l_ent": -0.6, "h_unit": s / 40,
             "h_batch": 0.69} for s in (20, 10)]
    _write_log(tmp_path / "run" / "log.jsonl", rows)
    curve = routing_entropy_curve(tmp_path / "run")
    assert list(curve.columns) == ["step", "epoch", "h_unit", "h_batch", "l_ent"]
    assert curve["step"].tolist() == [10, 20] and curve["h_unit"].tolist() == [0.25, 0.5]
    _write_log(tmp_path / "mined" / "round1" / "log.jsonl", rows[:1])
    _write_log(tmp_path / "mined" / "round2" / "log.jsonl", rows)
    assert len(routing_entropy_curve(tmp_path / "mined")) == 2


def test_entropy_curve_errors_name_the_file(tmp_path):
    _write_log(tmp_path / "det" / "log.jsonl", [{"step": 1, "loss": 1.0, "l_ent": 0.0}])
    with pytest.raises(FormatError, match="no routing entropy logged"):
        routing_entropy_curve(tmp_path / "det")
    bad = tmp_path / "bad" / "log.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"step": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(FormatError, match=r"log.jsonl:2"):
        read_log(bad)
    with pytest.raises(FileNotFoundError, match="not a training run folder"):
        routing_entropy_curve(tmp_path)


@pytest.fixture(scope="module")
def squad_sample(shared_data, tmp_path_factory):
    squad = build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")
    return write_squad_sample(squad, tmp_path_factory.mktemp("squad-sample"), n_train=32, n_dev=16)


def test_a_seq_r_training_run_logs_its_routing_entropy_every_step(squad_sample, tmp_path, capfd):
    from taser_lib.training.kinds import config_from_dict
    from taser_lib.training.retriever import train_retriever

    raw = tiny_config(make_tiny_bert(tmp_path / "tiny"), squad_sample, tmp_path / "run", max_steps=3)
    raw["model"]["overrides"].update(routing="sequence", num_experts=2)
    capfd.readouterr()  # what building the tiny BERT wrote
    train_retriever(config_from_dict(raw), progress=False)
    assert "Writing model shards" not in capfd.readouterr().err  # checkpoints and models save without a bar
    curve = routing_entropy_curve(tmp_path / "run")
    assert curve["step"].tolist() == [1, 2, 3]
    assert curve["h_unit"].between(0, math.log(2)).all() and curve["h_batch"].between(0, math.log(2)).all()
    assert (curve["h_batch"] >= curve["h_unit"] - 1e-6).all()  # concavity: H(mean P) >= mean H(P)
    assert (curve["l_ent"] < 0).all()  # release (default): the term is -H, summed over the two passes


# --- figures -----------------------------------------------------------------------------------------------------

def test_usage_heatmap_one_panel_per_model_averaging_seeds():
    rows = []
    for model, experts in (("Seq-R I=2", 2), ("Tok-R I=4", 4)):
        for seed, first in ((1, 0.8), (2, 0.6)):
            for side in ("question", "passage"):
                for e in range(experts):
                    share = first if e == 0 else (1 - first) / (experts - 1)
                    rows.append({"model": model, "seed": seed, "layer": 3, "side": side, "unit": "sequence",
                                 "expert": e, "share": share})
    fig = plot_expert_usage(pd.DataFrame(rows))
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_title().split("\n")[0] for ax in panels] == ["Seq-R I=2", "Tok-R I=4"]
    grid = panels[0].images[0].get_array()
    assert grid.shape == (2, 4) and grid.mask[:, 2:].all()  # I = 2: experts 2 and 3 blank
    assert math.isclose(float(grid[0, 0]), 0.7)             # mean of the two seeds
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["layer 3, question", "layer 3, passage"]


def test_entropy_plot_one_line_per_mode_with_the_uniform_level():
    rows = [{"mode": mode, "seed": seed, "step": step, "h_unit": h - step / 100, "h_batch": 0.69}
            for mode, h in (("release", 0.69), ("literal", 0.5), ("balance", 0.6))
            for seed in (1, 2) for step in (1, 2, 3)]
    fig = plot_routing_entropy(pd.DataFrame(rows), num_experts=2)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert labels == ["release", "literal", "balance"]
    literal = next(line for line in ax.get_lines() if line.get_label() == "literal")
    np.testing.assert_allclose(literal.get_ydata(), [0.49, 0.48, 0.47])
    assert any(math.isclose(line.get_ydata()[0], math.log(2)) for line in ax.get_lines())
    assert literal.get_linestyle() != next(line for line in ax.get_lines() if line.get_label() == "release").get_linestyle()
    assert not [t for t in ax.texts if "coincide" in t.get_text()]           # h_unit: the modes differ
    assert [t.get_text() for t in fig.axes[1].texts if "coincide" in t.get_text()] == [
        "the curves coincide:\nmax difference 0 nats"]                        # h_batch: one line hides the others


def test_paper_params_key_names_the_table_a1_row(tiny_bert6):
    assert paper_params_key(DPRModel.from_bert(tiny_bert6)) == ("dpr", None, None)
    for routing, experts in (("shared", 1), ("deterministic", 2), ("sequence", 4), ("token", 2)):
        key = paper_params_key(TaserModel.from_bert(tiny_bert6, routing=routing, num_experts=experts))
        assert key == ("taser", routing, experts) and key in PAPER_PARAMS_M
    assert paper_params_key(TaserModel.from_bert(tiny_bert6, routing="sequence", num_experts=3)) is None


def test_entropy_mode_changes_leave_the_default_runs_config_alone():
    from taser_book.runs import changes
    from taser_book.runs.recipes import RETRIEVERS, entropy_mode_changes

    seq = RETRIEVERS["seq-r-2"]
    assert entropy_mode_changes("release") == []  # the default: the variant's own run, not a second one
    for mode in ("literal", "balance"):
        config = changes.apply(seq.load(), entropy_mode_changes(mode))
        assert config.model.overrides["entropy_mode"] == mode and config.model.overrides["routing"] == "sequence"
    with pytest.raises(ConfigError, match="release, literal, balance"):
        entropy_mode_changes("maximise")


def test_usage_summary_tells_a_det_r_split_from_a_collapse(tiny_bert6):
    det = expert_usage(encoder_for(tiny_bert6), QUESTIONS, PASSAGES).assign(model="det")
    encoder = encoder_for(tiny_bert6, routing="sequence", num_experts=4)
    force_expert(encoder.model, {3: 2, 6: 2})
    collapsed = expert_usage(encoder, QUESTIONS, PASSAGES).assign(model="collapsed")
    summary = usage_summary(pd.concat([det, collapsed])).set_index(["model", "layer"])
    assert (summary.loc["det", "separation"] == 1.0).all() and (summary.loc["collapsed", "separation"] == 0.0).all()
    assert (summary[["top_question", "top_passage"]] == 1.0).all().all()


def test_usage_inputs_are_a_seeded_sample_of_both_sides():
    from taser_lib.data.types import Dataset, Document, Query

    data = Dataset("toy", "test", corpus={f"d{i}": Document(f"d{i}", f"text {i}", "") for i in range(30)},
                   queries={f"q{i}": Query(f"q{i}", f"question {i}") for i in range(12)})
    questions, passages = usage_inputs(data, 5, seed=3)
    assert len(questions) == 5 and len(passages) == 5 and len(set(questions)) == 5
    assert (questions, passages) == usage_inputs(data, 5, seed=3)
    assert all(isinstance(q, str) for q in questions)  # texts, ready to encode
    assert usage_inputs(data, None)[0] == [data.queries[q].text for q in sorted(data.queries)]
    assert len(usage_inputs(data, 100)[1]) == 30


def _two_seeds_swapped() -> pd.DataFrame:
    """Two seeds that learned the same split with the expert numbers swapped: questions 90% / passages 20% to one
    expert."""
    rows = []
    for seed, first in ((1, 0), (2, 1)):
        for side, share in (("question", 0.9), ("passage", 0.2)):
            for e in (0, 1):
                rows.append({"model": "seq", "seed": seed, "layer": 3, "side": side, "unit": "sequence",
                             "expert": e, "share": share if e == first else 1 - share})
    return pd.DataFrame(rows)


def test_experts_are_aligned_across_seeds_before_averaging():
    usage = _two_seeds_swapped()
    aligned = align_experts(usage)
    mean = aligned.groupby(["side", "expert"])["share"].mean()
    assert mean[("question", 0)] == pytest.approx(0.9) and mean[("passage", 0)] == pytest.approx(0.2)
    assert usage.groupby(["side", "expert"])["share"].mean().eq(0.5).all()  # unaligned, the seeds cancel out
    summary = usage_summary(usage).iloc[0]
    assert summary["top_question"] == pytest.approx(0.9) and summary["top_passage"] == pytest.approx(0.8)
    assert summary["separation"] == pytest.approx(0.7)
    fig = plot_expert_usage(usage)
    grid = fig.axes[0].images[0].get_array()
    np.testing.assert_allclose(grid, [[0.9, 0.1], [0.2, 0.8]])
    assert "per seed" in fig.axes[0].get_xlabel()
