"""The book: each notebook page from its executed copy with its claims' verdicts, the generated pages (scorecard, run
times, the ways in from both papers' tables and figures) and the Jupyter Book build (`build_book`)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from taser_lib.errors import ConfigError, FormatError, TaserError
from taser_lib.io import atomic_path, atomic_write_text
from .run_ledger import clean_run, hours_into_run, read_legs
from .scorecard import (NOT_TESTABLE, TESTABLE, _sentence, claim_anchor, claim_link, escape_markdown,
                        settings_by_status, verdict_counts_table)
from .results import EXECUTED_NAME, PROFILE_ORDER, read_meta
from .executed import _read_yaml, load_missing_value_notes, tidy_executed
from .profiles import load_profiles
from .runner import find_notebooks, page_stale_reason


def executed_notebook(results_root: str | os.PathLike, stem: str, prefer: str | None = None) -> Path | None:
    """The executed copy of notebook `stem` the book shows: from profile `prefer` if it ran there, else from the
    largest profile that ran it (full, then cpu, then smoke, then any other)."""
    results_root = Path(results_root)
    others = sorted(p.name for p in results_root.iterdir() if p.is_dir()) if results_root.is_dir() else []
    order = [prefer] if prefer else []
    order += [p for p in reversed(PROFILE_ORDER) if p not in order]
    order += [p for p in others if p not in order]
    for profile in order:
        candidate = results_root / profile / stem / EXECUTED_NAME
        if candidate.is_file():
            return candidate
    return None
_HIDDEN_TAGS = ("hide-input", "hide-output", "hide-cell", "remove-input", "remove-output", "remove-cell")


def _admonition(kind: str, title: str, body: str) -> str:
    return f"```{{admonition}} {title}\n:class: {kind}\n{body}\n```"


def wall_seconds(meta: Mapping[str, Any]) -> float | None:
    """A result's wall time: every leg of its run (`wall_seconds_all_legs`, when earlier legs were killed and the
    run resumed), else its one leg."""
    value = meta.get("wall_seconds_all_legs", meta.get("wall_seconds"))
    return value if isinstance(value, (int, float)) else None


def _provenance_line(meta: Mapping[str, Any]) -> str:
    """One line under the title: which run made the page's numbers."""
    hardware = (meta.get("hardware") or {}).get("summary") or meta.get("machine") or "an unrecorded machine"
    minutes = wall_seconds(meta)
    legs = 1 + len(meta.get("earlier_legs") or [])
    when = str(meta.get("start_time_utc") or meta.get("time_utc") or "")[:10]
    revision = str(meta.get("git_revision") or "")
    revision = revision.split("+")[0][:12] + ("+dirty" if revision.endswith("+dirty") else "")
    parts = [f"profile `{meta.get('profile')}`", when,
             (f"{minutes / 60:.1f} min" + (f" in {legs} legs" if legs > 1 else "") + f" on {hardware}")
             if isinstance(minutes, (int, float)) else f"on {hardware}"]
    if revision:
        parts.append(f"revision `{revision}`")
    runs = " (see [Run times](../book/runs.md))"
    return "*Computed by `taser reproduce`: " + ", ".join(p for p in parts if p) + runs + ".*"


