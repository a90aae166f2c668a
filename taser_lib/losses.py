"""Training losses of both papers as pure functions of score tensors (torch only, no model code).

Papers: "TASER" (Cheng et al.; equations cited as TASER Eq. n) and "In defense of dual-encoders for neural ranking"
(the anonymous review version in ../shared/papers; cited as DE Eq. n).

Conventions
- Scores are float `[B, K]` tensors: B queries, K candidates each; `s` the student's, `t` the teacher's.
- `positives` is a bool `[B, K]` mask of the relevant candidates (the set P; its complement is N);
  `targets` is a long `[B]` tensor holding the column of the single positive (one-hot losses).
- A per-query loss is the sum over candidates (or candidate pairs) exactly as the papers write it; the batch loss is
  its mean over queries (R(theta) = 1/N sum_n l(y_n, s_n), DE §2). `reduction="sum"` or `"none"` change only that
  last step.
- The data-side regularisers of DE Table 9 (input token dropout, masked-LM masking) are here too as pure functions
  of token ids, with the masked-LM loss of the head's logits; the embedding-layer dropout of Table 9 is a field of
  the model config, not a loss.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F

REDUCTIONS = ("mean", "sum", "none")
IGNORE_INDEX = -100  # label of unmasked tokens: ignored by torch's cross_entropy and transformers' MLM heads


def _f32(x: torch.Tensor) -> torch.Tensor:
    """Compute in at least float32: half-precision scores (bf16 autocast) are promoted, float64 is kept."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _reduce(per_query: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return per_query.mean()
    if reduction == "sum":
        return per_query.sum()
    if reduction == "none":
        return per_query
    raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _check_scores(s: torch.Tensor, t: torch.Tensor | None = None) -> None:
    if s.dim() != 2:
        raise ValueError(f"scores must be [batch, K], got shape {tuple(s.shape)}")
    if t is not None and t.shape != s.shape:
        raise ValueError(f"teacher scores {tuple(t.shape)} and student scores {tuple(s.shape)} differ in shape")


def _check_targets(scores: torch.Tensor, targets: torch.Tensor) -> None:
    _check_scores(scores)
    if targets.shape != (scores.shape[0],) or targets.dtype != torch.long:
        raise ValueError(f"targets must be a long tensor of shape ({scores.shape[0]},), "
                         f"got {targets.dtype} {tuple(targets.shape)}")
    if bool(((targets < 0) | (targets >= scores.shape[1])).any()):
        raise ValueError(f"targets must lie in [0, {scores.shape[1]}), got {targets.tolist()}")


def _check_positives(s: torch.Tensor, positives: torch.Tensor, need_both: bool) -> None:
    if positives.shape != s.shape or positives.dtype != torch.bool:
        raise ValueError(f"positives must be a bool mask of shape {tuple(s.shape)}, "
                         f"got {positives.dtype} {tuple(positives.shape)}")
    if need_both:
        bad = (~positives.any(1)) | positives.all(1)
        if bool(bad.any()):
            rows = bad.nonzero().flatten().tolist()
            raise ValueError(f"every row needs at least one positive and one negative candidate; rows {rows} do not")


def _check_tau(tau: float) -> None:
    if not tau > 0:
        raise ValueError(f"temperature tau must be > 0, got {tau}")


# --- contrastive training of retrievers (TASER, DPR) -------------------------------------------------------------

def contrastive_targets(n_questions: int, group_size: int, offset: int = 0,
                        device: torch.device | str | None = None) -> torch.Tensor:
    """Column of each question's positive when passages come in groups (positive, h hard negatives) per question:
    question i's positive is column `offset + i * group_size` (`offset`: where this device's passages start among
    the passages gathered from all devices)."""
    return offset + torch.arange(n_questions, device=device) * group_size


