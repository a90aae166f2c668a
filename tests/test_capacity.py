"""The DE paper's capacity axis on any checkpoint: `projection_dim` (a learned linear map of the pooled vector to the
embedding size) and `num_hidden_layers` (the checkpoint's first L layers), set through build_model / model.overrides,
kept by save_pretrained / from_pretrained."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModel, BertModel
from training_helpers import SMALL_VOCAB_BERT, save_small_vocab_bert

from taser_lib.errors import ConfigError
from taser_lib.models import CrossEncoderModel, DPRModel, TaserModel, build_model, check_overrides, load_model
from taser_lib.export import architecture
from taser_lib.training.config import ModelConfig

TINY = dict(SMALL_VOCAB_BERT, num_hidden_layers=4)


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    return save_small_vocab_bert(tmp_path_factory.mktemp("tiny-bert"), TINY["num_hidden_layers"])


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def batch(n=3, length=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (n, length), generator=g)
    mask = torch.ones(n, length, dtype=torch.long)
    mask[0, length - 2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def scores(model):
    with torch.no_grad():
        return model.compute_similarity(model.encode_query(**batch()), model.encode_passage(**batch(n=5, seed=2)))


@pytest.mark.parametrize("arch", ["shared", "dpr", "taser"])
def test_projection_sets_the_embedding_size_and_survives_save_and_load(tiny_bert_dir, tmp_path, arch):
    extra = {"shared_blocks": 1} if arch == "taser" else {}
    model = build_model(arch, tiny_bert_dir, projection_dim=8, num_hidden_layers=2, pooling="mean", **extra).eval()
    assert model.config.projection_dim == 8 and model.config.num_hidden_layers == 2
    q = model.encode_query(**batch())
    assert q.shape == (3, 8)
    before = scores(model)
    model.save_pretrained(tmp_path / arch)
    loaded = load_model(tmp_path / arch).eval()
    assert type(loaded) is type(model)
    assert loaded.config.projection_dim == 8 and loaded.config.num_hidden_layers == 2
    assert torch.allclose(scores(loaded), before, atol=1e-6)
    assert torch.allclose(scores(AutoModel.from_pretrained(tmp_path / arch).eval()), before, atol=1e-6)


def test_normalisation_comes_after_the_projection(tiny_bert_dir):
    model = build_model("shared", tiny_bert_dir, projection_dim=5, normalize=True).eval()
    with torch.no_grad():
        q = model.encode_query(**batch())
    assert q.shape == (3, 5) and torch.allclose(q.norm(dim=-1), torch.ones(3), atol=1e-6)


def test_a_full_size_projection_starts_as_an_isometry(tiny_bert_dir):
    """The fresh projection is orthogonal: at projection_dim = hidden_size the untrained model scores exactly as
    the checkpoint; a smaller one is a random subspace (rows orthonormal)."""
    plain = build_model("shared", tiny_bert_dir, pooling="cls").eval()
    full = build_model("shared", tiny_bert_dir, pooling="cls", projection_dim=32).eval()
    assert torch.allclose(scores(full), scores(plain), atol=1e-5)
    small = build_model("shared", tiny_bert_dir, projection_dim=8).embedding_projection.weight
    assert torch.allclose(small @ small.T, torch.eye(8), atol=1e-5)


def test_keeping_the_first_layers_is_the_checkpoints_own_first_layers(tiny_bert_dir):
    bert = BertModel.from_pretrained(tiny_bert_dir, add_pooling_layer=False).eval()
    b = batch()
    with torch.no_grad():
        hidden = bert(**b, output_hidden_states=True).hidden_states          # embeddings, then each layer
    for layers in (1, 3):
        for arch in ("shared", "dpr"):
            model = build_model(arch, tiny_bert_dir, num_hidden_layers=layers).eval()
            with torch.no_grad():
                tokens = model.encode_tokens("query", **b)
            assert torch.allclose(tokens, hidden[layers], atol=1e-5), (arch, layers)
        ca = build_model("cross-encoder", tiny_bert_dir, num_hidden_layers=layers)
        assert type(ca) is CrossEncoderModel and len(ca.bert.encoder.layer) == layers


def test_dpr_towers_get_their_own_projection_starting_equal(tiny_bert_dir):
    model = build_model("dpr", tiny_bert_dir, projection_dim=6)
    assert isinstance(model, DPRModel)
    q, p = model.embedding_projections["query"].weight, model.embedding_projections["passage"].weight
    assert q.shape == (6, 32) and torch.equal(q, p) and q.data_ptr() != p.data_ptr()


def test_the_projection_trains(tiny_bert_dir):
    model = build_model("shared", tiny_bert_dir, projection_dim=4).train()
    assert isinstance(model, TaserModel)
    sim = model.compute_similarity(model.encode_query(**batch()), model.encode_passage(**batch(n=3, seed=2)))
    torch.nn.functional.cross_entropy(sim, torch.arange(3)).backward()
    grad = model.embedding_projection.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_training_configs_set_both_through_model_overrides():
    section = ModelConfig(arch="shared", name_or_path="default",
                          overrides={"projection_dim": 64, "num_hidden_layers": 3, "similarity_scale": 20})
    assert section.overrides["projection_dim"] == 64 and section.overrides["num_hidden_layers"] == 3
    assert check_overrides("dpr", {"projection_dim": 16}) == {"projection_dim": 16}
    for overrides, key, message in [({"projection_dim": 0}, "projection_dim", "projection_dim must be >= 1"),
                                    ({"projection_dim": "big"}, "projection_dim", "expected an integer"),
                                    ({"num_hidden_layers": 0}, "num_hidden_layers", "must be >= 1")]:
        with pytest.raises(ConfigError, match=message) as err:
            check_overrides("shared", overrides)
        assert err.value.key == key
    with pytest.raises(ConfigError, match="model.overrides.num_hidden_layers"):
        ModelConfig(arch="shared", overrides={"num_hidden_layers": -1})


def test_impossible_capacity_settings_are_refused(tiny_bert_dir):
    with pytest.raises(ConfigError, match=r"num_hidden_layers must lie in \[1, 4\]") as err:
        build_model("shared", tiny_bert_dir, num_hidden_layers=5)
    assert err.value.key == "num_hidden_layers"
    with pytest.raises(ConfigError, match="not a ColBERT field") as err:
        build_model("colbert", tiny_bert_dir, projection_dim=8)
    assert err.value.key == "projection_dim"
    with pytest.raises(ConfigError, match="cannot be exported to sentence-transformers"):
        architecture(build_model("shared", tiny_bert_dir, projection_dim=8))
