"""The propositions of "In defense of dual-encoders" checked numerically: Proposition 1 in its finite form (an SVD
turns any score matrix into exact dual-encoder embeddings) and Proposition 3 (softmax cross-entropy distillation
approaches margin MSE as the temperature grows), computed with the library's own losses (`taser_lib.losses`).

    >>> S = ca_scores_on_a_grid                      # [queries, passages], e.g. a CA's score of every pair
    >>> R = relevance_matrix(qrels, query_ids, doc_ids)
    >>> Z, W = svd_embeddings(S)                     # d = rank(S): Z @ W.T == S up to rounding
    >>> truncation_curve(S, R)                       # dim, relative_error, max_abs_error, mrr (MRR@10 of S_d)
    >>> prop3_gradients([2.0, -1.0], [5.0, 1.0], taus=[1, 10, 100])      # tau, i, scaled sce grad, mmse grad / 8
    >>> prop3_binary_identity([2.0, -1.0], [5.0, 1.0], taus=[1, 10])      # sce, binary CE, KL, binary KL, H(teacher)

Proposition 1, finite form (§3.1): "we may associate with any s*: Q x D -> R a matrix S* ... By the singular value
decomposition, S* = Z W^T for matrices Z in R^{|Q| x r}, W in R^{|D| x r}, where r = rank(S*)". With
S = U diag(sigma) V^T we take Z = U_r diag(sigma_r)^{1/2} and W = V_r diag(sigma_r)^{1/2} (the split of sigma
between the sides is free; the symmetric one keeps both sides on one scale). Truncating to d < r dimensions gives the
best rank-d approximation S_d (Eckart-Young): ||S - S_d||_F = sqrt(sum_{i > d} sigma_i^2). `truncation_curve`
reports that error and the MRR@10 of ranking each query's passages by S_d, i.e. how large an embedding a DE needs
to represent this scorer's ranking. rank(S) is numerical: singular values above `tol` (numpy's default:
sigma_max * max(shape) * eps).

Proposition 3 (§4.2): for K = 2 and temperature tau, "lim_{tau -> inf} tau^2 d/ds_i l_sce(t, s; tau) = 1/8 d/ds_i
l_mmse(t, s)". `prop3_gradients` takes both gradients by autograd through `losses.softmax_ce_distill` (Eq. 1, the
teacher's softmax as soft labels, shared tau, no tau^2 factor) and `losses.margin_mse` (Eq. 3, unnormalised) in
float64. The approach is fast: tau^2 d l_sce / d s_1 = tau (sigma((s_1 - s_2) / tau) - sigma((t_1 - t_2) / tau))
= ((s_1 - s_2) - (t_1 - t_2)) / 4 + O(tau^-2) (the sigmoid's second-order term vanishes), so the ratio tends to
1 as 1 - (a^2 + a b + b^2) / (12 tau^2) with a = s_1 - s_2, b = t_1 - t_2. Where the margins agree (a = b) both
gradients are 0 and the ratio is NaN.

The proposition's first statement, "l_sce(t, s; tau) = KL_bin(sigma(t1 - t2; tau) || sigma(s1 - s2; tau))", holds
for the binary *cross-entropy*, which the proof derives (-sum_z sigma(z(t1 - t2); tau) log sigma(z(s1 - s2); tau));
the binary KL is that minus the teacher's binary entropy, a constant in s (same gradients). Likewise the paper's
"KL" loss (Table 12, `losses.kl_distill`) equals softmax CE minus the teacher's entropy. `prop3_binary_identity`
reports all of them, so that both identities can be checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import torch

from taser_lib.data.types import Qrels
from taser_lib.losses import kl_distill, margin_mse, softmax_ce_distill

# --- Proposition 1 ---------------------------------------------------------------------------------------------------


def _matrix(S) -> np.ndarray:
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or 0 in S.shape:
        raise ValueError(f"a score matrix must be 2-d and non-empty, got shape {S.shape}")
    if not np.isfinite(S).all():
        raise ValueError("the score matrix holds non-finite values")
    return S


def numerical_rank(S, tol: float | None = None) -> int:
    """The number of singular values of S above `tol` (numpy's default tolerance when None)."""
    return int(np.linalg.matrix_rank(_matrix(S), tol=tol))


def svd_embeddings(S, dim: int | None = None, tol: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Query embeddings Z [|Q|, d] and passage embeddings W [|D|, d] with Z @ W.T the best rank-d approximation
    of S (exactly S, up to rounding, at the default d = rank(S)): Z = U_d sqrt(sigma_d), W = V_d sqrt(sigma_d)."""
    S = _matrix(S)
    d = numerical_rank(S, tol) if dim is None else dim
    if not 1 <= d <= min(S.shape):
        raise ValueError(f"dim must lie in [1, {min(S.shape)}] for a {S.shape[0]} x {S.shape[1]} matrix, got {d}")
    U, sigma, Vt = np.linalg.svd(S, full_matrices=False)
    root = np.sqrt(sigma[:d])
    return U[:, :d] * root, Vt[:d].T * root


def relevance_matrix(qrels: Qrels, query_ids: Sequence[str], doc_ids: Sequence[str]) -> np.ndarray:
    """The grades of qrels on a query x passage grid (int [len(query_ids), len(doc_ids)], 0 where unjudged)."""
    col = {d: j for j, d in enumerate(doc_ids)}
    if len(col) != len(doc_ids):
        raise ValueError("doc_ids lists a passage twice")
    out = np.zeros((len(query_ids), len(doc_ids)), dtype=np.int64)
    for i, q in enumerate(query_ids):
        for d, grade in qrels.get(q, {}).items():
            if d in col:
                out[i, col[d]] = grade
    return out


def reciprocal_ranks(S, relevance, k: int = 10) -> np.ndarray:
    """RR@k of every query (row) that has a relevant passage (relevance > 0): 1 / the rank of its best-ranked
    relevant passage when that rank is <= k, else 0. Rows without a relevant passage are left out (as the
    re-ranking metrics leave out unjudged queries). Ties in score keep column order."""
    S = _matrix(S)
    rel = np.asarray(relevance)
    if rel.shape != S.shape:
        raise ValueError(f"relevance {rel.shape} and scores {S.shape} differ in shape")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    judged = (rel > 0).any(1)
    order = np.argsort(-S[judged], axis=1, kind="stable")[:, :k]
    hit = np.take_along_axis(rel[judged] > 0, order, axis=1)
    first = np.where(hit.any(1), hit.argmax(1) + 1, 0)
    return np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)


def mrr_at_k(S, relevance, k: int = 10) -> float:
    """MRR@k over the rows with a relevant passage (`reciprocal_ranks`)."""
    rr = reciprocal_ranks(S, relevance, k)
    if not len(rr):
        raise ValueError("no row of the relevance matrix has a relevant passage")
    return float(rr.mean())


def default_dims(S, tol: float | None = None) -> list[int]:
    """1, 2, 4, 8, ... up to min(shape), plus rank(S) and min(shape)."""
    S = _matrix(S)
    top = min(S.shape)
    dims = {2**i for i in range(int(np.log2(top)) + 1)} | {numerical_rank(S, tol), top}
    return sorted(d for d in dims if 1 <= d <= top)


def truncation_curve(S, relevance=None, dims: Iterable[int] | None = None, *, k: int = 10,
                     tol: float | None = None) -> pd.DataFrame:
    """One row per embedding dimension d: dim, rank (of S, the same on every row), relative_error
    (||S - S_d||_F / ||S||_F), max_abs_error (max |S - S_d|), and with a relevance matrix `mrr` (MRR@k of ranking
    each row by S_d) and `mrr_full` (that of S itself). S_d = Z_d W_d^T from `svd_embeddings(S, d)`."""
    S = _matrix(S)
    dims = default_dims(S, tol) if dims is None else sorted(set(int(d) for d in dims))
    top = min(S.shape)
    bad = [d for d in dims if not 1 <= d <= top]
    if bad:
        raise ValueError(f"dims must lie in [1, {top}], got {bad}")
    U, sigma, Vt = np.linalg.svd(S, full_matrices=False)
    norm = np.linalg.norm(S)
    rank = numerical_rank(S, tol)
    full = mrr_at_k(S, relevance, k) if relevance is not None else None
    rows = []
    for d in dims:
        approx = (U[:, :d] * sigma[:d]) @ Vt[:d]
        row = {"dim": d, "rank": rank, "relative_error": float(np.linalg.norm(S - approx) / norm) if norm else 0.0,
               "max_abs_error": float(np.abs(S - approx).max())}
        if relevance is not None:
            row.update(mrr=mrr_at_k(approx, relevance, k), mrr_full=full)
        rows.append(row)
    return pd.DataFrame(rows)


def dims_to_match(curve: pd.DataFrame, tolerance: float = 0.01) -> int | None:
    """The smallest embedding dimension d of a `truncation_curve` (with a relevance matrix) whose MRR@k is within
    `tolerance` of the full matrix's, or None when no listed d is (the curve need not be monotone in d)."""
    missing = [c for c in ("dim", "mrr", "mrr_full") if c not in curve.columns]
    if missing:
        raise KeyError(f"the curve has no column(s) {missing}: pass a relevance matrix to truncation_curve")
    close = curve[curve["mrr"] >= curve["mrr_full"] - tolerance]
    return int(close["dim"].min()) if len(close) else None


# --- Proposition 3 ---------------------------------------------------------------------------------------------------

def _pairs(s, t) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.as_tensor(np.asarray(s, dtype=np.float64))
    t = torch.as_tensor(np.asarray(t, dtype=np.float64))
    s, t = s.reshape(1, -1) if s.dim() == 1 else s, t.reshape(1, -1) if t.dim() == 1 else t
    if s.dim() != 2 or s.shape[1] != 2 or s.shape != t.shape:
        raise ValueError(f"Proposition 3 takes K = 2: s and t must both have shape (2,) or (B, 2), got "
                         f"{tuple(s.shape)} and {tuple(t.shape)}")
    return s, t


def _taus(taus: Iterable[float]) -> list[float]:
    taus = [float(x) for x in taus]
    if not taus or any(not x > 0 for x in taus):
        raise ValueError(f"taus must be positive, got {taus}")
    return taus


def prop3_gradients(s, t, taus: Iterable[float]) -> pd.DataFrame:
    """tau^2 d l_sce / d s_i against (1/8) d l_mmse / d s_i for each pair, tau and i in {1, 2}: columns pair, tau,
    i, sce_scaled (tau^2 times the autograd gradient of `losses.softmax_ce_distill`), mmse_over_8 (that of
    `losses.margin_mse` with the first candidate positive, divided by 8), ratio (sce_scaled / mmse_over_8; NaN
    where that is 0) and abs_error (|sce_scaled - mmse_over_8|). s, t: student and teacher scores, (2,) or
    (B, 2)."""
    s, t = _pairs(s, t)
    positives = torch.tensor([[True, False]]).expand_as(s)
    s_mm = s.clone().requires_grad_(True)
    (g_mmse,) = torch.autograd.grad(margin_mse(s_mm, t, positives, reduction="sum"), s_mm)
    rows = []
    for tau in _taus(taus):
        s_ce = s.clone().requires_grad_(True)
        (g_sce,) = torch.autograd.grad(softmax_ce_distill(s_ce, t, tau=tau, reduction="sum"), s_ce)
        scaled, target = (tau**2 * g_sce).numpy(), (g_mmse / 8).numpy()
        for b in range(s.shape[0]):
            for i in range(2):
                ratio = scaled[b, i] / target[b, i] if target[b, i] != 0 else float("nan")
                rows.append({"pair": b, "tau": tau, "i": i + 1, "sce_scaled": float(scaled[b, i]),
                             "mmse_over_8": float(target[b, i]), "ratio": float(ratio),
                             "abs_error": float(abs(scaled[b, i] - target[b, i]))})
    return pd.DataFrame(rows)


def prop3_binary_identity(s, t, taus: Iterable[float]) -> pd.DataFrame:
    """For each pair and tau: sce (`losses.softmax_ce_distill`), binary_ce = -sum_{z = +-1} sigma(z (t1 - t2);
    tau) log sigma(z (s1 - s2); tau) (the proof's middle line, computed here independently of the losses),
    teacher_entropy (the binary entropy of sigma(t1 - t2; tau)), binary_kl = binary_ce - teacher_entropy,
    kl (`losses.kl_distill`), and the errors sce_error = |sce - binary_ce| and kl_error = |kl - binary_kl|
    (both ~1e-16: Prop. 3's "= KL_bin" holds for kl, and for sce up to the teacher's entropy)."""
    s, t = _pairs(s, t)
    rows = []
    for tau in _taus(taus):
        sce = softmax_ce_distill(s, t, tau=tau, reduction="none")
        kl = kl_distill(s, t, tau=tau, reduction="none")
        ds, dt = (s[:, 0] - s[:, 1]) / tau, (t[:, 0] - t[:, 1]) / tau
        p = torch.sigmoid(dt)  # teacher's probability of candidate 1
        binary_ce = -(p * torch.nn.functional.logsigmoid(ds) + (1 - p) * torch.nn.functional.logsigmoid(-ds))
        entropy = -(p * torch.nn.functional.logsigmoid(dt) + (1 - p) * torch.nn.functional.logsigmoid(-dt))
        for b in range(s.shape[0]):
            rows.append({"pair": b, "tau": tau, "sce": float(sce[b]), "binary_ce": float(binary_ce[b]),
                         "teacher_entropy": float(entropy[b]), "binary_kl": float(binary_ce[b] - entropy[b]),
                         "kl": float(kl[b]), "sce_error": float(abs(sce[b] - binary_ce[b])),
                         "kl_error": float(abs(kl[b] - (binary_ce[b] - entropy[b])))})
    return pd.DataFrame(rows)


def proposition_checks(S, *, s=((2.0, -1.0), (0.5, 1.5)), t=((5.0, 1.0), (-2.0, 0.0)),
                       tau_limit: float = 1e3, taus: Sequence[float] = (1.0, 10.0, 100.0)) -> pd.DataFrame:
    """The `checks` table of the propositions page: check, value (each a maximal absolute error):
    svd_reconstruction (|S - Z W^T| at d = rank(S)), sce_vs_binary_kl (Prop. 3's identity, with the paper's
    "KL_bin" read as the binary cross-entropy for l_sce and as the KL for `kl_distill`: the larger error of the
    two), gradient_limit (|tau^2 d l_sce - d l_mmse / 8| at `tau_limit`)."""
    Z, W = svd_embeddings(S)
    identity = prop3_binary_identity(s, t, taus)
    grads = prop3_gradients(s, t, [tau_limit])
    rows = [("svd_reconstruction", float(np.abs(_matrix(S) - Z @ W.T).max())),
            ("sce_vs_binary_kl", float(max(identity["sce_error"].max(), identity["kl_error"].max()))),
            ("gradient_limit", float(grads["abs_error"].max()))]
    return pd.DataFrame(rows, columns=["check", "value"])



# --- inputs and companions of Proposition 3 ---------------------------------------------------------------------------

def prop3_pairs(teacher, relevance, student) -> tuple[np.ndarray, np.ndarray]:
    """Proposition 3's K = 2 inputs from two score matrices of one query x passage grid: for each row with a
    relevant and an irrelevant passage, the relevant passage the teacher scores highest and the irrelevant one it
    scores highest (the hardest negative, the pair M3SE matches). Returns (t, s), each [rows, 2] (positive first):
    the teacher's and the student's scores of those two passages, e.g. a CA's grid and its rank-d SVD dual
    encoder (`svd_embeddings`)."""
    T, S = _matrix(teacher), _matrix(student)
    rel = np.asarray(relevance)
    if T.shape != S.shape or rel.shape != T.shape:
        raise ValueError(f"teacher {T.shape}, student {S.shape} and relevance {rel.shape} must share one shape")
    pos, neg = rel > 0, rel <= 0
    rows = np.flatnonzero(pos.any(1) & neg.any(1))
    if not len(rows):
        raise ValueError("no row has both a relevant and an irrelevant passage")
    p = np.where(pos[rows], T[rows], -np.inf).argmax(1)
    n = np.where(neg[rows], T[rows], -np.inf).argmax(1)
    t = np.stack([T[rows, p], T[rows, n]], axis=1)
    s = np.stack([S[rows, p], S[rows, n]], axis=1)
    return t, s


def distillation_entropy_gap(s, t, taus: Iterable[float]) -> pd.DataFrame:
    """The paper's "KL" distillation loss against softmax cross-entropy for any number K of candidates: per row of
    s, t ([B, K] or [K]) and tau, sce (`losses.softmax_ce_distill`), kl (`losses.kl_distill`), teacher_entropy
    (of softmax(t / tau)) and error = |sce - kl - teacher_entropy| (~1e-16 in float64: the two losses differ by a
    constant in s, so their gradients, and the students they train, are the same)."""
    s = torch.as_tensor(np.asarray(s, dtype=np.float64))
    t = torch.as_tensor(np.asarray(t, dtype=np.float64))
    s, t = (s.reshape(1, -1) if s.dim() == 1 else s), (t.reshape(1, -1) if t.dim() == 1 else t)
    if s.dim() != 2 or s.shape != t.shape or s.shape[1] < 2:
        raise ValueError(f"s and t must share a shape (K,) or (B, K) with K >= 2, got {tuple(s.shape)} and "
                         f"{tuple(t.shape)}")
    rows = []
    for tau in _taus(taus):
        sce = softmax_ce_distill(s, t, tau=tau, reduction="none")
        kl = kl_distill(s, t, tau=tau, reduction="none")
        log_p = torch.log_softmax(t / tau, dim=1)
        entropy = -(log_p.exp() * log_p).sum(1)
        for b in range(s.shape[0]):
            rows.append({"row": b, "tau": tau, "K": int(s.shape[1]), "sce": float(sce[b]), "kl": float(kl[b]),
                         "teacher_entropy": float(entropy[b]),
                         "error": float(abs(sce[b] - kl[b] - entropy[b]))})
    return pd.DataFrame(rows)
