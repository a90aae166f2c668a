"""Encoders: parameter counts (TASER Table A1/A3), routing semantics, sparse expert compute, Gumbel gradients,
save/load, conversion of released checkpoints, and the offline default."""

from __future__ import annotations

import math
import socket

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from training_helpers import assert_entropy_moved
from training_helpers import SMALL_VOCAB_BERT, save_small_vocab_bert

from taser_lib.errors import ConfigError, OfflineError, TaserError
from taser_lib.models import (
    CrossEncoderModel, DPRModel, TaserConfig, TaserModel, build_model, from_microsoft_naming,
    load_encoder, load_microsoft_taser, load_model, maxsim, parameter_table, resolve_checkpoint,
    to_microsoft_naming,
)

TINY = dict(SMALL_VOCAB_BERT, num_hidden_layers=6)


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    return save_small_vocab_bert(tmp_path_factory.mktemp("tiny-bert"), TINY["num_hidden_layers"])


def batch(n=3, length=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.long)
    mask[0, length - 2:] = 0  # one padded row
    return {"input_ids": ids, "attention_mask": mask}


def test_parameter_counts_reproduce_table_a1_a3():
    rows = parameter_table(BertConfig())  # BERT-base, meta device: no weights, no download
    assert len(rows) == 7
    for row in rows:
        assert row["params_m"] == row["paper_m"], row
    by = {(r["arch"], r["routing"], r["experts"]): r["params"] for r in rows}
    # DPR is exactly two BERT-base encoders; TASER Det-R adds one FFN (with its LayerNorm) per specialized block.
    ffn = 768 * 3072 + 3072 + 3072 * 768 + 768 + 2 * 768
    assert by[("dpr", None, None)] == 2 * by[("taser", "shared", 1)]
    assert by[("taser", "deterministic", 2)] - by[("taser", "shared", 1)] == 4 * ffn
    assert by[("taser", "sequence", 4)] - by[("taser", "shared", 1)] == 4 * (3 * ffn + 768 * 4 + 4)


def test_specialized_layers_every_t_plus_one():
    assert TaserConfig(num_hidden_layers=12, shared_blocks=2).specialized_layers == [2, 5, 8, 11]  # 3,6,9,12 1-based
    assert TaserConfig(num_hidden_layers=6, shared_blocks=1).specialized_layers == [1, 3, 5]


@pytest.mark.parametrize("kwargs, message", [
    (dict(shared_blocks=0), "shared_blocks"),
    (dict(num_experts=0, routing="sequence"), "num_experts"),
    (dict(num_experts=3, routing="deterministic"), "exactly 2 experts"),
    (dict(num_experts=2, routing="shared"), "1 expert"),
    (dict(routing="random"), "routing must be"),
    (dict(pooling="max"), "pooling must be"),
    (dict(entropy_mode="maximise"), "entropy_mode must be"),
    (dict(passage_format="joined"), "passage_format must be"),
])
def test_bad_configs_are_clear_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TaserConfig(**kwargs)


def test_det_r_from_bert_equals_plain_bert_at_init(tiny_bert_dir):
    bert = BertModel.from_pretrained(tiny_bert_dir, add_pooling_layer=False).eval()
    taser = TaserModel.from_bert(tiny_bert_dir).eval()
    b = batch()
    expected = bert(**b).last_hidden_state[:, 0]
    torch.testing.assert_close(taser.encode_query(**b), expected)
    torch.testing.assert_close(taser.encode_passage(**b), expected)


def test_det_r_routing_semantics(tiny_bert_dir):
    model = TaserModel.from_bert(tiny_bert_dir).eval()
    b = batch()
    q0, p0 = model.encode_query(**b), model.encode_passage(**b)
    layer = model.taser_layers[0]
    with torch.no_grad():  # perturb the P-FFN only
        layer.experts[1].intermediate.dense.weight.add_(torch.randn_like(layer.experts[1].intermediate.dense.weight))
    q1, p1 = model.encode_query(**b), model.encode_passage(**b)
    torch.testing.assert_close(q1, q0)
    assert (p1 - p0).abs().max() > 1e-3
    with torch.no_grad():  # and now the Q-FFN
        layer.experts[0].output.dense.weight.add_(torch.randn_like(layer.experts[0].output.dense.weight))
    q2, p2 = model.encode_query(**b), model.encode_passage(**b)
    torch.testing.assert_close(p2, p1)
    assert (q2 - q1).abs().max() > 1e-3


