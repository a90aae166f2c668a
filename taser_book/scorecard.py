"""The scorecard: every headline claim of both papers, the paper's numbers, ours, and a verdict per profile.

The claims are data, `notebooks/claims/<notebook>.yaml` (schema and loader: `taser_book.claims`). The scorecard reads
only the result tables written by `taser_book.results.save_result` under `results/<profile>/<notebook>/`. A verdict
is one of:

- *planned*: the notebook that reproduces the claim (`notebooks/<notebook>.ipynb`) does not exist yet;
- *not run*: it exists but has no result at this profile, or its table lacks the claim's rows there;
- *holds* / *fails*: the claim's direction test on our numbers, and, when the claim says how to judge its noise,
  every compared pair is separated by a paired test (randomisation or t-test, per query or per seed) at alpha;
- *within noise*: the paired test cannot separate the two sides of a comparison (p >= alpha);
- *error*: the result table does not have the layout the claim reads (a missing column, several matching rows).

A claim without a noise section says why its numbers are exact (`exact`: parameter counts, a proof's floating-point
error) and can only hold or fail, its detail saying "no noise estimate: exact (...)"; one that says neither reads *not
testable here*. A result whose notebook or
library files changed since it was made (`stale_reason`, which ignores this module and the claims loader: they judge tables, never make them) is marked stale.

The contract for notebooks, so that their results can be scored:
- retrieval and re-ranking tables are long: columns `model`, `dataset`, `metric`, `value` (plus the keys a claim
  filters on, e.g. `split`, `size`, `k`); one row per number;
- per-query tables (for the paired tests) hold the same columns plus `query_id`, one row per query (the
  column name of `evaluation.records`' per-query files);
- values are on the paper's scale: TASER's R@K and nDCG@10 in percent, the second paper's MRR@10 / nDCG@10 as
  fractions, parameter counts as plain counts;
- metric names are those the library produces: `R@20` (answer recall), `macro R@20` / `micro R@20`
  (`evaluation.macro_micro_accuracy`), ir-measures names (`nDCG@10`, `MRR@10`); others are listed in the claims
  file's `metrics`;
- dataset names are those of `taser data list` (`dpr-nq`, `dpr-squad1`, `beir-arguana`, ...; the offline SQuAD
  stand-in is `squad-open`); MS MARCO re-ranking is `msmarco-passage`, its full retrieval
  `msmarco-passage-retrieval`, TREC DL 2019 `trec-dl-2019`.
"""

from __future__ import annotations

import html
import math
import multiprocessing
import json
import os
import tempfile
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .claims import (Claim, Comparison, claims_dir, evaluate, find_root, load_claims, load_claims_file, load_papers,
                     load_preconditions, names_in, parse_comparison)
from taser_lib.errors import ConfigError, TaserError
from taser_lib.io import atomic_write_json, atomic_write_text
from taser_lib.meta import run_metadata
from .results import META_NAME, PROFILE_ORDER, library_path, load_result, notebook_sha256, read_meta, save_result
from .preserving import PRESERVING_CHANGES, preserved_digests, preserved_files, read_preserving_changes
from .results import stale_reason as _recorded_stale_reason

PLANNED, NOT_RUN, HOLDS, FAILS, WITHIN_NOISE, ERROR = "planned", "not run", "holds", "fails", "within noise", "error"
NOT_TESTABLE = "not testable here"
VERDICTS = (HOLDS, FAILS, WITHIN_NOISE, NOT_TESTABLE, NOT_RUN, PLANNED)  # the summary's columns (ERROR only if any)
TESTABLE = (HOLDS, FAILS, WITHIN_NOISE)
NO_NOISE = "no noise estimate"
_TEST_NAMES = {"randomisation": "paired randomisation test", "t-test": "paired t-test",
               "equivalence": "equivalence test (two one-sided tests)", "non-inferiority": "non-inferiority test",
               "binomial": "exact binomial test", "two-sample": "two-sample permutation test",
               "bootstrap": "bootstrap over questions"}


def __getattr__(name: str) -> Any:
    """`CLAIMS`: every claim of the checkout's claims files (read when first asked for)."""
    if name == "CLAIMS":
        return load_claims(claims_dir())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Verdict:
    status: str                 # one of VERDICTS or ERROR
    ours: str = ""              # our numbers, per group
    detail: str = ""            # why: the test and its p-values, "no noise estimate", what is missing
    stale: str | None = None    # why the result it reads is stale (None: up to date, or not known)
    p_value: float | None = None  # the deciding p-value: the largest over the compared pairs
    observed: str = ""          # for fails: the direction observed, e.g. "dist < de"
    effect_ratio: float | None = None  # ER of the first comparison with the paper's numbers (None: not comparable)
    delta_ri: float | None = None      # its delta relative improvement
    groups: Mapping[str, str] | None = None  # per value of the claim's `over` column: its status
    # The direction the claim's own test observed, whatever the verdict (e.g. "dist < de", per group); for a claim
    # not testable for want of a precondition, that of the test run regardless of it, with its p-value.
    direction: str = ""
    direction_p: float | None = None
    reversal: bool = False      # that test found the opposite of the claim, significantly (a fail, or one hidden)

    @property
    def short(self) -> str:
        """The verdict as the scorecard's table shows it: "holds (p = 0.002)", "fails: dist < de (p = 0.0002)",
        "within noise: dist > de (p = 0.31)", "not testable here: needs teacher-leads; observed dist < de
        (p = 0.0002, a significant reversal)" (the precondition that does not hold, then what the claim's own test
        saw regardless of it)."""
        text = self.status
        if self.status in (FAILS, NOT_TESTABLE) and self.observed:
            text += f": {self.observed}"
        elif self.status == WITHIN_NOISE and self.direction:
            text += f": {self.direction}"
        if self.p_value is not None and self.status in (HOLDS, FAILS, WITHIN_NOISE):
            text += f" (p = {self.p_value:.2g})"
        if self.status == NOT_TESTABLE and self.direction:
            said = [f"p = {self.direction_p:.2g}"] if self.direction_p is not None else []
            said += ["a significant reversal"] if self.reversal else []
            text += f"; observed {self.direction}" + (f" ({', '.join(said)})" if said else "")
        return text + (" · stale" if self.stale else "")

    @property
    def er(self) -> str:
        """The effect ratio as shown beside the verdict ("" where the paper gives no comparable numbers)."""
        if self.effect_ratio is None or math.isnan(self.effect_ratio):
            return ""
        return f"{self.effect_ratio:.2f}"


# ----------------------------------------------------------------------------------------------- staleness

# The claims files' loader and this module read result tables and never write them, and the book judges every result
# again when it is built (`book.build_book` puts a freshly judged verdict box on each page and remakes the output
# of its `notebook_claims(...)` cell). So a change to them makes no result stale, and a better test of a claim needs
# no rerun of the notebooks. `preserving` only says which recorded files still count, never what a page computes.
# The figure functions draw from the tables and write none, so a change to them leaves
# every verdict as it was (the runner still reruns the notebook, to redraw its figures). Every other library file a
# notebook loaded still counts.
JUDGING_FILES = frozenset({"taser_book/claims.py", "taser_book/scorecard.py", "taser_book/preserving.py"})
DRAWING_FILES = "taser_book/plots/"


def stale_reason(result_folder: str | os.PathLike, repo_root: str | os.PathLike = ".") -> str | None:
    """None when the result is up to date with the checkout at `repo_root`, else why (see `results.stale_reason`);
    a changed file of JUDGING_FILES or DRAWING_FILES does not count, nor a change declared result-preserving."""
    preserved = preserved_files(result_folder, repo_root)
    return stale_beside_preserved_notebook(
        result_folder, repo_root, lambda f: f in JUDGING_FILES or f.startswith(DRAWING_FILES) or preserved(f))


def stale_beside_preserved_notebook(result_folder: str | os.PathLike, repo_root: str | os.PathLike,
                                    ignore: Callable[[str], bool]) -> str | None:
    """`results.stale_reason(result_folder, repo_root, ignore)`, where a notebook that changed since the result was
    made only by changes declared result-preserving (`preserving`: notebooks/<page>.ipynb entries, digests by
    `results.notebook_sha256`) counts as the notebook that made it."""
    moved = _notebook_preserved(Path(result_folder), Path(repo_root))
    if moved is None:
        return _recorded_stale_reason(result_folder, repo_root, ignore=ignore)
    with tempfile.TemporaryDirectory() as tmp:  # the same check, on the record as if made from the notebook now
        atomic_write_json(Path(tmp) / META_NAME, moved)
        return _recorded_stale_reason(tmp, repo_root, ignore=ignore)


def _notebook_preserved(result_folder: Path, repo_root: Path) -> dict[str, Any] | None:
    """The result's meta.json with its notebook's digest moved to the notebook's digest now, when the notebook
    changed since the result was made only by changes declared result-preserving (`preserving`: notebooks/<page>.ipynb
    entries, digests by `results.notebook_sha256`); else None."""
    meta = read_meta(result_folder) or {}
    source = meta.get("notebook_source") or {}
    rel, digest = source.get("path"), source.get("sha256")
    if not rel or not digest or Path(rel).is_absolute() or not (repo_root / rel).is_file():
        return None
    now = notebook_sha256(repo_root / rel)
    if now == digest:
        return None
    changes = read_preserving_changes(library_path(PRESERVING_CHANGES, repo_root))
    if now not in preserved_digests(rel, digest, changes):
        return None
    return {**meta, "notebook_source": {**source, "sha256": now}}




