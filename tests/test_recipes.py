"""Profile-sized runs (`runs.recipes`): a profile's parameters become one training config, so that every
notebook asking for a model at one profile and seed gets the same cached run; and what a run records of its cost
(`training.usage`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from training_helpers import make_tiny_bert, tiny_config, write_squad_sample, write_yaml
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_lib.data.squad_open import build_squad_open
from taser_lib.errors import ConfigError
from taser_lib.models.routing import DeterministicRouting, TokenRouting
from taser_book.runs import cache
from taser_book.runs import changes
from taser_book.runs.recipes import (RERANKERS, RETRIEVERS, Recipe, learned, profile_changes, recipe,
                                     reranking_changes, training_steps, variant_run)

pytestmark = pytest.mark.usefixtures("one_thread")

PARAMS = dict(model=None, pooling="mean", precision="fp32", max_query_length=24, max_passage_length=64,
              batch_size=8, eval_batch_size=16, epochs=1, learning_rate=1e-3, n_train=24, n_queries=None,
              n_docs=None)


def test_steps_follow_questions_epochs_and_batch():
    assert training_steps({"n_train": 24, "epochs": 1, "batch_size": 8}) == 3
    assert training_steps({"n_train": 25, "epochs": 1, "batch_size": 8}) == 4  # the last partial batch counts
    assert training_steps({"n_train": 24, "epochs": 2, "batch_size": 8}) == 6
    assert training_steps({"n_train": None, "epochs": 3, "batch_size": 8}) is None


def _sized(table, name, to_apply):
    """The config of recipe `table[name]` after `to_apply` (a list of changes, or a function of the config giving
    one)."""
    config = table[name].load()
    return changes.apply(config, to_apply(config) if callable(to_apply) else to_apply)


def test_profile_changes_map_each_parameter():
    config = _sized(RETRIEVERS, "taser", profile_changes({**PARAMS, "model": "default", "n_queries": 20}))
    assert config.model.name_or_path == "default"
    assert (config.loop.max_steps, config.loop.batch_size, config.loop.learning_rate) == (3, 8, 0.001)
    assert config.data.max_passage_length == 64 and config.data.dev_questions == 20
    own = RETRIEVERS["taser"].load().data.dev_corpus_sample
    assert config.data.dev_corpus_sample == own  # null n_docs keeps the config's own sample
    assert config.loop.eval_every == 3  # a tiny run evaluates only at its end (and at step 0)
    whole = _sized(RETRIEVERS, "taser", profile_changes({**PARAMS, "n_train": None, "pooling": "cls"}))
    assert whole.loop.max_steps is None and whole.loop.eval_every == RETRIEVERS["taser"].load().loop.eval_every
    assert whole.model.overrides["pooling"] == "cls" and whole.model.overrides["normalize"] is False
    assert whole.model.overrides["similarity_scale"] == 1.0  # the papers' dot product with [CLS]
    with pytest.raises(TypeError):  # a misspelt field fails where the change is applied, not in a parser later
        changes.apply(RETRIEVERS["taser"].load(), [changes.loop(max_stepz=3)])


def test_reranking_changes_size_teacher_and_students():
    sized = {**PARAMS, "cross_encoder_model": "default", "n_queries": 10}
    ca = _sized(RERANKERS, "ca", lambda c: reranking_changes(c, sized))
    assert ca.model.name_or_path == "default" and ca.training.max_length == 88  # query + passage
    assert ca.data.train_queries == 24 and ca.data.test_queries == 10
    assert ca.model.overrides["pooling"] == "mean"  # the CA reads the mean token of a mean-pooling checkpoint
    cls = _sized(RERANKERS, "ca", lambda c: reranking_changes(c, {**PARAMS, "pooling": "cls"}))
    assert "pooling" not in (cls.model.overrides or {})
    student = _sized(RERANKERS, "de-softmax-ce", lambda c: reranking_changes(c, {**PARAMS, "model": "default"}))
    assert student.training.max_passage_length == 64 and student.data.test_queries is None
    assert student.teacher.max_length == 88 and student.training.loss == "softmax-ce"
    with pytest.raises(ConfigError, match="kind"):
        reranking_changes(RETRIEVERS["taser"].load(), PARAMS)


def test_rerank_loop_sets_questions_per_step_and_the_evaluation_interval():
    own = RERANKERS["de-one-hot"].load().loop
    plain = _sized(RERANKERS, "de-one-hot", lambda c: reranking_changes(c, {**PARAMS, "n_train": 96}))
    assert (plain.loop.batch_size, plain.loop.eval_every, plain.loop.max_steps) == \
        (own.batch_size, own.eval_every, 96 // own.batch_size)
    sized = {**PARAMS, "n_train": 96, "epochs": 2, "rerank_loop": {"batch_size": 32, "eval_every": 5}}
    for name in ("ca", "de-one-hot"):
        config = _sized(RERANKERS, name, lambda c: reranking_changes(c, sized))
        assert (config.loop.batch_size, config.loop.eval_every, config.loop.max_steps) == (32, 5, 6)  # 96 * 2 / 32
    whole = _sized(RERANKERS, "ca", lambda c: reranking_changes(c, {**sized, "n_train": None}))
    assert whole.loop.max_steps is None and whole.loop.batch_size == 32
    with pytest.raises(ConfigError, match="rerank_loop: unknown key 'lr'"):
        reranking_changes(RERANKERS["ca"].load(), {**PARAMS, "rerank_loop": {"lr": 1.0}})


def test_the_teacher_takes_its_own_sizes(monkeypatch):
    from taser_book.runs import recipes
    calls = []
    monkeypatch.setattr(recipes, "trained_run", lambda config, seed, **kw: calls.append(config) or config)
    sized = {**PARAMS, "cross_encoder_model": "default", "n_queries": 500,
             "teacher": {"n_train": 80, "n_queries": None}}
    recipes.reranking_run("ca", 13, sized)
    ca = calls[-1]
    assert ca.data.train_queries == 80 and ca.data.test_queries is None  # the teacher's own sizes
    assert ca.data.dev_queries == RERANKERS["ca"].load().data.dev_queries
    teacher = SimpleNamespace(model_path="/runs/ca/best")
    recipes.reranking_run("de-softmax-ce", 13, sized, teacher=teacher)
    student = calls[-1]
    assert student.data.train_queries == 24 and student.data.test_queries == 500
    assert student.data.dev_queries == 40  # capped at the config's own dev sample
    assert student.loop.max_steps == 6  # ceil(24 questions / 4 per step)
    assert student.teacher.model == "/runs/ca/best"
    recipes.reranking_run("de-softmax-ce", 13, {**sized, "n_queries": 10}, teacher=teacher,
                          changes=[changes.training(tau=2.0)])
    assert calls[-1].data.dev_queries == 10 and calls[-1].training.tau == 2.0  # the page's, last
    with pytest.raises(ConfigError, match="teacher="):
        recipes.reranking_run("de-softmax-ce", 13, sized)


def test_the_recipes_name_existing_configs_and_make_their_changes():
    assert {"dpr", "taser", "shared", "seq-r-2", "tok-r-4"} <= set(RETRIEVERS) and "ca" in RERANKERS
    for each in [*RETRIEVERS.values(), *RERANKERS.values()]:
        assert each.config_path().is_file(), each
    merged = RETRIEVERS["tok-r-4"].load().model.overrides  # set in the base config's own overrides
    assert merged["routing"] == TokenRouting.name and merged["num_experts"] == 4 and "shared_blocks" in merged
    with pytest.raises(ConfigError, match="unknown retriever recipe 'nope'; known: dpr, shared, taser"):
        recipe(RETRIEVERS, "nope")
    with pytest.raises(ConfigError, match="unknown re-ranking recipe 'dpr'; known: ca,"):
        recipe(RERANKERS, "dpr")


def test_a_recipe_is_checked_where_it_is_written():
    """A routing that takes a fixed number of experts refuses another where the recipe is made, not when it
    trains; a misspelt config field fails where the change is made."""
    with pytest.raises(ConfigError, match="needs exactly 2 experts"):
        learned("det-r-4", DeterministicRouting(), 4)
    with pytest.raises(TypeError, match="lossname"):
        Recipe("x", "X", "squad_open_distill.yaml", (changes.training(lossname="mse"),)).load()


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


def test_a_student_recipe_is_named_for_its_architecture_and_its_loss_in_the_loss_spelling():
    """One spelling per loss from notebook to object: `de-softmax-ce` trains `training.loss: softmax-ce`."""
    arch_prefix = {"shared": "de", "dpr": "dpr", "taser": "taser", "colbert": "colbert"}
    students = {name: v for name, v in RERANKERS.items() if name != "ca"}
    assert students
    for name, v in students.items():
        loaded = v.load()
        assert name == f"{arch_prefix[loaded.model.arch]}-{loaded.training.loss}", name
        assert loaded.training.objective.name == loaded.training.loss