def _count_expert_rows(model: TaserModel) -> dict:
    """Rows each expert processed (a hook on the expert's first matmul counts real work, not slicing)."""
    counts: dict = {}
    for li, layer in enumerate(model.taser_layers):
        for e, expert in enumerate(layer.experts):
            def hook(_m, inputs, _out, key=(li, e)):
                counts[key] = counts.get(key, 0) + inputs[0].shape[0] * inputs[0].shape[1]
            expert.intermediate.dense.register_forward_hook(hook)
    return counts


def test_only_the_chosen_expert_runs_det_r(tiny_bert_dir):
    model = TaserModel.from_bert(tiny_bert_dir).eval()
    counts = _count_expert_rows(model)
    b = batch(n=4, length=5)
    model.encode_query(**b)
    assert set(counts) == {(0, 0), (1, 0)} and all(v == 4 * 5 for v in counts.values())
    counts.clear()
    model.encode_passage(**b)
    assert set(counts) == {(0, 1), (1, 1)}


@pytest.mark.parametrize("routing, units", [("sequence", lambda n, L: n * L), ("token", lambda n, L: n * L)])
@pytest.mark.parametrize("training", [False, True])
def test_learned_routing_runs_each_unit_through_one_expert(tiny_bert_dir, routing, units, training):
    torch.manual_seed(0)
    model = TaserModel.from_bert(tiny_bert_dir, routing=routing, num_experts=4).train(training)
    counts = _count_expert_rows(model)
    n, length = 6, 5
    model.encode_passage(**batch(n=n, length=length))
    for li in range(len(model.taser_layers)):
        total = sum(v for (l, _), v in counts.items() if l == li)
        assert total == units(n, length), (li, counts)  # every token computed once, by one expert


@pytest.mark.parametrize("routing", ["sequence", "token"])
def test_gumbel_router_gets_gradient_from_task_loss(tiny_bert_dir, routing):
    torch.manual_seed(0)
    model = TaserModel.from_bert(tiny_bert_dir, routing=routing, num_experts=2, entropy_weight=0.0).train()
    b = batch()
    out = model(query=b, passage=batch(seed=2))
    loss = model.compute_similarity(out.q_reps, out.p_reps).diagonal().sum()  # a task loss, no entropy term
    assert model.entropy_weight == 0.0 and float(out.entropy.detach()) < 0.0  # L_ent (release: -H), weighted by 0
    loss.backward()
    grads = [layer.router.weight.grad for layer in model.taser_layers]
    assert all(g is not None for g in grads)
    assert sum(float(g.abs().sum()) for g in grads) > 0


@pytest.mark.parametrize("mode, sign", [("release", -1), ("literal", 1), ("balance", -1)])
def test_entropy_term_on_known_logits(tiny_bert_dir, mode, sign):
    model = TaserModel.from_bert(tiny_bert_dir, routing="sequence", num_experts=4, entropy_weight=0.5,
                                 entropy_mode=mode).eval()
    with torch.no_grad():
        for layer in model.taser_layers:  # uniform routing: P(i) = 1/4 for every input
            layer.router.weight.zero_()
            layer.router.bias.zero_()
    out = model(query=batch(), passage=batch(seed=2))
    # per block +-log 4 under every reading (uniform: per-unit and batch entropy both log 4), averaged over the
    # blocks (as the release does) and added over the question and passage passes
    assert math.isclose(float(out.entropy.detach()), sign * 2 * math.log(4), rel_tol=1e-5)
    for kind in ("query", "passage"):
        h_unit, h_batch = model.routing_stats[kind]
        assert math.isclose(float(h_unit), math.log(4), rel_tol=1e-5)
        assert math.isclose(float(h_batch), math.log(4), rel_tol=1e-5)
    assert model.entropy_weight == 0.5  # beta, for losses.joint_loss (Eq. 5)
    assert float(DPRModel.from_bert(tiny_bert_dir)(query=batch()).entropy) == 0.0


