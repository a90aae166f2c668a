"""The propositions page ("In defense of dual-encoders", Propositions 1 and 3): a dual encoder of dimension rank(S)
represents the CA's score grid S exactly, and τ² times the softmax-CE gradient tends to 1/8 of margin MSE's.

    >>> page = run(settings("cpu"), results_dir="results/cpu/de_propositions")
    >>> print(page.teacher_line())     # the CA teacher's steps and dev nDCG@10
    >>> page.overview()                # the grid: questions, passages, relevant pairs, rank, MRR@10
    >>> page.exact_table()             # Proposition 1: Z Wᵀ = S at dimension rank(S)
    >>> page.truncation_figure()       # rank-d SVD dual encoders: error and MRR@10 against d
    >>> print(page.dims_needed())      # the dimension within 0.01 MRR@10 of every dimension
    >>> page.truncation_table()
    >>> print(page.margins_summary())  # the teacher's and the student's margins on the Proposition 3 pairs
    >>> page.gradients_figure()        # Proposition 3: τ² ∂ℓ_sce/∂s against τ
    >>> page.gradients_table()
    >>> page.identity_table()          # the binary identity and the paper's "KL"
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from taser_lib.evaluation import read_per_query
from ..analyses.propositions import (dims_to_match, distillation_entropy_gap, mrr_at_k, numerical_rank,
                                     prop3_binary_identity, prop3_gradients, prop3_pairs, proposition_checks,
                                     svd_embeddings, truncation_curve)
from ..plots import plot_prop3_gradients, plot_truncation_curve
from ..profiles import PageSettings, page_settings
from ..runs import changes
from ..runs.cache import CachedRun
from ..runs.recipes import reranking_run
from ..runs.scoring import grid_matrix, grid_set, run_scores, saved_model_scores
from ..scorecard import publish
from ..tables.propositions import prop3_summary
from .common import PageResult, distill_params, teacher_line

PAGE = "de_propositions"
IDENTITY_TAUS = [1.0, 10.0]  # the temperatures of the binary-identity table


def settings(profile: str = "smoke", overrides: Mapping[str, Any] | None = None) -> PageSettings:
    """The model, data and sizes this page runs with at `profile` (`overrides`: settings that differ from it)."""
    return page_settings(PAGE, profile, overrides)


def train(s: PageSettings) -> CachedRun:
    """The CA teacher (trained, or read from the run cache)."""
    on_testbed = [] if s.testbed == "squad-open" else [changes.data(dataset=s.testbed)]
    return reranking_run("ca", s.seed, distill_params(s), changes=on_testbed, progress=False)


@dataclass(frozen=True)
class Grid:
    """The score grid: a seeded sample of the teacher's test questions against all their candidates, scored by the
    CA (`S`) and by the untrained DE (`S_de`); `R` holds the relevance labels."""

    rset: Any
    S: np.ndarray
    R: np.ndarray
    S_de: np.ndarray


def score_grid(s: PageSettings, teacher: CachedRun) -> Grid:
    test_set = teacher.config.data.load(progress=False)[teacher.config.data.test_split]
    grid = grid_set(test_set, s.grid_queries, seed=s.seed)
    S, R = grid_matrix(grid, run_scores(teacher, grid))
    S_de, _ = grid_matrix(grid, saved_model_scores(s.model, grid, max_query_length=s.max_query_length,
                                                   max_passage_length=s.max_passage_length,
                                                   batch_size=s.eval_batch_size))
    return Grid(grid, S, R, S_de)


def grid_overview(teacher: CachedRun, g: Grid) -> dict[str, Any]:
    """The grid's sizes, rank and MRR@10 under the CA and the untrained DE, beside the CA's own test MRR@10."""
    ca_test = read_per_query(teacher.result["paths"]["test_per_query"])["MRR@10"]
    return {"questions": g.S.shape[0], "passages": g.S.shape[1], "pairs": int(g.S.size),
            "relevant pairs": int((g.R > 0).sum()), "of them by the answer rule": g.rset.meta["answer_labelled"],
            "rank(S)": numerical_rank(g.S), "CA MRR@10 on the grid": mrr_at_k(g.S, g.R),
            "untrained DE MRR@10 on the grid": mrr_at_k(g.S_de, g.R),
            f"CA MRR@10 on its {len(ca_test)} test questions": float(np.mean(list(ca_test.values())))}


def exact_embeddings(g: Grid) -> pd.DataFrame:
    """Proposition 1: the SVD embeddings Z, W of S, their dimension, max |S − Z Wᵀ| and MRR@10 of both."""
    Z, W = svd_embeddings(g.S)
    return pd.DataFrame([{"rank(S)": numerical_rank(g.S), "min(questions, passages)": min(g.S.shape),
                          "embedding dimension": Z.shape[1], "max |S - Z Wᵀ|": float(np.abs(g.S - Z @ W.T).max()),
                          "max |S|": float(np.abs(g.S).max()), "MRR@10 of S": mrr_at_k(g.S, g.R),
                          "MRR@10 of Z Wᵀ": mrr_at_k(Z @ W.T, g.R)}])


def truncation_curves(g: Grid) -> pd.DataFrame:
    """Relative error and MRR@10 of the rank-d SVD dual encoders of the CA's and the untrained DE's grids."""
    return pd.concat([truncation_curve(g.S, g.R).assign(model="CA teacher"),
                      truncation_curve(g.S_de, g.R).assign(model="untrained DE")], ignore_index=True)


@dataclass(frozen=True)
class Prop3:
    """Proposition 3 on the grid: (teacher, student) scores of each question's best positive and hardest negative,
    the student the rank-`prop3_dim` SVD DE, and the gradients against τ; `student_grid` is that DE's score grid."""

    t: np.ndarray
    s: np.ndarray
    grads: pd.DataFrame
    student_grid: np.ndarray


