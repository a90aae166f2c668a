"""The scorecard: every headline claim of both papers, the paper's numbers, ours, and a verdict per profile.

The claims are data, `notebooks/claims/<notebook>.yaml` (schema and loader: `taser_lib.claims`). The scorecard reads
only the result tables written by `taser_lib.results.save_result` under `results/<profile>/<notebook>/`. A verdict
is one of:

- *planned*: the notebook that reproduces the claim (`notebooks/<notebook>.ipynb`) does not exist yet;
- *not run*: it exists but has no result at this profile, or its table lacks the claim's rows there;
- *holds* / *fails*: the claim's direction test on our numbers, and, when the claim says how to judge its noise,
  every compared pair is separated by a paired test (randomisation or t-test, per query or per seed) at alpha;
- *within noise*: the paired test cannot separate the two sides of a comparison (p >= alpha);
- *error*: the result table does not have the layout the claim reads (a missing column, several matching rows).

A claim without a noise section can only hold or fail; its detail says "no noise estimate". A result whose notebook or
library files changed since it was made (`taser_lib.results.stale_reason`) is marked stale.

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

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .claims import (Claim, Comparison, claims_dir, compare, evaluate, find_root, load_claims,
                     load_claims_file, load_papers, names_in)
from .errors import ConfigError, TaserError
from .io import atomic_write_text
from .meta import run_metadata
from .results import META_NAME, PROFILE_ORDER, load_result

PLANNED, NOT_RUN, HOLDS, FAILS, WITHIN_NOISE, ERROR = "planned", "not run", "holds", "fails", "within noise", "error"
VERDICTS = (HOLDS, FAILS, WITHIN_NOISE, NOT_RUN, PLANNED)  # the summary's columns (ERROR only when one occurs)
NO_NOISE = "no noise estimate"
_TEST_NAMES = {"randomisation": "paired randomisation test", "t-test": "paired t-test"}


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

    @property
    def short(self) -> str:
        """The verdict as the scorecard's table shows it."""
        text = self.status
        if self.p_value is not None and self.status in (HOLDS, FAILS, WITHIN_NOISE):
            text += f" (p = {self.p_value:.2g})"
        return text + (" · stale" if self.stale else "")


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
            try:
                from .results import stale_reason
            except ImportError:  # a results module without staleness: nothing is known to be stale
                return None
            folder = self.folder(notebook)
            self.stale_cache[notebook] = stale_reason(folder, self.root) if (folder / META_NAME).is_file() else None
        return self.stale_cache[notebook]


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

@dataclass
class _Compared:
    comparison: Comparison
    holds: bool            # the comparison on our numbers
    p_value: float
    n: int
    sides: str = ""        # mean ± std of each side (per seed)

    def separated(self, alpha: float) -> bool:
        return self.p_value < alpha


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


def _side(expression: str, values: Mapping[str, Any], n: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(evaluate(expression, values), dtype=float), (n,))


def _paired_tests(claim: Claim, tables: _Tables, group: str | None, point: Mapping[str, float]) -> list[_Compared]:
    from .evaluation.significance import paired_t_test, randomisation_test

    noise = claim.noise
    assert noise is not None
    series = _per_key(claim, tables, group)
    results = []
    for comparison in noise.compare:
        names = sorted(names_in(comparison.left) | names_in(comparison.right))
        keys = sorted(set.intersection(*(set(series[n].index) for n in names)))
        where = f" for {claim.over}={group}" if group is not None else ""
        if len(keys) < 2:
            raise _Problem(NOT_RUN, f"noise: {len(keys)} common value(s) of '{noise.key}' for {comparison.text}"
                                    f"{where}; a paired test needs 2 or more")
        arrays = {n: series[n].loc[keys].to_numpy(dtype=float) for n in names}
        left, right = _side(comparison.left, arrays, len(keys)), _side(comparison.right, arrays, len(keys))
        a, b = dict(zip(keys, left)), dict(zip(keys, right))
        test = randomisation_test(a, b) if noise.test == "randomisation" else paired_t_test(a, b)
        p = 1.0 if math.isnan(test.p_value) else test.p_value
        sides = ""
        if noise.key == "seed":
            sides = (f"{comparison.left} {_fmt(left.mean())} ± {left.std(ddof=1):.2g}, "
                     f"{comparison.right} {_fmt(right.mean())} ± {right.std(ddof=1):.2g} (mean ± std over seeds)")
        holds = compare(comparison.op, evaluate(comparison.left, point), evaluate(comparison.right, point))
        results.append(_Compared(comparison, holds, p, len(keys), sides))
    return results


