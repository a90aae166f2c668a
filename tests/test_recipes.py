"""Profile-sized runs (`runs.recipes`): a profile's parameters become one training config, so that every
notebook asking for a model at one profile and seed gets the same cached run; and what a run records of its cost
(`training.usage`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import yaml
from training_helpers import make_tiny_bert, tiny_config, write_squad_sample, write_yaml
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_lib.data.squad_open import build_squad_open
from taser_lib.errors import ConfigError, FormatError
from taser_book.runs import cache
from taser_book.runs.recipes import (load_variants, profile_overrides, reranking_overrides, training_steps,
                                        variant, variant_run)

pytestmark = pytest.mark.usefixtures("one_thread")

PARAMS = dict(model=None, pooling="mean", precision="fp32", max_query_length=24, max_passage_length=64,
              batch_size=8, eval_batch_size=16, epochs=1, learning_rate=1e-3, n_train=24, n_queries=None,
              n_docs=None)


def test_steps_follow_questions_epochs_and_batch():
    assert training_steps({"n_train": 24, "epochs": 1, "batch_size": 8}) == 3
    assert training_steps({"n_train": 25, "epochs": 1, "batch_size": 8}) == 4  # the last partial batch counts
    assert training_steps({"n_train": 24, "epochs": 2, "batch_size": 8}) == 6
    assert training_steps({"n_train": None, "epochs": 3, "batch_size": 8}) is None


def test_profile_overrides_map_each_parameter():
    sets = dict(s.split("=", 1) for s in profile_overrides({**PARAMS, "model": "default", "n_queries": 20}))
    assert sets["model.name_or_path"] == "default"
    assert sets["loop.max_steps"] == "3" and sets["loop.batch_size"] == "8" and sets["loop.lr"] == "0.001"
    assert sets["data.max_passage_length"] == "64" and sets["data.dev_questions"] == "20"
    assert "data.dev_corpus_sample" not in sets  # null n_docs keeps the config's own sample
    assert sets["loop.eval_every"] == "3"  # a tiny run evaluates only at its end (and at step 0)
    whole = dict(s.split("=", 1) for s in profile_overrides({**PARAMS, "n_train": None, "pooling": "cls"}))
    assert whole["loop.max_steps"] == "null" and "loop.eval_every" not in whole
    assert whole["model.overrides.pooling"] == "cls" and whole["model.overrides.normalize"] == "false"
    assert whole["model.overrides.similarity_scale"] == "1.0"  # the papers' dot product with [CLS]


def test_reranking_overrides_size_teacher_and_students():
    ca = reranking_overrides({**PARAMS, "cross_encoder_model": "default", "n_queries": 10}, "cross-encoder")
    assert "model.name_or_path=default" in ca and "training.max_length=88" in ca  # query + passage
    assert "data.train_queries=24" in ca and "data.test_queries=10" in ca
    assert "model.overrides.pooling=mean" in ca  # the CA reads the mean token of a mean-pooling checkpoint
    assert not any("pooling" in o for o in reranking_overrides({**PARAMS, "pooling": "cls"}, "cross-encoder"))
    student = reranking_overrides({**PARAMS, "model": "default"}, "distill")
    assert "training.max_passage_length=64" in student and "data.test_queries=null" in student
    with pytest.raises(ConfigError, match="kind"):
        reranking_overrides(PARAMS, "retriever")


def test_the_teacher_takes_its_own_sizes(monkeypatch):
    from taser_book.runs import recipes
    calls = []
    monkeypatch.setattr(recipes, "trained_run", lambda path, seed, overrides, **kw: calls.append(overrides) or path)
    sized = {**PARAMS, "cross_encoder_model": "default", "n_queries": 500,
             "teacher": {"n_train": 80, "n_queries": None}}
    recipes.reranking_run("ca", 13, sized)
    ca = calls[-1]
    assert "data.train_queries=80" in ca and "data.test_queries=null" in ca  # the teacher's own sizes
    assert not any(o.startswith("data.dev_queries") for o in ca)
    teacher = SimpleNamespace(model_path="/runs/ca/best")
    recipes.reranking_run("de-softmax-ce", 13, sized, teacher=teacher)
    student = calls[-1]
    assert "data.train_queries=24" in student and "data.test_queries=500" in student
    assert "data.dev_queries=40" in student  # capped at the config's own dev sample
    assert "loop.max_steps=6" in student  # ceil(24 questions / 4 per step)
    recipes.reranking_run("de-softmax-ce", 13, {**sized, "n_queries": 10}, teacher=teacher)
    assert "data.dev_queries=10" in calls[-1]


def test_library_variants_name_existing_configs():
    variants = load_variants()
    assert {"dpr", "taser", "shared", "seq-r-2", "tok-r-4"} <= set(variants)
    for v in [*variants.values(), *load_variants(section="reranking").values()]:
        assert v.config_path().is_file(), v
    assert variant("tok-r-4").set == {"model.overrides.routing": "token", "model.overrides.num_experts": 4}
    with pytest.raises(ConfigError, match="unknown variants entry 'nope'"):
        variant("nope")


def test_a_bad_variants_file_names_the_entry(tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text(yaml.safe_dump({"variants": {"x": {"label": "X"}}}), encoding="utf-8")
    with pytest.raises(FormatError, match=r"variants\.x"):
        load_variants(path)


@pytest.fixture(scope="module")
def configs(shared_data, tmp_path_factory):
    """A configs folder whose squad_open_taser.yaml / squad_open_dpr.yaml train a tiny BERT on a small sample."""
    root = tmp_path_factory.mktemp("recipes")
    squad = build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")
    model_dir, data = make_tiny_bert(root / "bert"), write_squad_sample(squad, root, n_train=24, n_dev=8)
    folder = root / "configs"
    folder.mkdir()
    taser = tiny_config(model_dir, data, root / "unused")
    taser["data"]["train_eval_questions"] = 0
    write_yaml(taser, folder / "squad_open_taser.yaml")
    dpr = {**taser, "model": {**taser["model"], "arch": "dpr"}}
    write_yaml(dpr, folder / "squad_open_dpr.yaml")
    return folder


def test_same_profile_and_seed_share_one_run(configs, tmp_path, monkeypatch):
    monkeypatch.delenv(cache.ENV_FORCE, raising=False)
    runs = tmp_path / "runs"
    first = variant_run("taser", 3, PARAMS, runs_root=runs, configs_dir=configs, progress=False)
    again = variant_run("taser", 3, dict(PARAMS), runs_root=runs, configs_dir=configs, progress=False)
    assert again.reused and again.dir == first.dir
    assert first.result["final_step"] == 3  # 24 questions / batch 8
    usage = first.result["usage"]
    assert usage["steps_timed"] == 3 and usage["seconds_per_step"] > 0 and usage["cpu_seconds_per_step"] > 0
    assert usage["peak_bytes"] >= usage["start_bytes"] > 0 and usage["steps_per_epoch"] == 3
    other_seed = variant_run("taser", 4, PARAMS, runs_root=runs, configs_dir=configs, progress=False)
    routed = variant_run("seq-r-2", 3, PARAMS, runs_root=runs, configs_dir=configs, progress=False)
    assert len({first.dir, other_seed.dir, routed.dir}) == 3
    assert routed.config.model.overrides["routing"] == "sequence"
    assert type(routed.load()).__name__ == "TaserModel" and routed.load().config.routing == "sequence"
