"""The "tiny" model name: a random BERT built once per cache folder from a fixed seed, with the packaged model's
tokenizer (the smoke profile's model)."""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from taser_lib.models import TINY, build_model, default_checkpoint, load_encoder, resolve_checkpoint, tiny_checkpoint
from taser_lib.models.weights import TINY_CONFIG


def test_tiny_is_built_once_from_a_fixed_seed_without_touching_the_callers_random_state(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path / "a"))
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    first = tiny_checkpoint()
    assert torch.equal(torch.rand(3), expected_next), "building the tiny model changed the caller's random state"
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert resolve_checkpoint(TINY) == first and (first / "model.safetensors").stat().st_mtime_ns == stamp  # reused
    for name in ("vocab.txt", "tokenizer.json"):
        assert (first / name).read_bytes() == (default_checkpoint() / name).read_bytes()

    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path / "b"))  # another machine's cache: the same weights
    second = tiny_checkpoint()
    assert second != first
    a, b = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not list(first.parent.glob(".*")), "a temporary folder was left behind"


def test_tiny_serves_every_model_kind_like_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_CACHE_DIR", str(tmp_path))
    vectors = load_encoder(TINY).encode_queries(["who wrote hamlet"])
    assert vectors.shape == (1, TINY_CONFIG["hidden_size"])
    taser = build_model("taser", TINY)  # T = 2 over 6 layers: two specialized blocks
    assert taser.config.num_hidden_layers == TINY_CONFIG["num_hidden_layers"]
    assert taser.config.hidden_size == TINY_CONFIG["hidden_size"]