def _group_status(point_holds: bool, compared: list[_Compared], alpha: float) -> str:
    """holds / fails need every compared pair separated at alpha; a pair separated against the claim fails it."""
    if any(c.separated(alpha) and not c.holds for c in compared) and not point_holds:
        return FAILS
    if all(c.separated(alpha) for c in compared):
        return HOLDS if point_holds else FAILS
    return WITHIN_NOISE


# ----------------------------------------------------------------------------------------------- verdicts

def _value(claim: Claim, name: str, rows: pd.DataFrame, column: str, group: str | None) -> float:
    where = f" for {claim.over}={group}" if group is not None else ""
    if len(rows) == 0:
        raise _Problem(NOT_RUN, f"no row {claim.quantities[name]!r} ({name}){where}")
    key = claim.noise.key if claim.noise else None
    if len(rows) > 1:
        if key is None or key not in rows.columns:
            raise _Problem(ERROR, f"{len(rows)} rows match {name} {claim.quantities[name]!r}{where}")
        value = pd.to_numeric(rows[column], errors="coerce").groupby(rows[key].astype(str)).mean().mean()
    else:
        value = pd.to_numeric(rows[column], errors="coerce").iloc[0]
    if value is None or math.isnan(value):
        raise _Problem(ERROR, f"{name} is not a number{where}")
    return float(value)


def _evaluate(claim: Claim, tables: _Tables, root: Path | None) -> Verdict:
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
        if claim.groups is not None:
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
    ours = "; ".join(parts)
    statuses, notes, failed = [], [], []
    p_values: dict[str, list[float]] = {}  # per group status: the p-values that decided it
    for group in groups:
        point = bool(evaluate(claim.test, values[group]))
        label = f"{group}: " if group is not None else ""
        if claim.noise is None:
            status = HOLDS if point else FAILS
        else:
            try:
                compared = _paired_tests(claim, tables, group, values[group])
            except _Problem as problem:  # our numbers are there, the values to judge their noise are not
                return Verdict(problem.status, ours, problem.detail)
            status = _group_status(point, compared, claim.noise.alpha)
            p_values.setdefault(status, []).extend(
                c.p_value for c in compared if (status == WITHIN_NOISE) != c.separated(claim.noise.alpha))
            notes.append(label + "; ".join(
                f"{c.comparison.text} p = {c.p_value:.3g} over {c.n} values of '{claim.noise.key}'"
                + (f", {c.sides}" if c.sides else "") for c in compared))
        statuses.append(status)
        if status == FAILS and group is not None:
            failed.append(group)

    if FAILS in statuses:
        status = FAILS
    elif WITHIN_NOISE in statuses:
        status = WITHIN_NOISE
    else:
        status = HOLDS
    if claim.noise is None:
        detail = NO_NOISE
    else:
        detail = f"{_TEST_NAMES[claim.noise.test]}, alpha {claim.noise.alpha:g}: " + "; ".join(notes)
    if failed and len(groups) > 1:
        detail = f"fails on {', '.join(failed)}; {detail}"
    deciding = p_values.get(status)
    return Verdict(status, ours, detail, p_value=max(deciding) if deciding else None)


def evaluate_claim(claim: Claim, profile_dir: str | os.PathLike,
                   folders: Mapping[str, str | os.PathLike] | None = None, *,
                   root: str | os.PathLike | None = None, tables: _Tables | None = None) -> Verdict:
    """The verdict on `claim` from one profile's results. `folders` maps a notebook to the folder holding its tables
    when that is not `profile_dir/<notebook>` (a running notebook). With `root` (the repository root), a claim whose
    notebook does not exist there is *planned*, and a stale result is marked so."""
    root = Path(root) if root is not None else None
    tables = tables or _Tables(Path(profile_dir), {k: Path(v) for k, v in (folders or {}).items()}, root)
    try:
        verdict = _evaluate(claim, tables, root)
    except _Problem as problem:
        verdict = Verdict(problem.status, detail=problem.detail)
    if verdict.status in (PLANNED, NOT_RUN):
        return verdict
    reasons = [f"{nb}: {r}" for nb in claim.notebooks() if (r := tables.stale(nb))]
    if reasons:
        verdict = Verdict(verdict.status, verdict.ours, verdict.detail + "; stale: " + "; ".join(reasons),
                          stale="; ".join(reasons), p_value=verdict.p_value)
    return verdict


# ----------------------------------------------------------------------------------------------- tables of claims