# ----------------------------------------------------------------------------------------------- tables

def _matches(series: pd.Series, value: Any) -> pd.Series:
    """Column equals value; numbers compare as numbers (CSV turns 2 into 2.0 next to missing values)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == str(value)


def _fmt(x: float) -> str:
    if abs(x) >= 1e5:
        return f"{x / 1e6:.1f}M"
    return f"{x:.4g}"


class _Tables:
    """Result tables of one profile, each read once, and the staleness of each notebook's result."""

    def __init__(self, profile_dir: Path, folders: Mapping[str, Path] | None = None, root: Path | None = None):
        self.dir, self.folders, self.root = profile_dir, dict(folders or {}), root
        self.cache: dict[tuple[str, str], pd.DataFrame | None] = {}
        self.stale_cache: dict[str, str | None] = {}
        self.verdicts: dict[str, Verdict] = {}  # preconditions and required claims, evaluated once

    def folder(self, notebook: str) -> Path:
        return self.folders.get(notebook, self.dir / notebook)

    def get(self, notebook: str, table: str) -> pd.DataFrame | None:
        key = (notebook, table)
        if key not in self.cache:
            folder = self.folder(notebook)
            data = load_result(folder, table) if (folder / META_NAME).is_file() else None
            self.cache[key] = pd.DataFrame([data]) if isinstance(data, dict) else data
        return self.cache[key]

    def stale(self, notebook: str) -> str | None:
        """Why this notebook's result is stale, or None (up to date, a running notebook, or no checkout known)."""
        if self.root is None or notebook in self.folders:
            return None
        if notebook not in self.stale_cache:
            folder = self.folder(notebook)
            self.stale_cache[notebook] = stale_reason(folder, self.root) if (folder / META_NAME).is_file() else None
        return self.stale_cache[notebook]

    def machine(self, notebook: str) -> str | None:
        """The machine this notebook's result was made on (its meta's hardware summary), or None when unrecorded."""
        folder = self.folder(notebook)
        meta = read_meta(folder) if (folder / META_NAME).is_file() else None
        if not meta:
            return None
        return (meta.get("hardware") or {}).get("summary") or None

    def run_cache(self, notebook: str) -> str | None:
        """The run cache this notebook's result read its trained runs from (its meta's `run_cache`, the cache's
        identity that `taser reproduce` records), or None when unrecorded."""
        folder = self.folder(notebook)
        meta = read_meta(folder) if (folder / META_NAME).is_file() else None
        return (meta or {}).get("run_cache") or None


class _Problem(Exception):
    def __init__(self, status: str, detail: str):
        super().__init__(detail)
        self.status, self.detail = status, detail


def _select(frame: pd.DataFrame, where: Mapping[str, Any], over: str | None, group: str | None) -> pd.DataFrame:
    mask = pd.Series(True, index=frame.index)
    for key, value in where.items():
        mask &= _matches(frame[key], value)
    if group is not None:
        mask &= frame[over].astype(str) == group
    return frame[mask]


def _require(frame: pd.DataFrame, columns: Sequence[str], where: str) -> None:
    absent = [c for c in dict.fromkeys(columns) if c not in frame.columns]
    if absent:
        raise _Problem(ERROR, f"{where} has no column {', '.join(absent)}")


# ----------------------------------------------------------------------------------------------- noise

_OPPOSITE = {">": "<", ">=": "<", "<": ">", "<=": ">"}


@dataclass
class _Compared:
    """One compared pair: its status (holds / fails / within noise), the direction observed in the values the test
    used, the deciding p-value, the number of units, and how the two sides compare."""

    comparison: Comparison
    status: str
    observed: str          # e.g. "dist < de" (the direction of the tested means)
    p_value: float
    n: int
    what: str              # what the p-value tests, e.g. "mean difference +0.012"
    sides: str = ""        # mean ± std of each side (per seed)
    difference: np.ndarray | None = None  # per-key differences left - right (paired tests)


def _per_key(claim: Claim, tables: _Tables, group: str | None) -> dict[str, pd.Series]:
    """Per quantity, its values in the noise table indexed by the noise key (rows of one key averaged)."""
    noise = claim.noise
    assert noise is not None
    quantities = noise.quantities or claim.quantities
    out = {}
    for name, q in quantities.items():
        notebook, table = q.notebook or claim.notebook, q.table or noise.table or claim.table
        frame = tables.get(notebook, table)
        if frame is None:
            raise _Problem(NOT_RUN, f"no noise table {notebook}/{table}")
        column = q.column or noise.column or claim.quantities[name].column or claim.column
        _require(frame, [noise.key, column, *q.where, *([claim.over] if group is not None else [])],
                 f"{notebook}/{table}")
        rows = _select(frame, q.where, claim.over, group)
        values = pd.to_numeric(rows[column], errors="coerce")
        out[name] = values.groupby(rows[noise.key].astype(str)).mean().dropna()
    return out


@dataclass(frozen=True)
class _SeedNoise:
    """The seed noise a claim's question-paired comparisons must also clear: the pooled std over seeds of one run's
    number, its degrees of freedom and where it was measured, and each quantity's number of seeds."""

    sigma: float
    df: int
    rows: int
    where: str
    seeds: Mapping[str, int]

    def variance(self, comparison: Comparison) -> float:
        """The seed variance of mean(left - right): sigma^2 * sum of c^2 / seeds over the quantities, c each one's
        coefficient in left - right (the comparison must be linear in them)."""
        names = sorted(names_in(comparison.left) | names_in(comparison.right))

        def difference(values: Mapping[str, float]) -> float:
            return float(evaluate(comparison.left, values)) - float(evaluate(comparison.right, values))

        zero = {n: 0.0 for n in names}
        base = difference(zero)
        coefficients = {n: difference({**zero, n: 1.0}) - base for n in names}
        for probe in ({n: -2.0 - 3.0 * i for i, n in enumerate(names)},
                      {n: (-1.0) ** i * (0.7 + 1.3 * i) for i, n in enumerate(names)}):
            if not math.isclose(difference(probe) - base, sum(coefficients[n] * probe[n] for n in names),
                                rel_tol=1e-9, abs_tol=1e-12):
                raise _Problem(ERROR, f"seed noise: {comparison.text} is not linear in its quantities")
        return self.sigma ** 2 * sum(c ** 2 / self.seeds.get(n, 1) for n, c in coefficients.items()
                                     if self.seeds.get(n, 1) > 0)

    def describe(self, comparison: Comparison) -> str:
        names = sorted(names_in(comparison.left) | names_in(comparison.right))
        seeds = ", ".join(f"{n} {self.seeds.get(n, 1) or 'none (fixed)'}" for n in names)
        return (f"training-seed noise: std {self.sigma:.3g} over seeds, pooled over {self.rows} runs of {self.where} "
                f"({self.df} df); seeds {seeds}")


def _seed_noise(claim: Claim, tables: _Tables, group: str | None) -> _SeedNoise | None:
    noise = claim.noise
    assert noise is not None
    spec = noise.seed_noise
    if spec is None:
        return None
    notebook = spec.notebook or claim.notebook
    frame = tables.get(notebook, spec.table)
    if frame is None:
        raise _Problem(NOT_RUN, f"seed noise: no table {notebook}/{spec.table}")
    _require(frame, [spec.std, spec.n, *spec.rows], f"{notebook}/{spec.table}")
    mask = pd.Series(True, index=frame.index)
    wanted = dict(spec.rows)
    for column in spec.match:  # the values of the rows the claim compares (its testbed, in this group)
        compared = set()
        for name, q in claim.quantities.items():
            own = tables.get(q.notebook or claim.notebook, q.table or claim.table)
            if own is None or column not in own.columns:
                raise _Problem(ERROR, f"seed noise: match column {column} is not in the claim's table")
            compared |= set(_select(own, q.where, claim.over, group)[column].astype(str))
        wanted[column] = sorted(compared)
    for column, value in wanted.items():
        mask &= np.logical_or.reduce([_matches(frame[column], v) for v in
                                      (value if isinstance(value, list) else [value])])
    rows = frame[mask]
    std, n = pd.to_numeric(rows[spec.std], errors="coerce"), pd.to_numeric(rows[spec.n], errors="coerce")
    usable = std.notna() & (n >= 2)
    if not usable.any():
        raise _Problem(NOT_RUN, f"seed noise: no row of {notebook}/{spec.table} with "
                                f"{', '.join(f'{k}={v}' for k, v in wanted.items())} has 2 or more seeds")
    df = float((n[usable] - 1).sum())
    sigma = math.sqrt(float(((n[usable] - 1) * std[usable] ** 2).sum()) / df)
    seeds = {}
    quantities = noise.quantities or claim.quantities
    for name, q in quantities.items():  # how many seeds each side's per-question values average
        seeds[name] = 0 if name in spec.fixed else _seed_count(claim, tables, group, name, q, spec.n)
    return _SeedNoise(sigma, int(df), int(usable.sum()), f"{notebook}/{spec.table}", seeds)


