"""The run cache (`taser_book.runs.cache`): a training config is trained once and its finished run reused;
another config, other data or another seed is another run; forcing retrains without losing the finished run;
an interrupted run resumes from its checkpoint; concurrent callers wait on the run's lock."""

from __future__ import annotations

import fcntl
import json
import shutil
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import make_tiny_bert, tiny_config, write_squad_sample, write_yaml
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_lib.data.squad_open import build_squad_open
from taser_lib.errors import ConfigError
from taser_book.runs import cache
from taser_lib.training import loop
from taser_lib.training.checkpoint import checkpoint_name, list_checkpoints
from taser_lib.training.kinds import config_from_dict

pytestmark = pytest.mark.usefixtures("one_thread")

STEPS = 6


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("run-cache")
    squad = build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")
    return make_tiny_bert(root / "bert"), write_squad_sample(squad, root, n_train=32, n_dev=16)


def small(setup, **loop_fields) -> dict:
    """A tiny retriever config: a few steps of a tiny BERT, dev R@K on 16 questions, checkpoints every 2 steps."""
    model_dir, data = setup
    config = tiny_config(model_dir, data, Path("unused-output-dir"),
                         **{"max_steps": STEPS, "eval_every": 3, "checkpoint_every": 2, **loop_fields})
    config["data"]["train_eval_questions"] = 0
    return config


class Counter:
    """Wraps the kind runner (`cache._run_kind`) and counts how often training was started."""

    def __init__(self, monkeypatch):
        self.calls, self.real = 0, cache._run_kind
        monkeypatch.setattr(cache, "_run_kind", self)

    def __call__(self, config, progress):
        self.calls += 1
        return self.real(config, progress)


@pytest.fixture
def counter(monkeypatch):
    monkeypatch.delenv(cache.ENV_FORCE, raising=False)
    return Counter(monkeypatch)


def weights(run: cache.CachedRun, which: str = "final") -> dict[str, torch.Tensor]:
    return load_file(run.dir / which / "model.safetensors")


def test_second_call_reuses_the_finished_run(setup, tmp_path, counter, capsys, monkeypatch):
    runs = tmp_path / "runs"
    first = cache.trained_run(small(setup), runs_root=runs)
    assert counter.calls == 1 and not first.reused
    assert first.dir.parent == runs and first.dir.name == f"retriever-{first.key[:12]}"
    for name in ("config.yaml", "fingerprint.json", "finished.json", "curve.jsonl"):
        assert (first.dir / name).is_file(), name
    assert first.result["final_step"] == STEPS and first.model_path == first.dir / "best"
    assert not (first.dir / "checkpoints").exists(), "a finished run keeps its models, not its resumable state"
    assert first.train_result.best_step == first.result["best_step"]
    assert type(first.load()).__name__ == "TaserModel"

    # the YAML beside the run reads back to the resolved config, and it is the config that trained
    saved = json.loads((first.dir / "fingerprint.json").read_text())
    assert config_from_dict(saved["resolved_config"]) == first.config
    assert first.config.loop.output_dir == str(first.dir)

    capsys.readouterr()
    # the same config from another working directory, with relative paths, as a YAML file: the same run
    model_dir, data = setup
    monkeypatch.chdir(data["train"].parent)
    relative = small(setup)
    relative["data"]["train"][0]["path"] = f"./{data['train'].name}"
    again = cache.trained_run(write_yaml(relative, tmp_path / "again.yaml"), runs_root=runs)
    assert counter.calls == 1, "the second call trained again"
    assert again.reused and again.dir == first.dir and again.result == first.result
    assert f"reusing finished run {first.dir}" in capsys.readouterr().out


def test_key_follows_what_changes_the_model(setup, tmp_path):
    runs, model_dir, data = tmp_path / "runs", *setup
    base = cache.run_location(small(setup), runs_root=runs)
    assert base.parent == runs
    # bookkeeping does not change the trained model: same run
    for field, value in (("output_dir", str(tmp_path / "elsewhere")), ("checkpoint_every", 5), ("keep_last", 7),
                         ("log_every", 3)):
        config = small(setup)
        config["loop"][field] = value
        assert cache.run_location(config, runs_root=runs) == base, field
    # a training field, the seed or an override: another run
    assert cache.run_location(small(setup, learning_rate=2e-3), runs_root=runs) != base
    assert cache.run_location(small(setup), seed=7, runs_root=runs) != base
    assert cache.run_location(small(setup), overrides=["data.hard_negatives=0"], runs_root=runs) != base

    # the data by content: a copy elsewhere is another path (another run); a touched file is the same data; an
    # edited file is other data
    copy = shutil.copy(data["train"], tmp_path / "train.json")
    config = small(setup)
    config["data"]["train"][0]["path"] = str(copy)
    before = cache.run_location(config, runs_root=runs)
    Path(copy).touch()
    assert cache.run_location(config, runs_root=runs) == before
    examples = json.loads(Path(copy).read_text())
    Path(copy).write_text(json.dumps(examples[:-1]))
    assert cache.run_location(config, runs_root=runs) != before
    # the starting checkpoint's weights count too
    (model_dir / "extra.txt").write_text("x")
    try:
        assert cache.run_location(small(setup), runs_root=runs) != base
    finally:
        (model_dir / "extra.txt").unlink()
    assert cache.run_location(small(setup), runs_root=runs) == base