@pytest.mark.parametrize("routing", ["sequence", "token"])
@pytest.mark.parametrize("mode", ["release", "literal", "balance"])
def test_a_step_on_the_entropy_term_moves_the_models_routing_its_way(tiny_bert_dir, routing, mode):
    """Training on beta * L_ent alone (routers only): `release` raises the per-unit routing entropy, `literal`
    lowers it, `balance` raises the entropy of the batch-averaged routing."""
    torch.manual_seed(0)
    model = TaserModel.from_bert(tiny_bert_dir, routing=routing, num_experts=4, entropy_mode=mode).train()
    with torch.no_grad():  # a skewed start: every unit leans to expert 0, some more than others
        for layer in model.taser_layers:
            layer.router.weight.normal_(0.0, 0.3)
            layer.router.bias.copy_(torch.tensor([2.0, 0.0, -0.5, -1.0]))
    b = batch(n=6)

    def entropies():
        with torch.no_grad():
            model.encode_query(**b)
        return [float(x) for x in model.routing_stats["query"]]

    before = entropies()
    routers = [p for layer in model.taser_layers for p in layer.router.parameters()]
    optimizer = torch.optim.SGD(routers, lr=0.5)
    for _ in range(3):
        optimizer.zero_grad()
        model(query=b).entropy.backward()
        optimizer.step()
    after = entropies()
    assert_entropy_moved(mode, before, after)


def test_save_load_round_trip(tiny_bert_dir, tmp_path):
    b = batch()
    for arch, kwargs in [("taser", {}), ("taser", {"routing": "token", "num_experts": 3}), ("shared", {}),
                         ("dpr", {})]:
        model = build_model(arch, tiny_bert_dir, **kwargs).eval()
        with torch.no_grad():  # make the experts / towers differ, as after training
            for p in model.parameters():
                p.add_(0.01 * torch.randn_like(p))
        path = tmp_path / f"{arch}-{len(kwargs)}"
        model.save_pretrained(path)
        assert (path / "model.safetensors").is_file()
        loaded = load_model(path).eval()
        assert type(loaded) is type(model)
        torch.testing.assert_close(loaded.encode_query(**b), model.encode_query(**b))
        torch.testing.assert_close(loaded.encode_passage(**b), model.encode_passage(**b))


def test_dpr_towers_are_separate(tiny_bert_dir):
    model = DPRModel.from_bert(tiny_bert_dir).eval()
    b = batch()
    torch.testing.assert_close(model.encode_query(**b), model.encode_passage(**b))  # same init
    with torch.no_grad():
        w = model.passage_encoder.encoder.layer[0].output.dense.weight
        w.add_(torch.randn_like(w))
    q = model.encode_query(**b)
    assert (model.encode_passage(**b) - q).abs().max() > 1e-3
    assert model.compute_similarity(q, q).shape == (3, 3)


