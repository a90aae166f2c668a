"""The DE paper's capacity axis as data (`runs.capacity`): "L-H" sizes and checkpoint entries turned into the
changes of the CA and DE runs, and the number of documents K per query of Table 6."""

from __future__ import annotations

import json

import pytest

from taser_lib.errors import ConfigError
from taser_book.runs.cache import CachedRun, resolve_config
from taser_book.runs.capacity import (Size, checkpoint_shape, documents_changes, largest, parse_size,
                                         parse_sizes, size_changes, turc_checkpoint)
from taser_lib.training.config import config_to_dict
from taser_book.runs import changes
from taser_book.runs.recipes import RERANKERS

SHAPE = (6, 384)  # the offline default, MiniLM-L6-H384


def test_a_size_on_the_profile_model_cuts_layers_and_projects_the_de_only():
    small = parse_size("2-64")
    assert (small.layers, small.dim, small.checkpoint, small.label) == (2, 64, None, "2-64")
    assert size_changes(small, "distill", SHAPE) == [changes.model_overrides(num_hidden_layers=2, projection_dim=64)]
    assert size_changes(small, "cross-encoder", SHAPE) == [changes.model_overrides(num_hidden_layers=2)]
    narrow = parse_size("6-128")  # full depth: only the projection, and nothing for the CA
    assert size_changes(narrow, "distill", SHAPE) == [changes.model_overrides(projection_dim=128)]
    assert size_changes(narrow, "cross-encoder", SHAPE) == []
    assert size_changes(parse_size(" 6 - 384 "), "distill", SHAPE) == []  # the checkpoint itself


def test_the_checkpoint_size_is_the_same_run_as_no_size_at_all():
    """An explicit setting equal to the checkpoint's value would change the resolved config (and the run's key):
    the mapping gives none, so the largest size reuses every other notebook's DE run."""
    config = RERANKERS["de-one-hot"].load()
    plain = config_to_dict(resolve_config(config, seed=13))
    same = config_to_dict(resolve_config(changes.apply(config, size_changes(Size(6, 384), "distill", SHAPE)), seed=13))
    other = config_to_dict(resolve_config(changes.apply(config, size_changes(Size(6, 64), "distill", SHAPE)), seed=13))
    assert same == plain and other != plain
    assert other["model"]["overrides"]["projection_dim"] == 64


def test_a_checkpoint_entry_starts_both_models_from_it():
    entry = parse_size({"size": "2-128", "checkpoint": turc_checkpoint(2, 128)})
    assert entry.checkpoint == "google/bert_uncased_L-2_H-128_A-2" and entry.label == "2-128"
    for kind in ("distill", "cross-encoder"):
        assert size_changes(entry, kind, SHAPE) == [changes.model(name_or_path="google/bert_uncased_L-2_H-128_A-2")]
    base = parse_size({"size": "12-768", "checkpoint": "bert-base-uncased", "label": "bert-base"})
    assert base.label == "bert-base" and base.name == "12-768"
    assert turc_checkpoint(6, 768) == "google/bert_uncased_L-6_H-768_A-12"


@pytest.mark.parametrize("bad, message", [
    ("6x384", "'L-H'"), ({"checkpoint": "x"}, "needs 'size'"), ({"size": "2-64", "model": "x"}, "unknown key 'model'"),
    (3, "expected 'L-H'"), ("0-64", "at least 1 layer"), ({"size": "2-64", "checkpoint": ""}, "checkpoint"),
])
def test_a_bad_size_names_the_entry(bad, message):
    with pytest.raises(ConfigError, match=message):
        parse_sizes(["6-384", bad])
    with pytest.raises(ConfigError, match=r"sizes\[1\]"):
        parse_sizes(["6-384", bad])


def test_sizes_keep_their_order_and_refuse_repeats_and_impossible_depths():
    sizes = parse_sizes(["6-384", "2-64", "6-64"])
    assert [s.label for s in sizes] == ["6-384", "2-64", "6-64"]
    assert parse_sizes("2-64")[0].label == "2-64"  # one size as a bare string
    with pytest.raises(ConfigError, match="'2-64' appears more than once"):
        parse_sizes(["2-64", {"size": "2-64", "checkpoint": "x"}])
    with pytest.raises(ConfigError, match="at least one"):
        parse_sizes([])
    with pytest.raises(ConfigError, match="has 6 layers, cannot keep 12"):
        size_changes(Size(12, 64), "distill", SHAPE)
    with pytest.raises(ConfigError, match="kind"):
        size_changes(Size(2, 64), "retriever", SHAPE)
    with pytest.raises(ConfigError, match="multiple of 64"):
        turc_checkpoint(2, 100)


def test_largest_is_the_deepest_then_widest():
    sizes = parse_sizes(["2-768", "6-128", "6-384", "4-512"])
    assert largest(sizes).label == "6-384"
    assert largest(parse_sizes(["2-64"])).label == "2-64"
    full = parse_sizes(["6-768", {"size": "12-768", "checkpoint": "bert-base-uncased", "label": "bert-base"}])
    assert largest(full).label == "bert-base" and largest(full, "6-768").label == "6-768"
    with pytest.raises(ConfigError, match="'6-384' is not one of the sizes"):
        largest(full, "6-384")


def test_checkpoint_shape_reads_the_config(tmp_path):
    assert checkpoint_shape("default") == SHAPE
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 128}))
    assert checkpoint_shape(str(tmp_path)) == (2, 128)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 128}))
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        checkpoint_shape(str(tmp_path))


def test_documents_changes_keep_one_candidate_list_for_every_k(tmp_path):
    ca = RERANKERS["ca"].load()
    teacher = CachedRun(tmp_path / "ca", "key", resolve_config(ca, seed=13),
                        {"paths": {"best": str(tmp_path / "ca" / "best")}})
    assert (teacher.config.data.candidates, teacher.config.data.bm25_depth) == (8, 50)  # the CPU config's
    assert documents_changes(2, 20, teacher) == [
        changes.training(group_size=2), changes.data(candidates=20, bm25_depth=50),
        changes.teacher(cache=str(tmp_path / "ca" / "teacher_scores-candidates-20"))]
    assert documents_changes(4, 8, teacher) == [changes.training(group_size=4), changes.data(candidates=8,
                                                                                            bm25_depth=50)]
    assert changes.data(candidates=100, bm25_depth=100) in documents_changes(100, 100, teacher)
    student = RERANKERS["de-softmax-ce"].load()
    shared = config_to_dict(resolve_config(student, seed=13))
    assert config_to_dict(resolve_config(changes.apply(student, documents_changes(4, 8, teacher)), seed=13)) == shared
    # K above the config's own group size: the candidates grow first, whatever order the changes come in
    wide = changes.apply(student, documents_changes(20, 20, teacher))
    assert (wide.training.group_size, wide.data.candidates) == (20, 20)
    wikiqa = CachedRun(tmp_path / "w", "key", resolve_config(changes.apply(ca, [changes.data(dataset="wikiqa")]),
                                                             seed=13),
                       {"paths": {"best": str(tmp_path / "w" / "best")}})
    assert not any(c.section == "teacher" for c in documents_changes(2, 20, wikiqa))
    with pytest.raises(ConfigError, match="K = 30 exceeds"):
        documents_changes(30, 20, teacher)
    with pytest.raises(ConfigError, match="at least 2"):
        documents_changes(1, 20, teacher)