def _cell(text: Any) -> str:
    """Text for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def short_statement(statement: str, limit: int = 110) -> str:
    """A claim's statement in one line for the verdict box: without its parenthetical qualifiers (the quotes from the
    paper, the "here: ..." notes, the model details) and what follows a semicolon, which the dropdown below the box
    keeps, and cut at a word before `limit` characters."""
    text = " ".join(statement.split())
    start = text.find(" (")
    while start >= 0:  # a parenthetical opens after a space and closes before a space or a mark: (1/8)·x is math
        depth, end = 0, None
        for i in range(start + 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        if end is not None and (end + 1 == len(text) or text[end + 1] in " ,.;:"):
            text = text[:start] + text[end + 1:]
            start = text.find(" (", start)
        else:
            start = text.find(" (", start + 1)
    text = text.split("; ")[0].rstrip(" ,:")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return text


BOOK_INCLUDES = ("tools/reproduce.sbatch",)  # book/reproduce.md shows the job array's script itself

VERDICT_BOX_COLUMNS = (("claim", 34), ("verdict", 17), ("paper", 20), ("ours", 21), ("ER", 8))  # name, % of width


VERDICT_BOX_TITLES = {"ER": "effect ratio (Breuer et al., SIGIR 2020): our improvement over the paper's "
                               "(1: the whole effect came back; 0 or less: none, or reversed)"}


def _box_unit(ours: str) -> str:
    """Our numbers as the verdict box shows them: the unit at their end without its own parentheticals ("test R@K at
    the deciding cutoff (R@1 on SQuAD-open; ...), %" -> "test R@K at the deciding cutoff, %"), so that a row is a few
    lines, not a dozen; the dropdown below the box keeps the unit in full."""
    return "".join(_split_unit(ours))


def _split_unit(ours: str) -> tuple[str, str]:
    """`ours` as (the numbers, their unit shortened as `_box_unit` says), e.g. ("a=1, b=2", " (MRR@10)"); the unit is
    the parenthesis closing the text; (ours, "") where it has none."""
    if not ours.endswith(")"):
        return ours, ""
    depth, start = 0, None
    for i in range(len(ours) - 1, -1, -1):  # the parenthesis that opens the unit at the end
        depth += {")": 1, "(": -1}.get(ours[i], 0)
        if depth == 0:
            start = i
            break
    if not start:
        return ours, ""
    unit = ours[start + 1:-1]
    while (short := re.sub(r"\s*\([^()]*\)", "", unit)) != unit:  # nested parentheticals, innermost first
        unit = short
    body = ours[:start].rstrip()
    return body, f"{ours[len(body):start]}({unit})"


BOX_GROUPS = 4  # per-setting numbers the verdict box shows before "and N more" (all of them are in its dropdown)


def _box_ours(ours: str, verdict: str = "") -> tuple[str, bool]:
    """Our numbers as the verdict box's HTML cell, and whether it left anything out: the unit shortened
    (`_box_unit`), then one line per setting ("2-128: ca=0.34, de=0.60; 2-32: ..." -> a line each), the settings the
    `verdict` names first ("fails: 6-128: ..."), at most BOX_GROUPS of them and "and N more" (a claim over 8 sizes
    made a cell of thirty lines)."""
    body, unit = _split_unit(ours)
    short = body + unit
    parts = [p for p in _top_level_split(body, "; ") if p]
    if len(parts) < 2:
        return escape(short), short != ours
    named = [p for p in parts if p.partition(": ")[1] and f"{p.partition(': ')[0]}: " in verdict]
    shown = (named + [p for p in parts if p not in named])[:BOX_GROUPS]
    more = len(parts) - len(shown)
    lines = [escape(p) for p in shown] + ([f"and {more} more (in the claims in full)"] if more else [])
    return "<br>".join(lines) + escape(unit), short != ours or more > 0


def _break_points(cell: str) -> str:
    """An HTML cell with a line-break opportunity after each "/" and "=": the papers' "83.6/82.0/77.9/91.1/69.7" and our
    "train_first=0.8469" are single words to the browser, which in a narrow column would otherwise split one of the
    numbers ("91.1" as "91." over "1")."""
    return cell.replace("/", "/<wbr>").replace("=", "=<wbr>")


def _top_level_split(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        ch = text[i]
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    return parts + [text[start:]]


def _verdict_box(claims: pd.DataFrame) -> str:
    """The page's claims and verdicts as a short table (the first thing under the title): each claim in one line with
    its id and where the paper makes it, on the anchor the scorecard and the chapter pages link to, its verdict, the
    paper's numbers and ours; then a dropdown with each claim in full and the test behind its verdict. The table is
    HTML so that its columns get widths that fit the text column (a Markdown table gives the claim a sliver)."""

    rows = []
    details = []
    for row in claims.itertuples(index=False):
        where = getattr(row, "where", "") or ""
        statement = " ".join(str(getattr(row, "claim", "") or "").split())
        short = short_statement(statement)
        label = f"<strong>{escape(str(row.id))}</strong>" + (f" ({escape(str(where))})" if where else "")
        claim = f'<span id="{claim_anchor(row.id)}"></span>' + (
            f"{escape(short)}<br><small>{label}</small>" if short else label)
        ours = str(row.ours or "")
        shown, shortened = _box_ours(ours, str(row.verdict))
        cells = [claim, escape(str(row.verdict)), _break_points(escape(str(row.paper))), _break_points(shown) or "–"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells)
                    + f'<td class="number">{escape(str(row.ER or "")) or "–"}</td></tr>')
        detail = " ".join(str(getattr(row, "detail", "") or "").split())
        if statement or detail:
            details.append(f"- **{escape_markdown(row.id)}**: {escape_markdown(statement)}"
                           + (f" *Ours*: {escape_markdown(ours)}." if ours and shortened else "")
                           + (f" *Verdict*: {escape_markdown(detail)}" if detail else ""))
    widths = "".join(f'<col style="width: {w}%">' for _, w in VERDICT_BOX_COLUMNS)
    heads = "".join(f'<th title="{escape(VERDICT_BOX_TITLES[name])}">{name}</th>' if name in VERDICT_BOX_TITLES
                    else f"<th>{name}</th>" for name, _ in VERDICT_BOX_COLUMNS)
    lines = ["**Claims and verdicts** (judged when the book was built, from this page's saved tables; ER: our effect "
             "over the paper's; the [scorecard](../book/scorecard.md) explains the tests):", "",
             f'<table class="table verdict-box"><colgroup>{widths}</colgroup>',
             f"<thead><tr>{heads}</tr></thead><tbody>", *rows, "</tbody></table>"]
    if details:
        lines += ["", ":::{dropdown} The claims in full, with the test behind each verdict", "", *details, "", ":::"]
    return "\n".join(lines)


def _precondition_box(preconditions: pd.DataFrame) -> str:
    """A page that measures preconditions rather than claims (the testbed page): each precondition, its status and
    its status per setting, as the first thing under the title."""

    lines = ["**Preconditions measured here** (judged when the book was built, from this page's saved tables; the "
             "claims that rest on them read *not testable here* where they do not hold, see the "
             "[scorecard](../book/scorecard.md)):", "", "| precondition | status | per setting |", "| --- | --- | --- |"]
    for row in preconditions.itertuples(index=False):
        name = f'<span id="{claim_anchor(row.precondition)}"></span>**{_cell(row.precondition)}**'
        raw = str(getattr(row, "per_setting", "") or "")
        settings = len([p for p in _top_level_split(raw, "; ") if p])
        per_setting = _settings_by_status(raw) or (f"{row.status} for all {settings} settings" if settings > 1
                                                   else raw)
        lines.append(f"| {name} | {_cell(row.status)} | {_cell(per_setting) or '–'} |")
    return "\n".join(lines)


def _settings_by_status(per_setting: str) -> str:
    """`notebook_preconditions`' "per setting" ("a: met; b: not met; c: met") as `settings_by_status` words it ("met
    for a, c; not met for b"); "" when every setting has the same status."""
    pairs = [(setting, status) for part in _top_level_split(per_setting, "; ") if part
             for setting, _, status in [part.rpartition(": ")]]
    return settings_by_status(pairs)


def _preconditions_output(preconditions: pd.DataFrame) -> dict:
    """The output of a notebook's `notebook_preconditions(...)` cell in the book: each precondition as an item (what
    it says, its status per setting, what was measured), judged when the book was built. As a table its five columns
    of prose left the name and status a letter wide."""
    import nbformat

    items = []
    for row in preconditions.to_dict("records"):
        status = _settings_by_status(str(row.get("per setting") or "")) or str(row.get("status") or "")
        items.append(f"- **{escape_markdown(row['precondition'])}** ({escape_markdown(status)}). "
                     + escape_markdown(_sentence(str(row.get("what it says") or "")))
                     + (f" Measured: {escape_markdown(row['measured'])}." if row.get("measured") else ""))
    text = "\n".join(items)
    return nbformat.v4.new_output("display_data", data={"text/markdown": text, "text/plain": text})


def _shows_claims(source: str) -> bool:
    """Whether a notebook cell ends by showing the page's claims: `publish(...)` (its tables saved, then its claims
    judged on them) or `notebook_claims(...)`."""
    return "publish(" in source or "notebook_claims(" in source


def _shows_preconditions(source: str) -> bool:
    """Whether a notebook cell shows the page's preconditions: `notebook_preconditions(...)`, or a page module's
    `page.preconditions()` (taser_book/pages)."""
    if "import" in source:
        return False
    return "notebook_preconditions(" in source or source.strip().endswith(".preconditions()")


_VERDICT_ORDER = ("holds", "fails", "within noise", "not testable here", "not run", "planned")


def _claims_output(claims: pd.DataFrame) -> dict:
    """The output of a notebook's `publish(...)` or `notebook_claims(...)` cell in the book: the page's verdicts,
    judged again from the current claims and tests, counted in one line that points to the box at the top of the page
    (which shows them claim by claim; the table in full, as a notebook run prints it, would repeat that box)."""
    import nbformat

    verdicts = [str(v) for v in claims.get("verdict", pd.Series(dtype=str))]
    counts = {word: sum(v.startswith(word) for v in verdicts) for word in _VERDICT_ORDER}
    counts["other"] = len(verdicts) - sum(counts.values())
    told = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    line = (f"{len(verdicts)} claim{'s' if len(verdicts) != 1 else ''} judged from this page's tables ({told}): "
            "each with its test in *Claims and verdicts* at the top of the page.")
    return nbformat.v4.new_output("display_data", data={"text/markdown": line, "text/plain": line})


def collapse_set_up(nb) -> None:
    """Set-up code as a reader of an executed page meets it: papermill's injected cell says what the page ran with,
    so the notebook's own parameters cell (its defaults, overridden) leaves the page; and each run of consecutive
    collapsed code cells that show nothing becomes one cell, one "show code" bar instead of a stack of empty ones."""
    if any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells):
        nb.cells = [c for c in nb.cells if not ("parameters" in c.metadata.get("tags", [])
                                                and "injected-parameters" not in c.metadata.get("tags", []))]

    def quiet(cell) -> bool:
        return cell.cell_type == "code" and not cell.get("outputs") \
            and "hide-input" in cell.metadata.get("tags", [])

    cells = []
    for cell in nb.cells:
        if cells and quiet(cell) and quiet(cells[-1]):
            last = cells[-1]
            last.source = last.source.rstrip("\n") + "\n\n" + cell.source
            last.metadata["tags"] = list(dict.fromkeys(last.metadata["tags"] + cell.metadata["tags"]))
            continue
        cells.append(cell)
    nb.cells = cells