def test_masked_lm_head_tied_pretrained_and_saved(tiny_bert_dir, tmp_path):
    """The auxiliary MLM head (DE Table 9): absent by default; BERT's pretrained head loaded when the checkpoint
    has one (old gamma/beta names too); decoder = the tower's own word embeddings; survives save/load."""
    from transformers import BertForMaskedLM

    from taser_lib.losses import mlm_mask

    assert build_model("shared", tiny_bert_dir).mlm_head is None
    with pytest.raises(ValueError, match="mlm_head=True"):
        build_model("shared", tiny_bert_dir).masked_lm_loss("query", labels=batch()["input_ids"], **batch())
    # a checkpoint with BERT's pretrained MLM head, saved with the old TF LayerNorm names
    torch.manual_seed(3)
    mlm_dir = tmp_path / "bert-mlm"
    BertForMaskedLM(BertConfig(**TINY)).save_pretrained(mlm_dir)
    from safetensors.torch import load_file, save_file
    state = load_file(mlm_dir / "model.safetensors")
    head = {k: v for k, v in state.items() if k.startswith("cls.")}
    with torch.no_grad():
        head["cls.predictions.bias"] = torch.randn_like(head["cls.predictions.bias"])
    renamed = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
               if k.startswith("cls.") else k: v for k, v in {**state, **head}.items()}
    save_file(renamed, mlm_dir / "model.safetensors", metadata={"format": "pt"})
    model = build_model("taser", mlm_dir, mlm_head=True)
    torch.testing.assert_close(model.mlm_head.bias, head["cls.predictions.bias"])
    torch.testing.assert_close(model.mlm_head.transform.LayerNorm.weight,
                               head["cls.predictions.transform.LayerNorm.weight"])
    torch.testing.assert_close(model.mlm_head.transform.dense.weight, head["cls.predictions.transform.dense.weight"])
    # without a pretrained head: a fresh transform and a zero bias
    assert not build_model("shared", tiny_bert_dir, mlm_head=True).mlm_head.bias.any()

    b = batch(n=8, length=12)
    ids, labels = mlm_mask(b["input_ids"], b["attention_mask"], mask_token_id=4, vocab_size=100, probability=0.3,
                           generator=torch.Generator().manual_seed(0))
    masked = {**b, "input_ids": ids, "labels": labels}
    loss = model(masked_query=masked).mlm_loss
    logits = model.mlm_head(model.encode_tokens("query", ids, b["attention_mask"]),
                            model.embeddings.word_embeddings.weight)
    assert logits.shape == (8, 12, 100)
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits.reshape(-1, 100), labels.reshape(-1)))
    loss.backward()  # the tie: the decoder's gradient reaches the input embeddings of tokens never fed in
    unused = sorted(set(range(100)) - set(ids.flatten().tolist()))
    assert model.embeddings.word_embeddings.weight.grad[unused].abs().sum() > 0

    dpr = build_model("dpr", tiny_bert_dir, mlm_head=True)
    with torch.no_grad():
        dpr.mlm_heads["passage"].bias.add_(1.0)
        dpr.passage_encoder.embeddings.word_embeddings.weight.add_(0.1)
    out = dpr(masked_query=masked, masked_passage=masked)
    q, p = dpr.masked_lm_loss("query", **masked), dpr.masked_lm_loss("passage", **masked)
    assert float((q - p).detach().abs()) > 1e-4  # each side goes through its own tower and head
    torch.testing.assert_close(out.mlm_loss, (q + p) / 2)
    dpr.save_pretrained(tmp_path / "dpr")
    loaded = load_model(tmp_path / "dpr")
    assert loaded.config.mlm_head
    torch.testing.assert_close(loaded(masked_query=masked, masked_passage=masked).mlm_loss, out.mlm_loss)


def test_microsoft_taser_conversion_round_trip(tiny_bert_dir):
    model = TaserModel.from_bert(tiny_bert_dir).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    theirs = to_microsoft_naming(model.state_dict())
    # The released naming, spelled out: expert E of layer N under moe_layer.{interm,output}_layers.E.
    assert "encoder.layer.2.moe_layer.interm_layers.1.dense.weight" in theirs
    assert "encoder.layer.5.moe_layer.output_layers.0.LayerNorm.bias" in theirs
    assert "encoder.layer.0.intermediate.dense.weight" in theirs  # stock BertLayer names elsewhere
    assert not any(".experts." in k for k in theirs)
    wrapped = {f"module.{k}": v for k, v in theirs.items()}  # as saved from DDP
    converted = load_microsoft_taser(wrapped, BertConfig(**TINY).to_dict()).eval()
    assert converted.config.shared_blocks == 2 and converted.config.num_experts == 2
    b = batch()
    torch.testing.assert_close(converted.encode_query(**b), model.encode_query(**b))
    torch.testing.assert_close(converted.encode_passage(**b), model.encode_passage(**b))
    assert from_microsoft_naming(theirs).keys() == model.state_dict().keys()


