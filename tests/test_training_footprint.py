"""runs.footprint: measured usage of finished runs as a table; training-state bytes from a model (checked
against a real AdamW); ring all-reduce bytes; the BERT-base shapes of Table A3."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from taser_lib.models import PAPER_PARAMS_M, build_model, count_parameters
from taser_book.runs.footprint import (USAGE_METRICS, allreduce_bytes, bert_base_models, state_table,
                                          training_state_bytes, usage_table)

from training_helpers import make_tiny_bert, one_thread  # noqa: F401 - fixture


def _run(seed, usage, folder="runs/x"):
    return SimpleNamespace(seed=seed, dir=Path(folder), result={"usage": usage})


def test_usage_table_one_row_per_run_and_metric_with_epoch_cpu_time():
    usage = {"seconds_per_step": 2.0, "cpu_seconds_per_step": 3.0, "epoch_seconds": 20.0, "steps_per_epoch": 10,
             "steps_timed": 4, "peak_bytes": 900, "peak_growth_bytes": 300, "start_bytes": 600, "device": "cpu",
             "memory": "VmHWM (reset at start)"}
    table = usage_table({"dpr": [_run(1, usage), _run(2, {**usage, "epoch_seconds": 40.0})],
                         "taser": [_run(1, {**usage, "cpu_seconds_per_step": None})]})
    got = {(r.model, r.seed, r.metric): r.value for r in table.itertuples()}
    assert got[("dpr", 1, "epoch_cpu_seconds")] == 30.0          # cpu seconds per step x steps per epoch
    assert got[("dpr", 2, "epoch_seconds")] == 40.0
    assert ("taser", 1, "cpu_seconds_per_step") not in got       # a metric the run lacks is left out
    assert ("taser", 1, "epoch_cpu_seconds") not in got
    assert len(table[(table.model == "dpr") & (table.seed == 1)]) == len(USAGE_METRICS)
    assert set(table["memory"]) == {"VmHWM (reset at start)"} and set(table["run"]) == {"runs/x"}
    with pytest.raises(ValueError, match="runs/old has no usage record"):
        usage_table({"dpr": [_run(1, {}, "runs/old")]})


def test_state_bytes_by_hand_and_against_a_real_adamw():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    for p in model[1].parameters():
        p.requires_grad_(False)                        # 10 frozen parameters, 16 trainable
    state = training_state_bytes(model)
    assert state == {"parameters": 26 * 4, "gradients": 16 * 4, "optimizer": 2 * 16 * 4, "master_weights": 0,
                     "total": 26 * 4 + 16 * 4 + 2 * 16 * 4, "parameter_count": 26, "trainable_count": 16}
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    moments = sum(t.numel() * t.element_size() for s in optimizer.state.values()
                  for name, t in s.items() if name in ("exp_avg", "exp_avg_sq"))
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    assert state["optimizer"] == moments and state["gradients"] == grads


def test_low_precision_weights_add_float32_master_weights():
    model = torch.nn.Linear(3, 4).to(torch.bfloat16)   # 16 parameters
    state = training_state_bytes(model)
    assert state["parameters"] == state["gradients"] == 16 * 2
    assert state["optimizer"] == 2 * 16 * 2            # torch's AdamW keeps the moments in the weights' dtype
    assert state["master_weights"] == 16 * 4
    assert training_state_bytes(model, optimizer_dtype=torch.float32)["optimizer"] == 2 * 16 * 4


def test_allreduce_bytes_of_a_ring():
    assert allreduce_bytes(1000, 1) == 0
    assert allreduce_bytes(1000, 2) == 1000
    assert allreduce_bytes(1600, 16) == pytest.approx(2 * 15 / 16 * 1600)
    with pytest.raises(ValueError):
        allreduce_bytes(1000, 0)


def test_bert_base_shapes_give_table_a3_and_dpr_sends_twice_shared(one_thread):
    table = state_table(bert_base_models(), world_size=16).set_index("model")
    assert round(table.loc["dpr", "parameter_count"] / 1e6) == PAPER_PARAMS_M[("dpr", None, None)] == 218
    assert round(table.loc["taser", "parameter_count"] / 1e6) == PAPER_PARAMS_M[("taser", "deterministic", 2)]
    assert round(table.loc["shared", "parameter_count"] / 1e6) == PAPER_PARAMS_M[("taser", "shared", 1)]
    assert table.loc["dpr", "allreduce_bytes_per_step"] == 2 * table.loc["shared", "allreduce_bytes_per_step"]
    assert table.loc["dpr", "gradients"] == 4 * table.loc["dpr", "parameter_count"]


def test_state_of_built_models_follows_their_parameters(tmp_path, one_thread):
    bert = make_tiny_bert(tmp_path / "bert")
    dpr, shared = build_model("dpr", bert), build_model("shared", bert)
    table = state_table({"dpr": dpr, "shared": shared}, world_size=4).set_index("model")
    assert table.loc["dpr", "trainable_count"] == count_parameters(dpr) == 2 * count_parameters(shared)
    assert table.loc["dpr", "total"] == 16 * count_parameters(dpr)      # 4 weights + 4 grads + 8 AdamW bytes
    assert table.loc["dpr", "allreduce_bytes_per_step"] == pytest.approx(1.5 * table.loc["dpr", "gradients"])