def book_notebook(source: str | os.PathLike, executed: str | os.PathLike | None, dest: str | os.PathLike, *,
                  stale: str | None = None, meta: Mapping[str, Any] | None = None,
                  claims: pd.DataFrame | None = None, preconditions: pd.DataFrame | None = None,
                  missing_note: str | None = None) -> None:
    """Write the notebook page the book shows: the executed copy (else the source, with a note that it has not run),
    with the source's current cell tags (so `hide-input` set-up cells collapse), without stderr, warnings and
    progress bars, and, under its title, which run made it and, when `stale`, a warning saying why. `claims` (the
    page's claims judged now, `scorecard.notebook_claims`) opens the page as its verdict box and replaces the output
    of the notebook's own `publish(...)` (or `notebook_claims(...)`) cell, which was judged when the notebook ran.
    `missing_note` (book/missing_values.yaml) says why its tables have cells without a value."""
    import nbformat

    source_nb = nbformat.read(str(source), as_version=4)
    nb = nbformat.read(str(executed), as_version=4) if executed is not None else source_nb
    tags_by_source = {}
    for cell in source_nb.cells:
        tags_by_source.setdefault(cell.source, cell.metadata.get("tags", []))
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        if cell.source in tags_by_source:  # the source's tags win; a cell whose code changed since (a declared
            wanted = tags_by_source[cell.source]  # result-preserving change) keeps the tags it ran with
            tags = [t for t in tags if t not in _HIDDEN_TAGS or t in wanted] + [t for t in wanted if t not in tags]
        if tags:
            cell.metadata["tags"] = tags
    tidy_executed(nb, missing_note)  # as the runner left it; a copy made before it did is tidied here
    for cell in nb.cells:
        if cell.cell_type == "code" and claims is not None and executed is not None and _shows_claims(cell.source) \
                and "import" not in cell.source:
            cell.outputs = [_claims_output(claims)] if len(claims) else []  # no claims: no footer
        elif cell.cell_type == "code" and preconditions is not None and not preconditions.empty and executed \
                is not None and _shows_preconditions(cell.source):
            cell.outputs = [_preconditions_output(preconditions)]
    if executed is not None:
        collapse_set_up(nb)
    nb.metadata.pop("widgets", None)  # the progress-bar widgets' saved state: their outputs are gone

    notes = []
    if executed is None:
        notes.append(_admonition("note", "Not run yet",
                                 "No profile has run this notebook yet, so it shows no results: run "
                                 f"`taser reproduce --profile cpu --only {Path(source).stem}`."))
    else:
        if meta:
            notes.append(_provenance_line(meta))
        if stale:  # above the verdict box: in the first screen, before any number it qualifies
            profile = (meta or {}).get("profile", "cpu")
            notes.append(_admonition("warning", "Stale result",
                                     f"The results on this page are out of date: {escape_markdown(stale)}. Run "
                                     f"`taser reproduce --profile {profile} --only {Path(source).stem}` "
                                     "to bring them up to date."))
        if claims is not None and not claims.empty and "verdict" in claims.columns:
            notes.append(_verdict_box(claims))
        elif preconditions is not None and not preconditions.empty and "status" in preconditions.columns:
            notes.append(_precondition_box(preconditions.rename(columns={"per setting": "per_setting"})))
    if notes:
        first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
        text = "\n\n".join(notes)
        if first is not None and first.source.startswith("# "):
            title, _, rest = first.source.partition("\n")
            first.source = f"{title}\n\n{text}\n\n{rest.lstrip()}"
        else:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(text))
    with atomic_path(Path(dest)) as tmp:
        nbformat.write(nb, str(tmp))