def test_force_retrains_into_the_same_run(setup, tmp_path, counter):
    runs = tmp_path / "runs"
    first = cache.trained_run(small(setup), runs_root=runs)
    forced = cache.trained_run(small(setup), runs_root=runs, force=True)
    assert counter.calls == 2 and not forced.reused and forced.dir == first.dir
    assert forced.result["finished_at"] > first.result["finished_at"]
    assert not list(runs.glob("*.previous-*")), "the moved-aside finished run was not removed"
    for name, tensor in weights(first).items():  # a fresh start from the same seed: the same model (CPU)
        assert torch.equal(tensor, weights(forced)[name]), name
    cache.trained_run(small(setup), runs_root=runs)
    assert counter.calls == 2


def test_force_from_the_environment_retrains_once(setup, tmp_path, counter, monkeypatch):
    runs = tmp_path / "runs"
    cache.trained_run(small(setup), runs_root=runs)
    # TASER_FORCE_RETRAIN=1 in a process started after the run finished: retrain, then reuse within the process
    monkeypatch.setenv(cache.ENV_FORCE, "1")
    monkeypatch.setattr(cache, "_PROCESS_START", time.time())
    assert not cache.trained_run(small(setup), runs_root=runs).reused
    assert cache.trained_run(small(setup), runs_root=runs).reused
    assert counter.calls == 2
    # a forced `taser reproduce` (a time): runs finished before it are retrained once, for all its notebooks
    ((name, value),) = cache.force_retrain_env().items()
    monkeypatch.setenv(name, value)
    monkeypatch.setattr(cache, "_PROCESS_START", time.time() + 1000)  # the time rules, not the process
    assert not cache.trained_run(small(setup), runs_root=runs).reused
    assert cache.trained_run(small(setup), runs_root=runs).reused
    assert counter.calls == 3
    # force=False overrides the environment
    monkeypatch.setenv(cache.ENV_FORCE, f"{time.time() + 1000}")
    assert cache.trained_run(small(setup), runs_root=runs, force=False).reused
    assert counter.calls == 3


class Interrupt(Exception):
    pass


def interrupt_after_checkpoint(monkeypatch, at_step: int) -> None:
    """The loop stops (as if killed) right after writing its checkpoint of step `at_step`."""
    real = loop._Trainer.checkpoint

    def checkpoint(self):
        real(self)
        if self.step == at_step:
            raise Interrupt(f"stopped at step {self.step}")

    monkeypatch.setattr(loop._Trainer, "checkpoint", checkpoint)


def count_steps(monkeypatch) -> list[int]:
    steps: list[int] = []
    real = loop._Trainer.train_step

    def train_step(self):
        out = real(self)
        steps.append(self.step)
        return out

    monkeypatch.setattr(loop._Trainer, "train_step", train_step)
    return steps


def test_an_interrupted_run_resumes_from_its_checkpoint(setup, tmp_path, counter, monkeypatch, capsys):
    runs = tmp_path / "runs"
    reference = cache.trained_run(small(setup), runs_root=tmp_path / "reference")
    with monkeypatch.context() as m:
        interrupt_after_checkpoint(m, at_step=2)
        with pytest.raises(Interrupt):
            cache.trained_run(small(setup), runs_root=runs)
    run_dir = cache.run_location(small(setup), runs_root=runs)
    assert [p.name for p in list_checkpoints(run_dir / "checkpoints")] == [checkpoint_name(2)]
    assert not (run_dir / "finished.json").exists()

    steps = count_steps(monkeypatch)
    resumed = cache.trained_run(small(setup, checkpoint_every=3), runs_root=runs)  # other bookkeeping: same run
    assert "resuming unfinished run" in capsys.readouterr().out
    assert steps == list(range(3, STEPS + 1)), "the run restarted instead of resuming"
    assert resumed.dir == run_dir and resumed.result["final_step"] == STEPS
    for name, tensor in weights(reference).items():
        assert torch.equal(tensor, weights(resumed)[name]), name

    # forcing discards an unfinished run and starts again
    with monkeypatch.context() as m:
        interrupt_after_checkpoint(m, at_step=4)
        with pytest.raises(Interrupt):
            cache.trained_run(small(setup), runs_root=runs, force=True)
    steps.clear()
    forced = cache.trained_run(small(setup), runs_root=runs, force=True)
    assert steps == list(range(1, STEPS + 1)) and forced.result["final_step"] == STEPS


