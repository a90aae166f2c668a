"""What every format reader shares: reading text (through `taser_lib.data.text`: strict UTF-8, one BOM stripped,
CRLF, plain / gzip / zip member, damage as FormatError), and the bad-record policy.

The policy: a malformed record raises `FormatError` naming file, line and field. A caller who passes
`skip_bad=True` gets the record skipped instead, and every skipped record is counted in a `SkipReport` (pass your
own to read it afterwards) and logged as a warning. Nothing is dropped silently.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from ...errors import FormatError
from ..text import CsvLines, Line, PathLike, display_name, iter_lines, read_lines, read_text  # noqa: F401

logger = logging.getLogger("taser_lib.data")


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


class StrictJson:
    """JSON decoding that notices a key repeated within one object (json.loads keeps the last value silently, so a
    duplicated line inside an object would lose the first). After each decode, `repeated()` names such a key."""

    def __init__(self):
        self._repeated: list[str] = []
        self.decoder = json.JSONDecoder(object_pairs_hook=self._object)

    def _object(self, pairs: list[tuple[str, object]]) -> dict:
        obj = dict(pairs)
        if len(obj) != len(pairs) and not self._repeated:
            seen: set[str] = set()
            self._repeated.append(next(k for k, _ in pairs if k in seen or seen.add(k)))
        return obj

    def repeated(self) -> str | None:
        key = self._repeated[0] if self._repeated else None
        self._repeated.clear()
        return key

    def loads(self, text: str, where: str, lineno: int | None) -> object:
        """One JSON document, or FormatError (invalid JSON, or a key repeated in one object)."""
        try:
            value = self.decoder.decode(text)
        except json.JSONDecodeError as err:
            self._repeated.clear()
            raise FormatError(where, lineno if lineno is not None else err.lineno, None,
                              f"invalid JSON: {err.msg}") from None
        except RecursionError:
            self._repeated.clear()
            raise FormatError(where, lineno, None, "invalid JSON: nested too deeply") from None
        key = self.repeated()
        if key is not None:
            raise FormatError(where, lineno, key, "key repeated within one JSON object")
        return value


def split_columns(line: str, sep: str | None, names: tuple[str, ...], where: str, lineno: int) -> list[str]:
    """Split one line into the named columns, or raise FormatError naming the first missing/extra column."""
    parts = line.split(sep) if sep is not None else line.split()
    if len(parts) < len(names):
        raise FormatError(where, lineno, names[len(parts)] if parts else names[0],
                          f"expected {len(names)} columns ({', '.join(names)}), got {len(parts)}")
    if len(parts) > len(names):
        raise FormatError(where, lineno, None, f"expected {len(names)} columns ({', '.join(names)}), got {len(parts)}")
    return parts


def require_id(value: str, where: str, lineno: int | None, field_name: str, what: str) -> str:
    """`value` if it is a usable id; an empty or whitespace-only id is a FormatError in every reader."""
    if not value.strip():
        raise FormatError(where, lineno, field_name, f"empty {what} id")
    return value


_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f",
            "v": "\v", "0": "\0"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def parse_string_list(value: str, where: str, lineno: int | None, field_name: str, *, commas: bool) -> list[str]:
    r"""A printed list of Python string literals, parsed strictly (never evaluated): Python's repr of a list
    (`['a', "b's"]`, `commas=True`: DPR's qas files) or numpy's repr of a string array (`['a' "b's"\n 'c']`,
    items separated by whitespace: SciFact's abstracts). Literals are quoted with ' or " and may hold the escapes
    repr writes (\\ \' \" \n \t \r \a \b \f \v \0 \xHH \uHHHH \UHHHHHHHH); anything else is a FormatError."""
    def fail(message: str) -> FormatError:
        return FormatError(where, lineno, field_name, message)

    text, items = value.strip(), []
    if not (text.startswith("[") and text.endswith("]")):
        raise fail("expected a bracketed list of string literals")
    pos, end = 1, len(text) - 1

    def skip_ws(at: int) -> int:
        while at < end and text[at] in " \t\r\n":
            at += 1
        return at

    pos = skip_ws(pos)
    while pos < end:
        quote = text[pos]
        if quote not in "'\"":
            raise fail(f"unexpected text {text[pos:pos + 40]!r}")
        pos, chars = pos + 1, []
        while True:
            if pos >= end:
                raise fail("a string literal is not closed")
            char = text[pos]
            if char == quote:
                pos += 1
                break
            if char in "\r\n":
                raise fail("a line break inside a string literal")
            if char != "\\":
                chars.append(char)
                pos += 1
                continue
            code = text[pos + 1: pos + 2]
            if code in _ESCAPES:
                chars.append(_ESCAPES[code])
                pos += 2
            elif code in _HEX_ESCAPES:
                digits = text[pos + 2: pos + 2 + _HEX_ESCAPES[code]]
                if len(digits) != _HEX_ESCAPES[code] or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise fail(f"bad escape {text[pos:pos + 2 + len(digits)]!r}")
                if int(digits, 16) > 0x10FFFF:
                    raise fail(f"escape {text[pos:pos + 10]!r} is beyond Unicode")
                chars.append(chr(int(digits, 16)))
                pos += 2 + len(digits)
            else:
                raise fail(f"unknown escape {text[pos:pos + 2]!r}")
        items.append("".join(chars))
        pos = skip_ws(pos)
        if commas and pos < end:
            if text[pos] != ",":
                raise fail(f"expected ',' between list items, got {text[pos:pos + 40]!r}")
            pos = skip_ws(pos + 1)
            if pos >= end:
                raise fail("a trailing ',' before ']'")
        elif not commas and pos < end and text[pos] == ",":
            raise fail("unexpected ',' (items are separated by whitespace)")
    return items


def parse_int(value: str, where: str, lineno: int, field_name: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise FormatError(where, lineno, field_name, f"not an integer: {value!r}") from None


def iter_json_array(path: PathLike, member: str | None = None, chunk_chars: int = 1 << 20,
                    on_bad: OnBad | None = None) -> Iterator[tuple[int, object]]:
    """Stream the elements of a top-level JSON array as (line where the element starts, element).

    Memory holds one element at a time (plus a read buffer), so multi-gigabyte files such as DPR's retriever json
    stream. Malformed JSON raises FormatError with the line; the array itself being broken is never skippable. An
    element holding an undecodable line raises that line's error, or with `on_bad` is skipped and reported.
    """
    for _, line, element in iter_json_array_positions(path, member, chunk_chars, on_bad):
        yield line, element


def iter_json_array_positions(path: PathLike, member: str | None = None, chunk_chars: int = 1 << 20,
                              on_bad: OnBad | None = None) -> Iterator[tuple[int, int, object]]:
    """`iter_json_array` as (0-based position in the array, line, element): a skipped element keeps its position,
    so readers that number records by position do not shift the ids of the records after it."""
    where = display_name(path, member)
    strict = StrictJson()
    decoder = strict.decoder
    lines = read_lines(path, member)
    bad: list[Line] = []  # undecodable lines read so far and not yet blamed on an element
    buf, pos, line, eof, started = "", 0, 1, False, False

    def more(size: int) -> bool:
        nonlocal buf, pos, started
        parts, got = [], 0
        for item in lines:
            if item.error is not None:
                bad.append(item)
            parts.append(("\n" if started else "") + item.text)  # lines joined by "\n", as in the file
            started, got = True, got + len(item.text) + 1
            if got >= size:
                break
        buf, pos = buf[pos:] + "".join(parts), 0
        return bool(parts)

    def bad_before(last_line: int) -> Line | None:
        return next((b for b in bad if b.number <= last_line), None)

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

    def fail(at: int, message: str) -> FormatError:
        undecodable = bad_before(at)  # text that did not decode explains a syntax error best
        return undecodable.error if undecodable is not None else FormatError(where, at, None, message)

    if skip_ws() != "[":
        raise fail(line, "expected a JSON array ('[')")
    pos += 1
    if skip_ws() == "]":
        pos += 1
        if skip_ws():
            raise fail(line, "text after the end of the JSON array")
        return
    size, position = chunk_chars, -1
    while True:
        try:
            element, end = decoder.raw_decode(buf, pos)
            if end == len(buf) and not eof:  # a number or literal may continue in the next chunk
                raise json.JSONDecodeError("truncated", buf, end)
        except RecursionError:
            raise fail(line, "invalid JSON: nested too deeply") from None
        except json.JSONDecodeError as err:
            strict.repeated()  # a partial element may have completed inner objects: forget them
            if not eof and more(size):
                size *= 2  # an element larger than the buffer: read in growing chunks
                continue
            eof = True
            raise fail(line + buf.count("\n", pos, err.pos), f"invalid JSON: {err.msg}") from None
        size, position = chunk_chars, position + 1
        last = line + buf.count("\n", pos, end)
        undecodable, key = bad_before(last), strict.repeated()
        error = undecodable.error if undecodable is not None else \
            FormatError(where, line, key, "key repeated within one JSON object") if key is not None else None
        if error is None:
            yield position, line, element
        elif on_bad is None:
            raise error
        else:
            bad[:] = [b for b in bad if b.number > last]
            on_bad(error)
        line, pos = last, end
        after = skip_ws()
        if after == ",":
            pos += 1
            skip_ws()
            continue
        if after == "]":
            pos += 1
            if skip_ws():
                raise fail(line, "text after the end of the JSON array")
            if bad:
                raise bad[0].error
            return
        raise fail(line, "expected ',' or ']' between array elements"
                   if after else "the JSON array is not closed (file truncated?)")


def read_id_text_lines(path: PathLike, id_field: str, what: str, *, require_text: bool, skip_bad: bool = False,
                       report: SkipReport | None = None) -> dict[str, str]:
    """"<id><TAB><text>" lines as {id: text} (TREC topics, NFCorpus docs). Blank lines are ignored; an empty or
    repeated id, a line without a tab, or (with `require_text`) an empty text is a FormatError naming the field."""
    on_bad, out = OnBad(skip_bad, report), {}
    for lineno, line in iter_lines(path, on_bad=on_bad):
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