def _result_profiles(results_root: Path) -> list[str]:
    """Profile folders under results_root, in PROFILE_ORDER and then by name (bench folders are not profiles)."""
    found = [p.name for p in results_root.iterdir() if p.is_dir() and not p.name.startswith((".", "_", "bench"))] \
        if results_root.is_dir() else []
    return [p for p in PROFILE_ORDER if p in found] + sorted(p for p in found if p not in PROFILE_ORDER)


def run_times(root: str | os.PathLike, results_root: str | os.PathLike) -> pd.DataFrame:
    """One row per notebook and profile with a published result: wall minutes, date, machine, and whether it is up
    to date with the checkout at `root`."""
    root, results_root = Path(root), Path(results_root)
    rows = []
    for source in find_notebooks(root):
        for profile in _result_profiles(results_root):
            folder = results_root / profile / source.stem
            try:
                meta = read_meta(folder)
            except FormatError:
                meta = None
            if meta is None:
                continue
            wall = wall_seconds(meta)
            rows.append({
                "notebook": source.stem, "profile": profile,
                "minutes": round(wall / 60, 1) if wall is not None else None,
                "legs": 1 + len(meta.get("earlier_legs") or []),
                "date": str(meta.get("start_time_utc") or meta.get("time_utc") or "")[:10],
                "machine": (meta.get("hardware") or {}).get("summary") or meta.get("machine") or "",
                "up to date": "yes" if (reason := page_stale_reason(folder, root)) is None else f"no: {reason}",
            })
    return pd.DataFrame(rows, columns=["notebook", "profile", "minutes", "legs", "date", "machine", "up to date"])


def machine_label(machine: str) -> str:
    """A machine as the Run times page names it: the recorded summary without trademark marks ("Intel(R) Xeon(R)
    Processor (2 cores)" -> "Intel Xeon Processor (2 cores)")."""
    return re.sub(r"\s*\((?:R|TM)\)", "", str(machine)).strip()


def machines_sentence(rows: pd.DataFrame) -> str:
    """Which machine made a profile's pages, in one sentence (a column of it repeated the same words on every row):
    the most common machine, and the pages made elsewhere."""
    labels = rows["machine"].map(machine_label).replace("", "an unrecorded machine")
    common = labels.value_counts().index[0]
    others = [f"{nb} ({m})" for nb, m in zip(rows["notebook"], labels) if m != common]
    if not others:
        return f"Every page below ran on {common}."
    return f"Every page below ran on {common}, except {', '.join(others)}."


def claims_judged(card: pd.DataFrame | None, notebook: str, profile: str) -> str:
    """What a page's result decides at `profile`, from the scorecard: "3 of 5 judged (2 not testable here)"; "–"
    for a page without claims or without the scorecard."""
    column = f"verdict ({profile})"
    if card is None or column not in card:
        return "–"
    verdicts = card.loc[card["notebook"] == notebook, column]
    if verdicts.empty:
        return "–"
    judged, untestable = _judged(card, notebook, profile), int((verdicts == NOT_TESTABLE).sum())
    return f"{judged} of {len(verdicts)} judged" + (f" ({untestable} {NOT_TESTABLE})" if untestable else "")


def clean_run_sentence(profile: str, run: Mapping[str, Any] | None) -> str:
    """What the Run times page says of the latest run of a whole profile from an empty run cache (`clean_run`)."""
    if run is None:
        return (f"`{profile}`: no run of every notebook from an empty run cache is recorded yet, so the minutes above "
                "are each notebook's own, summed (a notebook that found its models in the run cache counts only its "
                "evaluation).")
    minutes = run["seconds"] / 60
    jobs = "/".join(str(j) for j in run["jobs"])
    legs = f" in {run['legs']} legs (sessions; the run cache resumes)" if run["legs"] > 1 else ""
    head = (f"`{profile}`: `taser reproduce --profile {profile} --jobs {jobs}` from an empty run cache, started "
            f"{str(run['start_time_utc'])[:10]} on {' and '.join(run['machines']) or 'an unrecorded machine'}")
    if run["complete"]:
        return f"{head}: **{minutes:.0f} minutes ({minutes / 60:.1f} h) of wall time**{legs}, every notebook done."
    return (f"{head}: {minutes:.0f} minutes ({minutes / 60:.1f} h) of wall time so far{legs}, {run['done']} of "
            f"{run['notebooks']} notebooks done; it is not finished.")


def clean_run_notebooks(run: Mapping[str, Any] | None) -> list[str]:
    """The Run times page's table of the minutes a clean run (`clean_run`) spent on each notebook, summed over its legs
    and attempts, most first; no lines when it recorded none."""
    seconds = (run or {}).get("notebook_seconds") or {}
    if not seconds:
        return []
    missing, rebuilt = run.get("legs_without_notebook_seconds", 0), run.get("legs_reconstructed", 0)
    notes = []
    if rebuilt:
        notes.append(f"{rebuilt} of its legs ran before the ledger kept each notebook's seconds; theirs were filled in "
                     "afterwards from the pages' `meta.json` and heartbeats, as the ledger says")
    if missing:
        notes.append(f"{missing} leg{'' if missing == 1 else 's'} recorded no per-notebook seconds, not in these "
                     "minutes")
    lines = ["", "The minutes this run spent on each notebook, over every leg and every attempt (a page run again after "
             "its notebook or a library file it loads changed counts each time, which its `meta.json` above, the "
             "time of the result it now holds, does not show)" + ("; " + "; ".join(notes) if notes else "") + ":", "",
             "| notebook | minutes in this run |", "| --- | ---: |"]
    for notebook, value in sorted(seconds.items(), key=lambda item: -item[1]):
        lines.append(f"| [{notebook}](../notebooks/{notebook}.ipynb) | {value / 60:.1f} |")
    return lines


