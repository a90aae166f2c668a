"""training.rerank_losses: the re-ranking losses as objects, one name each, bound to the pure equations of
taser_lib.losses."""

from __future__ import annotations

import pytest
import torch

from taser_lib import losses
from taser_lib.errors import ConfigError
from taser_lib.training.distill import LOSSES, DistillTraining
from taser_lib.training.rerank_losses import (NO_MASS, RERANK_LOSSES, Focal, KLDistill, OneHot, RankDistilB,
                                              SoftmaxCEDistill, rerank_loss, settings_of)

S = torch.tensor([[2.0, 0.5, -1.0, 0.3]])
T = torch.tensor([[3.0, 1.0, -2.0, 0.0]])
POS = torch.tensor([[True, False, False, False]])


def test_every_name_is_registered_by_the_class_that_carries_it():
    assert tuple(RERANK_LOSSES) == LOSSES
    assert set(LOSSES) == {"one-hot", "focal", "mse", "margin-mse", "m3se", "softmax-ce", "kl", "rankdistil-b"}
    for name, cls in RERANK_LOSSES.items():
        assert cls.name == name and rerank_loss(name).name == name
    assert {n for n, cls in RERANK_LOSSES.items() if not cls.needs_teacher} == {"one-hot", "focal"}


@pytest.mark.parametrize("name,expected", [
    ("one-hot", lambda: losses.softmax_ce(S, torch.zeros(1, dtype=torch.long), alpha=0.1)),
    ("focal", lambda: losses.focal_loss(S, torch.zeros(1, dtype=torch.long), gamma=3.0)),
    ("mse", lambda: losses.mse(S, T)),
    ("margin-mse", lambda: losses.margin_mse(S, T, POS)),
    ("m3se", lambda: losses.m3se(S, T, POS)),
    ("softmax-ce", lambda: losses.softmax_ce_distill(S, T, tau=2.0, tau_squared=True)),
    ("kl", lambda: losses.kl_distill(S, T, tau=2.0, tau_squared=True)),
    ("rankdistil-b", lambda: losses.rankdistil_b(S, T, POS, gamma0=0.5)),
])
def test_an_object_computes_its_equation_with_its_own_settings(name, expected):
    every = dict(label_smoothing=0.1, focal_gamma=3.0, tau=2.0, tau_squared=True, gamma0=0.5)
    settings = {k: v for k, v in every.items() if k in settings_of(name)}
    loss = rerank_loss(name, **settings)
    assert torch.allclose(loss(S, T, POS), expected())
    assert DistillTraining(loss=name, **settings).objective == loss


def test_settings_make_distinct_objects_and_a_direct_build_is_the_same():
    assert rerank_loss("softmax-ce", tau=2.0) == SoftmaxCEDistill(tau=2.0) != SoftmaxCEDistill(tau=1.0)
    assert rerank_loss("one-hot") == OneHot()
    assert RankDistilB(gamma0=1.0).gamma0 == 1.0


@pytest.mark.parametrize("name", LOSSES)
def test_a_setting_the_loss_does_not_take_is_an_error_naming_what_it_takes(name):
    foreign = {"tau": 2.0, "label_smoothing": 0.1, "focal_gamma": 3.0, "gamma0": 0.5}
    setting, value = next((k, v) for k, v in foreign.items() if k not in settings_of(name))
    with pytest.raises(ConfigError, match=f"takes no setting {setting}"):
        rerank_loss(name, **{setting: value})
    with pytest.raises(ConfigError, match=f"training.{setting} = {value} is not a setting of loss '{name}'"):
        DistillTraining(loss=name, **{setting: value})
    # another loss's setting at its default is what a config file holds for every loss: no error, no effect
    assert DistillTraining(loss=name, tau=1.0, label_smoothing=0.0, focal_gamma=2.0, gamma0=0.0).objective \
        == rerank_loss(name)


def test_a_loss_checks_its_own_hyperparameters():
    for build, match in [(lambda: SoftmaxCEDistill(tau=0.0), "tau must be > 0"),
                         (lambda: KLDistill(tau=-1.0), "tau must be > 0"),
                         (lambda: OneHot(label_smoothing=1.0), r"label_smoothing must lie in \[0, 1\)"),
                         (lambda: Focal(focal_gamma=-0.5), "focal_gamma must be >= 0"),
                         (lambda: DistillTraining(loss="kl", tau=0.0), "tau must be > 0")]:
        with pytest.raises(ConfigError, match=match):
            build()


def test_an_extra_negative_gets_no_teacher_mass_under_the_softmax_losses_and_the_lowest_score_otherwise():
    t = T[0]
    assert float(KLDistill(tau=2.0).extra_teacher_score(t)) == pytest.approx(-2.0 - NO_MASS * 2.0)
    assert float(SoftmaxCEDistill(tau=1.0).extra_teacher_score(t)) == pytest.approx(-2.0 - NO_MASS)
    for name in ("mse", "margin-mse", "m3se", "rankdistil-b", "one-hot"):
        assert float(rerank_loss(name).extra_teacher_score(t)) == pytest.approx(-2.0)


def test_an_unknown_name_is_a_config_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match="one-hot"):
        rerank_loss("softmax")
    with pytest.raises(ConfigError, match="must be one of"):
        DistillTraining(loss="cross_entropy")


def test_the_old_underscore_spelling_is_an_error_naming_the_one_spelling():
    with pytest.raises(ConfigError, match="'softmax_ce' is spelled 'softmax-ce'"):
        rerank_loss("softmax_ce")
    with pytest.raises(ConfigError, match="'one_hot' is spelled 'one-hot'"):
        DistillTraining(loss="one_hot")
