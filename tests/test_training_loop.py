"""The shared training loop on a toy BERT: layer-wise LR decay, learning curves, best checkpoint, resume (in
process), config checks on resume, NaN stops, evaluation leaving the trajectory unchanged."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertModel

from taser_lib.errors import ConfigError
from taser_lib.training.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_lib.training.loop import (
    WEIGHT_GROWTH_LIMIT, LoopConfig, NonFiniteLossError, layer_depth, max_abs_weight, parameter_groups, run_training,
    total_steps, unwrap_model,
)

pytestmark = pytest.mark.usefixtures("one_thread")

TOY = dict(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
           max_position_embeddings=16)


def toy_model(seed: int = 0) -> BertModel:
    torch.manual_seed(seed)
    return BertModel(BertConfig(**TOY), add_pooling_layer=False)


class ToyBatches:
    """8 batches of random token ids per epoch; each batch a function of (epoch, index) only."""

    def __init__(self, n: int = 8):
        self.n, self.epoch = n, 0

    def __len__(self):
        return self.n

    def set_epoch(self, epoch):
        self.epoch = epoch

    def iter_from(self, position):
        for i in range(position, self.n):
            g = torch.Generator().manual_seed(1000 * self.epoch + i)
            yield {"input_ids": torch.randint(1, 50, (4, 6), generator=g), "index": i}


def toy_loss(model, batch):
    hidden = model(input_ids=batch["input_ids"]).last_hidden_state
    loss = (hidden[:, 0] - 1.0).pow(2).mean()  # push the [CLS] vector towards all-ones
    return loss, {"half": float(loss.detach()) / 2}


def cfg(tmp_path, **kw) -> LoopConfig:
    base = dict(output_dir=str(tmp_path / "run"), learning_rate=1e-2, max_steps=6, checkpoint_every=2, eval_every=2,
                warmup_ratio=0.0, log_every=1)
    return LoopConfig(**{**base, **kw})


def weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_layerwise_lr_decay_gives_lower_layers_lower_lr():
    model = toy_model()
    groups = parameter_groups(model, lr=1.0, weight_decay=0.1, layerwise_lr_decay=0.5)
    lr_of = {name: g["lr"] for g in groups for name in g["names"]}
    # 3 layers, no head: the top layer trains at the base LR, each level below at half the LR above it
    assert lr_of["encoder.layer.2.intermediate.dense.weight"] == 1.0
    assert lr_of["encoder.layer.1.output.dense.weight"] == 0.5
    assert lr_of["encoder.layer.0.attention.self.query.weight"] == 0.5 ** 2
    assert lr_of["embeddings.word_embeddings.weight"] == 0.5 ** 3
    decay_of = {name: g["weight_decay"] for g in groups for name in g["names"]}
    assert decay_of["encoder.layer.2.intermediate.dense.bias"] == 0.0
    assert decay_of["encoder.layer.0.output.LayerNorm.weight"] == 0.0
    assert decay_of["encoder.layer.0.output.dense.weight"] == 0.1
    # without decay every group has the base LR
    assert {g["lr"] for g in parameter_groups(model, 1.0, 0.0)} == {1.0}
    # with a head (a cross-encoder's score layer) the head is the top
    head = torch.nn.ModuleDict({"bert": toy_model(), "score": torch.nn.Linear(16, 1)})
    lr_of = {name: g["lr"] for g in parameter_groups(head, 1.0, 0.0, 0.5) for name in g["names"]}
    assert lr_of["score.weight"] == 1.0 and lr_of["bert.encoder.layer.2.output.dense.weight"] == 0.5
    # DPR's towers and anything above the layers
    assert layer_depth("question_encoder.encoder.layer.5.output.dense.weight", 6) == 6
    assert layer_depth("score.weight", 6) == 7


def test_layerwise_lr_decay_survives_the_schedule(tmp_path):
    model = toy_model()
    run_training(model, toy_loss, ToyBatches(), cfg(tmp_path, max_steps=1, layerwise_lr_decay=0.5),
                 progress=False)
    state = torch.load(latest_checkpoint(tmp_path / "run" / "checkpoints") / "optimizer.pt", weights_only=True)
    lrs = sorted({round(g["lr"] / g["initial_lr"], 12) for g in state["param_groups"]})
    assert len(lrs) == 1  # one schedule factor for all groups
    initial = sorted({g["initial_lr"] for g in state["param_groups"]})
    assert initial == pytest.approx(sorted(1e-2 * 0.5 ** k for k in range(4)))


def test_total_steps():
    assert total_steps(LoopConfig("x", epochs=1.0, grad_accum=1), 10) == 10
    assert total_steps(LoopConfig("x", epochs=1.5, grad_accum=4), 10) == 4  # ceil(15 / 4)
    assert total_steps(LoopConfig("x", epochs=3.0, max_steps=7), 10) == 7


def test_curve_files_best_checkpoint_and_result(tmp_path):
    model = toy_model()
    dev_calls = []

    def evaluate(m):
        assert not m.training  # evaluation runs in eval mode
        dev_calls.append(1)
        step = len(dev_calls) - 1  # evaluated at steps 0, 2, 4, 6
        return {"R@20": [0.1, 0.5, 0.9, 0.3][step], "R@1": 0.0}

    result = run_training(model, toy_loss, ToyBatches(), cfg(tmp_path), evaluate=evaluate,
                          train_evaluate=lambda m: {"R@20": 1.0}, progress=False)
    assert model.training  # back in train mode
    assert [r["step"] for r in result.curve] == [0, 2, 4, 6]
    assert (result.best_step, result.best_metric, result.final_step) == (4, 0.9, 6)
    out = tmp_path / "run"
    rows = [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]
    assert rows == result.curve
    assert rows[0]["train_loss"] is None and rows[1]["train_loss"] > 0
    assert rows[1]["loss/half"] == pytest.approx(rows[1]["train_loss"] / 2)
    assert rows[2]["dev/R@20"] == 0.9 and rows[2]["train/R@20"] == 1.0
    header = (out / "curve.csv").read_text().splitlines()[0].split(",")
    assert {"step", "epoch", "lr", "train_loss", "train/R@20", "dev/R@20", "dev/R@1"} <= set(header)
    best = json.loads((out / "best" / "best.json").read_text())
    assert best["step"] == 4 and best["R@20"] == 0.9
    assert BertModel.from_pretrained(out / "best") is not None
    assert json.loads((out / "result.json").read_text())["best_step"] == 4
    assert len([json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]) == 6
    # keep_last=2: only the newest two checkpoints remain
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-4", "checkpoint-6"]


def test_select_min_and_unknown_metric(tmp_path):
    values = iter([3.0, 1.0, 2.0, 5.0])
    result = run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path, select_mode="min",
                                                                   select_metric="loss"),
                          evaluate=lambda m: {"loss": next(values)}, progress=False)
    assert result.best_step == 2
    with pytest.raises(ConfigError, match="R@20"):
        run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path / "b"), evaluate=lambda m: {"MRR": 1.0},
                     progress=False)


class Crash(Exception):
    pass


def test_resume_after_crash_is_bitwise_identical(tmp_path):
    reference = toy_model()
    run_training(reference, toy_loss, ToyBatches(), cfg(tmp_path / "a", max_steps=10, grad_accum=2),
                 progress=False)  # 10 steps of 2 micro-batches: 2.5 epochs, accumulation across an epoch edge

    calls = {"n": 0}

    def crashing_loss(model, batch):
        calls["n"] += 1
        if calls["n"] == 13:  # during step 7, after the checkpoint of step 6
            raise Crash()
        return toy_loss(model, batch)

    config = cfg(tmp_path / "b", max_steps=10, grad_accum=2)
    with pytest.raises(Crash):
        run_training(toy_model(), crashing_loss, ToyBatches(), config, progress=False)
    assert latest_checkpoint(tmp_path / "b" / "run" / "checkpoints").name == "checkpoint-6"
    resumed = toy_model(seed=123)  # different init: the checkpoint must overwrite it
    result = run_training(resumed, toy_loss, ToyBatches(), config, progress=False)
    assert result.final_step == 10
    for name, value in weights(reference).items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    log_a = (tmp_path / "a" / "run" / "log.jsonl").read_text()
    log_b = (tmp_path / "b" / "run" / "log.jsonl").read_text()
    assert log_a == log_b  # the log rows of the lost steps are redone, not duplicated


def test_resume_with_another_config_is_refused(tmp_path):
    run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path, max_steps=2), progress=False)
    with pytest.raises(ConfigError, match=r"learning_rate: 0\.01 -> 0\.02"):
        run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path, max_steps=2, learning_rate=2e-2), progress=False)
    with pytest.raises(ConfigError, match="fingerprint.data"):
        run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path, max_steps=2), fingerprint={"data": "x"},
                     progress=False)
    # the same config: the finished run is recognised and nothing is trained again
    again = run_training(toy_model(), toy_loss, ToyBatches(), cfg(tmp_path, max_steps=2), progress=False)
    assert again.final_step == 2


def test_nan_loss_stops_with_the_step_and_keeps_the_last_checkpoint(tmp_path):
    calls = {"n": 0}

    def nan_at_step_5(model, batch):
        calls["n"] += 1
        loss, logs = toy_loss(model, batch)
        return (loss * math.nan if calls["n"] == 5 else loss), logs

    model = toy_model()
    with pytest.raises(NonFiniteLossError, match=r"loss is nan at step 5 .*checkpoint-4"):
        run_training(model, nan_at_step_5, ToyBatches(), cfg(tmp_path), progress=False)
    assert all(torch.isfinite(p).all() for p in model.parameters())  # no NaN reached the weights
    ckpt = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert ckpt.name == "checkpoint-4"
    fresh = toy_model(seed=9)
    assert load_checkpoint(ckpt, fresh).step == 4
    saved = load_file(ckpt / "model" / "model.safetensors")
    assert all(torch.equal(saved[k], v) for k, v in fresh.state_dict().items() if k in saved)


def test_exploding_learning_rate_stops_before_an_exploded_checkpoint(tmp_path):
    # A warm-up to an absurd learning rate: Adam moves every weight by up to lr per step, so max |w| (1.0 at the
    # start: LayerNorm weights) grows until it passes the limit, a few steps in, while the loss stays finite.
    config = cfg(tmp_path, learning_rate=4e3, warmup_ratio=1.0, max_steps=40, checkpoint_every=1, keep_last=3,
                 max_grad_norm=None)
    model = toy_model()
    start = max_abs_weight(model)
    with pytest.raises(NonFiniteLossError) as err:
        run_training(model, toy_loss, ToyBatches(), config, progress=False)
    message = str(err.value)
    assert "\n" not in message and ("the weights exploded at step" in message or "a weight is" in message)
    kept = list_checkpoints(tmp_path / "run" / "checkpoints")
    assert len(kept) >= 2  # the explosion took a few steps, each checkpointed
    stopped_at = int(message.split(" step ")[1].split(":")[0].split()[0])
    assert int(kept[-1].name.split("-")[1]) == stopped_at - 1  # the step that exploded was never saved
    for ckpt in kept:  # every checkpoint on disk holds finite weights within the limit, and says so
        saved = load_file(ckpt / "model" / "model.safetensors")
        largest = max(float(t.abs().max()) for t in saved.values())
        assert math.isfinite(largest) and largest <= WEIGHT_GROWTH_LIMIT * start
        state = json.loads((ckpt / "trainer_state.json").read_text())["extra"]
        assert state["max_abs_weight"] == pytest.approx(largest) and state["initial_max_abs_weight"] == start
    assert max_abs_weight(model) > WEIGHT_GROWTH_LIMIT * start  # the weights in memory did explode
    assert not (tmp_path / "run" / "final").exists()
    # the remedy: an older checkpoint to start from, and a lower learning rate
    assert f"the one before it {kept[-2]}" in message and f"model.name_or_path: {kept[-2] / 'model'}" in message
    assert "lower learning rate (loop.learning_rate, now 4000)" in message
    # that checkpoint's weights are a good start: a new run from them with a sane learning rate trains
    fresh = BertModel.from_pretrained(kept[-2] / "model")
    result = run_training(fresh, toy_loss, ToyBatches(), cfg(tmp_path / "again", max_steps=2), progress=False)
    assert result.final_step == 2


def test_non_finite_weights_stop_the_run(tmp_path):
    calls = {"n": 0}

    def poisoning_loss(model, batch):
        calls["n"] += 1
        loss, logs = toy_loss(model, batch)
        if calls["n"] == 3:  # a finite loss (sqrt(0) = 0) whose gradient is inf: without clipping, Adam writes NaN
            w = unwrap_model(model).embeddings.word_embeddings.weight[0, 0]
            loss = loss + torch.sqrt(w - w.detach())
        return loss, logs

    with pytest.raises(NonFiniteLossError, match=r"a weight is nan after step 3; training stopped before any "
                                                 r"checkpoint or model of these weights was written"):
        run_training(toy_model(), poisoning_loss, ToyBatches(), cfg(tmp_path, max_grad_norm=None), progress=False)
    assert [p.name for p in list_checkpoints(tmp_path / "run" / "checkpoints")] == ["checkpoint-2"]


def test_evaluation_does_not_change_the_trajectory(tmp_path):
    plain, evaluated = toy_model(), toy_model()
    run_training(plain, toy_loss, ToyBatches(), cfg(tmp_path / "a"), progress=False)

    def consuming_rng(m):
        torch.rand(100), torch.nn.functional.dropout(torch.ones(5), 0.5, training=True)
        return {"R@20": float(torch.rand(()))}

    run_training(evaluated, toy_loss, ToyBatches(), cfg(tmp_path / "b", eval_every=1), evaluate=consuming_rng,
                 progress=False)
    for name, value in plain.state_dict().items():
        assert torch.equal(value, evaluated.state_dict()[name]), name


def test_bad_loop_config_is_a_clear_error():
    with pytest.raises(ConfigError, match="grad_accum"):
        LoopConfig("x", grad_accum=0)
    with pytest.raises(ConfigError, match="select_mode"):
        LoopConfig("x", select_mode="best")
