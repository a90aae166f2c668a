"""One builder for every architecture (`models.auto`), override validation by the config classes, and ColBERT as a
model like the others: encode_* give token vectors, compute_similarity is MaxSim, save/load and AutoModel work."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from training_helpers import make_tiny_bert
from transformers import AutoConfig, AutoModel

from taser_lib.errors import ConfigError
from taser_lib.models import (
    ARCHS, ColbertConfig, ColbertModel, CrossEncoderModel, DenseEncoder, DPRModel, TaserConfig, TaserModel,
    TokenReps, build_model, check_overrides, load_model, load_tokenizer, maxsim, model_fields,
)

from test_models import tiny_bert_dir  # noqa: E402,F401 (one tiny BERT for the model tests; a fixture)


def batch(n=3, length=7, seed=1, pad_row=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.long)
    mask[pad_row, length - 2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


# --- auto.build_model -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("arch, overrides, model_class", [
    ("dpr", {"similarity_scale": 2.0}, DPRModel),
    ("taser", {"routing": "token", "num_experts": 3, "shared_blocks": 1}, TaserModel),
    ("shared", {"pooling": "mean"}, TaserModel),
    ("colbert", {"dim": 8, "reduce": "sum"}, ColbertModel),
    ("cross-encoder", {"hidden_dropout_prob": 0.3}, CrossEncoderModel),
])
def test_build_model_builds_every_arch_with_its_overrides(tiny_bert_dir, arch, overrides, model_class):
    assert arch in ARCHS
    model = build_model(arch, tiny_bert_dir, **overrides).eval()
    assert type(model) is model_class
    for key, value in overrides.items():
        assert getattr(model.config, key) == value
    assert model.config.hidden_size == 32  # the checkpoint's shape, not the config class default
    b = batch()
    if arch == "cross-encoder":
        assert model(**b).shape == (3,)
        return
    scores = model.compute_similarity(model.encode_query(**b), model.encode_passage(**batch(n=5, seed=2)))
    assert scores.shape == (3, 5) and torch.isfinite(scores).all()
    if arch == "shared":
        assert model.config.routing == "shared" and model.config.num_experts == 1


def test_overrides_are_validated_by_the_config_class(tiny_bert_dir):
    bad = [({"shared_blocks": "two"}, "shared_blocks", "expected an integer"),
           ({"experts": 2}, "experts", "'experts' is not a field of arch 'taser'"),
           ({"shared_blocks": 0}, "shared_blocks", r"shared_blocks \(T\) must be >= 1"),
           ({"routing": "random"}, "routing", "routing must be one of"),
           ({"hidden_size": 64}, "hidden_size", "not a field"),  # fixed by the checkpoint
           ({"mlm_head": "yes"}, "mlm_head", "true or false")]
    for overrides, key, message in bad:
        with pytest.raises(ConfigError, match=message) as info:
            check_overrides("taser", overrides)
        assert info.value.key == key
    with pytest.raises(ConfigError, match="fixes routing") as info:
        build_model("shared", tiny_bert_dir, routing="token")
    assert info.value.key == "routing"
    with pytest.raises(ConfigError, match="reduce must be one of"):
        check_overrides("colbert", {"reduce": "max"})
    with pytest.raises(ConfigError, match="dim"):
        check_overrides("dpr", {"dim": 8})  # a ColBERT field is not a DPR field
    with pytest.raises(ConfigError, match="unknown arch"):
        build_model("bm25", tiny_bert_dir)
    # numbers become the field's type; a numeric string (YAML 1.1's 2e-5) is a float; null = the checkpoint's own
    assert check_overrides("taser", {"similarity_scale": 20, "entropy_weight": "1e-2", "pooling": None}) == \
        {"similarity_scale": 20.0, "entropy_weight": 0.01, "pooling": None}


def test_model_fields_come_from_the_config_classes():
    taser = model_fields("taser")
    own = {f.name: f for f in dataclasses.fields(TaserConfig) if "help" in f.metadata}  # TASER's fields
    assert {"shared_blocks", "num_experts", "routing", "entropy_weight"} <= set(own) <= set(taser)
    for name, f in own.items():
        assert taser[name][1] == f.metadata["help"] != ""
    assert taser["shared_blocks"][0] == 2
    assert taser["pooling"][0] is None  # built from a checkpoint: its own pooling
    assert "routing" not in model_fields("shared") and "dim" in model_fields("colbert")
    assert model_fields("colbert")["normalize"][0] is True
    assert set(model_fields("cross-encoder")) == {"hidden_dropout_prob", "attention_probs_dropout_prob",
                                                  "num_hidden_layers", "pooling"}
    assert model_fields("cross-encoder")["pooling"][0] is None  # unset: [CLS], the paper's CA


# --- ColBERT ----------------------------------------------------------------------------------------------------

def test_colbert_encodes_tokens_and_scores_by_maxsim(tiny_bert_dir):
    model = build_model("colbert", tiny_bert_dir, dim=8, similarity_scale=3.0).eval()
    q, p = batch(n=2), batch(n=4, length=9, seed=2, pad_row=1)
    q_reps, p_reps = model.encode_query(**q), model.encode_passage(**p)
    assert isinstance(q_reps, TokenReps) and q_reps.vectors.shape == (2, 7, 8)
    torch.testing.assert_close(q_reps.vectors.norm(dim=-1), torch.ones(2, 7))  # L2-normalised token vectors
    assert torch.equal(p_reps.mask, p["attention_mask"])
    scores = model.compute_similarity(q_reps, p_reps)
    assert scores.shape == (2, 4)
    # MaxSim by hand for one pair: mean over real query tokens of the best real passage token
    qv, pv = q_reps.vectors[0][q["attention_mask"][0].bool()], p_reps.vectors[1][p["attention_mask"][1].bool()]
    by_hand = 3.0 * (qv @ pv.T).max(1).values.mean()
    torch.testing.assert_close(scores[0, 1], by_hand)
    # padding neither matches nor counts: extra padded tokens leave every score unchanged
    padded = TokenReps.cat([p_reps, TokenReps(torch.randn(1, 12, 8), torch.tensor([[1] * 3 + [0] * 9]))])
    torch.testing.assert_close(model.compute_similarity(q_reps, padded)[:, :4], scores)
    # the forward returns both sides and a zero routing entropy (plain BERT tower)
    out = model(query=q, passage=p)
    torch.testing.assert_close(model.compute_similarity(out.q_reps, out.p_reps), scores)
    assert float(out.entropy) == 0.0


def test_colbert_on_a_taser_tower(tiny_bert_dir):
    model = build_model("colbert", tiny_bert_dir, routing="deterministic", shared_blocks=2, dim=8).eval()
    assert model.config.num_experts == 2 and len(model.taser_layers) == model.config.num_hidden_layers // 3
    b = batch()
    with torch.no_grad():  # perturb the P-FFN: questions are unchanged, passages change
        w = model.taser_layers[0].experts[1].output.dense.weight
        before = model.encode_query(**b).vectors, model.encode_passage(**b).vectors
        w.add_(torch.randn_like(w))
        torch.testing.assert_close(model.encode_query(**b).vectors, before[0])
        assert (model.encode_passage(**b).vectors - before[1]).abs().max() > 1e-3


def test_colbert_save_load_round_trip_and_auto_classes(tiny_bert_dir, tmp_path):
    model = build_model("colbert", tiny_bert_dir, dim=8, reduce="sum").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(tmp_path / "colbert")
    q, p = batch(n=2), batch(n=3, seed=2)
    expected = model.compute_similarity(model.encode_query(**q), model.encode_passage(**p))
    for loaded in (load_model(tmp_path / "colbert"), AutoModel.from_pretrained(tmp_path / "colbert")):
        loaded.eval()
        assert type(loaded) is ColbertModel and loaded.config.dim == 8 and loaded.config.reduce == "sum"
        torch.testing.assert_close(loaded.compute_similarity(loaded.encode_query(**q), loaded.encode_passage(**p)),
                                   expected)
    assert isinstance(AutoConfig.from_pretrained(tmp_path / "colbert"), ColbertConfig)


def test_maxsim_ignores_padded_query_tokens_even_against_padding():
    q = torch.tensor([[[1.0, 0.0], [5.0, 5.0]]])
    d = torch.tensor([[[0.5, 0.5], [0.0, 0.0]]])
    score = maxsim(q, torch.tensor([[1, 0]]), d, torch.tensor([[1, 0]]))
    assert float(score) == pytest.approx(0.5) and torch.isfinite(score).all()


def test_dense_encoder_represents_colbert_and_refuses_a_dense_index(tmp_path):
    folder = make_tiny_bert(tmp_path / "bert", dropout=0.0)  # the default tokenizer's vocabulary
    tokenizer = load_tokenizer(folder)
    model = build_model("colbert", folder, dim=8).eval()
    encoder = DenseEncoder(model, tokenizer, device="cpu", show_progress=False, batch_size=2)
    texts = ["a short one", "a much longer question with many more words in it", "mid length text"]
    with pytest.raises(ConfigError, match="token vectors"):
        encoder.encode_queries(texts)
    reps = encoder.represent_queries(texts)  # input order, padded to the longest
    for i, text in enumerate(texts):
        ids = tokenizer([text], return_tensors="pt")
        alone = model.encode_query(ids["input_ids"], ids["attention_mask"])
        n = int(alone.mask.sum())
        assert int(reps.mask[i].sum()) == n
        torch.testing.assert_close(reps.vectors[i, :n], alone.vectors[0], atol=1e-5, rtol=1e-5)