def test_an_interrupted_retrain_keeps_the_finished_run(setup, tmp_path, counter, monkeypatch):
    runs = tmp_path / "runs"
    first = cache.trained_run(small(setup), runs_root=runs)
    with monkeypatch.context() as m:
        interrupt_after_checkpoint(m, at_step=2)
        with pytest.raises(Interrupt):
            cache.trained_run(small(setup), runs_root=runs, force=True)
    (kept,) = runs.glob(f"{first.dir.name}.previous-*")
    assert json.loads((kept / "finished.json").read_text())["finished_at"] == first.result["finished_at"]
    assert not (first.dir / "finished.json").exists()
    # the next call finishes the retrain (resuming it), then drops the old run
    retrained = cache.trained_run(small(setup), runs_root=runs)
    assert not retrained.reused and retrained.result["finished_at"] > first.result["finished_at"]
    assert not kept.exists()

    # killed between moving the finished run aside and starting the new one: the next call puts it back
    shutil.move(first.dir, runs / f"{first.dir.name}.previous-1")
    calls = counter.calls
    back = cache.trained_run(small(setup), runs_root=runs)
    assert back.reused and back.dir == first.dir and counter.calls == calls
    assert back.result["finished_at"] == retrained.result["finished_at"]


def test_seeds_give_one_run_each(setup, tmp_path, counter):
    runs = tmp_path / "runs"
    one, two = cache.trained_runs(small(setup), seeds=[1, 2], runs_root=runs)
    assert counter.calls == 2 and one.dir != two.dir
    assert (one.seed, two.seed) == (1, 2)
    assert one.config.loop.seed == 1 and json.loads((two.dir / "fingerprint.json").read_text())[
        "config"]["loop"]["seed"] == 2
    assert any(not torch.equal(a, weights(two)[k]) for k, a in weights(one).items())
    again = cache.trained_runs(small(setup), seeds=[2, 1], runs_root=runs)
    assert [r.dir for r in again] == [two.dir, one.dir] and all(r.reused for r in again)
    assert counter.calls == 2
    assert {r["seed"] for r in cache.list_runs(runs)} == {1, 2}
    with pytest.raises(ConfigError, match="repeated seeds"):
        cache.trained_runs(small(setup), seeds=[3, 3], runs_root=runs)


def test_a_second_caller_waits_for_the_lock_then_reuses(setup, tmp_path, counter, capsys):
    runs = tmp_path / "runs"
    first = cache.trained_run(small(setup), runs_root=runs)
    results = []
    with open(first.dir.with_name(first.dir.name + ".lock"), "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another process training this run
        waiter = threading.Thread(target=lambda: results.append(cache.trained_run(small(setup), runs_root=runs)))
        waiter.start()
        waiter.join(timeout=1.0)
        assert waiter.is_alive(), "the second caller did not wait for the lock"
        fcntl.flock(held, fcntl.LOCK_UN)
    waiter.join(timeout=60)
    assert results and results[0].reused and counter.calls == 1
    assert "waiting for another process" in capsys.readouterr().out


def test_runs_root_default(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV_RUNS_DIR, str(tmp_path / "mine"))
    assert cache.default_runs_root() == (tmp_path / "mine").resolve()
    monkeypatch.delenv(cache.ENV_RUNS_DIR)
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo / "tests")
    assert cache.default_runs_root() == repo / "runs" / "cache"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_runs_root() == tmp_path / "home" / ".cache" / "taser" / "runs"


