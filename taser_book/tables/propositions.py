"""Tables of the propositions page (the dual-encoder paper's §4 propositions checked numerically)."""
from __future__ import annotations

import pandas as pd


def prop3_summary(grads: pd.DataFrame, coordinate: int = 1) -> pd.DataFrame:
    """Proposition 3 per temperature τ, for score `coordinate` (1: the positive's): the median ratio of
    τ² ∂ℓ_sce/∂s_i to ∂ℓ_mmse/∂s_i / 8 over questions, the largest absolute gap between them, and the largest
    |∂ℓ_mmse/∂s_i| / 8 (the gap's scale). `grads` is `taser_lib.evaluation.prop3_gradients`'s frame."""
    rows = grads[grads["i"] == coordinate]
    return rows.groupby("tau").agg(median_ratio=("ratio", "median"), max_abs_gap=("abs_error", "max"),
                                   max_abs_mmse_grad_over_8=("mmse_over_8", lambda g: g.abs().max()))
