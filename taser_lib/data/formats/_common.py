"""What every format reader shares: opening (plain, gzip, or a member of a zip), and the bad-record policy.

The policy: a malformed record raises `FormatError` naming file, line and field. A caller who passes
`skip_bad=True` gets the record skipped instead, and every skipped record is counted in a `SkipReport` (pass your
own to read it afterwards) and logged as a warning. Nothing is dropped silently.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ...errors import FormatError

logger = logging.getLogger("taser_lib.data")

PathLike = str | os.PathLike


@dataclass
class SkipReport:
    """Every record a loader skipped (with `skip_bad=True`), as the FormatError it would have raised."""

    skipped: list[FormatError] = field(default_factory=list)

    def add(self, err: FormatError) -> None:
        self.skipped.append(err)

    def __len__(self) -> int:
        return len(self.skipped)

    def by_file(self) -> dict[str, int]:
        return dict(Counter(err.path for err in self.skipped))

    def __str__(self) -> str:
        if not self.skipped:
            return "no records skipped"
        lines = [f"{len(self.skipped)} bad record(s) skipped:"] + [f"  {err}" for err in self.skipped]
        return "\n".join(lines)


class OnBad:
    """A loader's handler for one malformed record: raise it, or (skip_bad) record it and carry on."""

    def __init__(self, skip_bad: bool = False, report: SkipReport | None = None):
        self.skip_bad = skip_bad
        self.report = report if report is not None else SkipReport()

    def __call__(self, err: FormatError) -> None:
        if not self.skip_bad:
            raise err
        self.report.add(err)
        logger.warning("skipped bad record: %s", err)


@contextmanager
def open_text(path: PathLike, member: str | None = None) -> Iterator[IO[str]]:
    """Open a text file for reading as UTF-8 with universal newlines (CRLF files read as LF).

    `.gz` files are decompressed; with `member`, `path` is a zip archive and the member is read from it.
    """
    path = Path(path)
    if member is not None:
        with zipfile.ZipFile(path) as archive:
            try:
                raw = archive.open(member)
            except KeyError:
                raise FormatError(path, None, None, f"zip archive has no member {member!r}") from None
            with raw, io.TextIOWrapper(raw, encoding="utf-8", newline=None) as handle:
                yield handle
        return
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", newline=None) as handle:
            yield handle
        return
    with open(path, encoding="utf-8", newline=None) as handle:
        yield handle


def display_name(path: PathLike, member: str | None = None) -> str:
    """How errors name a file, including the zip member when there is one."""
    return f"{path}!{member}" if member else str(path)


def split_columns(line: str, sep: str | None, names: tuple[str, ...], where: str, lineno: int) -> list[str]:
    """Split one line into the named columns, or raise FormatError naming the first missing/extra column."""
    parts = line.split(sep) if sep is not None else line.split()
    if len(parts) < len(names):
        raise FormatError(where, lineno, names[len(parts)] if parts else names[0],
                          f"expected {len(names)} columns ({', '.join(names)}), got {len(parts)}")
    if len(parts) > len(names):
        raise FormatError(where, lineno, None, f"expected {len(names)} columns ({', '.join(names)}), got {len(parts)}")
    return parts


def parse_int(value: str, where: str, lineno: int, field_name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FormatError(where, lineno, field_name, f"not an integer: {value!r}") from None


def iter_json_array(path: PathLike, member: str | None = None,
                    chunk_chars: int = 1 << 20) -> Iterator[tuple[int, object]]:
    """Stream the elements of a top-level JSON array as (line where the element starts, element).

    Memory holds one element at a time (plus a read buffer), so multi-gigabyte files such as DPR's retriever json
    stream. Malformed JSON raises FormatError with the line; the array itself being broken is never skippable.
    """
    where = display_name(path, member)
    decoder = json.JSONDecoder()
    with open_text(path, member) as handle:
        buf, pos, line, eof = "", 0, 1, False

        def more(size: int) -> bool:
            nonlocal buf, pos
            chunk = handle.read(size)
            buf, pos = buf[pos:] + chunk, 0
            return bool(chunk)

        def skip_ws() -> str:
            nonlocal pos, line, eof
            while True:
                while pos < len(buf) and buf[pos] in " \t\r\n":
                    line += buf[pos] == "\n"
                    pos += 1
                if pos < len(buf):
                    return buf[pos]
                if eof or not more(chunk_chars):
                    eof = True
                    return ""

        if skip_ws() != "[":
            raise FormatError(where, line, None, "expected a JSON array ('[')")
        pos += 1
        if skip_ws() == "]":
            return
        size = chunk_chars
        while True:
            try:
                element, end = decoder.raw_decode(buf, pos)
                if end == len(buf) and not eof:  # a number or literal may continue in the next chunk
                    raise json.JSONDecodeError("truncated", buf, end)
            except json.JSONDecodeError as err:
                if not eof and more(size):
                    size *= 2  # an element larger than the buffer: read in growing chunks
                    continue
                eof = True
                raise FormatError(where, line + buf.count("\n", pos, err.pos), None,
                                  f"invalid JSON: {err.msg}") from None
            size = chunk_chars
            yield line, element
            line += buf.count("\n", pos, end)
            pos = end
            after = skip_ws()
            if after == ",":
                pos += 1
                skip_ws()
                continue
            if after == "]":
                pos += 1
                if skip_ws():
                    raise FormatError(where, line, None, "text after the end of the JSON array")
                return
            raise FormatError(where, line, None, "expected ',' or ']' between array elements"
                              if after else "the JSON array is not closed (file truncated?)")


def read_id_text_lines(path: PathLike, id_field: str, what: str, *, require_text: bool, skip_bad: bool = False,
                       report: SkipReport | None = None) -> dict[str, str]:
    """"<id><TAB><text>" lines as {id: text} (TREC topics, NFCorpus docs). Blank lines are ignored; an empty or
    repeated id, a line without a tab, or (with `require_text`) an empty text is a FormatError naming the field."""
    on_bad, out = OnBad(skip_bad, report), {}
    with open_text(path) as lines:
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                if "\t" not in line:
                    raise FormatError(path, lineno, "text", f"expected '{id_field}<TAB>text'")
                key, text = (part.strip() for part in line.split("\t", 1))
                if not key:
                    raise FormatError(path, lineno, id_field, f"empty {what} id")
                if require_text and not text:
                    raise FormatError(path, lineno, "text", f"{what} {key!r} has no text")
                if key in out:
                    raise FormatError(path, lineno, id_field, f"duplicate {what} id {key!r}")
            except FormatError as err:
                on_bad(err)
                continue
            out[key] = text
    return out
