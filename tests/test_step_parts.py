"""The opt-in benchmark of a training step's parts (`taser bench --only step_parts`)."""

from __future__ import annotations

import pytest
import torch

from taser_book.bench import NAMES, OPT_IN, load_results
from taser_book.bench.step_parts import PARTS, TRAINER, VARIANTS, op_family, profiled
from taser_book.cli import main


def test_op_families():
    assert op_family("aten::addmm") == "matrix products"
    assert op_family("aten::bmm") == "matrix products"
    assert op_family("aten::bernoulli_") == "dropout's random draws"
    assert op_family("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention (softmax, fused kernels)"
    assert op_family("aten::copy_") == "casts and copies"
    assert op_family("aten::gelu") == "other"


def test_profiled_puts_each_op_under_its_part():
    """A step with one matrix product in the forward, a dropout in the backward's place and nothing else: the
    profile finds each in its part and family, and only there (an op's own allocations may add a little 'other')."""
    a = torch.randn(64, 64)

    def step():
        with torch.profiler.record_function("forward"):
            torch.mm(a, a)
        with torch.profiler.record_function("backward"):
            torch.empty(64, 64).bernoulli_(0.5)
        torch.mm(a, a)  # outside every part: not counted
        return 0.0

    found = profiled(step)
    assert set(found) == set(PARTS)
    assert found["forward"]["matrix products"] > 0 and "dropout's random draws" not in found["forward"]
    assert "dropout's random draws" in found["backward"] and "matrix products" not in found["backward"]
    assert found["optimizer"] == {}


@pytest.mark.slow
def test_step_parts_runs_quick(tmp_path, shared_data):
    """Named, its quick mode (the tiny BERT) steps every variant at both precisions and records the parts."""
    assert "step_parts" in OPT_IN and "step_parts" not in NAMES
    rc = main(["bench", "--quick", "--no-progress", "--only", "step_parts", "--out", str(tmp_path),
               "--mirror", str(shared_data), "--data-dir", str(tmp_path / "data")])
    assert rc == 0
    (result,) = load_results(tmp_path)
    measured = result["measured"]
    quick = {name for name, (_, _, compiled) in VARIANTS.items() if not compiled}  # quick mode compiles nothing
    assert set(measured["bf16_speedup"]) == quick
    assert set(measured["step_seconds"]) == {f"{v} | {p}" for v in quick for p in ("fp32", "bf16")}
    for p in ("fp32", "bf16"):
        parts = measured["part_seconds"][p]
        assert set(parts) == set(PARTS) and all(parts[k]["n"] == 1 for k in PARTS)
        # the parts of a step add up to no more than the step, timed around them
        assert sum(parts[k]["median"] for k in PARTS) <= measured["step_seconds_spread"][p]["median"]
        assert measured["profile_self_seconds"][p]["forward"].get("matrix products", 0) > 0
        assert measured["profile_self_seconds"][p]["optimizer"]
    assert TRAINER in measured["bf16_speedup"]