def _seed_count(claim: Claim, tables: _Tables, group: str | None, name: str, q: Any, n_column: str) -> int:
    """The seeds a quantity's per-question values average: the noise table's `seeds` column, else the seed count
    (`n_column`) of its row in the claim's own table, else 1 (one run: the widest noise)."""
    noise = claim.noise
    notebook = q.notebook or claim.notebook
    for table, column, where in ((q.table or noise.table or claim.table, "seeds", q.where),
                                 (claim.quantities[name].table or claim.table, n_column,
                                  claim.quantities[name].where)):
        frame = tables.get(notebook, table)
        if frame is None or column not in frame.columns or (group is not None and claim.over not in frame.columns):
            continue
        counts = pd.to_numeric(_select(frame, where, claim.over, group)[column], errors="coerce").dropna()
        if len(counts):
            return max(1, int(counts.max()))
    return 1


def _seed_p(d: np.ndarray, seed: _SeedNoise, comparison: Comparison, *, greater_than: float | None = None,
            less_than: float | None = None, two_sided: bool = False) -> float:
    """The p-value of the same hypothesis when the mean difference also carries the training-seed noise."""
    from taser_book.analyses.hypothesis import with_seed_noise

    variance = seed.variance(comparison)
    if two_sided:
        return min(1.0, 2 * min(with_seed_noise(d, variance, seed.df, greater_than=0.0),
                                with_seed_noise(d, variance, seed.df, less_than=0.0)))
    return with_seed_noise(d, variance, seed.df, greater_than=greater_than, less_than=less_than)


def _side(expression: str, values: Mapping[str, Any], n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(evaluate(expression, values), dtype=float), (n,))


def _direction(difference: float, comparison: Comparison) -> str:
    op = "=" if difference == 0 else (">" if difference > 0 else "<")
    return f"{comparison.left} {op} {comparison.right}"


def _wanted(comparison: Comparison, difference: float) -> bool:
    """Does a mean difference left - right point the way the comparison says?"""
    return difference > 0 if comparison.op in (">", ">=") else difference < 0


def _superiority(comparison: Comparison, d: np.ndarray, p: float, alpha: float, n: int) -> tuple[str, str]:
    mean = float(np.mean(d))
    if p < alpha and mean != 0:
        return (HOLDS if _wanted(comparison, mean) else FAILS), _direction(mean, comparison)
    return WITHIN_NOISE, _direction(mean, comparison)


def _noise_tests(claim: Claim, tables: _Tables, group: str | None, point: Mapping[str, float]) -> list[_Compared]:
    """Each compared pair of the claim's noise section, tested as its `test` says; the direction always comes from
    the values the test itself uses (the per-key means, or the point estimate for a bootstrap)."""
    from taser_book.analyses import hypothesis
    from taser_lib.evaluation.significance import paired_t_test, randomisation_test

    noise = claim.noise
    assert noise is not None
    series = _per_key(claim, tables, group)
    seed = _seed_noise(claim, tables, group)
    where = f" for {claim.over}={group}" if group is not None else ""
    method = noise.method or ("t-test" if noise.key == "seed" else "randomisation")
    results = []
    for comparison in noise.compare:
        names = sorted(names_in(comparison.left) | names_in(comparison.right))
        if noise.test == "binomial":
            values = series[comparison.left].to_numpy(dtype=float)
            if len(values) < 1:
                raise _Problem(NOT_RUN, f"noise: no value of '{noise.key}' for {comparison.text}{where}")
            p0 = float(evaluate(comparison.right, point))  # a number, or a claim quantity (a base rate)
            if not 0 < p0 < 1:
                raise _Problem(NOT_RUN, f"noise: the reference share {comparison.right} = {p0:g}{where} is not in "
                                        "(0, 1)")
            test = hypothesis.binomial(values, p0)
            status, observed = _superiority(comparison, np.array([test.effect - p0]), test.p_value, noise.alpha, 1)
            results.append(_Compared(comparison, status, f"{comparison.left} = {test.effect:.3g} "
                                     f"({'>' if test.effect > p0 else '<' if test.effect < p0 else '='} {p0:g})",
                                     test.p_value, test.n, f"exact binomial test, share {test.effect:.3g} vs {p0:g}"))
            continue
        if noise.test == "two-sample":
            a, b = series[comparison.left].to_numpy(float), series[comparison.right].to_numpy(float)
            if len(a) + len(b) < 3 or not len(a) or not len(b):
                raise _Problem(NOT_RUN, f"noise: {len(a)} and {len(b)} values for {comparison.text}{where}; a "
                                        "two-sample test needs 3 or more")
            test = hypothesis.two_sample(a, b)
            status, observed = _superiority(comparison, np.array([test.effect]), test.p_value, noise.alpha, 1)
            results.append(_Compared(comparison, status, observed, test.p_value, test.n,
                                     f"two-sample permutation test, {len(a)} vs {len(b)} values, difference of "
                                     f"means {test.effect:+.3g}"))
            continue
        keys = sorted(set.intersection(*(set(series[n].index) for n in names)))
        if len(keys) < 2:
            raise _Problem(NOT_RUN, f"noise: {len(keys)} common value(s) of '{noise.key}' for {comparison.text}"
                                    f"{where}; a paired test needs 2 or more")
        arrays = {n: series[n].loc[keys].to_numpy(dtype=float) for n in names}
        left, right = _side(comparison.left, arrays, len(keys)), _side(comparison.right, arrays, len(keys))
        d = left - right
        sides = ""
        if noise.key == "seed":
            sides = (f"{comparison.left} {_fmt(left.mean())} ± {left.std(ddof=1):.2g}, "
                     f"{comparison.right} {_fmt(right.mean())} ± {right.std(ddof=1):.2g} (mean ± std over seeds)")
        if noise.test == "bootstrap":
            observed_d = float(evaluate(comparison.left, point) - evaluate(comparison.right, point))
            test = hypothesis.bootstrap(d, observed_d)
            status, observed = _superiority(comparison, np.array([observed_d]), test.p_value, noise.alpha, 1)
            results.append(_Compared(comparison, status, observed, test.p_value, test.n,
                                     f"bootstrap over questions, difference {observed_d:+.3g}", "", d))
            continue
        if noise.test == "equivalence":
            equal = hypothesis.equivalence(d, noise.margin, method)
            apart = hypothesis.outside_margin(d, noise.margin, method)
            margin = noise.margin
            if equal.p_value < noise.alpha:
                status, p, observed = HOLDS, equal.p_value, f"|{comparison.left} - {comparison.right}| < {noise.margin:g}"
                if seed:
                    p = max(p, _seed_p(d, seed, comparison, greater_than=-margin),
                            _seed_p(d, seed, comparison, less_than=margin))
            elif apart.p_value < noise.alpha:
                status, p = FAILS, apart.p_value
                observed = f"{comparison.left} - {comparison.right} = {equal.effect:+.3g}, outside ±{noise.margin:g}"
                if seed:
                    p = max(p, _seed_p(d, seed, comparison, greater_than=margin) if equal.effect >= 0 else
                            _seed_p(d, seed, comparison, less_than=-margin))
            else:
                status, p, observed = WITHIN_NOISE, equal.p_value, _direction(equal.effect, comparison)
            if status != WITHIN_NOISE and p >= noise.alpha:  # clear of the questions' noise, not of the seeds'
                status, observed = WITHIN_NOISE, _direction(equal.effect, comparison)
            results.append(_Compared(comparison, status, observed, p, len(keys),
                                     f"equivalence (TOST, {method}) within ±{noise.margin:g}, mean difference "
                                     f"{equal.effect:+.3g}" + _seed_text(seed, comparison), sides, d))
            continue
        if noise.test == "non-inferiority":
            if comparison.op in ("<", "<="):  # 'a <= b': a is not above b by the margin or more
                d = -d
            better = hypothesis.non_inferiority(d, noise.margin, method)
            worse = hypothesis.one_sided(d, less_than=-noise.margin, method=method)
            mean = float(np.mean(left - right))
            if better.p_value < noise.alpha:
                status, p, observed = HOLDS, better.p_value, _direction(mean, comparison)
                if seed:
                    p = max(p, _seed_p(d, seed, comparison, greater_than=-noise.margin))
            elif worse < noise.alpha:
                status, p = FAILS, worse
                observed = (f"{comparison.left} {'<' if comparison.op in ('>', '>=') else '>'} {comparison.right} "
                            f"by more than {noise.margin:g}")
                if seed:
                    p = max(p, _seed_p(d, seed, comparison, less_than=-noise.margin))
            else:
                status, p, observed = WITHIN_NOISE, better.p_value, _direction(mean, comparison)
            if status != WITHIN_NOISE and p >= noise.alpha:  # clear of the questions' noise, not of the seeds'
                status, observed = WITHIN_NOISE, _direction(mean, comparison)
            results.append(_Compared(comparison, status, observed, p, len(keys),
                                     f"non-inferiority ({method}) with margin {noise.margin:g}, mean difference "
                                     f"{mean:+.3g}" + _seed_text(seed, comparison), sides, left - right))
            continue
        a, b = dict(zip(keys, left)), dict(zip(keys, right))
        test = randomisation_test(a, b) if noise.test == "randomisation" else paired_t_test(a, b)
        p = 1.0 if math.isnan(test.p_value) else test.p_value
        if seed and p < noise.alpha:  # clear of the questions' noise: must clear the seeds' too
            p = max(p, _seed_p(d, seed, comparison, two_sided=True))
        status, observed = _superiority(comparison, d, p, noise.alpha, len(keys))
        results.append(_Compared(comparison, status, observed, p, len(keys),
                                 f"{_TEST_NAMES[noise.test]}, mean difference {float(np.mean(d)):+.3g}"
                                 + _seed_text(seed, comparison), sides, d))
    return results