def notebook_claims(notebook: str, results_dir: str | os.PathLike | None = None,
                    claims: Sequence[Claim] | None = None, *, root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The paper's claims whose numbers `notebook` produces (its claims file), beside ours from `results_dir` (the
    notebook's own result folder, e.g. while it runs) when given: the "paper's table beside ours" cell."""
    if claims is None:
        folder = claims_dir(root)
        path = folder / f"{notebook}.yaml"
        claims = load_claims_file(path, load_papers(folder)).claims if path.is_file() else ()
    columns = ["id", "where", "claim", "paper"] + (["ours", "verdict", "detail"] if results_dir is not None else [])
    rows = []
    for claim in claims:
        if claim.notebook != notebook:
            continue
        row = {"id": claim.id, "where": claim.where, "claim": claim.statement, "paper": claim.paper_numbers}
        if results_dir is not None:
            folder = Path(results_dir)
            verdict = evaluate_claim(claim, folder.parent, folders={notebook: folder})
            row.update({"ours": verdict.ours, "verdict": verdict.short, "detail": verdict.detail})
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


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


def build_scorecard(results_root: str | os.PathLike, claims: Sequence[Claim] | None = None, *,
                    root: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per claim: id, paper, where, claim, paper's numbers, notebook, then `ours (<profile>)`,
    `verdict (<profile>)`, `detail (<profile>)` and `stale (<profile>)` for each profile with results (a single
    unlabelled set when none has any). `root`: the repository root (default: found from the working directory)."""
    claims, root = _resolve(claims, root)
    profiles = profiles_with_results(results_root)
    tables = {p: _Tables(Path(results_root) / p, root=root) for p in profiles or [""]}
    rows = []
    for claim in claims:
        row = {"id": claim.id, "paper": claim.paper, "where": claim.where, "claim": claim.statement,
               "paper's numbers": claim.paper_numbers, "notebook": claim.notebook}
        for profile in profiles or [""]:
            verdict = evaluate_claim(claim, Path(results_root) / profile, root=root, tables=tables[profile])
            suffix = f" ({profile})" if profile else ""
            row.update({f"ours{suffix}": verdict.ours, f"verdict{suffix}": verdict.status,
                        f"shown{suffix}": verdict.short, f"detail{suffix}": verdict.detail,
                        f"stale{suffix}": verdict.stale or ""})
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------- the page

_MARKDOWN_SPECIAL = "\\`*_[]<>$|~#"


def _md(text: Any) -> str:
    """Plain text for a Markdown table cell or list item: Markdown's special characters escaped, one line."""
    out = str(text).replace("\n", " ")
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL else ch for ch in out)


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


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


def write_scorecard_page(results_root: str | os.PathLike, out_md: str | os.PathLike,
                         claims: Sequence[Claim] | None = None, *,
                         root: str | os.PathLike | None = None) -> pd.DataFrame:
    """Write the book's scorecard page (MyST markdown) from results_root; returns the scorecard table."""
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
        "- **smoke** results come from tiny slices and only show that the pipeline runs: their numbers mean nothing. "
        "**cpu** runs the offline data with the packaged MiniLM model, which is not the papers' setting "
        "(see [Reproducing](reproduce.md)). **gpu** is sized for one GPU; **full** is paper scale.",
        f"- Verdicts: *{HOLDS}* and *{FAILS}* say whether the claim's direction holds in our numbers. Where a claim "
        "has per-query or per-seed values, a paired test (randomisation or t-test, alpha 0.05) must also separate "
        f"the two sides; when it cannot, the verdict is *{WITHIN_NOISE}*, and the p-value is shown. A claim without "
        f"such values can only hold or fail ({NO_NOISE}). *{NOT_RUN}*: the notebook has no result for it at that "
        f"profile; *{PLANNED}*: the notebook that will reproduce it is not written yet. *stale*: the notebook or a "
        "library file it uses changed since the result was made.",
        "- Each claim's statement, its test and the details of its verdicts are in the list below each paper's "
        "table.",
        "",
        "## Summary",
        "",
    ]
    if not claims:
        lines += ["No claims files were found (`notebooks/claims/<notebook>.yaml`).", ""]
    if not profiles:
        lines += ["No profile has results yet: run `taser reproduce --profile cpu`.", ""]
    show_error = any((card[f"verdict{' (' + p + ')' if p else ''}"] == ERROR).any() for p in labels)
    header = ["profile", *VERDICTS, *([ERROR] if show_error else []), "stale"]
    rows = []
    for p in labels:
        suffix = f" ({p})" if p else ""
        col = card[f"verdict{suffix}"]
        counts = [int((col == v).sum()) for v in header[1:-1]]
        rows.append([p or "(none)", *counts, int((card[f"stale{suffix}"] != "").sum())])
    lines += _table(header, rows)

    for paper, title in _papers(root, claims).items():
        part = card[card["paper"] == paper]
        lines += [f"## {title}", ""]
        for p in labels:
            suffix = f" ({p})" if p else ""
            if p:
                lines += [f"### {p}", ""]
            lines += _table(["claim", "verdict", "paper", "ours"],
                            [[r["id"], r[f"shown{suffix}"], r["paper's numbers"], r[f"ours{suffix}"]]
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
    atomic_write_text(out_md, "\n".join(lines))
    return card