def _judged(card: pd.DataFrame | None, notebook: str, profile: str) -> int | None:
    """How many of a notebook's claims have a verdict (holds, fails, within noise) at `profile`; None without the
    scorecard's column."""
    column = f"verdict ({profile})"
    if card is None or column not in card:
        return None
    return int(card.loc[card["notebook"] == notebook, column].isin(TESTABLE).sum())


def _profile_budgets() -> dict[str, float | None]:
    """Each profile's `budget_hours` (the wall time a whole run of it is sized for); none when profiles.yaml cannot
    be read, so the Run times page still builds."""
    try:
        return {name: body.get("budget_hours") for name, body in load_profiles().items()}
    except TaserError:
        return {}


def clean_run_hours(run: Mapping[str, Any] | None, profile_dir: str | os.PathLike, card: pd.DataFrame | None,
                    profile: str, budget_hours: float | None) -> list[str]:
    """What each hour of a clean run (`clean_run`) buys: the notebooks it has done in the order their results were
    written (the time the run's ledger recorded, else each `meta.json`'s `time_utc`: a page made again after the run
    keeps its place; placed on the run's wall clock by `hours_into_run`), with the claims
    each decides at `profile` and the running count, then how many were done within `budget_hours` and what the
    hours past it bought. No lines without a run or a done notebook."""
    if not run or not run.get("done_notebooks"):
        return []
    rows = []
    for notebook in run["done_notebooks"]:
        try:
            meta = read_meta(Path(profile_dir) / notebook) or {}
        except FormatError:
            meta = {}
        when = (run.get("finished_utc") or {}).get(notebook) or meta.get("time_utc")
        rows.append((hours_into_run(run, when), notebook, _judged(card, notebook, profile)))
    rows.sort(key=lambda row: (row[0] is None, row[0] or 0.0, row[1]))
    lines = ["", "What the hours bought: each notebook the run has done, at the hour of the run's wall time when its "
             "result was written (sessions' gaps left out; a page the run made twice, after its notebook or a library file changed, stands at the second time), with the claims its page decides at this profile (holds, "
             "fails or within noise, in the scorecard now; a claim whose premise another page measures counts on its "
             "own page):", "", "| hours into the run | notebook | claims decided | decided so far |",
             "| ---: | --- | ---: | ---: |"]
    total = 0
    for hours, notebook, judged in rows:
        total += judged or 0
        lines.append(f"| {'–' if hours is None else f'{hours:.1f}'} | [{notebook}](../notebooks/{notebook}.ipynb) | "
                     f"{'–' if judged is None else judged} | {total if judged is not None else '–'} |")
    if budget_hours and card is not None:
        within = [r for r in rows if r[0] is not None and r[0] <= budget_hours]
        after = [r for r in rows if r not in within]
        hours = run["seconds"] / 3600
        lines += ["", f"Within the profile's {budget_hours:g}-hour budget the run did {len(within)} of "
                  f"{run['notebooks']} notebooks, deciding {sum(r[2] or 0 for r in within)} claims; the "
                  f"{hours - budget_hours:.1f} hours past it " + ("so far " if not run["complete"] else "")
                  + f"did {len(after)} more, deciding {sum(r[2] or 0 for r in after)}."
                  if hours > budget_hours else
                  f"The run took {hours:.1f} of the profile's {budget_hours:g}-hour budget."]
    return lines


def write_runs_page(root: str | os.PathLike, results_root: str | os.PathLike, out_md: str | os.PathLike,
                    card: pd.DataFrame | None = None) -> None:
    """The book's page of run times (book/runs.md in the assembled sources); with the scorecard (`card`), what each
    page's minutes decide (`claims_judged`)."""
    table = run_times(root, results_root)
    lines = ["# Run times", "",
             "How long each notebook took at each profile that has published results, when, and on which machine "
             "(the wall time of the whole notebook, from the `meta.json` beside its results). A run that was killed "
             "(a session that ended) and run again resumes its trained runs from the run cache; its minutes are then "
             "those of every leg, and *legs* says how many. A page run when its models were already in the run cache "
             "(trained by another page, or by an earlier run of its own) counts only its evaluation; what the "
             "training cost is on the *Reproducing* page. *Claims* says how many of the page's claims its result decides "
             "(holds, fails or within noise): what those minutes buy. A result that is not up to date was made from "
             "an older version of its notebook or of a library file it uses; its page says so too.", ""]
    if table.empty:
        lines.append("No notebook has published results yet: run `taser reproduce --profile cpu`.")
    else:
        stems = [p.stem for p in find_notebooks(root)]
        budgets = _profile_budgets()
        for profile, rows in table.groupby("profile", sort=False):
            lines += [f"## The `{profile}` profile", "", machines_sentence(rows), "",
                      "| notebook | minutes | legs | claims | date | up to date |",
                      "| --- | ---: | ---: | --- | --- | --- |"]
            for row in rows.to_dict("records"):
                cells = [f"[{row['notebook']}](../notebooks/{row['notebook']}.ipynb)",
                         "–" if pd.isna(row["minutes"]) else f"{row['minutes']:.1f}", row["legs"],
                         claims_judged(card, row["notebook"], profile), row["date"],
                         "yes" if row["up to date"] == "yes" else "no"]
                lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
            lines += ["", f"In all: {rows['minutes'].sum():g} minutes."]
            stale = rows[rows["up to date"] != "yes"]
            if not stale.empty:   # below the table: in a column, the reasons made every row a dozen lines tall
                lines += ["", "Not up to date, and why:", ""]
                lines += [f"- [{row['notebook']}](../notebooks/{row['notebook']}.ipynb): "
                          f"{row['up to date'].removeprefix('no: ')}" for row in stale.to_dict("records")]
            if profile != "smoke":
                run = clean_run(read_legs(Path(results_root) / profile), stems)
                lines += ["", f"### One run of the whole `{profile}` profile", "", clean_run_sentence(profile, run),
                          *clean_run_notebooks(run),
                          *clean_run_hours(run, Path(results_root) / profile, card, profile, budgets.get(profile))]
            lines.append("")
    atomic_write_text(Path(out_md), "\n".join(lines) + "\n")