def _seed_text(seed: _SeedNoise | None, comparison: Comparison) -> str:
    if seed is None:
        return ""
    return f"; with {seed.describe(comparison)}: std of the mean difference {math.sqrt(seed.variance(comparison)):.3g}"


def _holm_for_fails(compared: list[_Compared], alpha: float) -> None:
    """A claim fails when any one of its compared pairs (over every group judged) is significantly reversed: a union
    of m tests, so each reversal must stand after Holm's correction over the m pairs (the family-wise error of a
    *fails*). A pair that does not is *within noise*, its p the adjusted one. *Holds* needs every pair to hold, an
    intersection of tests, which needs no correction. A pair that is not reversed enters Holm's family with p = 1
    (its reversal's p is at least alpha), which leaves the reversals' adjusted p as the whole family's would."""
    from taser_lib.evaluation.significance import adjust_p_values

    m = len(compared)
    adjusted = adjust_p_values({i: c.p_value if c.status == FAILS else 1.0 for i, c in enumerate(compared)}, "holm")
    for i, c in enumerate(compared):
        if c.status != FAILS:
            continue
        if m > 1:
            c.what += f"; Holm-adjusted over the claim's {m} compared pairs: p = {adjusted[i]:.3g}"
        if adjusted[i] >= alpha:
            c.status, c.p_value = WITHIN_NOISE, adjusted[i]
            c.observed = f"{c.observed} (not significant after Holm's correction)"


def _group_status(compared: list[_Compared]) -> str:
    """A pair that fails fails the claim; holds needs every pair to hold; anything else is within noise."""
    if any(c.status == FAILS for c in compared):
        return FAILS
    if all(c.status == HOLDS for c in compared):
        return HOLDS
    return WITHIN_NOISE


# ----------------------------------------------------------------------------------------------- verdicts

def _value(claim: Claim, name: str, rows: pd.DataFrame, column: str, group: str | None) -> float:
    where = f" for {claim.over}={group}" if group is not None else ""
    if len(rows) == 0:
        raise _Problem(NOT_RUN, f"no row {claim.quantities[name]!r} ({name}){where}")
    key = claim.noise.key if claim.noise else None
    aggregate = claim.quantities[name].aggregate
    values = pd.to_numeric(rows[column], errors="coerce")
    if len(rows) > 1 and aggregate in ("min", "max"):
        value = values.min() if aggregate == "min" else values.max()
    elif len(rows) > 1:
        if key is None or key not in rows.columns:
            raise _Problem(ERROR, f"{len(rows)} rows match {name} {claim.quantities[name]!r}{where}")
        value = values.groupby(rows[key].astype(str)).mean().mean()
    else:
        value = values.iloc[0]
    if value is None or math.isnan(value):
        raise _Problem(ERROR, f"{name} is not a number{where}")
    return float(value)


def _reproduction(claim: Claim, compared: list[_Compared], values: Mapping[str, float],
                  group: str | None) -> tuple[float, float] | None:
    """ER and delta RI of the first compared pair whose sides the paper's numbers give (None: none does)."""
    from taser_book.analyses.reproducibility import reproduction

    paper = claim.paper_values_for(group)
    if not paper:
        return None
    for c in compared:
        names = names_in(c.comparison.left) | names_in(c.comparison.right)
        if not names or not names <= set(paper) or c.comparison.op == "==":
            continue
        paper_left = float(evaluate(c.comparison.left, paper))
        paper_right = float(evaluate(c.comparison.right, paper))
        if c.difference is not None and claim.noise is not None and claim.noise.paired \
                and claim.noise.test != "bootstrap":
            diff = np.asarray(c.difference, dtype=float)
            ours_right = float(evaluate(c.comparison.right, values))
            ours_base, ours_adv = np.full(len(diff), ours_right), ours_right + diff
        else:
            ours_base, ours_adv = float(evaluate(c.comparison.right, values)), float(evaluate(c.comparison.left,
                                                                                             values))
        result = reproduction(ours_base, ours_adv, paper_right, paper_left)
        return result.er, result.delta_ri
    return None


def _point_reproduction(claim: Claim, values: Mapping[str, float], group: str | None) -> tuple[float, float] | None:
    """ER and delta RI from the claim's own numbers, for a claim whose test is one comparison of two sides."""
    from taser_book.analyses.reproducibility import reproduction

    paper = claim.paper_values_for(group)
    if not paper:
        return None
    try:
        comparison = parse_comparison(claim.test, claim.quantities)
    except ValueError:
        return None
    names = names_in(comparison.left) | names_in(comparison.right)
    if not names <= set(paper):
        return None
    result = reproduction(float(evaluate(comparison.right, values)), float(evaluate(comparison.left, values)),
                          float(evaluate(comparison.right, paper)), float(evaluate(comparison.left, paper)))
    return result.er, result.delta_ri


def _evaluate(claim: Claim, tables: _Tables, root: Path | None, skip: Any = None) -> Verdict:
    """The claim's verdict on the values of its `over` column that `skip` (a predicate) does not exclude."""
    if root is not None:
        missing = [nb for nb in claim.notebooks()
                   if nb not in tables.folders and not (root / "notebooks" / f"{nb}.ipynb").is_file()]
        if missing:
            return Verdict(PLANNED, detail=f"notebook {', '.join(missing)} is not written yet")
    frames: dict[str, pd.DataFrame] = {}
    columns: dict[str, str] = {}
    for name, q in claim.quantities.items():
        notebook, table = q.notebook or claim.notebook, q.table or claim.table
        frame = tables.get(notebook, table)
        if frame is None:
            return Verdict(NOT_RUN, detail=f"no result {notebook}/{table} at this profile")
        columns[name] = q.column or claim.column
        _require(frame, [columns[name], *q.where, *([claim.over] if claim.over else [])], f"{notebook}/{table}")
        frames[name] = _select(frame, q.where, None, None)

    if claim.over:
        present = [set(f[claim.over].astype(str)) for f in frames.values()]
        groups: list[str | None] = sorted(set.intersection(*present)) if present else []
        absent: list[str] = []  # listed groups without a row for every quantity at this profile: said, not dropped
        if claim.groups is not None:
            absent = [g for g in claim.groups if g not in groups]
            groups = [g for g in claim.groups if g in groups]
        if not groups:
            wanted = f" (of {', '.join(claim.groups)})" if claim.groups else ""
            return Verdict(NOT_RUN, detail=f"no {claim.over}{wanted} has a row for every quantity")
    else:
        groups = [None]

    values = {group: {name: _value(claim, name, f if group is None else f[f[claim.over].astype(str) == group],
                                   columns[name], group)
                      for name, f in frames.items()}
              for group in groups}
    parts = [(f"{group}: " if group is not None else "") + ", ".join(f"{k}={_fmt(v)}" for k, v in vals.items())
             for group, vals in values.items()]
    ours = "; ".join(parts) + (f" ({claim.unit})" if claim.unit else "")  # the numbers' unit, once
    if claim.noise is None and claim.exact is None and not claim.precondition:
        return Verdict(NOT_TESTABLE, ours, f"{NO_NOISE}: the claim has no noise test and does not say its numbers are "
                       "exact, so a difference cannot be told from noise (its notebook saves no values to test it on)",
                       observed="needs a noise test")
    tested = [g for g in groups if skip is None or not skip(g)]
    statuses: dict[str | None, str] = {}
    notes, failed, observed, seen = [], [], [], []
    p_values: dict[str, list[float]] = {}  # per status: the p-values that decided it
    reproduction = None
    family: dict[str | None, list[_Compared]] = {}
    if claim.noise is not None:
        for group in tested:
            try:
                family[group] = _noise_tests(claim, tables, group, values[group])
            except _Problem as problem:  # our numbers are there, the values to judge their noise are not
                return Verdict(problem.status, ours, problem.detail)
        _holm_for_fails([c for compared in family.values() for c in compared], claim.noise.alpha)
    for group in tested:
        label = f"{group}: " if group is not None else ""
        if claim.noise is None:
            status = HOLDS if bool(evaluate(claim.test, values[group])) else FAILS
            if reproduction is None:
                reproduction = _point_reproduction(claim, values[group], group)
        else:
            compared = family[group]
            status = _group_status(compared)
            p_values.setdefault(status, []).extend(c.p_value for c in compared if c.status == status)
            observed += [label + c.observed for c in compared if c.status == FAILS]
            seen += [label + c.observed for c in compared]
            if reproduction is None:
                reproduction = _reproduction(claim, compared, values[group], group)
            notes.append(label + "; ".join(
                f"{c.comparison.text}: {c.status}, observed {c.observed}, p = {c.p_value:.3g} over {c.n} "
                f"{'replicates' if claim.noise.test == 'bootstrap' else 'values'} of '{claim.noise.key}' "
                f"({c.what})" + (f", {c.sides}" if c.sides else "") for c in compared))
        statuses[group] = status
        if status == FAILS and group is not None:
            failed.append(group)

    found = set(statuses.values())
    status = FAILS if FAILS in found else WITHIN_NOISE if WITHIN_NOISE in found else HOLDS
    if claim.noise is None:
        detail = f"{NO_NOISE}: exact ({claim.exact})" if claim.exact else NO_NOISE
    else:
        detail = f"{_TEST_NAMES[claim.noise.test]}, alpha {claim.noise.alpha:g}: " + "; ".join(notes)
    if failed and len(tested) > 1:
        detail = f"fails on {', '.join(failed)}; {detail}"
    if claim.over and absent:
        detail = (f"judged on {', '.join(str(g) for g in tested)} only: no result here for "
                  f"{', '.join(absent)}; {detail}")
    deciding = p_values.get(status)
    er, dri = reproduction if reproduction is not None else (None, None)
    return Verdict(status, ours, detail, p_value=max(deciding) if deciding else None, observed="; ".join(observed),
                   effect_ratio=er, delta_ri=dri,
                   groups={str(g): s for g, s in statuses.items() if g is not None} or None,
                   direction="; ".join(seen), reversal=status == FAILS)