def test_taser_train_cache_reuses_and_forces(setup, tmp_path, counter, monkeypatch, capsys):
    from taser_book.cli import main

    monkeypatch.setenv(cache.ENV_RUNS_DIR, str(tmp_path / "runs"))
    config = write_yaml(small(setup), tmp_path / "c.yaml")

    def train(*extra: str) -> dict:
        assert main(["train", "--config", str(config), "--cache", "--set", "loop.seed=5", *extra]) == 0
        out = capsys.readouterr().out
        return json.loads(out[out.index("{"):])

    first, second, forced = train(), train(), train("--force")
    assert (first["reused"], second["reused"], forced["reused"]) == (False, True, False)
    assert first["run_dir"] == second["run_dir"] == forced["run_dir"] == str(
        cache.run_location(small(setup), seed=5, runs_root=tmp_path / "runs"))
    assert Path(first["model"]).is_dir() and first["final_step"] == STEPS
    assert counter.calls == 2
    assert main(["train", "--config", str(config), "--cache", "--output-dir", str(tmp_path / "x")]) == 2


def test_registered_datasets_are_keyed_by_what_training_reads(tmp_path, monkeypatch):
    from taser_lib.datasets import registry
    from taser_lib.datasets import ready as datasets

    prepared = tmp_path / "prepared-squad-open"
    (prepared / "dpr").mkdir(parents=True)
    (prepared / "dpr" / "train.json").write_text("[]")
    (prepared / "meta.json").write_text('{"written": "now"}')
    asked = []
    monkeypatch.setattr(datasets, "ensure_prepared", lambda name, **kw: asked.append(name) or prepared)
    hashes = cache._HashCache(tmp_path / "fingerprints.json")

    def fingerprint(source: dict) -> dict:
        return cache.data_fingerprint({"data": {"train": [source]}}, hashes)

    default = fingerprint({"format": "squad-open", "split": "train", "path": None})
    assert set(default) == {"dataset:squad-open"} and asked == ["squad-open"]
    (prepared / "meta.json").write_text('{"written": "later"}')  # times and versions: not the data
    assert fingerprint({"format": "squad-open", "split": "train", "path": None}) == default
    (prepared / "dpr" / "train.json").write_text('[{"question": "q"}]')
    assert fingerprint({"format": "squad-open", "split": "train", "path": None}) != default
    # a path beside the name says where the data is: only that path counts
    own = fingerprint({"format": "squad-open", "split": "train", "path": str(prepared)})
    assert set(own) == {"data.train[0].path"} and asked == ["squad-open"] * 3
    # a raw registered dataset: its registered sha256s
    wikiqa = fingerprint({"format": "beir", "split": "train", "path": "wikiqa"})["dataset:wikiqa"]
    assert wikiqa["files_sha256"] == {f.path: f.sha256 for f in registry.get("wikiqa").files}


def test_a_renamed_option_keeps_the_key_and_an_older_run_reads_back(tmp_path, monkeypatch):
    """`loop.lr` became `loop.learning_rate` (transformers' spelling): the key keeps the old name, so every run cached
    before is found, and its saved config (with `lr`) reads back as the config it is now."""
    from taser_lib.training.config import config_to_dict
    from taser_lib.training.kinds import load_config
    monkeypatch.setattr(cache, "data_fingerprint", lambda data, hashes: {})
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "squad_open_distill.yaml")
    key, material = cache.run_key(config, cache._HashCache(tmp_path / "fingerprints.json"))
    keyed = material["config"]["loop"]
    assert keyed["lr"] == config.loop.learning_rate and "learning_rate" not in keyed
    older = config_to_dict(config)
    older["loop"]["lr"] = older["loop"].pop("learning_rate")  # what a run cached before the rename saved
    assert cache.key_form(older) == cache.key_form(config_to_dict(config))
    (tmp_path / cache.FINGERPRINT_FILE).write_text(json.dumps({"resolved_config": older}), encoding="utf-8")
    assert cache._saved_config(tmp_path, None) == config


def test_an_option_added_later_keeps_older_runs_keys_at_its_default(tmp_path, monkeypatch):
    from taser_lib.training.config import config_to_dict
    from taser_lib.training.kinds import load_config
    monkeypatch.setattr(cache, "data_fingerprint", lambda data, hashes: {})  # the config alone decides here
    hashes = cache._HashCache(tmp_path / "fingerprints.json")
    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "squad_open_distill.yaml")
    older = config_to_dict(config)
    del older["teacher"]["released"]  # what a run cached before the option existed recorded
    key, material = cache.run_key(config, hashes)
    assert "released" not in material["config"]["teacher"]
    assert key == cache.run_key(config_from_dict(older), hashes)[0]
    released = config_to_dict(config)
    released["teacher"]["released"] = "msmarco-passage-t1"
    released["data"]["dataset"] = "msmarco-passage"
    unreleased = {**released, "teacher": {**released["teacher"], "released": None}}
    assert cache.run_key(config_from_dict(released), hashes)[0] != cache.run_key(config_from_dict(unreleased),
                                                                                 hashes)[0]
