"""taser_book.analyses.propositions: Proposition 1 in finite form (SVD embeddings, truncation error and MRR@10) and
Proposition 3 (tau^2 d l_sce -> d l_mmse / 8, by autograd through the library's losses)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from taser_lib.evaluation import evaluate
from taser_book.analyses.propositions import (mrr_at_k, numerical_rank, prop3_binary_identity, prop3_gradients,
                                              proposition_checks, reciprocal_ranks, relevance_matrix, svd_embeddings,
                                              truncation_curve)


def low_rank(n_q, n_d, r, seed=0, scale=10.0):
    rng = np.random.default_rng(seed)
    return scale * rng.normal(size=(n_q, r)) @ rng.normal(size=(r, n_d))


def one_relevant(n_q, n_d, seed=0):
    rel = np.zeros((n_q, n_d), dtype=int)
    rel[np.arange(n_q), np.random.default_rng(seed).integers(0, n_d, n_q)] = 1
    return rel


# --- Proposition 1 ---------------------------------------------------------------------------------------------------

@settings(max_examples=25, deadline=None)
@given(n_q=st.integers(2, 12), n_d=st.integers(2, 15), r=st.integers(1, 12), seed=st.integers(0, 10**6))
def test_svd_gives_exact_dual_encoder_embeddings_of_dimension_rank(n_q, n_d, r, seed):
    r = min(r, n_q, n_d)
    S = low_rank(n_q, n_d, r, seed)
    assert numerical_rank(S) == r
    Z, W = svd_embeddings(S)
    assert Z.shape == (n_q, r) and W.shape == (n_d, r)
    assert np.abs(Z @ W.T - S).max() <= 1e-9 * max(1.0, np.abs(S).max())


def test_truncation_error_is_eckart_young_and_vanishes_at_the_rank():
    S = low_rank(30, 40, 8, seed=3) + 0.01 * np.random.default_rng(4).normal(size=(30, 40))  # full rank, 8 big
    sigma = np.linalg.svd(S, compute_uv=False)
    curve = truncation_curve(S, dims=range(1, 31))
    assert list(curve["dim"]) == list(range(1, 31))
    expected = [np.sqrt((sigma[d:] ** 2).sum()) / np.linalg.norm(S) for d in range(1, 31)]
    assert np.allclose(curve["relative_error"], expected, atol=1e-12)
    assert (np.diff(curve["relative_error"]) <= 1e-15).all()
    assert curve["rank"].iloc[0] == 30
    assert curve["max_abs_error"].iloc[-1] < 1e-10
    assert curve["relative_error"].iloc[7] < 0.01 < curve["relative_error"].iloc[6]   # the 8 big directions
    Z, W = svd_embeddings(S, dim=8)
    assert np.linalg.norm(S - Z @ W.T) / np.linalg.norm(S) == pytest.approx(curve["relative_error"].iloc[7])


def test_truncated_mrr_reaches_the_full_matrix_mrr_at_the_rank():
    S = low_rank(25, 50, 6, seed=1)
    rel = one_relevant(25, 50, seed=2)
    curve = truncation_curve(S, rel)
    assert 6 in set(curve["dim"]) and curve["dim"].max() == 25
    assert np.allclose(curve.loc[curve["dim"] >= 6, "mrr"], mrr_at_k(S, rel))
    assert (curve["mrr_full"] == mrr_at_k(S, rel)).all()


def test_reciprocal_ranks_agree_with_ir_measures():
    rng = np.random.default_rng(7)
    S = rng.normal(size=(15, 30))
    rel = (rng.random((15, 30)) < 0.08).astype(int)
    rel[3] = 0                                                   # a query without a relevant passage: left out
    qids, dids = [f"q{i}" for i in range(15)], [f"d{j}" for j in range(30)]
    run = {q: {d: float(S[i, j]) for j, d in enumerate(dids)} for i, q in enumerate(qids)}
    qrels = {q: {d: int(rel[i, j]) for j, d in enumerate(dids) if rel[i, j]} for i, q in enumerate(qids)}
    qrels = {q: v for q, v in qrels.items() if v}
    for k in (1, 5, 10):
        assert mrr_at_k(S, rel, k) == pytest.approx(evaluate(run, qrels, [f"RR@{k}"])[f"RR@{k}"])
    assert len(reciprocal_ranks(S, rel)) == len(qrels)
    assert np.array_equal(relevance_matrix(qrels, qids, dids), rel)


def test_bad_matrices_are_refused():
    with pytest.raises(ValueError, match="2-d"):
        svd_embeddings(np.zeros(3))
    with pytest.raises(ValueError, match="dim must lie in"):
        svd_embeddings(np.eye(3), dim=4)
    with pytest.raises(ValueError, match="differ in shape"):
        mrr_at_k(np.eye(3), np.eye(2))
    with pytest.raises(ValueError, match="no row"):
        mrr_at_k(np.eye(3), np.zeros((3, 3)))


# --- Proposition 3 ---------------------------------------------------------------------------------------------------

scores = st.floats(-5, 5, allow_nan=False)


@settings(max_examples=25, deadline=None)
@given(s1=scores, s2=scores, t1=scores, t2=scores)
def test_tau_squared_sce_gradient_approaches_one_eighth_of_the_margin_mse_gradient(s1, s2, t1, t2):
    a, b = s1 - s2, t1 - t2
    if abs(a - b) < 1e-2:          # equal margins: both gradients are 0, the ratio undefined
        return
    taus = [1.0, 10.0, 100.0, 1000.0]
    out = prop3_gradients([s1, s2], [t1, t2], taus)
    first = out[out["i"] == 1].sort_values("tau")
    second = out[out["i"] == 2].sort_values("tau")
    assert np.allclose(first["sce_scaled"].to_numpy(), -second["sce_scaled"].to_numpy())   # d/ds2 = -d/ds1
    assert np.allclose(first["mmse_over_8"], (a - b) / 4)                                  # 2 (a - b) / 8
    errors = np.abs(first["ratio"].to_numpy() - 1)
    assert (np.diff(errors) <= 1e-9).all()                                                 # closer as tau grows
    assert errors[-1] < 1e-4
    # the leading correction: ratio = 1 - (a^2 + a b + b^2) / (12 tau^2) + O(tau^-4)
    big = first[first["tau"] >= 100]
    predicted = 1 - (a * a + a * b + b * b) / (12 * big["tau"] ** 2)
    assert np.allclose(big["ratio"], predicted, atol=1e-7)


def test_gradients_come_from_the_library_losses(monkeypatch):
    """The module calls taser_lib.losses (no formula of its own): doubling those losses doubles its output."""
    import taser_book.analyses.propositions as prop
    base = prop3_gradients([2.0, -1.0], [5.0, 1.0], [10.0])
    real_sce, real_mmse = prop.softmax_ce_distill, prop.margin_mse
    monkeypatch.setattr(prop, "softmax_ce_distill", lambda *a, **k: 2 * real_sce(*a, **k))
    monkeypatch.setattr(prop, "margin_mse", lambda *a, **k: 3 * real_mmse(*a, **k))
    moved = prop3_gradients([2.0, -1.0], [5.0, 1.0], [10.0])
    assert np.allclose(moved["sce_scaled"], 2 * base["sce_scaled"])
    assert np.allclose(moved["mmse_over_8"], 3 * base["mmse_over_8"])


def test_closed_form_of_the_scaled_gradient():
    s, t, tau = np.array([1.5, -0.5]), np.array([0.2, 0.7]), 3.0
    out = prop3_gradients(s, t, [tau])
    sig = torch.sigmoid
    closed = tau * (sig(torch.tensor((s[0] - s[1]) / tau)) - sig(torch.tensor((t[0] - t[1]) / tau))).item()
    assert out.loc[out["i"] == 1, "sce_scaled"].item() == pytest.approx(closed, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(s1=scores, s2=scores, t1=scores, t2=scores, tau=st.floats(0.1, 100))
def test_sce_is_the_binary_cross_entropy_and_kl_the_binary_kl(s1, s2, t1, t2, tau):
    out = prop3_binary_identity([s1, s2], [t1, t2], [tau]).iloc[0]
    assert out["sce_error"] < 1e-12 and out["kl_error"] < 1e-12
    assert out["sce"] - out["kl"] == pytest.approx(out["teacher_entropy"], abs=1e-12)   # "KL" = CE - H(teacher)
    assert 0 <= out["teacher_entropy"] <= np.log(2) + 1e-12


def test_batches_of_pairs_and_the_checks_table():
    out = prop3_gradients(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[0.0, 0.0], [3.0, 1.0]]), [1.0, 50.0])
    assert sorted(set(out["pair"])) == [0, 1] and len(out) == 2 * 2 * 2
    checks = proposition_checks(low_rank(10, 12, 4))
    assert list(checks["check"]) == ["svd_reconstruction", "sce_vs_binary_kl", "gradient_limit"]
    assert checks.set_index("check")["value"].lt([1e-6, 1e-6, 1e-3]).all()
    with pytest.raises(ValueError, match="K = 2"):
        prop3_gradients([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [1.0])
    with pytest.raises(ValueError, match="taus must be positive"):
        prop3_gradients([1.0, 2.0], [1.0, 2.0], [0.0])