def _write_root_favicon(png: Path, ico: Path) -> None:
    """The book's icon also as /favicon.ico at the site's root: the root index.html is a bare redirect without an icon
    link, and a browser then asks for /favicon.ico (a 404 in its console otherwise)."""
    if not png.is_file():
        return
    from PIL import Image

    ico.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(png) as image:
        image.save(ico, format="ICO")


MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output", "ui", "a11y", "adaptors")  # what the CHTML component loads


def _copy_mathjax(dest: Path) -> None:
    """MathJax 3 (es5 build) from the `mathjax` package of django-static-mathjax into the book's extra files (copied
    to the site as they are, not linked into every page), so that math renders offline. Without the package the book still builds, and its math stays as raw TeX."""
    try:
        import mathjax
    except ImportError:
        logging.getLogger(__name__).warning("django-static-mathjax is not installed: math will not render offline "
                                            "(pip install django-static-mathjax)")
        return
    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    dest.mkdir(parents=True, exist_ok=True)
    for part in MATHJAX_PARTS:
        source = es5 / part
        if source.is_dir():
            shutil.copytree(source, dest / part, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, dest / part)


# ------------------------------------------------------------------------------------------------ the book's ways in
# Both papers' tables and figures listed on the front page, and each chapter's notebooks with their claims' verdicts,
# every claim linked to its row in its page's verdict box. The list of tables and figures is data: book/papers.yaml.

PAPERS_FILE = "book/papers.yaml"


@dataclass(frozen=True)
class PaperItem:
    """One table or figure of a paper and the notebook page that reproduces it."""

    paper: str
    ref: str
    what: str
    notebook: str


@dataclass(frozen=True)
class PageVerdicts:
    """A notebook page's claims judged at the profile the book shows it at (`scorecard.card_claims`)."""

    profile: str
    claims: pd.DataFrame
    preconditions: pd.DataFrame | None = None  # a page without claims: the preconditions it measures


def load_paper_items(root: str | os.PathLike) -> tuple[dict[str, str], list[PaperItem]]:
    """The papers' titles (key -> title) and their tables and figures, in the file's order, from book/papers.yaml.
    A missing file gives nothing; a malformed one is a ConfigError naming the file and the entry."""
    path = Path(root) / PAPERS_FILE
    if not path.is_file():
        return {}, []
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of paper keys to {{title, items}}")
    titles, items = {}, []
    for key, paper in data.items():
        if not isinstance(paper, dict) or not isinstance(paper.get("items"), list):
            raise ConfigError(f"{path}: paper '{key}' needs a title and a list of items")
        titles[str(key)] = str(paper.get("title", key))
        for i, item in enumerate(paper["items"], 1):
            missing = [f for f in ("ref", "what", "notebook") if not isinstance(item, dict) or not item.get(f)]
            if missing:
                raise ConfigError(f"{path}: paper '{key}', item {i}: field '{missing[0]}' is missing")
            items.append(PaperItem(str(key), str(item["ref"]), str(item["what"]), str(item["notebook"])))
    return titles, items


_REFS = re.compile(r"\b(Table|Figure)s?\s+([A-Z]?\d+(?:\s*(?:,|and|-)\s*[A-Z]?\d+)*)")


def paper_refs(text: str) -> set[tuple[str, str]]:
    """The tables and figures `text` names: 'Tables 4 and 5, Figure 2' -> {(Table, 4), (Table, 5), (Figure, 2)}."""
    found = set()
    for kind, numbers in _REFS.findall(text):
        found |= {(kind, n) for n in re.findall(r"[A-Z]?\d+", numbers)}
    return found


def _claim_links(page: PageVerdicts | None, notebook: str, ref: str | None = None) -> str:
    """'ID verdict; ...' with each ID linked to its row in the page's verdict box, for a Markdown table cell. With
    `ref` (a paper's table or figure), only the claims whose `where` names it, when any does."""
    if page is None:
        return "not run yet"
    if page.claims.empty:
        if page.preconditions is None or page.preconditions.empty or "status" not in page.preconditions.columns:
            return "no claims to judge"
        return f"`{page.profile}`, preconditions: " + "; ".join(
            f"{claim_link(str(row.precondition), notebook)} {escape_markdown(str(row.status))}"
            for row in page.preconditions.itertuples(index=False))
    rows = page.claims
    if ref is not None and (wanted := paper_refs(ref)):
        mine = rows[[bool(paper_refs(str(w)) & wanted) for w in rows["where"]]]
        rows = mine if not mine.empty else rows
    parts = []
    for row in rows.itertuples(index=False):
        word = str(row.verdict).split(":")[0].replace(" · stale", " (stale)")
        parts.append(f"{claim_link(str(row.id), notebook)} {escape_markdown(word)}")
    return f"`{page.profile}`: " + "; ".join(parts)


HEADLINE_FILE = "book/headline.yaml"
_HEADLINE_FIELDS = {"claim": str, "says": str, "paper": str, "metric": str, "show": dict, "lead": int, "group": str,
                    "digits": int}
_HEADLINE_REQUIRED = ("claim", "says", "paper", "metric", "show")


@dataclass(frozen=True)
class HeadlineRow:
    """One key claim on the front page: its id, a few words, the paper's number, our metric and what to show."""

    paper: str
    claim: str
    says: str
    paper_number: str
    metric: str
    show: Mapping[str, str]
    lead: int = 1                # how many of `show` come before "vs"
    group: str | None = None
    digits: int = 1


