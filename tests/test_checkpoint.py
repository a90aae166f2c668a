"""Checkpoints: exact resume (weights, optimizer, scheduler, RNG streams), atomic writes, pruning."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, BertModel, get_linear_schedule_with_warmup

from taser_lib.training import checkpoint as ckpt
from taser_lib.training.checkpoint import latest_checkpoint, list_checkpoints, load_checkpoint, save_checkpoint


def make_run(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=10)
    return model, opt, sched


def train_step(model, opt, sched, gen):
    x = torch.randn(5, 4, generator=gen)
    loss = model(x).pow(2).mean() + 0.01 * torch.randn(1).abs().sum()  # also consumes the global torch stream
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()


def draw(gen):
    return (random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist(), torch.rand(2, generator=gen).tolist())


def test_round_trip_resumes_exactly(tmp_path):
    model, opt, sched = make_run(0)
    gen = torch.Generator().manual_seed(7)
    random.seed(1), np.random.seed(2)
    for _ in range(3):
        train_step(model, opt, sched, gen)
    path = save_checkpoint(tmp_path, model, opt, sched, step=3, data_state={"epoch": 0, "batch": 3},
                           extra={"best_dev": 0.5}, generators={"sampler": gen})
    assert path == tmp_path / "checkpoint-3" and (path / "model.safetensors").is_file()
    expected_draws = draw(gen)
    train_step(model, opt, sched, gen)
    expected_weights = {k: v.clone() for k, v in model.state_dict().items()}
    expected_lr = sched.get_last_lr()

    # a fresh process state: other init, other seeds, other generator position
    model2, opt2, sched2 = make_run(123)
    gen2 = torch.Generator().manual_seed(99)
    random.seed(5), np.random.seed(6), torch.manual_seed(7)
    state = load_checkpoint(latest_checkpoint(tmp_path), model2, opt2, sched2, generators={"sampler": gen2})
    assert (state.step, state.data_state, state.extra) == (3, {"epoch": 0, "batch": 3}, {"best_dev": 0.5})
    assert draw(gen2) == expected_draws
    train_step(model2, opt2, sched2, gen2)
    for k, v in model2.state_dict().items():
        assert torch.equal(v, expected_weights[k]), k  # bitwise: Adam moments and schedule restored too
    assert sched2.get_last_lr() == expected_lr
    meta = json.loads((path / "trainer_state.json").read_text())
    assert meta["world_size"] == 1 and "versions" in meta["metadata"]


def test_transformers_model_saved_with_save_pretrained_and_tied_weights(tmp_path):
    cfg = BertConfig(vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(0)
    model = BertForMaskedLM(cfg)
    path = save_checkpoint(tmp_path, model, None, None, step=0, data_state={})
    assert (path / "model" / "config.json").is_file() and (path / "model" / "model.safetensors").is_file()
    torch.manual_seed(1)
    other = BertForMaskedLM(cfg)
    load_checkpoint(path, other, restore_rng=False)
    for k, v in other.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k
    assert other.cls.predictions.decoder.weight is other.bert.embeddings.word_embeddings.weight
    # the model folder is an ordinary transformers checkpoint
    encoder = BertModel.from_pretrained(path / "model")
    assert torch.equal(encoder.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight)
    # strict: weights of another architecture are refused
    with pytest.raises(RuntimeError):
        load_checkpoint(path, torch.nn.Linear(2, 2), restore_rng=False)


def tied_plain_module():
    model = torch.nn.Sequential(torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5, bias=False))
    model[1].weight = model[0].weight  # tied
    return model


def test_tied_plain_module_round_trip(tmp_path):
    torch.manual_seed(0)
    model = tied_plain_module()
    save_checkpoint(tmp_path, model, None, None, step=1, data_state={})
    torch.manual_seed(1)
    other = tied_plain_module()
    load_checkpoint(tmp_path / "checkpoint-1", other, restore_rng=False)
    assert torch.equal(other[0].weight, model[0].weight) and other[1].weight is other[0].weight


def test_keep_last_overwrite_and_validation(tmp_path):
    model, opt, sched = make_run(0)
    for step in (10, 20, 30):
        save_checkpoint(tmp_path, model, opt, sched, step=step, data_state={"step": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-20", "checkpoint-30"]
    save_checkpoint(tmp_path, model, opt, sched, step=30, data_state={"again": True}, keep_last=2)
    assert load_checkpoint(latest_checkpoint(tmp_path), model).data_state == {"again": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-20", "checkpoint-30"]
    with pytest.raises(ValueError, match="JSON"):
        save_checkpoint(tmp_path, model, opt, sched, step=40, data_state={"bad": object()})
    with pytest.raises(FileNotFoundError, match="not a checkpoint"):
        load_checkpoint(tmp_path, model)
    save_checkpoint(tmp_path, model, opt, None, step=50, data_state={})
    with pytest.raises(FileNotFoundError, match="scheduler.pt"):
        load_checkpoint(tmp_path / "checkpoint-50", model, opt, sched)
    assert latest_checkpoint(tmp_path / "nothing-here") is None


def test_failed_overwrite_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    model, opt, sched = make_run(0)
    save_checkpoint(tmp_path, model, opt, sched, step=5, data_state={"v": 1})

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, model, opt, sched, step=5, data_state={"v": 2})
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-5"]
    assert load_checkpoint(tmp_path / "checkpoint-5", model, opt, sched).data_state == {"v": 1}


CRASHING_WRITER = textwrap.dedent("""
    import os, sys, torch
    from taser_lib.training.checkpoint import save_checkpoint
    run_dir = sys.argv[1]
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.no_grad():
        model.weight.fill_(1.0)
    save_checkpoint(run_dir, model, opt, None, step=1, data_state={"batch": 1}, keep_last=1)
    with torch.no_grad():
        model.weight.fill_(2.0)

    def die_mid_write(obj, f, *args, **kwargs):
        with open(f, "wb") as out:
            out.write(b"half a file")
        os._exit(9)  # a hard kill: no exception handler, no cleanup runs

    torch.save = die_mid_write
    save_checkpoint(run_dir, model, opt, None, step=2, data_state={"batch": 2}, keep_last=1)