def _required(name: str, registry: Mapping[str, Claim], tables: _Tables, root: Path | None) -> Verdict:
    if name not in tables.verdicts:
        tables.verdicts[name] = _judge(registry[name], tables, root, registry)
    return tables.verdicts[name]


def _unmet_reason(name: str, pre: Claim, verdict: Verdict) -> str:
    what = verdict.short if verdict.status in (HOLDS, FAILS, WITHIN_NOISE) else verdict.status
    measured = f"{verdict.ours}; " if verdict.ours else ""
    extra = f" ({verdict.detail})" if verdict.status in (NOT_RUN, ERROR, PLANNED) and verdict.detail else ""
    return f"precondition '{name}' not met ({_sentence(pre.statement)[:-1]}): {measured}{what}{extra}"


def _judge(claim: Claim, tables: _Tables, root: Path | None, registry: Mapping[str, Claim] | None) -> Verdict:
    """The claim's verdict, after its preconditions: a precondition that does not hold makes the claim (or, for a
    precondition measured per value of the claim's own `over` column, that value) *not testable here*. Such a
    verdict still tells what the claim's own test observed, run regardless of the precondition (`_ungated`)."""
    verdict = _gated(claim, tables, root, registry)
    if verdict.status == NOT_TESTABLE and claim.requires:
        return _ungated(claim, tables, root, verdict)
    return verdict


def _ungated(claim: Claim, tables: _Tables, root: Path | None, verdict: Verdict) -> Verdict:
    """`verdict` (not testable for want of a precondition) with the direction, p-value and reversal that the
    claim's own test finds on the same tables when no precondition is asked for. The status stays: the test's
    premise does not hold, so its outcome is a direction to report, not a verdict."""
    try:
        seen = _evaluate(claim, tables, root)
    except _Problem:
        return verdict
    if seen.status not in TESTABLE or not seen.direction:
        return verdict
    return replace(verdict, direction=seen.direction, direction_p=seen.p_value, reversal=seen.reversal)


def _gated(claim: Claim, tables: _Tables, root: Path | None, registry: Mapping[str, Claim] | None) -> Verdict:
    """`_judge` before the ungated direction is added."""
    registry = registry or {}
    if claim.requires:
        untested = _evaluate(claim, tables, root, skip=lambda g: True)  # no result, no claim: not run, not judged
        if untested.status in (PLANNED, NOT_RUN, ERROR):
            return untested
    reasons, rules = [], []  # rules: per precondition measured per group, which of the claim's groups it excludes
    for name in claim.requires:
        if name not in registry:
            return Verdict(NOT_TESTABLE, detail=f"precondition '{name}' is not declared")
        pre = registry[name]
        verdict = _required(name, registry, tables, root)
        if verdict.status == HOLDS and pre.notebook != claim.notebook:
            # a premise measured on another page's result holds for this page only if both came from the same runs
            # (one revision, one run cache): with either result stale, they may not (a teacher retrained since)
            old = [nb for nb in dict.fromkeys((claim.notebook, pre.notebook)) if tables.stale(nb)]
            if old:
                return Verdict(NOT_TESTABLE, _ours(claim, tables, root),
                               f"premise '{name}' holds on {pre.notebook}'s result, but the result of "
                               f"{' and '.join(old)} is stale, so the two may not come from the same runs",
                               observed=f"needs {name} on a current result")
            # and only if both were made on one machine: a run cache does not travel, so a teacher of the same
            # recipe trained on another machine is another model (machines sold under one name may still differ;
            # a page that can measures the premise on its own runs, as a precondition of its claims file)
            # Both results name their run cache (`taser reproduce` records it): the same cache is the same runs, on
            # whichever machines the pages were evaluated; another cache is other runs. Else the machine decides.
            caches = {nb: tables.run_cache(nb) for nb in (claim.notebook, pre.notebook)}
            made_on = {nb: tables.machine(nb) for nb in (claim.notebook, pre.notebook)}
            if pre.reads_trained_runs and None not in caches.values():
                if caches[claim.notebook] != caches[pre.notebook]:
                    return Verdict(NOT_TESTABLE, _ours(claim, tables, root),
                                   f"premise '{name}' holds on {pre.notebook}'s result, but {claim.notebook}'s read "
                                   "another run cache: its runs (its teacher) are not the ones the premise was "
                                   "measured on", observed=f"needs {name} on the same run cache")
            elif pre.reads_trained_runs and None not in made_on.values() \
                    and made_on[claim.notebook] != made_on[pre.notebook]:
                return Verdict(NOT_TESTABLE, _ours(claim, tables, root),
                               f"premise '{name}' holds on {pre.notebook}'s result, made on {made_on[pre.notebook]}, "
                               f"but {claim.notebook}'s was made on {made_on[claim.notebook]}: its runs (its teacher) "
                               "are not the ones the premise was measured on",
                               observed=f"needs {name} on this machine's runs")
        if verdict.status == HOLDS:
            continue
        reason = _unmet_reason(name, pre, verdict)
        if pre.over and pre.over == claim.over and verdict.groups and verdict.status in TESTABLE:
            # per group: a group the precondition measured is excluded where it does not hold there; a group it
            # did not measure (a retrieval set beside its re-ranking set) only where it holds nowhere
            ok = {g for g, st in verdict.groups.items() if st == HOLDS}
            measured = set(verdict.groups)
            rules.append(lambda g, ok=ok, measured=measured: g not in ok if g in measured else not ok)
            reasons.append(reason)
            continue
        return Verdict(NOT_TESTABLE, _ours(claim, tables, root), reason, observed=f"needs {name}")
    if not rules:
        return _evaluate(claim, tables, root)
    skip = lambda g: any(rule(g) for rule in rules)  # noqa: E731
    verdict = _evaluate(claim, tables, root, skip=skip)
    if verdict.status not in TESTABLE:
        return verdict
    if not verdict.groups:
        names = [n for n in claim.requires if any(f"'{n}'" in r for r in reasons)]
        return Verdict(NOT_TESTABLE, verdict.ours, "; ".join(reasons), observed="needs " + ", ".join(names))
    excluded = [g for g in _groups_of(claim, tables) if skip(g)]
    note = f"{claim.over} {', '.join(excluded)} not testable: " + "; ".join(reasons) + "; " if excluded else ""
    return replace(verdict, detail=note + verdict.detail)


def _ours(claim: Claim, tables: _Tables, root: Path | None) -> str:
    """Our numbers for a claim that is not judged (shown beside *not testable here*)."""
    try:
        return _evaluate(claim, tables, root, skip=lambda g: True).ours
    except _Problem:
        return ""


def _groups_of(claim: Claim, tables: _Tables) -> list[str]:
    frame = tables.get(claim.notebook, claim.table)
    if frame is None or claim.over not in frame.columns:
        return []
    groups = sorted(set(frame[claim.over].astype(str)))
    return [g for g in claim.groups if g in groups] if claim.groups else groups


