"""The one way this library reads text input: every format reader (and `read_run`) goes through `read_lines`.

What it guarantees, for a plain file, a `.gz` file, or a member of a zip or tar archive (.tar, .tar.gz, .tgz; a
tar member is streamed, never extracted to disk: MS MARCO ships its 3 GB collection as collection.tar.gz):
- strict UTF-8: a line that does not decode is reported as a FormatError naming the file, the line and the byte
  column (never a bare UnicodeDecodeError), and a reader running with `skip_bad` can skip it and count it;
- exactly one leading byte-order mark is stripped (a second one stays, and the format's checks see it);
- lines end at "\\n"; one "\\r" before it is dropped, so CRLF files read as LF files; a "\\r" anywhere else in a
  line (a line broken inside, or a file with old Mac CR-only line ends) makes that line bad, like one that does not
  decode: strict readers raise its FormatError, `skip_bad` readers skip and report it, none loses it silently;
- a damaged archive (bad gzip header or CRC, truncated stream, bad zip directory, bad CRC-32, zlib errors, ...) is a
  FormatError naming the file, and the line reading had reached; never EOFError, BadGzipFile, BadZipFile, zlib.error.
A missing file still raises FileNotFoundError: that is not malformed input.
"""

from __future__ import annotations

import gzip
import os
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, NamedTuple

from ..errors import FormatError

PathLike = str | os.PathLike

BOM = "\ufeff"
# What decompressors raise on damaged input. OSError covers gzip.BadGzipFile and zip seeks past the end; the
# subclasses that mean "no such file" are not damage and pass through (see _NOT_DAMAGE).
_DAMAGE = (EOFError, OSError, zlib.error, zipfile.BadZipFile, tarfile.TarError, struct.error, NotImplementedError,
           RuntimeError, ValueError, UnicodeDecodeError)
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")
_NOT_DAMAGE = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


class Line(NamedTuple):
    """One line of text: its 1-based number, its text without the line end, and the error if it did not decode
    (then `text` is the line decoded with U+FFFD replacements: enough to recognise a format's tags, never data)."""

    number: int
    text: str
    error: FormatError | None = None


def display_name(path: PathLike, member: str | None = None) -> str:
    """How errors name a file, including the archive member when there is one."""
    return f"{path}!{member}" if member else str(path)


@contextmanager
def _damage_is_format_error(where: str, line: int | None = None) -> Iterator[None]:
    try:
        yield
    except (FormatError, *_NOT_DAMAGE):
        raise
    except _DAMAGE as err:
        raise FormatError(where, line, None, f"damaged or truncated compressed file ({type(err).__name__}: "
                          f"{err}); fetch or write it again") from None


@contextmanager
def open_binary(path: PathLike, member: str | None = None) -> Iterator[IO[bytes]]:
    """The raw bytes of a plain file, a `.gz` file, or (with `member`) a member of a zip or tar archive (a tar
    archive is read as a stream: its members are passed over, unread, until `member`; "./name" matches "name")."""
    path = Path(path)
    where = display_name(path, member)
    if member is not None and path.name.endswith(TAR_SUFFIXES):
        with _damage_is_format_error(where):
            archive = tarfile.open(path, mode="r|*")
        with archive:
            with _damage_is_format_error(where):
                found = next((info for info in archive if info.isfile() and
                              info.name.removeprefix("./") == member.removeprefix("./")), None)
            if found is None:
                raise FormatError(path, None, None, f"tar archive has no member {member!r}")
            with _damage_is_format_error(where):
                raw = archive.extractfile(found)
            yield raw
        return
    if member is not None:
        with _damage_is_format_error(where):
            archive = zipfile.ZipFile(path)
        with archive:
            try:
                with _damage_is_format_error(where):
                    raw = archive.open(member)
            except KeyError:
                raise FormatError(path, None, None, f"zip archive has no member {member!r}") from None
            with raw:
                yield raw
        return
    if path.name.endswith(".gz"):
        if path.stat().st_size == 0:  # gzip reads an empty file as empty text; it is not a gzip file at all
            raise FormatError(path, None, None, "empty file: not gzip data (a .gz holds at least a header)")
        with open(path, "rb") as plain, gzip.GzipFile(fileobj=plain, mode="rb") as handle:
            yield handle
        return
    with open(path, "rb") as handle:
        yield handle


