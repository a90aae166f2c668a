"""Losses of both papers: hand-computed values, Proposition 3 of the DE paper, invariances, gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from training_helpers import assert_entropy_moved

from taser_lib import losses as L


def T(rows, dtype=torch.float64):
    return torch.tensor(rows, dtype=dtype)


def log_softmax_list(xs):
    z = math.log(sum(math.exp(x) for x in xs))
    return [x - z for x in xs]


def sigmoid(x):
    return 1.0 / (1.0 + math.exp(-x))


# --- contrastive (TASER Eq. 2) ------------------------------------------------------------------------------------

def test_contrastive_loss_equals_cross_entropy_on_explicit_matrix():
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, generator=g, dtype=torch.float64)
    p = torch.randn(4, 3, generator=g, dtype=torch.float64)  # 2 questions x (positive, 1 hard negative)
    matrix = torch.tensor([[float(sum(q[i, k] * p[j, k] for k in range(3))) for j in range(4)] for i in range(2)],
                          dtype=torch.float64)
    targets = L.contrastive_targets(2, 2)
    assert targets.tolist() == [0, 2]
    assert torch.allclose(L.contrastive_loss(matrix, targets), F.cross_entropy(matrix, targets))
    # and by hand: question 0's positive is column 0, question 1's is column 2
    by_hand = -(log_softmax_list(matrix[0].tolist())[0] + log_softmax_list(matrix[1].tolist())[2]) / 2
    assert L.contrastive_loss(matrix, targets).item() == pytest.approx(by_hand, rel=1e-12)
    per_question = L.contrastive_loss(matrix, targets, reduction="none")
    assert per_question.shape == (2,) and per_question.mean().item() == pytest.approx(by_hand, rel=1e-12)


def test_contrastive_targets_and_shape_check():
    assert L.contrastive_targets(3, 4, offset=12).tolist() == [12, 16, 20]
    with pytest.raises(ValueError, match="targets"):
        L.contrastive_loss(torch.zeros(2, 3), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"\[batch, K\]"):
        L.contrastive_loss(torch.zeros(6), torch.tensor([0, 3]))


def test_routing_entropy_and_joint_loss():
    logits = T([[0.0, math.log(3.0)], [50.0, -50.0]])  # P = (1/4, 3/4) and ~(1, 0)
    h0 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert L.routing_entropy(logits[:1]).item() == pytest.approx(h0, rel=1e-12)
    assert L.routing_entropy(logits).item() == pytest.approx(h0 / 2, rel=1e-9)
    assert L.routing_entropy(logits, mask=torch.tensor([True, False])).item() == pytest.approx(h0, rel=1e-12)
    assert L.routing_entropy(torch.zeros(2, 5, 4)).item() == pytest.approx(math.log(4))  # [B, tokens, I]
    with pytest.raises(ValueError, match="no unit"):
        L.routing_entropy(logits, mask=torch.tensor([False, False]))
    assert L.joint_loss(torch.tensor(1.0), torch.tensor(2.0)).item() == pytest.approx(1.02)
    assert L.joint_loss(torch.tensor(1.0), torch.tensor(2.0), beta=0.5).item() == pytest.approx(2.0)


def test_routing_entropy_terms_by_hand():
    """The three readings of TASER Eq. 4-5 on two units with P = (1/4, 3/4) and (1, 0) (to float64 rounding)."""
    logits = T([[0.0, math.log(3.0)], [50.0, -50.0]])
    h_unit = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) / 2   # mean per-unit entropy (second unit: 0)
    p_bar = (0.25 + 1.0) / 2, (0.75 + 0.0) / 2                     # batch-averaged routing (5/8, 3/8)
    h_bar = -sum(p * math.log(p) for p in p_bar)
    assert L.batch_routing_entropy(logits).item() == pytest.approx(h_bar, rel=1e-9)
    assert L.routing_entropy_release(logits).item() == pytest.approx(-h_unit, rel=1e-9)   # mean sum p log p
    assert L.routing_entropy_literal(logits).item() == pytest.approx(h_unit, rel=1e-9)
    assert L.routing_entropy_balance(logits).item() == pytest.approx(-h_bar, rel=1e-9)
    for mode, fn in L.ENTROPY_TERMS.items():
        assert L.routing_entropy_term(logits, mode).item() == fn(logits).item()
    assert L.routing_entropy_term(logits).item() == L.routing_entropy_release(logits).item()  # the default
    # all units on one expert, each with certainty: no entropy either way; uniform units: log I both ways
    collapsed = T([[30.0, -30.0, -30.0]] * 3)
    assert L.batch_routing_entropy(collapsed).item() == pytest.approx(0.0, abs=1e-9)
    assert L.batch_routing_entropy(torch.zeros(4, 3)).item() == pytest.approx(math.log(3))
    # confident units spread over the experts: no per-unit entropy, full batch entropy
    spread = T([[30.0, -30.0], [-30.0, 30.0]])
    assert L.routing_entropy(spread).item() == pytest.approx(0.0, abs=1e-9)
    assert L.batch_routing_entropy(spread).item() == pytest.approx(math.log(2))
    # masks select units ([B, tokens] for Tok-R)
    tokens = torch.stack([logits, T([[0.0, 0.0], [0.0, 0.0]])])                 # [2, 2, I]
    mask = torch.tensor([[True, True], [False, False]])
    assert L.routing_entropy_balance(tokens, mask).item() == pytest.approx(-h_bar, rel=1e-9)
    with pytest.raises(ValueError, match="entropy mode"):
        L.routing_entropy_term(logits, "maximise")


@pytest.mark.parametrize("mode", L.ENTROPY_MODES)
def test_a_step_on_the_entropy_term_moves_the_entropy_its_way(mode):
    """Gradient descent on the term alone: release raises per-unit entropy, literal lowers it, balance raises the
    entropy of the batch-averaged routing (units that all lean to expert 0, with different confidence)."""
    logits = T([[2.0, 0.0, -1.0], [1.0, 0.5, 0.0], [3.0, -1.0, 0.5], [0.5, 0.0, 0.2]]).requires_grad_()
    before = float(L.routing_entropy(logits.detach())), float(L.batch_routing_entropy(logits.detach()))
    L.routing_entropy_term(logits, mode).backward()
    with torch.no_grad():
        stepped = logits - 0.5 * logits.grad
    after = float(L.routing_entropy(stepped)), float(L.batch_routing_entropy(stepped))
    assert_entropy_moved(mode, before, after)


# --- one-hot softmax CE with smoothing (DE Eq. 1, Table 8), focal loss (Table 9) ----------------------------------

def test_softmax_ce_hand_example_smoothing_and_temperature():
    s = T([[1.0, 2.0, 3.0]])
    y = torch.tensor([0])
    lp = log_softmax_list([1.0, 2.0, 3.0])
    assert L.softmax_ce(s, y).item() == pytest.approx(-lp[0], rel=1e-12)
    alpha = 0.3  # y = 0.7 * onehot + 0.1 each
    expected = -(0.7 + 0.1) * lp[0] - 0.1 * lp[1] - 0.1 * lp[2]
    assert L.softmax_ce(s, y, alpha=alpha).item() == pytest.approx(expected, rel=1e-12)
    lp_tau = log_softmax_list([0.5, 1.0, 1.5])
    assert L.softmax_ce(s, y, tau=2.0).item() == pytest.approx(-lp_tau[0], rel=1e-12)


def test_softmax_ce_alpha_zero_is_plain_ce_and_matches_torch_smoothing():
    g = torch.Generator().manual_seed(1)
    s = torch.randn(5, 7, generator=g)
    y = torch.randint(7, (5,), generator=g)
    assert torch.allclose(L.softmax_ce(s, y, alpha=0.0), F.cross_entropy(s, y))
    assert torch.allclose(L.softmax_ce(s, y, alpha=0.2), F.cross_entropy(s, y, label_smoothing=0.2), atol=1e-6)
    with pytest.raises(ValueError, match="alpha"):
        L.softmax_ce(s, y, alpha=1.0)


def test_focal_loss():
    s = T([[2.0, 0.0, -1.0]])
    y = torch.tensor([1])
    lp = log_softmax_list([2.0, 0.0, -1.0])[1]
    assert L.focal_loss(s, y, gamma=2.0).item() == pytest.approx(-((1 - math.exp(lp)) ** 2) * lp, rel=1e-12)
    assert L.focal_loss(s, y, gamma=0.0).item() == pytest.approx(-lp, rel=1e-12)


# --- distillation (DE §4) -----------------------------------------------------------------------------------------

def test_mse_hand_example():
    assert L.mse(T([[1.0, 2.0]]), T([[3.0, -1.0]])).item() == pytest.approx(4 + 9)


def test_margin_mse_hand_examples():
    # Eq. 3: ((5 - 1) - (2 - 1))^2 = 9
    assert L.margin_mse(T([[2.0, 1.0]]), T([[5.0, 1.0]]), torch.tensor([[True, False]])).item() == pytest.approx(9)
    # two positives {0, 1}, two negatives {2, 3}: sum over the four (i, j) pairs
    t, s = [4.0, 3.0, 1.0, 0.0], [1.0, 2.0, 0.0, 2.0]
    pairs = [(0, 2), (0, 3), (1, 2), (1, 3)]
    expected = sum(((t[i] - t[j]) - (s[i] - s[j])) ** 2 for i, j in pairs)
    pos = torch.tensor([[True, True, False, False]])
    assert L.margin_mse(T([s]), T([t]), pos).item() == pytest.approx(expected)
    assert expected == pytest.approx(4 + 25 + 0 + 9)  # the hand arithmetic itself


def test_m3se_hand_example():
    t = T([[5.0, 1.0, 3.0, 2.0]])  # the teacher's top negative is column 2
    s = T([[2.0, 1.5, 0.5, 1.0]])
    pos = torch.tensor([[True, False, False, False]])
    matched = ((5 - 3) - (2 - 0.5)) ** 2  # 0.25
    hinge = (1.5 - 0.5) ** 2 + 0.0 + (1.0 - 0.5) ** 2  # columns 1, 2 (= j*), 3
    assert L.m3se(s, t, pos).item() == pytest.approx(matched + hinge)
    assert matched + hinge == pytest.approx(1.5)


def test_m3se_with_one_negative_equals_margin_mse():
    g = torch.Generator().manual_seed(2)
    s, t = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    pos = torch.ones(6, 4, dtype=torch.bool)
    pos[torch.arange(6), torch.randint(4, (6,), generator=g)] = False  # one negative per row, three positives
    assert torch.allclose(L.m3se(s, t, pos), L.margin_mse(s, t, pos))


def test_softmax_ce_and_kl_distill_hand_example():
    s, t, tau = [1.0, 0.0, -1.0], [2.0, 1.0, 0.5], 2.0
    pt = [math.exp(x) for x in log_softmax_list([x / tau for x in t])]
    lps = log_softmax_list([x / tau for x in s])
    ce = -sum(p * l for p, l in zip(pt, lps))
    kl = sum(p * (math.log(p) - l) for p, l in zip(pt, lps))
    assert L.softmax_ce_distill(T([s]), T([t]), tau=tau).item() == pytest.approx(ce, rel=1e-12)
    assert L.softmax_ce_distill(T([s]), T([t]), tau=tau, tau_squared=True).item() == pytest.approx(4 * ce, rel=1e-12)
    assert L.kl_distill(T([s]), T([t]), tau=tau).item() == pytest.approx(kl, rel=1e-12)
    assert L.kl_distill(T([t]), T([t])).item() == pytest.approx(0.0, abs=1e-12)


def test_rankdistil_b_hand_example():
    s, t = T([[2.0, 0.5, -1.0]]), T([[3.0, 0.0, 0.0]])
    pos = torch.tensor([[True, False, False]])
    assert L.rankdistil_b(s, t, pos, gamma0=0.0).item() == pytest.approx(1.0 + 0.25 + 0.0)
    assert L.rankdistil_b(s, t, pos, gamma0=1.0).item() == pytest.approx(1.0)
    assert L.rankdistil_b(s, t, pos, gamma0=-1.0).item() == pytest.approx(1.0 + 1.5**2 + 0.0)


# --- DE Proposition 3 ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tau", [0.5, 1.0, 4.0])
def test_prop3_softmax_ce_is_binary_cross_entropy_of_margin_sigmoids(tau):
    g = torch.Generator().manual_seed(3)
    t, s = torch.randn(4, 2, generator=g, dtype=torch.float64), torch.randn(4, 2, generator=g, dtype=torch.float64)
    got = L.softmax_ce_distill(s, t, tau=tau, reduction="none")
    got_kl = L.kl_distill(s, t, tau=tau, reduction="none")
    for b in range(4):
        a = sigmoid((t[b, 0] - t[b, 1]).item() / tau)   # sigma(t1 - t2; tau)
        c = sigmoid((s[b, 0] - s[b, 1]).item() / tau)   # sigma(s1 - s2; tau)
        # the proof's sum over z in {+1, -1}: -sigma(z(t1-t2)) log sigma(z(s1-s2))
        assert got[b].item() == pytest.approx(-(a * math.log(c) + (1 - a) * math.log(1 - c)), rel=1e-10)
        # the paper calls it KL_bin; the two differ by the teacher's binary entropy (constant in s)
        assert got_kl[b].item() == pytest.approx(a * math.log(a / c) + (1 - a) * math.log((1 - a) / (1 - c)),
                                                 rel=1e-9, abs=1e-12)


def test_prop3_high_temperature_gradient_limit():
    """tau^2 * d l_sce / d s_i -> (1/8) * d l_mmse / d s_i, with l_mmse = ((t1-t2) - (s1-s2))^2 unnormalised."""
    t = T([[2.0, -1.0], [0.3, 0.9]])
    s0 = T([[0.5, 0.2], [-1.0, 1.5]])
    pos = torch.tensor([[True, False], [True, False]])
    s = s0.clone().requires_grad_(True)
    L.margin_mse(s, t, pos, reduction="sum").backward()
    g_mmse = s.grad.clone()
    # d l_mmse / d s1 = 2((s1 - s2) - (t1 - t2)) = -d / d s2 (the proof's first line)
    by_hand = 2 * ((s0[:, 0] - s0[:, 1]) - (t[:, 0] - t[:, 1]))
    assert torch.allclose(g_mmse, torch.stack([by_hand, -by_hand], 1))
    errors = []
    for tau in (10.0, 100.0, 1000.0):
        s = s0.clone().requires_grad_(True)
        L.softmax_ce_distill(s, t, tau=tau, reduction="sum").backward()
        errors.append((tau**2 * s.grad - g_mmse / 8).abs().max().item())
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 1e-5 * g_mmse.abs().max().item()
    # the tau_squared convention gives the same limit without the explicit factor
    s = s0.clone().requires_grad_(True)
    L.softmax_ce_distill(s, t, tau=1000.0, tau_squared=True, reduction="sum").backward()
    assert torch.allclose(s.grad, g_mmse / 8, atol=1e-5)


# --- invariances, gradients, validation ----------------------------------------------------------------------------

def _batch(seed=4, b=3, k=5):
    g = torch.Generator().manual_seed(seed)
    s, t = torch.randn(b, k, generator=g, dtype=torch.float64), torch.randn(b, k, generator=g, dtype=torch.float64)
    pos = torch.zeros(b, k, dtype=torch.bool)
    pos[:, 0] = True
    pos[0, 1] = True
    return s, t, pos


TRANSLATION_INVARIANT = {
    "margin_mse": lambda s, t, p: L.margin_mse(s, t, p),
    "m3se": lambda s, t, p: L.m3se(s, t, p),
    "softmax_ce_distill": lambda s, t, p: L.softmax_ce_distill(s, t, tau=2.0),
    "kl_distill": lambda s, t, p: L.kl_distill(s, t),
    "softmax_ce": lambda s, t, p: L.softmax_ce(s, torch.zeros(len(s), dtype=torch.long), alpha=0.1),
    "focal_loss": lambda s, t, p: L.focal_loss(s, torch.zeros(len(s), dtype=torch.long)),
    "contrastive": lambda s, t, p: L.contrastive_loss(s, torch.zeros(len(s), dtype=torch.long)),
}
NOT_INVARIANT = {
    "mse": lambda s, t, p: L.mse(s, t),
    "rankdistil_b": lambda s, t, p: L.rankdistil_b(s, t, p, gamma0=0.0),
}
ALL_LOSSES = {**TRANSLATION_INVARIANT, **NOT_INVARIANT}


@pytest.mark.parametrize("name", sorted(TRANSLATION_INVARIANT))
def test_translation_invariance(name):
    s, t, pos = _batch()
    shift = T([[3.0], [-7.5], [100.0]])  # a different constant per row
    fn = TRANSLATION_INVARIANT[name]
    base = fn(s, t, pos)
    assert torch.allclose(fn(s + shift, t, pos), base, rtol=1e-9, atol=1e-9)
    assert torch.allclose(fn(s, t - shift, pos), base, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(NOT_INVARIANT))
def test_logit_matching_losses_are_not_translation_invariant(name):
    s, t, pos = _batch()
    fn = NOT_INVARIANT[name]
    assert not torch.allclose(fn(s + 3.0, t, pos), fn(s, t, pos))


@pytest.mark.parametrize("name", sorted(ALL_LOSSES))
def test_gradients_flow_to_student_scores(name):
    s, t, pos = _batch()
    s = (s + 0.5).float().requires_grad_(True)
    loss = ALL_LOSSES[name](s, t.float(), pos)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(s.grad).all() and s.grad.abs().sum() > 0
    assert t.grad is None


def test_reductions_and_half_precision():
    s, t, pos = _batch()
    per_query = L.m3se(s, t, pos, reduction="none")
    assert per_query.shape == (3,)
    assert torch.allclose(L.m3se(s, t, pos, reduction="sum"), per_query.sum())
    assert torch.allclose(L.m3se(s, t, pos), per_query.mean())
    with pytest.raises(ValueError, match="reduction"):
        L.mse(s, t, reduction="avg")
    out = L.softmax_ce_distill(s.bfloat16(), t.bfloat16())
    assert out.dtype == torch.float32


def test_margin_losses_reject_rows_without_positive_or_negative():
    s, t, pos = _batch()
    pos[1] = False
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        L.margin_mse(s, t, pos)
    pos[1] = True
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        L.m3se(s, t, pos)
    with pytest.raises(ValueError, match="bool mask"):
        L.m3se(s, t, pos.long())


# --- data-side regularisers (DE Table 9) ---------------------------------------------------------------------------

CLS, SEP, PAD, MASK = 101, 102, 0, 103


def _token_batch(n_rows=200, length=64, seed=5):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 2000, (n_rows, length), generator=g)
    ids[:, 0] = CLS
    ids[:, 40] = SEP
    ids[:, 41:] = PAD
    attn = (ids != PAD).long()
    return ids, attn


def test_input_token_dropout():
    ids, attn = _token_batch()
    new_ids, new_attn = L.input_token_dropout(ids, attn, 0.3, torch.Generator().manual_seed(0), (CLS, SEP, PAD))
    assert torch.equal(new_ids, ids)
    dropped = (attn == 1) & (new_attn == 0)
    assert not (new_attn > attn).any()  # padding stays padding
    assert not dropped[:, [0, 40]].any()  # [CLS] and [SEP] are never dropped
    rate = dropped.sum().item() / (200 * 39)
    assert abs(rate - 0.3) < 0.02
    again = L.input_token_dropout(ids, attn, 0.3, torch.Generator().manual_seed(0), (CLS, SEP, PAD))
    assert torch.equal(again[1], new_attn)
    rep_ids, rep_attn = L.input_token_dropout(ids, attn, 0.3, torch.Generator().manual_seed(0), (CLS, SEP, PAD),
                                              replace_id=MASK)
    assert torch.equal(rep_attn, attn) and torch.equal(rep_ids == MASK, dropped)  # same draws, other action
    no_drop = L.input_token_dropout(ids, attn, 0.0)
    assert torch.equal(no_drop[0], ids) and torch.equal(no_drop[1], attn)


def test_mlm_mask_follows_bert_80_10_10():
    ids, attn = _token_batch(n_rows=400)
    masked, labels = L.mlm_mask(ids, attn, MASK, vocab_size=3000, special_ids=(CLS, SEP, PAD),
                                generator=torch.Generator().manual_seed(0))
    selected = labels != -100
    assert torch.equal(labels[selected], ids[selected])
    assert not selected[:, [0, 40]].any() and not selected[:, 41:].any()
    assert torch.equal(masked[~selected], ids[~selected])
    n = selected.sum().item()
    assert abs(n / (400 * 39) - 0.15) < 0.01
    to_mask = (masked == MASK) & selected
    unchanged = (masked == ids) & selected
    assert abs(to_mask.sum().item() / n - 0.8) < 0.03
    assert abs(unchanged.sum().item() / n - 0.1) < 0.03  # a random token equal to the original is rare (1/3000)
    again = L.mlm_mask(ids, attn, MASK, 3000, (CLS, SEP, PAD), generator=torch.Generator().manual_seed(0))
    assert torch.equal(again[0], masked) and torch.equal(again[1], labels)


def test_masked_lm_loss_by_hand():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 3.0], [1.0, 1.0, 1.0]]])
    labels = torch.tensor([[0, -100], [1, -100]])  # two masked positions
    by_hand = -(math.log(math.exp(2) / (math.exp(2) + 2)) + math.log(1 / (2 + math.exp(3)))) / 2
    assert float(L.masked_lm_loss(logits, labels)) == pytest.approx(by_hand, rel=1e-6)
    # nothing masked: zero loss and a zero (not NaN) gradient
    logits.requires_grad_(True)
    empty = L.masked_lm_loss(logits, torch.full((2, 2), -100))
    empty.backward()
    assert float(empty.detach()) == 0.0 and torch.equal(logits.grad, torch.zeros_like(logits))