def evaluate_claim(claim: Claim, profile_dir: str | os.PathLike,
                   folders: Mapping[str, str | os.PathLike] | None = None, *,
                   root: str | os.PathLike | None = None, tables: _Tables | None = None,
                   registry: Mapping[str, Claim] | None = None) -> Verdict:
    """The verdict on `claim` from one profile's results. `folders` maps a notebook to the folder holding its tables
    when that is not `profile_dir/<notebook>` (a running notebook). With `root` (the repository root), a claim whose
    notebook does not exist there is *planned*, and a stale result is marked so. `registry` maps the names a claim
    `requires` (preconditions, other claims' ids) to their definitions; by default the checkout's claims files."""
    root = Path(root) if root is not None else None
    tables = tables or _Tables(Path(profile_dir), {k: Path(v) for k, v in (folders or {}).items()}, root)
    if registry is None and claim.requires:
        registry = _registry(None, root)
    try:
        verdict = _judge(claim, tables, root, registry)
    except _Problem as problem:
        verdict = Verdict(problem.status, detail=problem.detail)
    if verdict.status in (PLANNED, NOT_RUN):
        return verdict
    reasons = [f"{nb}: {r}" for nb in claim.notebooks() if (r := tables.stale(nb))]
    if reasons:
        verdict = replace(verdict, detail=verdict.detail + "; stale: " + "; ".join(reasons),
                          stale="; ".join(reasons))
    return verdict


def _preconditions(root: Path | None) -> dict[str, Claim]:
    """The checkout's preconditions by name (none without a claims folder)."""
    try:
        folder = claims_dir(root)
    except ConfigError:
        return {}
    return load_preconditions(folder) if folder.is_dir() else {}


def _registry(claims: Sequence[Claim] | None, root: Path | None) -> dict[str, Claim]:
    """Every name a claim may require: the preconditions of the claims files, and the claims themselves."""
    try:
        folder = claims_dir(root)
    except ConfigError:
        return {c.id: c for c in claims or ()}
    if not folder.is_dir():
        return {c.id: c for c in claims or ()}
    found = dict(load_preconditions(folder))
    found.update({c.id: c for c in (claims if claims is not None else load_claims(folder))})
    return found


# ----------------------------------------------------------------------------------------------- tables of claims

def notebook_claims(notebook: str, results_dir: str | os.PathLike | None = None,
                    claims: Sequence[Claim] | None = None, *, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's claims whose numbers `notebook` produces (its claims file), beside ours from `results_dir` (the
    notebook's own result folder, e.g. while it runs) when given: the "paper's table beside ours" cell."""
    registry = None
    if claims is None:
        folder = claims_dir(root)
        path = folder / f"{notebook}.yaml"
        claims = load_claims_file(path, load_papers(folder)).claims if path.is_file() else ()
        if any(c.requires for c in claims):
            registry = _registry(None, Path(root) if root is not None else None)
    columns = ["id", "where", "claim", "paper"] + (["ours", "verdict", "ER", "detail"]
                                                   if results_dir is not None else [])
    rows = []
    for claim in claims:
        if claim.notebook != notebook:
            continue
        row = {"id": claim.id, "where": claim.where, "claim": claim.statement, "paper": claim.paper_numbers}
        if results_dir is not None:
            folder = Path(results_dir)
            verdict = evaluate_claim(claim, folder.parent, folders={notebook: folder}, registry=registry)
            row.update({"ours": verdict.ours, "verdict": verdict.short, "ER": verdict.er, "detail": verdict.detail})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def publish(results_dir: str | os.PathLike | None, notebook: str, tables: Mapping[str, Any],
            parameters: Mapping[str, Any] | None = None, *,
            table_parameters: Mapping[str, Mapping[str, Any]] | None = None,
            settings: Any = None,
            root: str | os.PathLike | None = None) -> pd.DataFrame | None:
    """A page's last cell in one call: save each of its `tables` ({name: DataFrame or mapping}, in order, with
    `results.save_result`) under `results_dir`, recording `parameters` (what the page ran with) with the first and
    `table_parameters[name]` with that table; then return the page's claims beside ours, judged on what was just
    saved (`notebook_claims`), or None for a page without a claims file. With `results_dir=None` (a notebook opened
    by hand) nothing is written and the claims come without our numbers.

    `settings` (the page's `profiles.page_settings`) is recorded whole: under the first table's parameters (below
    `parameters`) and as meta.json's `settings`, so a page run by `papermill -p profile NAME` says what it ran with."""
    unknown = set(table_parameters or {}) - set(tables)
    if unknown:
        raise ConfigError(f"publish({notebook!r}): table_parameters names tables it does not save: {sorted(unknown)}")
    resolved = settings.as_dict() if settings is not None else {}
    for i, (name, table) in enumerate(tables.items()):
        own = {**({**resolved, **(parameters or {})} if i == 0 else {}), **(table_parameters or {}).get(name, {})}
        save_result(results_dir, name, table, parameters=own or None)
    if results_dir is not None and resolved:
        meta = read_meta(results_dir) or {}
        meta["settings"] = json.loads(json.dumps(resolved, default=str))
        atomic_write_json(Path(results_dir) / META_NAME, meta)
    tell_the_shell(f"taser: {notebook}: {len(tables)} table(s) saved in {Path(results_dir).resolve()}"
                   if results_dir is not None else
                   f"taser: {notebook}: results_dir is None, so nothing was saved (papermill ... -p results_dir DIR "
                   f"saves the tables there; taser reproduce --only {notebook} publishes them in results/)")
    if not (claims_dir(root) / f"{notebook}.yaml").is_file():
        return None
    return notebook_claims(notebook, results_dir, root=root)


def tell_the_shell(message: str) -> None:
    """One line for whoever started a notebook by hand (papermill in a shell): in a kernel, on the process's own
    stderr, which the shell shows (the notebook's output shows `print`s); elsewhere on stderr. `taser reproduce`
    (which sets TASER_REPRODUCE for its kernels) says where results went itself."""
    if os.environ.get("TASER_REPRODUCE"):
        return
    stream = sys.__stderr__ if sys.__stderr__ is not None else sys.stderr
    try:
        print(message, file=stream, flush=True)
    except (OSError, ValueError):  # a closed stream: nowhere to say it
        pass
    if stream is not sys.stderr:
        print(message, file=sys.stderr)


PRECONDITION_STATUS = {HOLDS: "met", FAILS: "not met", WITHIN_NOISE: "not shown"}


def notebook_preconditions(notebook: str, results_dir: str | os.PathLike | None = None, *,
                           root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The preconditions `notebook`'s claims file declares, each with its status (met / not met / not shown, and
    per value of its `over` column) and measured numbers from `results_dir` when given: the page's own verdicts
    where the page measures what other pages' claims rest on (the testbed page)."""
    folder = claims_dir(root)
    path = folder / f"{notebook}.yaml"
    pres = load_claims_file(path, load_papers(folder)).preconditions if path.is_file() else {}
    columns = ["precondition", "what it says"] + (["status", "per setting", "measured"] if results_dir is not None
                                                  else [])
    rows = []
    for name, pre in pres.items():
        row = {"precondition": name, "what it says": pre.statement}
        if results_dir is not None:
            where = Path(results_dir)
            verdict = evaluate_claim(pre, where.parent, folders={notebook: where})
            row.update({"status": PRECONDITION_STATUS.get(verdict.status, verdict.status),
                        "per setting": "; ".join(f"{g}: {PRECONDITION_STATUS.get(s, s)}"
                                                 for g, s in (verdict.groups or {}).items()),
                        "measured": verdict.ours or verdict.detail})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def card_claims(card: pd.DataFrame, notebook: str, profile: str) -> pd.DataFrame:
    """`notebook_claims`'s table for one notebook at one profile, read from a scorecard (`build_scorecard`) instead
    of judged again."""
    columns = ["id", "where", "claim", "paper", "ours", "verdict", "ER", "detail"]
    suffix = f" ({profile})"
    if card.empty or f"shown{suffix}" not in card.columns:
        return pd.DataFrame(columns=columns)
    part = card[card["notebook"] == notebook]
    return pd.DataFrame({"id": part["id"], "where": part["where"], "claim": part["claim"],
                         "paper": part["paper's numbers"], "ours": part[f"ours{suffix}"],
                         "verdict": part[f"shown{suffix}"], "ER": part[f"ER{suffix}"],
                         "detail": part[f"detail{suffix}"]}, columns=columns).reset_index(drop=True)


def profiles_with_results(results_root: str | os.PathLike) -> list[str]:
    """Profiles under results_root with at least one published notebook result: smoke, cpu, gpu, full, then others."""
    root = Path(results_root)
    if not root.is_dir():
        return []
    found = [p.name for p in root.iterdir()
             if p.is_dir() and not p.name.startswith((".", "_")) and any(p.glob(f"*/{META_NAME}"))]
    return sorted(found, key=lambda p: (PROFILE_ORDER.index(p) if p in PROFILE_ORDER else len(PROFILE_ORDER), p))


def _resolve(claims: Sequence[Claim] | None, root: str | os.PathLike | None) -> tuple[tuple[Claim, ...], Path | None]:
    if root is None:
        try:
            root = find_root()
        except ConfigError:  # no checkout here: no claims files, no staleness
            root = None
    root = Path(root) if root is not None else None
    if claims is not None:
        return tuple(claims), root
    folder = claims_dir(root) if root is not None else None
    return (load_claims(folder) if folder is not None and folder.is_dir() else ()), root


PARALLEL_FROM = 24  # claims: from this many, the verdicts are judged on every core (the paired randomisation tests
                   # dominate `taser book`: about 0.7 s each over a few thousand questions)


def _judge_part(claims: Sequence[Claim], results_root: Path, profiles: Sequence[str], root: Path | None,
                registry: Mapping[str, Claim]) -> dict[tuple[str, str], Verdict]:
    """The verdicts on `claims` in each profile, reading each profile's tables once."""
    tables = {p: _Tables(results_root / p, root=root) for p in profiles}
    return {(claim.id, p): evaluate_claim(claim, results_root / p, root=root, tables=tables[p], registry=registry)
            for claim in claims for p in profiles}


def _judge_all(claims: Sequence[Claim], results_root: Path, profiles: Sequence[str], root: Path | None,
               registry: Mapping[str, Claim], workers: int | None) -> dict[tuple[str, str], Verdict]:
    """Every claim's verdict in every profile, on `workers` processes (None: every core once there are
    PARALLEL_FROM claims, else one). Each process takes whole notebooks, so it reads a page's tables once; every
    test is seeded, so the verdicts do not depend on how the claims are shared out."""
    if workers is None:
        workers = (os.cpu_count() or 1) if len(claims) >= PARALLEL_FROM else 1
    by_page: dict[str, list[Claim]] = {}
    for claim in claims:
        by_page.setdefault(claim.notebook, []).append(claim)
    workers = max(1, min(workers, len(by_page)))
    # fork (Linux): the workers inherit the loaded claims and modules and never re-run the caller's script, as spawn
    # would; they run numpy and scipy only. Elsewhere, or if the pool breaks, one process judges everything.
    if workers == 1 or not sys.platform.startswith("linux"):
        return _judge_part(claims, results_root, profiles, root, registry)
    parts: list[list[Claim]] = [[] for _ in range(workers)]
    for page in sorted(by_page, key=lambda k: -len(by_page[k])):  # the largest pages first, each to the least loaded
        min(parts, key=len).extend(by_page[page])
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            done = pool.map(_judge_part, parts, *([x] * workers for x in (results_root, profiles, root, registry)))
            return {key: verdict for part in done for key, verdict in part.items()}
    except (BrokenProcessPool, OSError):
        return _judge_part(claims, results_root, profiles, root, registry)


def build_scorecard(results_root: str | os.PathLike, claims: Sequence[Claim] | None = None, *,
                    root: str | os.PathLike | None = None, workers: int | None = None) -> pd.DataFrame:
    """One row per claim: id, paper, where, claim, paper's numbers, notebook, then `ours (<profile>)`,
    `verdict (<profile>)`, `detail (<profile>)` and `stale (<profile>)` for each profile with results (a single
    unlabelled set when none has any). `root`: the repository root (default: found from the working directory).
    `workers`: processes judging the claims (`_judge_all`; None: every core for a full claims set)."""
    claims, root = _resolve(claims, root)
    registry = _registry(claims, root)
    profiles = profiles_with_results(results_root) or [""]
    verdicts = _judge_all(claims, Path(results_root), profiles, root, registry, workers)
    rows = []
    for claim in claims:
        row = {"id": claim.id, "paper": claim.paper, "where": claim.where, "claim": claim.statement,
               "paper's numbers": claim.paper_numbers, "notebook": claim.notebook}
        for profile in profiles:
            verdict = verdicts[claim.id, profile]
            suffix = f" ({profile})" if profile else ""
            row.update({f"ours{suffix}": verdict.ours, f"verdict{suffix}": verdict.status,
                        f"shown{suffix}": verdict.short, f"detail{suffix}": verdict.detail,
                        f"ER{suffix}": verdict.er, f"reversal{suffix}": verdict.reversal,
                        f"delta RI{suffix}": "" if verdict.delta_ri is None or math.isnan(verdict.delta_ri)
                        else f"{verdict.delta_ri:+.2f}",
                        f"stale{suffix}": verdict.stale or ""})
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- the page

_MARKDOWN_SPECIAL = "\\`*_[]<>$|~#"


@dataclass(frozen=True)
class _ClaimLink:
    """A table cell that links a claim to its row on its notebook's page (`claim_link`)."""

    claim_id: str
    notebook: str


def claim_anchor(claim_id: str) -> str:
    """The HTML id of a claim's row in its page's verdict box (`book.book_notebook` writes it)."""
    return "claim-" + re.sub(r"[^A-Za-z0-9_-]", "-", claim_id)


def claim_link(claim_id: str, notebook: str) -> str:
    """An HTML link from a page in book/ to the claim's row on its notebook's page: an anchor inside a page is not a
    Sphinx target, so a plain link to the built page."""
    return (f'<a href="../notebooks/{html.escape(notebook)}.html#{claim_anchor(claim_id)}">'
            f"{html.escape(claim_id)}</a>")


def _md(text: Any) -> str:
    """Plain text for a Markdown table cell or list item: Markdown's special characters escaped, one line."""
    if isinstance(text, _ClaimLink):
        return claim_link(text.claim_id, text.notebook)
    if isinstance(text, _Html):
        return str(text)
    return escape_markdown(text)


def escape_markdown(text: Any) -> str:
    """`text` on one line with Markdown's special characters escaped, to show as it is in a page."""
    out = str(text).replace("\n", " ")
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in out)