def zip_names(path: PathLike) -> list[str]:
    """The member names of a zip archive; a damaged archive is a FormatError naming it."""
    with _damage_is_format_error(str(path)):
        with zipfile.ZipFile(path) as archive:
            return archive.namelist()


def decode_line(data: bytes, where: str, number: int) -> Line:
    """One line's bytes (line end already removed) as a Line; `number` 1 also strips one leading BOM."""
    try:
        text = data.decode("utf-8")
        error = None
    except UnicodeDecodeError as err:
        text = data.decode("utf-8", errors="replace")
        error = FormatError(where, number, None, f"invalid UTF-8 at byte {err.start + 1} of the line "
                            f"({data[err.start:err.start + 4]!r}...)")
    if number == 1 and text.startswith(BOM):
        text = text[1:]
    return Line(number, text, error)


def read_lines(path: PathLike, member: str | None = None) -> Iterator[Line]:
    """Every line of a text file (plain, .gz, or a zip member), decoded strictly, as `Line`s in file order.

    Undecodable lines come back with their `error` set, so each reader decides what a bad line costs (one record,
    a whole block, an aligned row). Use `iter_lines` for the common case of "raise or skip that line".
    """
    where = display_name(path, member)
    compressed = member is not None or Path(path).name.endswith(".gz")
    guard = _damage_is_format_error if compressed else _no_guard
    with ExitStack() as stack:
        with guard(where, 1):
            handle = stack.enter_context(open_binary(path, member))
        number = 0
        while True:
            with guard(where, number + 1):
                data = handle.readline()
            if not data:
                break
            number += 1
            if data.endswith(b"\n"):
                data = data[:-2] if data.endswith(b"\r\n") else data[:-1]
            line = decode_line(data, where, number)
            if line.error is None and b"\r" in data:
                line = line._replace(error=bare_carriage_return(data, where, number))
            yield line


def bare_carriage_return(data: bytes, where: str, number: int) -> FormatError:
    """The error of a line (line end removed) that holds a carriage return: csv, str.splitlines and the formats'
    own splitting would cut the line there and part of a record would be lost."""
    byte = data.index(b"\r") + 1
    return FormatError(where, number, None, f"a carriage return (\\r) at byte {byte} of the line, "
                       f"not at its end: the line was broken inside, or the file has old Mac (CR-only) line ends "
                       f"(convert them to LF)")


@contextmanager
def _no_guard(where: str, line: int | None = None) -> Iterator[None]:
    yield


def iter_lines(path: PathLike, member: str | None = None, on_bad=None) -> Iterator[tuple[int, str]]:
    """(line number, text) for each line. An undecodable line raises its FormatError, or with `on_bad` (an
    `OnBad`, which raises or, with skip_bad, records it) is skipped and reported."""
    for line in read_lines(path, member):
        if line.error is not None:
            if on_bad is None:
                raise line.error
            on_bad(line.error)
            continue
        yield line.number, line.text


def read_text(path: PathLike, member: str | None = None) -> str:
    """A whole file as one string (lines joined by "\\n"): for formats that are one document, such as a JSON file.
    Any undecodable line raises its FormatError."""
    return "\n".join(text for _, text in iter_lines(path, member))


class CsvLines:
    """Lines for `csv.reader` (each with "\\n" back on, so quoted fields may span lines), remembering which physical
    lines the current record came from and whether one of them did not decode.

        lines = CsvLines(path); reader = csv.reader(lines)
        for row in reader:
            start, error = lines.record()   # first line of this row, and the decode error of one of its lines
    """

    def __init__(self, path: PathLike, member: str | None = None):
        self._lines = read_lines(path, member)
        self._start: int | None = None
        self._error: FormatError | None = None
        self.line = 0  # the last line handed to csv

    def __iter__(self) -> CsvLines:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.line = line.number
        if self._start is None:
            self._start = line.number
        if line.error is not None and self._error is None:
            self._error = line.error
        return line.text + "\n"

    def record(self) -> tuple[int, FormatError | None]:
        """(first line, decode error or None) of the lines read since the last call; call once per row."""
        start, error = self._start if self._start is not None else self.line, self._error
        self._start, self._error = None, None
        return start, error
