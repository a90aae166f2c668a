"""Parameter counts of every architecture for a base BERT config (TASER Table A1 / A3)."""

from __future__ import annotations

import torch
from transformers import BertConfig

from .dpr import DPRConfig, DPRModel
from .taser import TaserConfig, TaserModel

# (arch, routing, experts) -> millions of parameters the paper reports for BERT-base (Table A1; A3 for DPR, TASER).
PAPER_PARAMS_M: dict[tuple[str, str | None, int | None], int] = {
    ("dpr", None, None): 218,
    ("taser", "shared", 1): 109,
    ("taser", "deterministic", 2): 128,
    ("taser", "sequence", 2): 128,
    ("taser", "sequence", 4): 166,
    ("taser", "token", 2): 128,
    ("taser", "token", 4): 166,
}


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def parameter_table(base: BertConfig | None = None, shared_blocks: int = 2) -> list[dict]:
    """One row per Table A1 model: arch, routing, experts, params (exact), params_m (rounded), paper_m.

    Models are built on the meta device: shapes only, no memory, no download.
    """
    base = base or BertConfig()
    fields = {k: v for k, v in base.to_dict().items() if k not in ("model_type", "architectures")}
    rows = []
    with torch.device("meta"):
        for arch, routing, experts in PAPER_PARAMS_M:
            if arch == "dpr":
                model = DPRModel(DPRConfig(**fields))
            else:
                model = TaserModel(TaserConfig(**fields, shared_blocks=shared_blocks, num_experts=experts,
                                               routing=routing))
            n = count_parameters(model)
            rows.append({"arch": arch, "routing": routing, "experts": experts, "params": n,
                         "params_m": round(n / 1e6), "paper_m": PAPER_PARAMS_M[(arch, routing, experts)]})
    return rows


def paper_params_key(model: torch.nn.Module) -> tuple[str, str | None, int | None] | None:
    """The Table A1 row (a key of PAPER_PARAMS_M) a trained model stands for: DPR, or TASER by its routing and
    number of experts; None for anything else (ColBERT, a TASER variant the paper does not list)."""
    if isinstance(model, DPRModel):
        key = ("dpr", None, None)
    elif isinstance(model, TaserModel) and model.config.model_type == TaserConfig.model_type:  # not ColBERT's
        key = ("taser", model.config.routing, model.config.num_experts)
    else:
        return None
    return key if key in PAPER_PARAMS_M else None