def contrastive_loss(scores: torch.Tensor, targets: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """L_sim of TASER Eq. 2 (DPR's loss, Karpukhin et al. 2020, Eq. 2) on the model's score matrix:

        L_sim = -log( exp(sim(q, p+)) / sum_{p' in P u {p+}} exp(sim(q, p')) )

    Row b of `scores` holds sim(q_b, .) = the model's `compute_similarity` for every candidate and `targets[b]` is
    the column of q_b's positive. With in-batch negatives (DPR, §3.2) the candidates are all passages of the batch
    (of every device, `training.distributed.gathered_similarity`), question i's positive and h hard negatives
    being columns i*(1+h) .. i*(1+h)+h (`contrastive_targets`).
    The extracted text of TASER Eq. 2 lacks the log; we follow DPR, whose negative log-likelihood TASER adopts.
    """
    _check_targets(scores, targets)
    return F.cross_entropy(_f32(scores), targets, reduction=reduction)


# --- TASER's routing-entropy regularizer (Eq. 4-5): three readings, see `routing_entropy_term` ---

ENTROPY_MODES = ("release", "literal", "balance")


def _routing_log_probs(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """log P of the selected units, `[n, I]`."""
    log_p = F.log_softmax(_f32(logits), dim=-1)
    if mask is None:
        return log_p.reshape(-1, log_p.shape[-1])
    if mask.shape != log_p.shape[:-1]:
        raise ValueError(f"mask must have shape {tuple(log_p.shape[:-1])}, got {tuple(mask.shape)}")
    if not bool(mask.any()):
        raise ValueError("routing entropy: the mask selects no unit")
    return log_p[mask]


def routing_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Per-unit routing entropy, Eq. 4's -sum_i P(i) log P(i) with P = softmax(A h + c), averaged over the routed
    units: mean_u H(P_u) (a measure, >= 0; `routing_entropy_literal` is the same value as a loss term)."""
    log_p = _routing_log_probs(logits, mask)
    return -(log_p.exp() * log_p).sum(-1).mean()


def batch_routing_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy of the batch-averaged routing distribution, H(Pbar) with Pbar = mean_u P_u: log I when the units
    use every expert equally often (in expectation), 0 when all go to one expert."""
    p_bar = _routing_log_probs(logits, mask).exp().mean(0)
    return -(p_bar * torch.log(p_bar.clamp_min(torch.finfo(p_bar.dtype).tiny))).sum()


def routing_entropy_release(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """`release` term: mean_u sum_i P_u(i) log P_u(i) = -mean_u H(P_u), as the authors' moe_models.py computes it
    (issue 11's reading); added with +beta, training raises every unit's routing entropy. The default."""
    return -routing_entropy(logits, mask)


def routing_entropy_literal(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """`literal` term: mean_u H(P_u), Eq. 4 as printed; added with +beta (Eq. 5), training lowers every unit's
    routing entropy (more confident routing)."""
    return routing_entropy(logits, mask)


def routing_entropy_balance(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """`balance` term: -H(Pbar), the negative entropy of the batch-averaged routing distribution; added with +beta,
    training spreads the batch's units over the experts (load balancing), the paper's stated motive."""
    return -batch_routing_entropy(logits, mask)


ENTROPY_TERMS = {"release": routing_entropy_release, "literal": routing_entropy_literal,
                 "balance": routing_entropy_balance}


def routing_entropy_term(logits: torch.Tensor, mode: str = "release", mask: torch.Tensor | None = None
                         ) -> torch.Tensor:
    """The L_ent term of Eq. 5 under `mode`, one of ENTROPY_MODES.

    The routing-entropy regularizer of TASER Eq. 4-5 for learned routing (Seq-R, Tok-R). The paper (App. A):

        "For Seq-R and Tok-R, to avoid routing all inputs to the same expert FFN sub-layer, we further apply the
         entropic regularization  L_ent = - sum_{i=1}^I P(i) log P(i).  (4)  where P(i) = Softmax(Ah + c)_i is the
         probability of the i-th expert FFN sub-layer being selected. Hence, the joint training objective is
         L_joint = L_sim + beta L_ent,  (5)  where beta is a scalar hyperparameter. In our work, we fix beta = 0.01."

    Read literally, Eq. 4-5 minimise the entropy of each unit's routing distribution: every unit's routing grows
    more confident, which does nothing against the collapse the sentence names as the motive. The authors' release
    (microsoft/taser; quoted here from issue 11's reading of it, the repository cannot be fetched offline) does the
    opposite: its `moe_models.py` computes sum(p * log p), i.e. -H, per routed unit and averages it over the
    specialized layers, and `train_dense_retriever.py` adds beta times that to the loss, which *maximises* per-unit
    entropy. A third reading expresses the stated motive directly: maximise the entropy of the batch-averaged routing
    distribution (load balancing, as in switch-style mixtures of experts). Each variant below returns the term that
    enters L_joint = L_sim + beta * term (Eq. 5's sign), averaged over the routed units:

      release  (the default):  mean_u sum_i P_u(i) log P_u(i)  = -mean_u H(P_u)   minimised: per-unit entropy rises
      literal  (Eq. 4 as printed):  mean_u H(P_u)                                   minimised: per-unit entropy falls
      balance:  sum_i Pbar(i) log Pbar(i) = -H(Pbar),  Pbar = mean_u P_u             minimised: batch usage evens out

    `logits` is `[..., I]` (one row per routed sequence for Seq-R, per token for Tok-R); `mask` (bool, shape
    `logits.shape[:-1]`) selects the units that count, e.g. real tokens rather than padding.
    """
    if mode not in ENTROPY_TERMS:
        raise ValueError(f"entropy mode must be one of {ENTROPY_MODES}, got {mode!r}")
    return ENTROPY_TERMS[mode](logits, mask)


def joint_loss(l_sim: torch.Tensor, l_ent: torch.Tensor, beta: float = 0.01) -> torch.Tensor:
    """L_joint = L_sim + beta * L_ent (TASER Eq. 5; the paper fixes beta = 0.01). `l_ent` is the routing term of
    the model's entropy mode (`routing_entropy_term`): under the default `release` it is -H, so the sum raises the
    routing entropy."""
    return l_sim + beta * l_ent


# --- one-hot training (DE Eq. 1, Tables 8 and 9) ----------------------------------------------------------------

def softmax_ce(scores: torch.Tensor, targets: torch.Tensor, alpha: float = 0.0, tau: float = 1.0,
               reduction: str = "mean") -> torch.Tensor:
    """Softmax cross-entropy of DE Eq. 1 with label smoothing (DE Appendix C.9, Table 8):

        l_ce(y, s) = -sum_k y_k log p_k,   p_k = exp(s_k / tau) / sum_k' exp(s_k' / tau),
        y = (1 - alpha) * onehot(target) + alpha / K            (alpha in [0, 1); alpha = 0 is one-hot training)
    """
    _check_targets(scores, targets)
    _check_tau(tau)
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"label smoothing alpha must lie in [0, 1), got {alpha}")
    log_p = F.log_softmax(_f32(scores) / tau, dim=-1)
    per_query = -(1.0 - alpha) * log_p.gather(1, targets[:, None]).squeeze(1) - alpha * log_p.mean(1)
    return _reduce(per_query, reduction)


def focal_loss(scores: torch.Tensor, targets: torch.Tensor, gamma: float = 2.0,
               reduction: str = "mean") -> torch.Tensor:
    """Softmax focal loss (Lin et al. 2017, Eq. 4 without the alpha-balancing weight), a regulariser of DE Table 9:

        FL = -(1 - p_y)^gamma * log p_y,   p = softmax(s)

    gamma = 0 gives the plain softmax cross-entropy. The DE paper does not give its gamma; 2 is Lin et al.'s default.
    """
    _check_targets(scores, targets)
    if gamma < 0:
        raise ValueError(f"focal gamma must be >= 0, got {gamma}")
    log_p_y = F.log_softmax(_f32(scores), dim=-1).gather(1, targets[:, None]).squeeze(1)
    per_query = -((1.0 - log_p_y.exp()) ** gamma) * log_p_y
    return _reduce(per_query, reduction)


# --- distillation from teacher scores t to student scores s (DE §4) ----------------------------------------------

def mse(s: torch.Tensor, t: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Logit matching (DE §4.1, Ba & Caruana 2014): l_mse(t, s) = ||t - s||^2 = sum_k (t_k - s_k)^2."""
    _check_scores(s, t)
    return _reduce(((_f32(t) - _f32(s)) ** 2).sum(1), reduction)


def margin_mse(s: torch.Tensor, t: torch.Tensor, positives: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Margin MSE (DE Eq. 3, Hofstätter et al. 2020) in its multi-positive form (DE §4.1):

        l(t, s) = sum_{i in P} sum_{j in N} ((t_i - t_j) - (s_i - s_j))^2

    With one positive and one negative this is Eq. 3, ((t1 - t2) - (s1 - s2))^2, unnormalised (no 1/2, no mean over
    pairs): the normalisation under which DE Proposition 3's constant 1/8 holds. Every row needs >= 1 of each.
    """
    _check_scores(s, t)
    _check_positives(s, positives, need_both=True)
    d = _f32(s) - _f32(t)  # (t_i - t_j) - (s_i - s_j) = -(d_i - d_j)
    pair = positives[:, :, None] & ~positives[:, None, :]
    per_query = (((d[:, :, None] - d[:, None, :]) ** 2) * pair).sum((1, 2))
    return _reduce(per_query, reduction)


def m3se(s: torch.Tensor, t: torch.Tensor, positives: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """Multi-margin MSE, M3SE (DE Eq. 4):

        l_m3se(t, s) = sum_{i in P} ((t_i - t_j*) - (s_i - s_j*))^2 + sum_{j in N} [s_j - s_j*]_+^2

    where j* = argmax_{j in N} t_j is the negative the teacher scores highest (ties: the first such column). The
    margins of the positives are matched to j* only; every other negative is merely pushed below s_j* (its term is
    zero once s_j <= s_j*; the j = j* term is always zero). Gradients flow through both s_j and s_j* of the hinge.
    The extracted equation is legible; this is it symbol for symbol. With one negative it equals margin_mse.
    """
    _check_scores(s, t)
    _check_positives(s, positives, need_both=True)
    s, t = _f32(s), _f32(t)
    j_star = t.masked_fill(positives, float("-inf")).argmax(1, keepdim=True)
    s_star, t_star = s.gather(1, j_star), t.gather(1, j_star)
    matched = ((((t - t_star) - (s - s_star)) ** 2) * positives).sum(1)
    hinge = ((F.relu(s - s_star) ** 2) * ~positives).sum(1)
    return _reduce(matched + hinge, reduction)


def _teacher_student_log_probs(s: torch.Tensor, t: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    _check_scores(s, t)
    _check_tau(tau)
    return F.log_softmax(_f32(t) / tau, dim=-1), F.log_softmax(_f32(s) / tau, dim=-1)


def softmax_ce_distill(s: torch.Tensor, t: torch.Tensor, tau: float = 1.0, tau_squared: bool = False,
                       reduction: str = "mean") -> torch.Tensor:
    """Softmax cross-entropy distillation: DE Eq. 1 with the teacher's soft labels y = softmax(t / tau):

        l_sce(t, s; tau) = -sum_k softmax(t / tau)_k * log softmax(s / tau)_k

    Teacher and student share the temperature, as in DE Proposition 3 and its proof. `tau_squared=True` multiplies
    by tau^2 (Hinton et al. 2015), which keeps gradient magnitudes comparable across temperatures; the default
    returns Eq. 1 as written, the quantity of Proposition 3 (tau^2 * d l_sce / d s_i -> 1/8 * d l_mmse / d s_i).
    """
    log_pt, log_ps = _teacher_student_log_probs(s, t, tau)
    per_query = -(log_pt.exp() * log_ps).sum(1)
    return _reduce(per_query * (tau**2 if tau_squared else 1.0), reduction)


def kl_distill(s: torch.Tensor, t: torch.Tensor, tau: float = 1.0, tau_squared: bool = False,
               reduction: str = "mean") -> torch.Tensor:
    """KL(softmax(t / tau) || softmax(s / tau)) = sum_k p^t_k (log p^t_k - log p^s_k) ("KL" of DE Table 12).

    It equals softmax_ce_distill minus the teacher's entropy, a constant in s: same gradients, but zero when the
    student matches the teacher. `tau_squared` as in softmax_ce_distill.
    """
    log_pt, log_ps = _teacher_student_log_probs(s, t, tau)
    per_query = (log_pt.exp() * (log_pt - log_ps)).sum(1)
    return _reduce(per_query * (tau**2 if tau_squared else 1.0), reduction)


def rankdistil_b(s: torch.Tensor, t: torch.Tensor, positives: torch.Tensor, gamma0: float = 0.0,
                 reduction: str = "mean") -> torch.Tensor:
    """Binary RankDistil, RankDistil-B (Reddi et al. 2021), as stated in DE §4.3:

        l_rankB(t, s) = sum_{i in P} (t_i - s_i)^2 + sum_{j in N} [s_j - gamma0]_+^2

    Positives' scores are matched to the teacher's; negatives are pushed below the threshold gamma0. The paper gives
    no value for gamma0; 0.0 is our default. Not translation invariant (like mse).
    """
    _check_scores(s, t)
    _check_positives(s, positives, need_both=False)
    s, t = _f32(s), _f32(t)
    per_query = (((t - s) ** 2) * positives).sum(1) + ((F.relu(s - gamma0) ** 2) * ~positives).sum(1)
    return _reduce(per_query, reduction)


# --- data-side regularisers of DE Table 9 --------------------------------------------------------------------------

def _droppable(input_ids: torch.Tensor, attention_mask: torch.Tensor, special_ids: Iterable[int]) -> torch.Tensor:
    if attention_mask.shape != input_ids.shape:
        raise ValueError(f"attention_mask {tuple(attention_mask.shape)} and input_ids {tuple(input_ids.shape)} differ")
    special = torch.tensor(sorted(set(special_ids)), dtype=input_ids.dtype, device=input_ids.device)
    return attention_mask.bool() & ~torch.isin(input_ids, special)


def _uniform(shape: torch.Size, generator: torch.Generator | None, device: torch.device) -> torch.Tensor:
    # Draw on the generator's device so a CPU generator also seeds masks for GPU batches.
    gen_device = generator.device if generator is not None else device
    return torch.rand(shape, generator=generator, device=gen_device).to(device)


def input_token_dropout(input_ids: torch.Tensor, attention_mask: torch.Tensor, rate: float,
                        generator: torch.Generator | None = None, special_ids: Iterable[int] = (),
                        replace_id: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Token dropout at the input layer (DE Appendix C.10, Table 9): each attended token that is not special
    ([CLS], [SEP], ...) is dropped independently with probability `rate`.

    A dropped token is removed from attention (its attention_mask becomes 0, so it is also left out of mean
    pooling) or, when `replace_id` is given (e.g. [MASK] or [UNK]), replaced by that id and kept attended.
    Returns new `(input_ids, attention_mask)`; the inputs are not modified. Seed via `generator`.
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"token dropout rate must lie in [0, 1), got {rate}")
    drop = _droppable(input_ids, attention_mask, special_ids)
    drop &= _uniform(input_ids.shape, generator, input_ids.device) < rate
    if replace_id is None:
        return input_ids.clone(), attention_mask.masked_fill(drop, 0)
    return input_ids.masked_fill(drop, replace_id), attention_mask.clone()


def mlm_mask(input_ids: torch.Tensor, attention_mask: torch.Tensor, mask_token_id: int, vocab_size: int,
             special_ids: Iterable[int] = (), probability: float = 0.15,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking for the auxiliary masked-LM loss of DE Table 9 (Devlin et al. 2019, §3.1, Appendix A.1):
    each attended non-special token is selected with `probability`; a selected token becomes [MASK] with
    probability 0.8, a uniformly random token with 0.1, and stays unchanged with 0.1.

    Returns `(masked_ids, labels)` where labels hold the original id at selected positions and -100 elsewhere (the
    ignore index of torch's cross_entropy and transformers' MLM heads). Written here rather than taken from
    transformers' DataCollatorForLanguageModeling so that an explicit `generator` makes it reproducible on resume.
    """
    if not 0.0 < probability < 1.0:
        raise ValueError(f"MLM masking probability must lie in (0, 1), got {probability}")
    device = input_ids.device
    selected = _droppable(input_ids, attention_mask, special_ids) & (
        _uniform(input_ids.shape, generator, device) < probability)
    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    action = _uniform(input_ids.shape, generator, device)
    to_mask = selected & (action < 0.8)
    to_random = selected & (action >= 0.8) & (action < 0.9)
    gen_device = generator.device if generator is not None else device
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=gen_device).to(device)
    masked = input_ids.masked_fill(to_mask, mask_token_id)
    masked = torch.where(to_random, random_ids.to(input_ids.dtype), masked)
    return masked, labels


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """BERT's masked-LM loss, the auxiliary loss of DE Table 9 (Devlin et al. 2019, §3.1):

        L_mlm = -(1/|M|) sum_{i in M} log softmax(logits_i)[x_i]

    over the masked positions M (labels != -100, as `mlm_mask` returns them), x_i being the original token.
    logits: [..., V]; labels: [...]. A batch without a masked position gives 0 (and a zero gradient), not NaN."""
    labels = labels.reshape(-1)
    if not bool((labels != IGNORE_INDEX).any()):
        return logits.sum() * 0.0
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels, ignore_index=IGNORE_INDEX)
