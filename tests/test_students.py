"""Student sizes and testbeds of the DE re-ranking runs (taser_book.runs.students)."""

from __future__ import annotations

from pathlib import Path

import pytest

from taser_lib.errors import ConfigError, TaserError
from taser_lib.training.kinds import load_config
from taser_book.runs.cache import resolve_config
from taser_book.runs import changes
from taser_book.runs.students import hub_name, parse_size, size_changes
from taser_book.runs.students import testbed_changes as changes_for_testbed  # not collected as a test


def test_parse_size_reads_layers_and_embedding_size():
    assert parse_size("6-128") == (6, 128)
    assert parse_size(" 2 - 768 ") == (2, 768)
    assert parse_size("-64") == (None, 64)
    for bad in ["128", "6x128", "0-128", "6-0", ""]:
        with pytest.raises(ConfigError):
            parse_size(bad)


def test_truncate_keeps_layers_and_projects_the_embedding():
    # the default is MiniLM-L6-H384: an L or H equal to its own needs no change
    assert size_changes("2-64") == [changes.model_overrides(num_hidden_layers=2, projection_dim=64)]
    assert size_changes("2-384") == [changes.model_overrides(num_hidden_layers=2)]
    assert size_changes("-64") == size_changes("6-64") == [changes.model_overrides(projection_dim=64)]
    assert size_changes("6-384") == []
    with pytest.raises(ConfigError, match="cannot keep 8"):
        size_changes("8-128")


def test_students_and_the_capacity_pages_read_a_size_alike():
    """de_distillation's small students and de_capacity's DEs of one size are the same runs (same changes)."""
    from taser_book.runs import capacity
    shape = capacity.checkpoint_shape("default")
    for size in ["2-64", "2-384", "6-128", "6-384", "4-256"]:
        assert size_changes(size) == capacity.size_changes(capacity.parse_size(size), "distill", shape), size


def test_hub_names_turc_et_al_checkpoints():
    assert hub_name("6-128") == "google/bert_uncased_L-6_H-128_A-2"
    assert hub_name("2-768") == "google/bert_uncased_L-2_H-768_A-12"
    assert size_changes("6-512", source="hub") == [changes.model(name_or_path="google/bert_uncased_L-6_H-512_A-8")]
    with pytest.raises(ConfigError):
        hub_name("6-100")
    with pytest.raises(ConfigError):
        size_changes("6-128", source="nowhere")


def test_changes_resolve_on_the_distill_config():
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "squad_open_distill.yaml")
    resolved = resolve_config(changes.apply(config, size_changes("2-64") + changes_for_testbed("wikiqa")))
    assert resolved.model.overrides["num_hidden_layers"] == 2
    assert resolved.model.overrides["projection_dim"] == 64
    assert resolved.data.dataset == "wikiqa"
    assert changes_for_testbed("squad-open") == []
    with pytest.raises(ConfigError):
        changes_for_testbed("msmarco")


def test_msmarco_passage_testbed_is_a_data_change():
    assert changes_for_testbed("msmarco-passage") == [changes.data(dataset="msmarco-passage")]
    root = Path(__file__).resolve().parents[1] / "configs"
    for name in ("squad_open_distill.yaml", "squad_open_cross_encoder.yaml"):
        resolved = resolve_config(changes.apply(load_config(root / name), changes_for_testbed("msmarco-passage")))
        assert resolved.data.dataset == "msmarco-passage"
    # The paper's released T1 teacher: only for a distill run on the MS MARCO triples.
    distill = load_config(root / "squad_open_distill.yaml")
    resolved = resolve_config(distill, overrides=["data.dataset=msmarco-passage", "teacher.released=msmarco-passage-t1",
                                                  "teacher.model=null"])
    assert resolved.teacher.released == "msmarco-passage-t1" and resolved.teacher.model is None
    with pytest.raises(TaserError, match="msmarco-passage training triples"):
        resolve_config(distill, overrides=["teacher.released=msmarco-passage-t1"])
    with pytest.raises(TaserError, match="teacher.released must be one of"):
        resolve_config(distill, overrides=["data.dataset=msmarco-passage", "teacher.released=t2"])
