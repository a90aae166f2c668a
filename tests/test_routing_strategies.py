"""models.routing: TASER's routing schemes as strategy objects, one table of names."""

from __future__ import annotations

import pytest
import torch

from taser_lib.errors import ConfigError
from taser_lib.models import TaserConfig, TaserModel
from taser_lib.models.routing import (ROUTING_STRATEGIES, ROUTINGS, DeterministicRouting, SharedRouting,
                                      TokenRouting, routing_strategy)


def test_the_table_holds_the_four_schemes_and_what_each_requires():
    assert ROUTINGS == ("deterministic", "sequence", "token", "shared")
    assert {n: s.experts for n, s in ROUTING_STRATEGIES.items()} == \
        {"deterministic": 2, "sequence": None, "token": None, "shared": 1}
    assert {n for n, s in ROUTING_STRATEGIES.items() if s.learned} == {"sequence", "token"}
    assert {n: s.default_experts for n, s in ROUTING_STRATEGIES.items()} == \
        {"deterministic": 2, "sequence": 2, "token": 2, "shared": 1}
    assert routing_strategy("token") == TokenRouting() and routing_strategy("token").unit == "token"
    assert DeterministicRouting().expert_names(2) == ["Q-FFN", "P-FFN"] and SharedRouting().expert_names(1) == ["FFN"]


def test_a_config_checks_its_experts_against_its_scheme():
    assert TaserConfig(routing="sequence", num_experts=4).strategy.name == "sequence"
    with pytest.raises(ConfigError, match="Det-R.*exactly 2 experts.*num_experts=3"):
        TaserConfig(routing="deterministic", num_experts=3)
    with pytest.raises(ConfigError, match="TASER_Shared.*exactly 1 expert,"):
        TaserConfig(routing="shared", num_experts=2)
    with pytest.raises(ConfigError, match="routing must be one of"):
        routing_strategy("random")


def test_only_learned_schemes_build_a_router_and_shared_routing_defaults_to_one_expert():
    small = dict(vocab_size=50, hidden_size=16, num_hidden_layers=3, num_attention_heads=2, intermediate_size=32,
                 shared_blocks=2)
    for name, scheme in ROUTING_STRATEGIES.items():
        model = TaserModel(TaserConfig(routing=name, num_experts=scheme.default_experts, **small))
        layer = next(m for m in model.modules() if type(m).__name__ == "TaserLayer")
        assert (layer.router is not None) == scheme.learned and len(layer.experts) == scheme.default_experts
        assert layer.strategy is scheme
        ids = torch.randint(0, 50, (2, 5))
        mask = torch.ones_like(ids)
        model.eval()
        q, p = model.encode_query(ids, mask), model.encode_passage(ids, mask)
        assert q.shape == p.shape and q.shape[0] == 2 and torch.isfinite(q).all()
        if name == "deterministic":  # the Q-FFN and the P-FFN differ once their weights do
            with torch.no_grad():
                layer.experts[1].output.dense.weight.add_(1.0)
            assert not torch.allclose(model.encode_query(ids, mask), model.encode_passage(ids, mask))