def test_conversion_rejects_unknown_keys_and_pooler(tiny_bert_dir):
    state = to_microsoft_naming(TaserModel.from_bert(tiny_bert_dir).state_dict())
    with pytest.raises(ConfigError, match="pooler"):
        load_microsoft_taser({**state, "pooler.dense.weight": torch.zeros(32, 32)}, BertConfig(**TINY).to_dict())
    with pytest.raises(ConfigError, match="unexpected"):
        load_microsoft_taser({**state, "encoder.layer.0.extra.weight": torch.zeros(1)}, BertConfig(**TINY).to_dict())


def test_cross_encoder_scores_pairs(tiny_bert_dir):
    ce = CrossEncoderModel.from_bert(tiny_bert_dir).eval()
    assert ce(**batch(n=5)).shape == (5,)


def test_cross_encoder_reads_cls_by_default_or_the_mean_token(tiny_bert_dir, tmp_path):
    inputs = batch(n=4)
    cls_ce = CrossEncoderModel.from_bert(tiny_bert_dir).eval()
    mean_ce = CrossEncoderModel.from_bert(tiny_bert_dir, pooling="mean").eval()
    assert cls_ce.config.pooling == "cls" and mean_ce.config.pooling == "mean"
    mean_ce.score.load_state_dict(cls_ce.score.state_dict())  # the same head: only what it reads differs
    with torch.no_grad():
        hidden = cls_ce.bert(**inputs).last_hidden_state
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        expected = cls_ce.score((hidden * mask).sum(1) / mask.sum(1)).squeeze(-1)
        assert torch.allclose(mean_ce(**inputs), expected, atol=1e-5)
        assert torch.allclose(cls_ce(**inputs), cls_ce.score(hidden[:, 0]).squeeze(-1), atol=1e-5)
    mean_ce.save_pretrained(tmp_path / "ce")
    assert CrossEncoderModel.from_pretrained(tmp_path / "ce").config.pooling == "mean"
    with pytest.raises(ConfigError, match="pooling"):
        CrossEncoderModel.from_bert(tiny_bert_dir, pooling="max")


def test_maxsim_hand_example():
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [9.0, 9.0]]])  # third query token is padding
    d = torch.tensor([[[1.0, 0.0], [0.5, 0.5], [0.0, 7.0]]])  # third document token is padding
    qm, dm = torch.tensor([[1, 1, 0]]), torch.tensor([[1, 1, 0]])
    # token 1: max(1, .5) = 1; token 2: max(0, .5) = .5 -> mean .75, sum 1.5
    assert float(maxsim(q, qm, d, dm)) == pytest.approx(0.75)
    assert float(maxsim(q, qm, d, dm, reduce="sum")) == pytest.approx(1.5)


def test_pickled_weights_refused(tmp_path):
    BertConfig(**TINY).save_pretrained(tmp_path)
    torch.save({}, tmp_path / "pytorch_model.bin")
    with pytest.raises(TaserError, match="pickled"):
        TaserModel.from_bert(tmp_path)


def test_hub_name_offline_fails_at_once_naming_default(monkeypatch):
    with pytest.raises(OfflineError, match="'default'"):
        resolve_checkpoint("some-org/not-cached-model")