def _sentence(text: str) -> str:
    """`text` ending as a sentence does ("" stays "")."""
    return text if not text or text.endswith((".", "!", "?")) else text + "."


class _Html(str):
    """A table cell or list item already written as HTML (links the scorecard makes itself), not escaped."""


def precondition_anchor(name: str) -> str:
    """The HTML id of a precondition's row in the scorecard's table of preconditions."""
    return "pre-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def precondition_clause(statement: str) -> str:
    """A precondition's statement in a few words: its first clause ("The wall clock was quiet enough to compare
    epoch times"), lower-cased at the start, for a verdict's reason."""
    clause = re.split(r":\s|\s\(|;\s", statement.strip(), maxsplit=1)[0].rstrip(".")
    return clause[:1].lower() + clause[1:] if clause[1:2].islower() else clause


def verdict_in_words(shown: str, preconditions: Mapping[str, Claim]) -> str:
    """A verdict as the scorecard's tables show it, each precondition it names ("needs quiet-clock") in words and
    linked to its row of the table of preconditions: "needs <a>the wall clock was quiet enough ...</a>"."""
    names = sorted((n for n in preconditions if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", shown)),
                   key=len, reverse=True)
    if not names or not shown.startswith(NOT_TESTABLE):
        return _Html(_breakable(escape_markdown(shown)))
    out = escape_markdown(shown)
    for name in names:
        words = html.escape(precondition_clause(preconditions[name].statement))
        out = re.sub(rf"(?<![\w-]){re.escape(escape_markdown(name))}(?![\w-])",
                     lambda _: f'<a href="#{precondition_anchor(name)}" title="{html.escape(name)}">{words}</a>', out)
    return _Html(_breakable(out))


def _breakable(markdown: str) -> str:
    """A line break allowed after each underscore of a name outside a link ("onehot_<wbr>mined"): a verdict naming
    the claim's quantities stays as narrow as its other words, so the table fits the column."""
    parts = re.split(r"(<a\b[^>]*>.*?</a>)", markdown)
    return "".join(part if part.startswith("<a") else part.replace("\\_", "\\_<wbr>") for part in parts)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _papers(root: Path | None, claims: Sequence[Claim]) -> dict[str, str]:
    titles: dict[str, str] = {}
    if root is not None:
        try:
            titles = load_papers(claims_dir(root))
        except TaserError:
            titles = {}
    for claim in claims:
        titles.setdefault(claim.paper, claim.paper)
    return {k: v for k, v in titles.items() if any(c.paper == k for c in claims)}


def _precondition_status(verdict: Verdict) -> str:
    """A precondition's status in a few words: "met", "not met", "not shown", or, measured per setting where the
    settings differ, "met for 6-32, 6-64; not met for 2-32" (`settings_by_status`)."""
    met = PRECONDITION_STATUS.get(verdict.status, verdict.status)
    return settings_by_status([(g, PRECONDITION_STATUS.get(s, s)) for g, s in (verdict.groups or {}).items()]) or met


def settings_by_status(pairs: Sequence[tuple[Any, str]]) -> str:
    """Settings and their statuses in a few words, each status once: "met for 6-32, 6-64; not met for 2-32"; where
    a setting's name has a comma ("squad-open, 200 questions"), settings are split by semicolons and statuses by
    dashes. "" when every setting has the same status (the status alone says it)."""
    by: dict[str, list[str]] = {}
    for setting, status in pairs:
        by.setdefault(status, []).append(str(setting))
    if len(by) < 2:
        return ""
    commas = any(", " in setting for settings in by.values() for setting in settings)
    between, among = (" — ", "; ") if commas else ("; ", ", ")
    return between.join(f"{status} for {among.join(settings)}" for status, settings in by.items())


def verdict_counts_table(card: pd.DataFrame, profiles: Sequence[str]) -> list[str]:
    """The verdict counts per profile as Markdown table lines (the scorecard's summary; the book's front page too)."""
    labels = list(profiles) or [""]
    show_error = any((card[f"verdict{' (' + p + ')' if p else ''}"] == ERROR).any() for p in labels)
    header = ["profile", *VERDICTS, *([ERROR] if show_error else []), "stale", "testable"]
    rows, notes = [], []
    for p in labels:
        suffix = f" ({p})" if p else ""
        col = card[f"verdict{suffix}"]
        counts = [int((col == v).sum()) for v in header[1:-2]]
        testable = int(col.isin(TESTABLE).sum())
        rows.append([p or "(none)", *counts, int((card[f"stale{suffix}"] != "").sum()),
                     f"{testable} of {len(col)}"])
        reversed_ = card[f"reversal{suffix}"].astype(bool) if f"reversal{suffix}" in card else col == FAILS
        hidden = int((reversed_ & (col == NOT_TESTABLE)).sum())
        notes.append(f"Significant reversals{' at ' + p if p else ''}: {int(reversed_.sum())}"
                     + (f", {hidden} of them in *{NOT_TESTABLE}* rows (the claim's own test, run regardless of its "
                        "unmet premise, finds the opposite of the paper)" if hidden else "") + ".")
    return _table(header, rows) + [" ".join(notes), ""]


def write_scorecard_page(results_root: str | os.PathLike, out_md: str | os.PathLike,
                         claims: Sequence[Claim] | None = None, *,
                         root: str | os.PathLike | None = None, link_pages: bool = True) -> pd.DataFrame:
    """Write the book's scorecard page (MyST markdown) from results_root; returns the scorecard table. With
    `link_pages`, each claim links to its notebook's page (`../notebooks/<notebook>.ipynb`, as the book lays it)."""
    claims, root = _resolve(claims, root)
    card = build_scorecard(results_root, claims, root=root)
    profiles = profiles_with_results(results_root)
    labels = profiles or [""]
    lines = [
        "# Scorecard",
        "",
        "Every headline claim of both papers: the paper's numbers, ours, and a verdict at each profile that has "
        f"results (generated {run_metadata()['time_utc']} from the saved result tables).",
        "",
        "## Summary",
        "",
    ]
    if not claims:
        lines += ["No claims files were found (`notebooks/claims/<notebook>.yaml`).", ""]
    if not profiles:
        lines += ["No profile has results yet: run `taser reproduce --profile cpu`.", ""]
    lines += verdict_counts_table(card, labels)
    lines += ["Each paper's claims come first, then how to read the verdicts, then the preconditions the claims rest on.",
              ""]
    claims_at, lines = len(lines), lines + [
        "## How to read the verdicts",
        "",
        "- **smoke** results come from tiny slices and only show that the pipeline runs: their numbers mean nothing. "
        "**cpu** runs the offline data with the packaged MiniLM model, which is not the papers' setting "
        "(see [Reproducing](reproduce.md)). **gpu** is sized for one GPU; **full** is paper scale.",
        "- Verdicts:",
        f"  - *{HOLDS}* and *{FAILS}* come from the test that matches the claim's words, at alpha 0.05, on the values "
        "the test itself uses (per-question or per-seed means; a pooled statistic by a bootstrap over questions): a "
        "paired randomisation or t-test for \"A beats B\", two one-sided tests for \"within m\", a non-inferiority "
        "test with the claim's margin for \"on par\", an exact binomial test for a share, a two-sample test for "
        "unpaired groups. A failed claim shows the direction observed.",
        f"  - *{WITHIN_NOISE}*: the test cannot decide; the direction it observed is shown.",
        "  - **Training-seed noise.** A test paired over questions sees only the questions' noise: it asks whether "
        "these two trained models differ, not whether their two recipes do, and two runs of one recipe with "
        "different seeds differ on the same questions too. Where a claim compares trained models, its verdict must "
        "also clear the std over seeds of one run's number, measured on a page that trains 3 seeds and pooled over "
        "its models (the detail says which), added to the questions' variance in a t-test (Welch-Satterthwaite "
        "degrees of freedom); a difference clear of the questions' noise but not of the seeds' reads "
        f"*{WITHIN_NOISE}*.",
        f"  - **Several compared pairs** (or groups): the claim *{FAILS}* when any one pair is significantly "
        f"reversed, so each reversal must stand after Holm's correction over the claim's pairs; *{HOLDS}* needs "
        "every pair to hold.",
        "  - **Exact numbers** (parameter counts, a proof's floating-point error): the claim is judged on them alone "
        f"and can only hold or fail ({NO_NOISE}).",
        f"  - *{NOT_TESTABLE}*: the claim has neither a noise test nor exact numbers, or a precondition it rests on "
        "(the teacher leads, every compared model trained past its initialisation, the metric below its ceiling) "
        "was measured and does not hold, so the claim is not judged; the reason gives the measurement, and the row "
        "still shows the direction and p-value the claim's own test observes when run regardless of the precondition "
        "(\"a significant reversal\" where that test would read *fails*).",
        "- **Significant reversals** (under the summary) count the claims whose own test finds the opposite of what the "
        f"paper says, significantly: the *{FAILS}* verdicts and the reversals that a *{NOT_TESTABLE}* row would "
        "otherwise hide.",
        f"  - *{NOT_RUN}*: the notebook has no result for it at that profile; *{PLANNED}*: the notebook that will "
        "reproduce it is not written yet; *stale*: the notebook or a library file it uses changed since the result "
        "was made.",
        "- **ER** is the effect ratio of Breuer et al. (SIGIR 2020): our mean per-question (or per-seed) "
        "improvement over the paper's improvement (1: the whole effect came back; between 0 and 1: part of it; "
        "0 or less: none, or reversed). It is shown where the claims file gives the paper's numbers; the paper's "
        "numbers are on its own datasets (MS MARCO, NQ), ours on the offline testbed, so ER compares effect "
        "sizes across datasets, not a replication on the same data.",
        "- Each claim's statement, its test and the details of its verdicts are in the list below each paper's "
        "table.",
        "",
    ]

    preconditions = _preconditions(root)
    if preconditions and profiles:
        lines += ["## Preconditions", "",
                  "What the claims rest on, measured on the same results. A claim that requires one which does not "
                  f"hold reads *{NOT_TESTABLE}*.", ""]
        rows, full = [], [":::{dropdown} Preconditions: each in full, with its test and what was measured", ""]
        for name, pre in preconditions.items():
            users = sorted(c.id for c in claims if name in c.requires)
            over = f" for each {_md(pre.over)}" if pre.over else ""
            full.append(f"- **{_md(name)}**. {_md(_sentence(pre.statement))} Test: `{pre.test}`{over}.")
            statuses = []
            for p in profiles:
                verdict = evaluate_claim(pre, Path(results_root) / p, root=root,
                                         tables=_Tables(Path(results_root) / p, root=root))
                statuses.append(_precondition_status(verdict))
                full.append(f"  - {p}: *{_md(statuses[-1])}*" + (f": {_md(verdict.ours)}" if verdict.ours else ""))
            rows.append([_Html(f'<span id="{precondition_anchor(name)}"></span>{escape_markdown(name)}'), *statuses,
                         ", ".join(users) or "–"])
        # a short table to scan (a column each of statement and measurement made every row a screen tall), and
        # each precondition in full below it, as the claims are under each paper's table
        lines += _table(["precondition", *profiles, "claims"], rows) + full + [":::", ""]

    guide, lines = lines[claims_at:], lines[:claims_at]  # the claims first: the guide and preconditions after them
    for paper, title in _papers(root, claims).items():
        part = card[card["paper"] == paper]
        lines += [f"## {title}", ""]
        for p in labels:
            suffix = f" ({p})" if p else ""
            if p:
                lines += [f"### {p}", ""]
            lines += _table(["claim", "verdict", "ER", "paper", "ours"],
                            [[_ClaimLink(r["id"], r["notebook"])
                              if link_pages and (root is None or (root / "notebooks" / f"{r['notebook']}.ipynb").is_file())
                              else r["id"],
                              verdict_in_words(r[f"shown{suffix}"], preconditions),
                              r[f"ER{suffix}"], r["paper's numbers"], r[f"ours{suffix}"]]
                             for _, r in part.iterrows()])
        lines += [f":::{{dropdown}} {_md(title)}: the claims in full, with their tests and verdicts", ""]
        by_id = {c.id: c for c in claims}
        for _, r in part.iterrows():
            claim = by_id[r["id"]]
            over = f" for each {_md(claim.over)}" + (f" in {_md(', '.join(claim.groups))}" if claim.groups else "") \
                if claim.over else ""
            lines.append(f"- **{_md(claim.id)}** ({_md(claim.where)}; notebook {_md(claim.notebook)}, table "
                         f"{_md(claim.table)}). {_md(_sentence(claim.statement))} Paper: {_md(claim.paper_numbers)}. "
                         f"Test: `{claim.test}`{over}.")
            for p in labels:
                suffix = f" ({p})" if p else ""
                detail = r[f"detail{suffix}"]
                lines.append(f"  - {p + ': ' if p else ''}*{_md(r[f'verdict{suffix}'])}*"
                             + (f": {_md(detail)}" if detail else ""))
        lines += [":::", ""]
    atomic_write_text(out_md, "\n".join(lines + guide))
    return card
