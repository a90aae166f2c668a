"""TASER's routing schemes (Cheng et al., Sec. 3 and App. A) as strategy objects: which expert FFN of a specialized
block each input goes to.

- `deterministic` (Det-R): questions to the Q-FFN (expert 0), passages to the P-FFN (expert 1); exactly 2 experts.
- `sequence` (Seq-R): a router (Eq. 3) reads the FFN input of [CLS] and sends the whole sequence to one expert.
- `token` (Tok-R): the router sends each token to its own expert; the entropy term counts real tokens only.
- `shared` (TASER_Shared): one FFN for everything; exactly 1 expert.

A `TaserConfig` keeps the scheme's name (`routing: sequence`, what config.json and YAML files hold) and hands out
the object (`config.strategy`); the model asks the object, never the name:

    >>> strategy = routing_strategy("sequence")
    >>> strategy.learned, strategy.default_experts, strategy.unit
    (True, 2, 'sequence')
    >>> strategy.route(layer, h, kind="query", token_mask=mask)   # inside TaserLayer.forward: the block's output
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class Routing:
    """A routing scheme. `experts`: the number of experts it requires (None: any I >= 1); `learned`: whether the
    block has a router (Eq. 3) and an entropy term; `unit`: what one routing decision covers."""

    name: ClassVar[str]
    experts: ClassVar[int | None] = None
    learned: ClassVar[bool] = False
    unit: ClassVar[str] = "sequence"

    @property
    def default_experts(self) -> int:
        """I when a config leaves it unset: the required number, else 2."""
        return self.experts if self.experts is not None else 2

    def check(self, num_experts: int) -> None:
        if self.experts is not None and num_experts != self.experts:
            raise ConfigError(f"{self.name} routing ({self.label}) needs exactly {self.experts} expert"
                              f"{'s' if self.experts > 1 else ''}, got num_experts={num_experts}")

    @property
    def label(self) -> str:
        return ROUTING_LABELS[self.name]

    def expert_names(self, num_experts: int) -> list[str]:
        return [f"FFN{i + 1}" for i in range(num_experts)]

    def route(self, layer, h: torch.Tensor, kind: str | None, token_mask: torch.Tensor | None) -> torch.Tensor:
        """The output of specialized block `layer` (a `taser.TaserLayer`: its experts and router) for its FFN input
        `h` ([batch, tokens, hidden]) of a batch of `kind` ("query" or "passage", the forward's `routing_kind`)
        whose real tokens `token_mask` marks ([batch, tokens], None: every token)."""
        raise NotImplementedError


ROUTING_LABELS = {"deterministic": "Det-R", "sequence": "Seq-R", "token": "Tok-R", "shared": "TASER_Shared"}


class SharedRouting(Routing):
    name = "shared"
    experts = 1

    def expert_names(self, num_experts: int) -> list[str]:
        return ["FFN"]

    def route(self, layer, h, kind, token_mask):
        return layer.experts[0](h)


class DeterministicRouting(Routing):
    name = "deterministic"
    experts = 2

    def expert_names(self, num_experts: int) -> list[str]:
        return ["Q-FFN", "P-FFN"]

    def route(self, layer, h, kind, token_mask):
        if kind not in ("query", "passage"):
            raise ValueError("deterministic routing needs to know whether the batch holds questions or "
                             "passages: call encode_query / encode_passage, not the BERT forward")
        return layer.experts[0 if kind == "query" else 1](h)


class SequenceRouting(Routing):
    name = "sequence"
    learned = True

    def route(self, layer, h, kind, token_mask):
        logits = layer.router(h[:, 0])  # u = FFN input of [CLS]
        layer.regularize(logits)
        return layer.dispatch(h, logits)


class TokenRouting(Routing):
    name = "token"
    learned = True
    unit = "token"

    def route(self, layer, h, kind, token_mask):
        # each token on its own; entropy over real (non-padding) tokens only
        logits = layer.router(h)
        real = (token_mask.bool() if token_mask is not None
                else torch.ones(h.shape[:2], dtype=torch.bool, device=h.device))
        layer.regularize(logits[real])
        flat = layer.dispatch(h.reshape(-1, 1, h.shape[-1]), logits.reshape(-1, logits.shape[-1]))
        return flat.reshape(h.shape)


# The table of schemes by the name configs use.
ROUTING_STRATEGIES: dict[str, Routing] = {cls.name: cls() for cls in (DeterministicRouting, SequenceRouting,
                                                                       TokenRouting, SharedRouting)}
ROUTINGS = tuple(ROUTING_STRATEGIES)


def routing_strategy(name: str) -> Routing:
    if name not in ROUTING_STRATEGIES:
        raise ConfigError(f"routing must be one of {ROUTINGS}, got {name!r}")
    return ROUTING_STRATEGIES[name]