def load_headline(root: str | os.PathLike) -> list[HeadlineRow]:
    """The front page's key claims from book/headline.yaml ({paper key: [row, ...]}); no file gives none. A malformed
    row is a FormatError naming the file, its line and the field."""
    import yaml

    path = Path(root) / HEADLINE_FILE
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    data, document = _read_yaml(path) or {}, yaml.compose(text)
    if not isinstance(data, dict):
        raise FormatError(path, 1, None, "expected a mapping of paper keys to lists of claims")
    rows = []
    for (key, entries), (_, node) in zip(data.items(), document.value if document else []):
        if not isinstance(entries, list):
            raise FormatError(path, node.start_mark.line + 1, str(key), "expected a list of claims")
        for entry, item in zip(entries, node.value):
            line = item.start_mark.line + 1
            if not isinstance(entry, dict):
                raise FormatError(path, line, None, f"{key}: expected a mapping with {', '.join(_HEADLINE_REQUIRED)}")
            for name in _HEADLINE_REQUIRED:
                if not entry.get(name):
                    raise FormatError(path, line, name, "missing")
            for name, value in entry.items():
                kind = _HEADLINE_FIELDS.get(name)
                if kind is None:
                    raise FormatError(path, line, name, f"unknown (expected {', '.join(_HEADLINE_FIELDS)})")
                if not isinstance(value, kind) or isinstance(value, bool):
                    raise FormatError(path, line, name, f"expected {kind.__name__}, got {value!r}")
            rows.append(HeadlineRow(str(key), entry["claim"], entry["says"], entry["paper"], entry["metric"],
                                    {str(k): str(v) for k, v in entry["show"].items()}, entry.get("lead", 1),
                                    entry.get("group"), entry.get("digits", 1)))
    return rows


_OURS_GROUP = re.compile(r"(?:^|;\s*)(?:(?P<group>[\w.+-]+):\s*)?(?P<pairs>[\w.+-]+=[^;(]*)")
_OURS_PAIR = re.compile(r"([\w.+-]+)=(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)([kMG]?)")


def ours_numbers(ours: str, group: str | None = None) -> dict[str, tuple[float, str]] | None:
    """{quantity: (value, unit suffix)} of one group of a verdict's `ours` text ("squad-open: taser=63.82, dpr=63.76
    (unit)"): the group named, else the first; None when there is no such group."""
    for match in _OURS_GROUP.finditer(ours.split(" (")[0] if "=" in ours.split(" (")[0] else ours):
        if group is None or match.group("group") == group:
            return {k: (float(v), suffix) for k, v, suffix in _OURS_PAIR.findall(match.group("pairs"))}
    return None


def headline_ours(row: HeadlineRow, ours: str) -> str:
    """Our numbers for a headline row, 'TASER 63.8 vs DPR 63.8', at the row's decimals (the first `lead` before
    "vs"); "not run" without every one of them."""
    numbers = ours_numbers(ours, row.group) if ours else None
    if not numbers:
        return "not run"
    shown = [f"{label} {numbers[q][0]:.{row.digits}f}{numbers[q][1]}" for q, label in row.show.items() if q in numbers]
    if len(shown) != len(row.show):
        return "not run"
    lead, rest = shown[:row.lead], shown[row.lead:]
    return ", ".join(lead) + (" vs " + ", ".join(rest) if rest else "")


def headline_section(card: pd.DataFrame, rows: Sequence[HeadlineRow], titles: Mapping[str, str],
                     profile: str) -> str:
    """Markdown for the front page's first screen: each key claim, the paper's number, ours (each with its metric),
    the verdict linked to the claim on its page, the page, and the command that reruns a page."""
    by_id = card.set_index("id") if not card.empty else pd.DataFrame()
    lines = ["## The key claims", "", ":::{container} headline", "",
             "| claim | paper | ours | verdict |", "| --- | --- | --- | --- |"]
    for row in rows:
        if row.claim not in by_id.index:
            raise ConfigError(f"{HEADLINE_FILE}: claim {row.claim!r} is in no claims file (notebooks/claims/)")
        claim = by_id.loc[row.claim]
        notebook = str(claim["notebook"])
        ours = headline_ours(row, str(claim.get(f"ours ({profile})", "")))
        word = str(claim.get(f"verdict ({profile})", "not run")).split(":")[0]
        link = claim_link(row.claim, notebook).replace(f">{escape(row.claim)}<", f">{escape(word)}<")
        title = titles.get(row.paper, row.paper)  # "TASER (Cheng et al., 2023)": the claim's paper as "Cheng et al."
        paper = title.rsplit("(", 1)[-1].split(",")[0] if "(" in title else title
        lines.append(f"| {escape_markdown(paper)}: {escape_markdown(row.says)} | {escape_markdown(row.paper_number)} | "
                     f"{escape_markdown(ours)} ({escape_markdown(row.metric)}) | {link} |")
    lines += ["", ":::", "", "Each verdict links to its claim on its page; rerun a page with "
              f"`taser reproduce --profile {profile} --only PAGE`. Every claim is on the [scorecard](scorecard.md).",
              ""]
    return "\n".join(lines)


def _shown_profile(profiles: Sequence[str]) -> str:
    """The profile the front page shows: the largest that has results (full, gpu, cpu, then smoke)."""
    for name in ("full", "gpu", "cpu"):
        if name in profiles:
            return name
    return profiles[0] if profiles else "cpu"


def verdicts_section(card: pd.DataFrame, profiles: Sequence[str]) -> str:
    """Markdown for the front page: the verdict counts per profile."""
    lines = ["## The verdicts at a glance", "",
             "Every headline claim of both papers, judged from the saved results (the [scorecard](scorecard.md) "
             "has each claim, its test and its numbers; {ref}`both papers, table by table <both-papers>` links "
             "each claim to its page):", ""]
    lines += verdict_counts_table(card, profiles) if not card.empty else ["No claims files were found.", ""]
    return "\n".join(lines)


def papers_section(titles: Mapping[str, str], items: Sequence[PaperItem],
                   pages: Mapping[str, PageVerdicts | None]) -> str:
    """Markdown for the front page: every table and figure of both papers, each linked to the page that reproduces
    it, with the verdicts of that page's claims about it. A notebook not in `pages` is not written yet."""
    lines = ["(both-papers)=", "## Both papers, table by table", "",
             "Each table and figure of the two papers, the page that reproduces it, and the verdicts of that "
             "page's claims about it (each links to the claim on its page).", ""]
    for key, title in titles.items():
        lines += [f"### {escape_markdown(title)}", "", "| paper | what it shows | page | claims and verdicts |",
                  "| --- | --- | --- | --- |"]
        for item in (i for i in items if i.paper == key):
            page = f"[{item.notebook}](../notebooks/{item.notebook}.ipynb)" if item.notebook in pages \
                else f"{escape_markdown(item.notebook)} (not written yet)"
            lines.append(f"| {escape_markdown(item.ref)} | {escape_markdown(item.what)} | {page} | "
                         f"{_claim_links(pages.get(item.notebook), item.notebook, item.ref)} |")
        lines.append("")
    return "\n".join(lines)