def test_default_model_offline_matches_sentence_transformers(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the offline default touched the network")
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    enc = load_encoder("default", show_progress=False)
    assert enc.model.config.pooling == "mean" and enc.model.config.normalize  # its own pooling, kept zero-shot
    texts = ["who wrote the play hamlet", "Paris is the capital and most populous city of France.",
             "a short one", "Photosynthesis converts light energy into chemical energy stored in glucose."]
    ours = enc.encode_queries(texts)
    assert ours.dtype == np.float32 and ours.shape == (4, 384)
    from sentence_transformers import SentenceTransformer

    from taser_lib.models import default_checkpoint
    theirs = SentenceTransformer(str(default_checkpoint()), device="cpu").encode(texts)
    assert np.all((ours * theirs).sum(1) > 0.999)  # both unit-normalised: this is cosine
    passages = enc.encode_passages([("Hamlet", "Hamlet is a tragedy written by William Shakespeare."),
                                    ("Paris", "Paris is the capital of France.")])
    scores = enc.encode_queries(["who wrote hamlet"]) @ passages.T
    assert scores[0, 0] > scores[0, 1]
    # a titled passage goes in as sentence-transformers users give it: one string, title + " " + text
    assert enc.passage_format == "concat"
    titled = [("Hamlet", "Hamlet is a tragedy written by William Shakespeare."), ("", "Untitled text here.")]
    joined = SentenceTransformer(str(default_checkpoint()), device="cpu").encode([f"{t} {x}".strip()
                                                                                for t, x in titled])
    assert np.all((enc.encode_passages(titled) * joined).sum(1) > 0.9999)


def test_passage_format_is_the_checkpoints_own_and_survives_save_load(tiny_bert_dir, tmp_path):
    """A plain BERT reads passages as DPR's pair; a sentence-transformers checkpoint (modules.json) as one string;
    an override wins; saved models keep theirs, and a saved config without the field (older models) reads pairs."""
    import json

    from taser_lib.models import DenseEncoder, load_tokenizer

    assert build_model("taser", tiny_bert_dir).config.passage_format == "pair"
    assert build_model("dpr", tiny_bert_dir, passage_format="concat").config.passage_format == "concat"
    st_dir = tmp_path / "st"  # the tiny BERT as a sentence-transformers checkpoint
    BertModel.from_pretrained(tiny_bert_dir).save_pretrained(st_dir)
    (st_dir / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "",
                                                       "type": "sentence_transformers.models.Transformer"}]))
    for arch in ("shared", "taser", "dpr", "colbert"):
        assert build_model(arch, st_dir).config.passage_format == "concat", arch
        assert build_model(arch, st_dir, passage_format="pair").config.passage_format == "pair", arch
    model = build_model("taser", st_dir)
    model.save_pretrained(tmp_path / "saved")
    assert load_model(tmp_path / "saved").config.passage_format == "concat"
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    del config["passage_format"]
    (tmp_path / "saved" / "config.json").write_text(json.dumps(config))
    assert load_model(tmp_path / "saved").config.passage_format == "pair"

    tokenizer = load_tokenizer("default")  # a real vocabulary, to read the tokens back
    passages = [("Hamlet", "hamlet was written by william shakespeare"), "an untitled passage"]
    decoded = {}
    for fmt in ("pair", "concat"):
        enc = DenseEncoder(model, tokenizer, passage_format=fmt, show_progress=False)
        decoded[fmt] = [tokenizer.decode(ids) for ids in enc.tokenize_passages(passages)["input_ids"]]
    assert decoded["pair"][0] == "[CLS] hamlet [SEP] hamlet was written by william shakespeare [SEP]"
    assert decoded["concat"][0] == "[CLS] hamlet hamlet was written by william shakespeare [SEP]"
    assert decoded["pair"][1] == "[CLS] [SEP] an untitled passage [SEP]"  # in a titled batch: an empty title
    assert decoded["concat"][1] == "[CLS] an untitled passage [SEP]"
    assert DenseEncoder(model, tokenizer, show_progress=False).passage_format == "concat"  # the model's own
    with pytest.raises(ConfigError, match="passage_format"):
        DenseEncoder(model, tokenizer, passage_format="joined")


def test_covering_query_length(tiny_bert_dir):
    from taser_lib.models import DenseEncoder, load_tokenizer
    from taser_lib.models.encoding import covering_length

    tokenizer = load_tokenizer("default")
    texts = ["short one", "a somewhat longer query about the aerodynamics of slender wings at supersonic speed"]
    longest = len(tokenizer(texts[1])["input_ids"])
    assert covering_length(tokenizer, texts) == longest
    assert covering_length(tokenizer, texts, limit=8) == 8
    enc = DenseEncoder(build_model("shared", tiny_bert_dir), tokenizer, max_query_length=4, show_progress=False)
    assert enc.covering_query_length(texts) == longest  # < the tiny model's 64 positions
    assert enc.covering_query_length(texts + ["word " * 100]) == TINY["max_position_embeddings"]
    with enc.query_length(longest):
        assert [len(x) for x in enc.tokenize_queries(texts)] == [4, longest]
    assert enc.max_query_length == 4 and len(enc.tokenize_queries(texts)[1]) == 4
