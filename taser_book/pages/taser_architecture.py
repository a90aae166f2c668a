"""The architecture page (TASER Figure 1, Tables A1 and A3): the specialized blocks drawn from a model's own
configuration and the parameters of every variant counted, on BERT-base and on the page's model.

    >>> page = run(settings("cpu"), results_dir="results/cpu/taser_architecture")
    >>> page.specialized_blocks()     # which blocks of BERT-base carry the experts (1-based)
    >>> page.figure("deterministic")  # Figure 1: Det-R on BERT-base; page.figure("sequence", 4): Seq-R, 4 experts
    >>> page.params()                 # Tables A1/A3: ours beside the paper's
    >>> page.det_r_fraction()         # TASER Det-R / DPR against the paper's 128M / 218M
    >>> page.default_model_params()   # the same architectures on the page's model

Nothing here depends on data or training: BERT-base is built on PyTorch's meta device, so every profile gives the
same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.figure import Figure
from transformers import BertConfig

from taser_lib.models import TaserConfig, parameter_table, resolve_checkpoint
from taser_lib.models.routing import DeterministicRouting
from ..plots import draw_taser_architecture
from ..profiles import PageSettings, page_settings
from ..scorecard import notebook_claims, publish

PAGE = "taser_architecture"
PAPER_DET_R, PAPER_DPR = 128, 218  # millions of parameters, Table A3


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model and block period T this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def bert_base_fields() -> dict[str, Any]:
    """BERT-base's configuration (`transformers.BertConfig()`) as keyword arguments of a `TaserConfig`."""
    return {k: v for k, v in BertConfig().to_dict().items() if k not in ("model_type", "architectures")}


def params_table(config: BertConfig, shared_blocks: int) -> pd.DataFrame:
    """Every variant's exact parameter count on `config`, in millions beside the paper's, and as a fraction of DPR."""
    table = pd.DataFrame(parameter_table(config, shared_blocks=shared_blocks)).rename(
        columns={"params_m": "ours (M)", "paper_m": "paper (M)"})
    table["routing"] = table["routing"].fillna("-")
    table["experts"] = table["experts"].astype("Int64")
    table["matches paper"] = table["ours (M)"] == table["paper (M)"]
    table["fraction of DPR"] = (table["params"] / dpr_params(table)).round(3)
    return table


def default_model_table(model: str, shared_blocks: int) -> pd.DataFrame:
    """The same counts on `model`'s configuration (the paper has no such model: no paper column)."""
    table = pd.DataFrame(parameter_table(BertConfig.from_pretrained(resolve_checkpoint(model)),
                                         shared_blocks=shared_blocks)).drop(columns=["paper_m"])
    table["fraction of DPR"] = (table["params"] / dpr_params(table)).round(3)
    return table


def dpr_params(table: pd.DataFrame) -> int:
    return table.loc[table.arch == "dpr", "params"].item()


@dataclass(frozen=True)
class Architecture:
    """The page's result: its settings and its two tables (`results_dir`: where they were saved; None: nowhere)."""

    settings: PageSettings
    params_frame: pd.DataFrame
    default_frame: pd.DataFrame
    results_dir: str | os.PathLike | None = None

    def config(self, routing: str = DeterministicRouting.name, experts: int = 2) -> TaserConfig:
        """TASER on BERT-base with the page's T, `routing` (a scheme's name) and `experts`."""
        return TaserConfig(**bert_base_fields(), shared_blocks=self.settings.shared_blocks, routing=routing,
                           num_experts=experts)

    def specialized_blocks(self) -> str:
        return f"specialized blocks (1-based): {[i + 1 for i in self.config().specialized_layers]}"

    def figure(self, routing: str = DeterministicRouting.name, experts: int = 2) -> Figure:
        return draw_taser_architecture(self.config(routing, experts))

    def params(self) -> pd.DataFrame:
        return self.params_frame

    def det_r_fraction(self) -> str:
        """TASER Det-R's parameters over DPR's, beside the paper's; raises if any count differs from the paper."""
        table = self.params_frame
        det_r = table[(table.arch == "taser") & (table.routing == DeterministicRouting.name)]["params"].item()
        if not table["matches paper"].all():
            raise AssertionError("a parameter count differs from the paper")
        return (f"TASER Det-R / DPR = {det_r / dpr_params(table):.3f} (the paper: {PAPER_DET_R}M / {PAPER_DPR}M = "
                f"{PAPER_DET_R / PAPER_DPR:.3f}, 'about 60%')")

    def default_model_params(self) -> pd.DataFrame:
        return self.default_frame

    def claims(self) -> pd.DataFrame:
        """The paper's claims of this page beside ours, judged on the saved tables."""
        return notebook_claims(PAGE, self.results_dir)

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        s = self.settings
        return publish(results_dir, PAGE, tables={"params": self.params_frame,
                                                  "parameters_default_model": self.default_frame},
                       parameters={"profile": s.profile, "shared_blocks": s.shared_blocks,
                                   "base": "transformers.BertConfig()"},
                       table_parameters={"parameters_default_model": {"profile": s.profile,
                                                                      "shared_blocks": s.shared_blocks,
                                                                      "base": s.model}},
                       settings=s)


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Architecture:
    """Count every variant's parameters on BERT-base and on `s.model`, and save both tables into `results_dir`
    (None: nothing saved, and it says so)."""
    page = Architecture(s, params_table(BertConfig(), s.shared_blocks), default_model_table(s.model, s.shared_blocks),
                        results_dir)
    page.publish(results_dir)
    return page