_CHAPTER_ROW = re.compile(  # | [title](../notebooks/<nb>.ipynb) | what it reproduces | in this book |
    r"^(\|\s*\[[^\]]+\]\(\.\./notebooks/(?P<nb>[\w-]+)\.ipynb\)\s*\|.*\|)\s*in this book\s*\|\s*$")


def chapter_verdicts(text: str, pages: Mapping[str, PageVerdicts | None]) -> str:
    """A chapter page's notebook table with its last column ('status', each row 'in this book') replaced by the
    page's claims and verdicts, each linked to its row on the page."""
    out = []
    for line in text.split("\n"):
        if line.strip() == "| notebook | reproduces | status |":
            line = "| notebook | reproduces | claims and verdicts |"
        elif (m := _CHAPTER_ROW.match(line)):
            line = f"{m.group(1)} {_claim_links(pages.get(m.group('nb')), m.group('nb'))} |"
        out.append(line)
    return "\n".join(out)


def insert_before_heading(text: str, section: str, heading: str = "## Citing") -> str:
    """`section` placed before the line `heading` of a Markdown page (at its end when there is none)."""
    lines = text.split("\n")
    if heading in lines:
        i = lines.index(heading)
        return "\n".join(lines[:i] + [section, ""] + lines[i:])
    return text.rstrip("\n") + "\n\n" + section + "\n"


def _write_ways_in(root: Path, src: Path, card: pd.DataFrame, profiles: list[str],
                   pages: dict[str, PageVerdicts | None]) -> None:
    """The front page gets the verdict counts and both papers' tables and figures, each linked; the chapter pages'
    notebook tables get each page's claims and verdicts (in the copied sources, not the repository's)."""
    titles, items = load_paper_items(root)
    intro = src / "book" / "intro.md"
    if intro.is_file():
        text = insert_before_heading(intro.read_text(encoding="utf-8"), verdicts_section(card, profiles),
                                     "## The two papers")
        headline = load_headline(root)
        if headline and not card.empty:  # the first screen: the key claims, then the counts
            text = insert_before_heading(text, headline_section(card, headline, titles, _shown_profile(profiles)),
                                         "## The verdicts at a glance")
        if items:
            text = insert_before_heading(text, papers_section(titles, items, pages), "## Citing")
        atomic_write_text(intro, text)
    for chapter in sorted((src / "book").glob("*.md")):
        text = chapter.read_text(encoding="utf-8")
        if "](../notebooks/" in text:
            new = chapter_verdicts(text, pages)
            if new != text:
                atomic_write_text(chapter, new)


def build_book(root: str | os.PathLike = ".", results_root: str | os.PathLike | None = None, *,
               out_dir: str | os.PathLike | None = None, prefer: str | None = None) -> Path:
    """Assemble the book's sources with the executed notebooks and the scorecard, and build it with Jupyter Book
    (notebooks are not re-executed) into `<out_dir>/_build/html`. Returns the path of index.html."""
    from .scorecard import card_claims, notebook_preconditions, profiles_with_results, write_scorecard_page

    root = Path(root).resolve()
    results_root = Path(results_root) if results_root is not None else root / "results"
    out_dir = Path(out_dir).resolve() if out_dir is not None else root
    for needed in ("_config.yml", "_toc.yml", "book"):
        if not (root / needed).exists():
            raise ConfigError(f"{root / needed} is missing: build the book from the repository root")

    src = out_dir / "_build" / "book-src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    shutil.copy2(root / "_config.yml", src / "_config.yml")
    shutil.copy2(root / "_toc.yml", src / "_toc.yml")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(root / "book", src / "book", ignore=ignore)
    for folder in ("_static", "_ext"):
        if (root / folder).is_dir():
            shutil.copytree(root / folder, src / folder, ignore=ignore)
    for shown in BOOK_INCLUDES:  # files a page shows as they are (literalinclude), from the repository
        if (root / shown).is_file():
            (src / shown).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / shown, src / shown)
    _copy_mathjax(src / "_extra" / "mathjax")
    _write_root_favicon(src / "_static" / "favicon.png", src / "_extra" / "favicon.ico")
    card = write_scorecard_page(results_root, src / "book" / "scorecard.md", root=root)  # every verdict, judged once
    pages: dict[str, PageVerdicts | None] = {}
    missing_notes = load_missing_value_notes(root)
    if (root / "notebooks").is_dir():
        shutil.copytree(root / "notebooks", src / "notebooks", ignore=ignore)
        for source in find_notebooks(root):
            executed = executed_notebook(results_root, source.stem, prefer)
            stale = meta = claims = preconditions = None
            if executed is not None:
                meta = read_meta(executed.parent)
                stale = page_stale_reason(executed.parent, root)
                claims = card_claims(card, source.stem, executed.parent.parent.name)
                if claims.empty:
                    preconditions = notebook_preconditions(source.stem, executed.parent, root=root)
                pages[source.stem] = PageVerdicts(executed.parent.parent.name, claims, preconditions)
            else:
                pages[source.stem] = None
            book_notebook(source, executed, src / "notebooks" / source.name, stale=stale, meta=meta, claims=claims,
                          preconditions=preconditions, missing_note=missing_notes.get(source.stem))
    _write_ways_in(root, src, card, profiles_with_results(results_root), pages)
    write_runs_page(root, results_root, src / "book" / "runs.md", card)

    log = out_dir / "_build" / "book.log"
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           "build", str(src), "--path-output", str(out_dir), "--builder", "html", "--warningiserror",
           "--keep-going"]
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=src)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise TaserError(f"jupyter-book build failed (exit {proc.returncode}); full log: {log}\n{tail}")
    return out_dir / "_build" / "html" / "index.html"
