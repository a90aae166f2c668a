"""An executed notebook as the book shows it: its injected parameters collapsed and its outputs cleaned (no stderr,
timers, machine paths or missing-value marks; `book/missing_values.yaml` says why a value is missing)."""

from __future__ import annotations

import os
import re
from html import escape
from pathlib import Path
from typing import Any

import yaml

from taser_lib.errors import ConfigError


def tidy_executed(nb, missing_note: str | None = None) -> None:
    """The committed executed notebook as the book shows it (`book_notebook`): its injected parameters cell collapsed
    (`hide-input`) and its outputs cleaned (`_clean_outputs`: no stderr, timers, machine paths or NaN), so a reader
    who opens `results/<profile>/<page>/notebook.ipynb` sees what the page shows."""
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]
        if cell.get("cell_type") == "code":
            cell.outputs = _clean_outputs(cell.get("outputs", []), missing_note)


_PROGRESS_LINE = re.compile(r"\d+%\|.*\||\[\d+:\d+(:\d+)?<|\d+(\.\d+)?(it|s)/(s|it)\]")


def _clean_text(text: str) -> str:
    """What a terminal would show of `text` (each line's last carriage-return segment), without progress bars."""
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(line for line in lines if not _PROGRESS_LINE.search(line))


# What a reader has no use for: timers, the machine's paths, a path object echoed by the last line of a cell, and
# pandas' marks for a missing value (shown as "–").
_TIMER_LINE = re.compile(r"\b\d+(\.\d+)? s so far\b|^\s*wall time \d+(\.\d+)? s\s*$")
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|root|home|Users|scratch|private)(?:/[\w.+-]+)*/([\w.+-]+)")
_MISSING_HTML = re.compile(r"<td>(?:NaN|&lt;NA&gt;|None)</td>")
_MISSING_TEXT = re.compile(r"(?<![\w.])(?:NaN|<NA>)(?![\w.])")


# A printed data frame's default index: a first column of row numbers 0, 1, 2, ... under an empty header cell. It
# carries nothing (pandas numbers the rows it was given) and took a column of the text column's width on 64 of the
# committed pages' 109 tables; a named or non-consecutive index is kept.
_FRAME = re.compile(r'(<table\b[^>]*class="dataframe"[^>]*>)(.*?)(</table>)', re.S)
_FRAME_ROW = re.compile(r"(<tr\b[^>]*>)(.*?)(</tr>)", re.S)
_FIRST_HEADER = re.compile(r"^(\s*)<th\b[^>]*>(.*?)</th>", re.S)


def _without_row_numbers(html: str) -> str:
    """`html` with each data frame's row-number column removed (the index pandas prints for a frame without one)."""

    def frame(match: re.Match) -> str:
        opening, body, closing = match.groups()
        head, rows = re.search(r"<thead>(.*?)</thead>", body, re.S), re.search(r"<tbody>(.*?)</tbody>", body, re.S)
        if not head or not rows:
            return match.group(0)
        head_rows, body_rows = _FRAME_ROW.findall(head.group(1)), _FRAME_ROW.findall(rows.group(1))
        if not head_rows or not body_rows:
            return match.group(0)
        for _, cells, _ in head_rows:  # an index name or a column level's name: not the bare row numbers
            first = _FIRST_HEADER.match(cells)
            if not first or first.group(2).strip():
                return match.group(0)
        for number, (_, cells, _) in enumerate(body_rows):
            first = _FIRST_HEADER.match(cells)
            if not first or first.group(2).strip() != str(number) or "<th" in cells[first.end():] \
                    or "span=" in first.group(0):
                return match.group(0)

        def drop_first(section: str) -> str:
            return _FRAME_ROW.sub(lambda r: r.group(1) + _FIRST_HEADER.sub(r"\1", r.group(2), count=1) + r.group(3),
                                  section)

        body = body.replace(head.group(0), f"<thead>{drop_first(head.group(1))}</thead>", 1)
        body = body.replace(rows.group(0), f"<tbody>{drop_first(rows.group(1))}</tbody>", 1)
        return opening + body + closing

    return _FRAME.sub(frame, html)


def _scrub(text: str, html: bool = False) -> tuple[str, int]:
    """`text` without machine paths, and with "–" for each missing value; and how many values were missing."""
    text = _MACHINE_PATH.sub(r"\1", text)
    return _MISSING_HTML.subn("<td>–</td>", text) if html else _MISSING_TEXT.subn("–", text)


# Why a page's tables have cells without a value (page -> one sentence): data, in book/missing_values.yaml. The book
# shows the sentence under each table in which it put a "–".
MISSING_VALUES_FILE = "book/missing_values.yaml"
UNEXPLAINED_MISSING = "no value (the page does not say why)"


def _read_yaml(path: Path) -> Any:
    """The YAML data file `path` (None when empty); invalid YAML is a ConfigError naming the file and line."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None


def load_missing_value_notes(root: str | os.PathLike) -> dict[str, str]:
    """{page: why its tables have "–" cells} from book/missing_values.yaml (nothing when the file is absent). A
    malformed file is a ConfigError naming the file, and the line or the page."""
    path = Path(root) / MISSING_VALUES_FILE
    if not path.is_file():
        return {}
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of page names to one sentence each")
    for page, note in data.items():
        if not isinstance(note, str) or not note.strip():
            raise ConfigError(f"{path}: page '{page}': the note must be a non-empty sentence")
    return {str(page): note.strip() for page, note in data.items()}


def _missing_footnote(note: str | None, html: bool) -> str:
    note = note or UNEXPLAINED_MISSING
    if not html:
        return f"\n– {note}"
    return '\n<p class="missing-note">– ' + re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(note)) + "</p>\n"


def _clean_outputs(outputs: list, missing_note: str | None = None) -> list:
    """A cell's outputs as the book shows them: no stderr (warnings, progress bars, logging), no widgets, no
    progress-bar debris or timers in stdout, no echoed path objects, no machine paths (a run folder shows as its
    name), no data frame's bare row numbers (`_without_row_numbers`), and "–" for a missing value, with
    `missing_note` (why the page's tables have cells without a value) under a table that has one."""
    kept = []
    for out in outputs:
        if out.get("output_type") == "stream":
            if out.get("name") != "stdout":
                continue
            text = _clean_text("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
            text = "\n".join(line for line in text.split("\n") if not _TIMER_LINE.search(line))
            if not text.strip():
                continue
            out["text"] = _scrub(text)[0]
        elif out.get("output_type") in ("display_data", "execute_result"):
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data and len(data) <= 2:  # a widget, or it and its text
                continue
            plain = data.get("text/plain", "")
            plain = "".join(plain) if isinstance(plain, list) else plain
            if set(data) <= {"text/plain"} and plain.lstrip("[(").startswith("PosixPath("):
                continue
            for kind in ("text/plain", "text/html"):
                if kind in data:
                    value = "".join(data[kind]) if isinstance(data[kind], list) else data[kind]
                    value, n_missing = _scrub(value, html=kind == "text/html")
                    if kind == "text/html":
                        value = _without_row_numbers(value)
                    data[kind] = value + (_missing_footnote(missing_note, kind == "text/html") if n_missing else "")
        kept.append(out)
    return kept