def proposition_3(s: PageSettings, g: Grid) -> Prop3:
    Zd, Wd = svd_embeddings(g.S, dim=min(s.prop3_dim, min(g.S.shape)))
    t, student = prop3_pairs(g.S, g.R, Zd @ Wd.T)
    return Prop3(t, student, prop3_gradients(student, t, s.taus), Zd @ Wd.T)


@dataclass(frozen=True)
class Propositions(PageResult):
    """The page's result: its settings, the teacher, the grid and its tables (`results_dir`: where they were saved;
    None: nowhere)."""

    page = PAGE

    settings: PageSettings
    teacher: CachedRun
    grid: Grid
    overview_values: dict[str, Any]
    exact: pd.DataFrame
    curves: pd.DataFrame
    prop3: Prop3
    identity: pd.DataFrame
    gap: pd.DataFrame
    checks: pd.DataFrame
    wall_s: float
    results_dir: str | os.PathLike | None = None

    def parameters(self) -> dict[str, Any]:
        s = self.settings
        return {**distill_params(s), "profile": s.profile, "seed": s.seed, "testbed": s.testbed,
                "grid_queries": s.grid_queries, "prop3_dim": s.prop3_dim, "taus": s.taus, "tau_limit": s.tau_limit,
                "teacher": self.teacher.dir.name, "grid": self.grid.rset.meta, "wall_s": round(self.wall_s)}

    def publish(self, results_dir: str | os.PathLike | None) -> pd.DataFrame | None:
        """Save the tables into `results_dir` (None: nothing) and judge the page's claims on them."""
        return publish(results_dir, PAGE, tables={"checks": self.checks, "grid": self.overview_values,
                                                  "truncation": self.curves, "prop3_gradients": self.prop3.grads},
                       parameters=self.parameters(), settings=self.settings)

    def teacher_line(self) -> str:
        return teacher_line(self.teacher)

    def overview(self) -> pd.DataFrame:
        return pd.Series(self.overview_values, name="value", dtype=object).to_frame()

    def exact_table(self) -> pd.DataFrame:
        return self.exact

    def truncation_figure(self) -> Figure:
        S = self.grid.S
        return plot_truncation_curve(self.curves, title=f"Rank-d SVD dual encoders of a {S.shape[0]} x {S.shape[1]} "
                                                        f"score grid ({self.settings.profile} profile)")

    def dims_needed(self) -> str:
        """Per grid, MRR@10 with every dimension and the smallest d within 0.01 of it."""
        curves, lines = self.curves, []
        for m, c in curves.groupby("model", sort=False):
            d = dims_to_match(c, tolerance=0.01)
            full = curves.loc[curves["model"] == m, "mrr_full"].iloc[0]
            lines.append(f"{m}: MRR@10 {full:.3f} with every dimension; within 0.01 of it from d = {d} "
                         f"(of rank {int(curves.loc[curves['model'] == m, 'rank'].iloc[0])})")
        return "\n".join(lines)

    def truncation_table(self) -> pd.DataFrame:
        return self.curves.pivot_table(index="dim", columns="model", values=["relative_error", "mrr"],
                                       sort=False).round(4)

    def margins_summary(self) -> str:
        t, s = self.prop3.t, self.prop3.s
        margins = pd.DataFrame({"teacher margin t1 - t2": t[:, 0] - t[:, 1],
                                "student margin s1 - s2": s[:, 0] - s[:, 1]})
        return margins.describe().loc[["count", "min", "50%", "max"]].round(3).to_string()

    def gradients_figure(self) -> Figure:
        return plot_prop3_gradients(self.prop3.grads, title=f"Proposition 3 on the CA's grid ({len(self.prop3.t)} "
                                                            f"question pairs, {self.settings.profile} profile)")

    def gradients_table(self) -> pd.DataFrame:
        return prop3_summary(self.prop3.grads)

    def identity_table(self) -> pd.DataFrame:
        """The binary identity of Proposition 3's proof (K = 2) and KL = CE − H(teacher) over all K candidates."""
        identity, gap = self.identity, self.gap
        return pd.DataFrame([
            {"candidates K": 2, "max |sce - binary CE|": identity["sce_error"].max(),
             "max |KL - binary KL|": identity["kl_error"].max(),
             "max |sce - KL - H(teacher)|": float((identity["sce"] - identity["kl"]
                                                   - identity["teacher_entropy"]).abs().max()),
             "mean H(teacher)": identity["teacher_entropy"].mean()},
            {"candidates K": self.grid.S.shape[1], "max |sce - KL - H(teacher)|": gap["error"].max(),
             "mean H(teacher)": gap["teacher_entropy"].mean()}])


def run(s: PageSettings, results_dir: str | os.PathLike | None = None) -> Propositions:
    """Train (or read from the run cache) the CA teacher at `s`, score its grid, compute the page's tables and save
    them into `results_dir` (None: nothing saved, and it says so)."""
    started = time.perf_counter()
    teacher = train(s)
    g = score_grid(s, teacher)
    overview = grid_overview(teacher, g)
    exact, curves, prop3 = exact_embeddings(g), truncation_curves(g), proposition_3(s, g)
    identity = prop3_binary_identity(prop3.s, prop3.t, taus=IDENTITY_TAUS)
    gap = distillation_entropy_gap(prop3.student_grid, g.S, taus=IDENTITY_TAUS)
    checks = pd.concat([proposition_checks(g.S, s=prop3.s, t=prop3.t, tau_limit=s.tau_limit),
                        pd.DataFrame([{"check": "kl_equals_ce_minus_entropy", "value": float(gap["error"].max())}])],
                       ignore_index=True)
    page = Propositions(s, teacher, g, overview, exact, curves, prop3, identity, gap, checks,
                        wall_s=time.perf_counter() - started, results_dir=results_dir)
    page.publish(results_dir)
    return page
