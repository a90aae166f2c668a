"""The re-ranking losses of "In defense of dual-encoders" as objects, the way sentence-transformers' `losses/`
classes are: each carries its one name, whether it needs a teacher, its hyperparameters, and what an extra negative
that the teacher never scored is given as teacher score. The equations themselves are the pure functions of
`taser_lib.losses`; an object only binds one of them to its settings.

    >>> loss = rerank_loss("softmax-ce", tau=2.0)          # the name a config file uses
    >>> loss.needs_teacher, loss.name
    (True, 'softmax-ce')
    >>> loss(s, t, positives)                               # one query's scores, shape [1, K]
    >>> SoftmaxCEDistill(tau=2.0) == loss                   # or build it directly
    True
    >>> rerank_loss("m3se", tau=2.0)                        # a setting the loss does not take is an error
    ConfigError: loss 'm3se' takes no setting tau (it takes none)

A loss owns its hyperparameters: each class checks its own (`tau > 0`, label smoothing in [0, 1), `focal_gamma >= 0`)
when it is built.

Each loss has one spelling from notebook to object, with hyphens (`softmax-ce`): a student recipe's name is its
architecture and that spelling (`de-softmax-ce`, `colbert-one-hot`), and the old underscore spelling of a config
file (`softmax_ce`) is an error that names the new one.

`RERANK_LOSSES` is the one table of names, after the classes; `DistillTraining.objective` turns a config's `loss:`
into the object once, and the trainer asks the object, never the name.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

import torch

from ..errors import ConfigError
from ..losses import focal_loss, kl_distill, m3se, margin_mse, mse, rankdistil_b, softmax_ce, softmax_ce_distill

# Extras for softmax-ce / kl sit this many temperatures below the lowest teacher score: no teacher probability mass
# (the teacher's distribution is over its own candidates).
NO_MASS = 100.0

@dataclass(frozen=True)
class RerankLoss:
    """One query's loss from the student's scores `s` and the teacher's `t` (both [1, K']; column 0 is a positive
    for the one-hot losses) and the positives' mask."""

    name: ClassVar[str]
    needs_teacher: ClassVar[bool] = True

    def __call__(self, s: torch.Tensor, t: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def extra_teacher_score(self, t: torch.Tensor) -> torch.Tensor:
        """The stand-in teacher score of an extra negative: the query's lowest teacher score (as irrelevant as its
        least relevant candidate)."""
        return t.min()


@dataclass(frozen=True)
class OneHot(RerankLoss):
    """Softmax CE on the one positive, with label smoothing `label_smoothing` (DE Eq. 1, Table 8)."""

    name: ClassVar[str] = "one-hot"
    needs_teacher: ClassVar[bool] = False
    label_smoothing: float = 0.0

    def __post_init__(self):
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")

    def __call__(self, s, t, positives):
        return softmax_ce(s, torch.zeros(1, dtype=torch.long, device=s.device), alpha=self.label_smoothing)


@dataclass(frozen=True)
class Focal(RerankLoss):
    """The focal loss on the one positive (a regulariser of DE Table 9)."""

    name: ClassVar[str] = "focal"
    needs_teacher: ClassVar[bool] = False
    focal_gamma: float = 2.0

    def __post_init__(self):
        if not self.focal_gamma >= 0:
            raise ConfigError(f"focal_gamma must be >= 0, got {self.focal_gamma}")

    def __call__(self, s, t, positives):
        return focal_loss(s, torch.zeros(1, dtype=torch.long, device=s.device), gamma=self.focal_gamma)


@dataclass(frozen=True)
class MSE(RerankLoss):
    """Logit matching (DE §4.1)."""

    name: ClassVar[str] = "mse"

    def __call__(self, s, t, positives):
        return mse(s, t)


@dataclass(frozen=True)
class MarginMSE(RerankLoss):
    """Margin MSE, multi-positive form (DE Eq. 3)."""

    name: ClassVar[str] = "margin-mse"

    def __call__(self, s, t, positives):
        return margin_mse(s, t, positives)


@dataclass(frozen=True)
class M3SE(RerankLoss):
    """Multi-margin MSE (DE Eq. 4)."""

    name: ClassVar[str] = "m3se"

    def __call__(self, s, t, positives):
        return m3se(s, t, positives)


@dataclass(frozen=True)
class _Softmax(RerankLoss):
    tau: float = 1.0
    tau_squared: bool = False

    def __post_init__(self):
        if not self.tau > 0:
            raise ConfigError(f"tau must be > 0, got {self.tau}")

    def extra_teacher_score(self, t: torch.Tensor) -> torch.Tensor:
        return t.min() - NO_MASS * self.tau


@dataclass(frozen=True)
class SoftmaxCEDistill(_Softmax):
    """Softmax CE against the teacher's softmax at temperature `tau` (DE Eq. 1 with soft labels)."""

    name: ClassVar[str] = "softmax-ce"

    def __call__(self, s, t, positives):
        return softmax_ce_distill(s, t, tau=self.tau, tau_squared=self.tau_squared)


@dataclass(frozen=True)
class KLDistill(_Softmax):
    """KL from the teacher's softmax to the student's at temperature `tau` (DE Table 12)."""

    name: ClassVar[str] = "kl"

    def __call__(self, s, t, positives):
        return kl_distill(s, t, tau=self.tau, tau_squared=self.tau_squared)


@dataclass(frozen=True)
class RankDistilB(RerankLoss):
    """Binary RankDistil (DE §4.3): negatives pushed below `gamma0`."""

    name: ClassVar[str] = "rankdistil-b"
    gamma0: float = 0.0

    def __call__(self, s, t, positives):
        return rankdistil_b(s, t, positives, gamma0=self.gamma0)


# The one table from a config's `training.loss` to its class, in the order the classes are defined above.
RERANK_LOSSES: dict[str, type[RerankLoss]] = {cls.name: cls for cls in (
    OneHot, Focal, MSE, MarginMSE, M3SE, SoftmaxCEDistill, KLDistill, RankDistilB)}


def settings_of(name: str) -> dict[str, Any]:
    """{setting: default} of the loss called `name` (a ConfigError naming the known losses for an unknown name)."""
    return {f.name: f.default for f in fields(_loss_class(name))}


def rerank_loss(name: str, **settings: Any) -> RerankLoss:
    """The loss called `name` with `settings`; a setting it does not take (`tau` for `m3se`) is a ConfigError."""
    cls = _loss_class(name)
    own = {f.name for f in fields(cls)}
    if foreign := sorted(set(settings) - own):
        raise ConfigError(f"loss {name!r} takes no setting {', '.join(foreign)} "
                          f"(it takes {', '.join(sorted(own)) or 'none'})")
    return cls(**settings)


def _loss_class(name: str) -> type[RerankLoss]:
    if name not in RERANK_LOSSES:
        if isinstance(name, str) and name.replace("_", "-") in RERANK_LOSSES:  # the spelling before one name per loss
            raise ConfigError(f"loss {name!r} is spelled {name.replace('_', '-')!r} (the name the variants, "
                              f"notebooks and run keys use)")
        raise ConfigError(f"loss must be one of {tuple(RERANK_LOSSES)}, got {name!r}")
    return RERANK_LOSSES[name]