""")


def test_process_killed_mid_write_leaves_previous_checkpoint_loadable(tmp_path):
    proc = subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 9, proc.stderr
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1 and (leftovers[0] / "optimizer.pt").read_bytes() == b"half a file"
    latest = latest_checkpoint(tmp_path)
    assert latest == tmp_path / "checkpoint-1"  # keep_last=1 did not delete it before step 2 was complete
    model = torch.nn.Linear(4, 3)
    assert load_checkpoint(latest, model, restore_rng=False).data_state == {"batch": 1}
    assert torch.equal(model.weight, torch.ones(3, 4))
    # the next save clears the crashed one's leftovers
    save_checkpoint(tmp_path, model, None, None, step=2, data_state={"batch": 2}, keep_last=1)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-2"]


def test_checkpoints_have_hugging_faces_names_and_older_runs_resume(tmp_path):
    """`checkpoint-<step>` as transformers' Trainer names them; a run folder of an older version, whose checkpoints
    are `step-<9 digits>`, resumes from them and prunes them as its own."""
    model, opt, sched = make_run(0)
    old = save_checkpoint(tmp_path, model, opt, sched, step=5, data_state={"at": 5}, keep_last=2)
    assert old.name == "checkpoint-5"
    old = old.rename(tmp_path / "step-000000005")  # as the older version wrote it
    assert latest_checkpoint(tmp_path) == old and load_checkpoint(old, model).data_state == {"at": 5}
    for step in (10, 100):
        save_checkpoint(tmp_path, model, opt, sched, step=step, data_state={"at": step}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["checkpoint-10", "checkpoint-100"]  # by step, not name
    assert load_checkpoint(latest_checkpoint(tmp_path), model).data_state == {"at": 100}
