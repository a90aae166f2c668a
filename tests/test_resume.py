"""A `taser train` process killed mid-run and started again with the same command ends with the weights, learning
curve and log of an uninterrupted run, bit for bit (CPU)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from training_helpers import make_tiny_bert, tiny_config, write_squad_sample, write_yaml

from taser_lib.data.squad_open import build_squad_open
from taser_lib.training.checkpoint import list_checkpoints

STEPS = 40


def taser_train(config: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-c", "import sys; from taser_book.cli import main; sys.exit(main())",
                             "train", "--config", str(config)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float = 120) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out
    return out


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    squad = build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")
    return make_tiny_bert(root / "bert"), write_squad_sample(squad, root)


def test_killed_run_resumes_to_identical_weights(setup, tmp_path):
    model_dir, data = setup
    configs = {name: write_yaml(tiny_config(model_dir, data, tmp_path / name, max_steps=STEPS, eval_every=8,
                                            checkpoint_every=4, keep_last=2), tmp_path / f"{name}.yaml")
               for name in ("reference", "killed")}
    reference = taser_train(configs["reference"])
    finish(reference)

    killed = taser_train(configs["killed"])
    ckpts = tmp_path / "killed" / "checkpoints"
    deadline = time.monotonic() + 120
    while not list_checkpoints(ckpts) and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()
    assert killed.returncode == -signal.SIGKILL
    steps = [int(p.name.split("-")[1]) for p in list_checkpoints(ckpts)]
    assert steps and max(steps) < STEPS, "the run was not interrupted mid-way"
    assert not (tmp_path / "killed" / "result.json").exists()

    out = finish(taser_train(configs["killed"]))  # the same command again
    assert '"final_step": 40' in out

    ref = load_file(tmp_path / "reference" / "final" / "model.safetensors")
    res = load_file(tmp_path / "killed" / "final" / "model.safetensors")
    assert ref.keys() == res.keys()
    for name in ref:
        assert torch.equal(ref[name], res[name]), name
    for name in ("curve.jsonl", "log.jsonl"):
        assert (tmp_path / "reference" / name).read_text() == (tmp_path / "killed" / name).read_text(), name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_process_on_the_global_batch(setup, tmp_path):
    """DDP: 2 ranks x 4 questions (in-batch negatives gathered across ranks) follow the same losses as one process
    with 8 questions. Dropout is off so that both runs compute the same function."""
    _, data = setup
    model_dir = make_tiny_bert(tmp_path / "bert", dropout=0.0)
    single = tiny_config(model_dir, data, tmp_path / "single", max_steps=3, batch_size=8)
    double = tiny_config(model_dir, data, tmp_path / "ddp", max_steps=3, batch_size=4)
    for config in (single, double):
        config["data"].update(dev=None, train_eval_questions=0)
    finish(taser_train(write_yaml(single, tmp_path / "single.yaml")))
    port = str(free_port())
    procs = [taser_train(write_yaml(double, tmp_path / "ddp.yaml"),
                         {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                          "MASTER_PORT": port}) for r in (0, 1)]
    for proc in procs:
        finish(proc)
    logs = {name: [json.loads(x) for x in (tmp_path / name / "log.jsonl").read_text().splitlines()]
            for name in ("single", "ddp")}
    assert len(logs["ddp"]) == 3
    for a, b in zip(logs["ddp"], logs["single"]):  # step 1: same weights; then updates from the same gradients
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-4)
        assert a["l_sim"] == pytest.approx(b["l_sim"], abs=1e-4)  # logged values are means over the ranks
