"""What a prepared folder's meta.json promises about the files beside it, and the checks that hold it to that.

`write_prepared` (formats/beir.py) and `write_squad_open` record, for each file a meta.json covers, its sha256
and its record count: `meta["files"] = {"corpus.jsonl": {"sha256": ..., "records": 5183}, "qrels.tsv": ...,
"dpr/train.json": ...}` (paths relative to the meta.json's folder). Records are documents, queries, judgments,
candidate pairs (a .jsonl's or .tsv's data lines) or a JSON array's elements; a file without countable records
(split.json) has its sha256 only.

Reading checks the counts against what the readers returned (free: the records are read anyway); `verify_folder`
(`taser data verify`) rehashes and recounts every file. A damaged folder is a `FormatError` naming the file and
saying to prepare the dataset again. Folders prepared before meta.json held these entries still load (their
`counts` are checked where they have them); `verify_folder` says that they carry no hashes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError, TaserError
from ..io import sha256_file

META = "meta.json"
FILES_KEY = "files"
# The counts `write_prepared` wrote before per-file entries existed: file -> key of meta["counts"].
LEGACY_COUNTS = {"corpus.jsonl": "documents", "queries.jsonl": "queries", "qrels.tsv": "qrels"}
SPLIT_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv")  # besides meta.json; candidates.tsv is optional
SQUAD_OPEN_BUILDER = "taser_lib.data.squad_open"


def file_entry(path: str | Path, records: int | None = None) -> dict[str, Any]:
    """meta["files"][name] for a file just written: its sha256 and (when it has records) their count."""
    entry: dict[str, Any] = {"sha256": sha256_file(path)}
    if records is not None:
        entry["records"] = int(records)
    return entry


def dataset_name(folder: str | Path, meta: dict[str, Any] | None = None) -> str | None:
    """The registered name to prepare again: the folder's place under <data dir>/prepared/<name>[/<split>], else
    what its meta.json says (`source`, written by `registry.prepare`; squad-open's builder)."""
    folder = Path(folder)
    for candidate in (folder, folder.parent):
        if candidate.parent.name == "prepared" and candidate.name:
            return candidate.name
    meta = meta if isinstance(meta, dict) else {}
    if isinstance(meta.get("source"), str) and meta["source"]:
        return meta["source"]
    if meta.get("built_by") == SQUAD_OPEN_BUILDER:
        return "squad-open"
    return None


def again(folder: str | Path, meta: dict[str, Any] | None = None) -> str:
    """The remedy every damaged-folder error ends with."""
    name = dataset_name(folder, meta)
    if name:
        return f"the prepared folder is damaged: run `taser data prepare {name}` again"
    return ("the prepared folder is damaged: prepare it again (`taser data prepare NAME` for a registered dataset, "
            "else write it again with formats.beir.write_prepared)")


def damaged(err: FormatError, folder: str | Path, meta: dict[str, Any] | None = None) -> FormatError:
    """`err` (a reader's error about a file of the folder) with the remedy appended, same file, line and field."""
    where = err.path if err.line is None else f"{err.path}:{err.line}"
    prefix = f"{where}:{f' field {err.field!r}' if err.field else ''} "
    text = str(err)
    message = text[len(prefix):] if text.startswith(prefix) else text
    if "taser data prepare" in message:
        return err
    return FormatError(err.path, err.line, err.field, f"{message}; {again(folder, meta)}")


def read_meta(folder: str | Path, required: tuple[str, ...] = (), name: str = META) -> dict[str, Any]:
    """A prepared folder's meta.json (or another JSON object file `name` in it) as a dict; missing, unreadable, not
    JSON, not an object, a key of `required` missing or a malformed `files` entry: FormatError naming it, with the
    remedy."""
    folder = Path(folder)
    path = folder / name
    if not path.is_file():
        raise FormatError(path, None, None, f"missing; {again(folder)}")
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise FormatError(path, None, None, f"not UTF-8 text (byte {err.start}); {again(folder)}") from None
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"invalid JSON: {err.msg}; {again(folder)}") from None
    except OSError as err:
        raise FormatError(path, None, None, f"cannot be read ({err.strerror or err}); {again(folder)}") from None
    if not isinstance(meta, dict):
        raise FormatError(path, None, None, f"expected a JSON object; {again(folder)}")
    for key in required:
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise FormatError(path, None, key, f"missing or not a string; {again(folder, meta)}")
    files = meta.get(FILES_KEY)
    if files is not None and not (isinstance(files, dict) and all(
            isinstance(e, dict) and isinstance(e.get("sha256"), str) and
            isinstance(e.get("records", 0), int) for e in files.values())):
        raise FormatError(path, None, FILES_KEY, f"expected {{file: {{sha256, records}}}}; {again(folder, meta)}")
    return meta


def recorded_count(meta: dict[str, Any], name: str) -> int | None:
    """The record count meta.json holds for file `name` (per-file entry, else the legacy `counts`), or None."""
    entry = (meta.get(FILES_KEY) or {}).get(name)
    if entry is not None:
        return entry.get("records")
    if FILES_KEY not in meta and name in LEGACY_COUNTS and isinstance(meta.get("counts"), dict):
        value = meta["counts"].get(LEGACY_COUNTS[name])
        return value if isinstance(value, int) else None
    return None


def check_counts(folder: str | Path, meta: dict[str, Any], actual: dict[str, int]) -> None:
    """Raise FormatError naming the first file whose records (as read) differ from meta.json's count."""
    for name, count in actual.items():
        expected = recorded_count(meta, name)
        if expected is not None and expected != count:
            raise FormatError(Path(folder) / name, None, None, f"holds {count} records but {META} says "
                              f"{expected} (lines lost or added?); {again(folder, meta)}")


def count_records(path: Path) -> int:
    """Records of a prepared file: a JSON array's elements (.json), else its non-blank lines, less the header
    line of a .tsv. Raises FormatError for a .json that is not a well-formed array."""
    if path.suffix == ".json" or path.name.endswith(".json.gz"):
        from .formats._common import iter_json_array  # lazily: formats import this module
        return sum(1 for _ in iter_json_array(path))
    with open(path, "rb") as f:
        lines = sum(1 for line in f if line.strip())
    return max(lines - 1, 0) if path.suffix == ".tsv" else lines


@dataclass
class Verification:
    """What `verify_folder` found: files checked, problems (one line each), meta.json files without hashes."""

    folder: Path
    name: str | None
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unhashed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _metas(folder: Path) -> list[Path]:
    """The folders whose meta.json `verify_folder` checks: `folder` itself and its prepared split folders."""
    found = [folder] if (folder / META).is_file() else []
    if folder.is_dir():
        found += sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
                        and (p / META).is_file())
    return found


def verify_folder(folder: str | Path) -> Verification:
    """Rehash and recount every file each meta.json under `folder` (itself and its split folders) covers, and
    check that a split folder has its data files. Never raises for damage: every problem is a line of the result.
    """
    folder = Path(folder)
    result = Verification(folder, dataset_name(folder))
    metas = _metas(folder)
    if not metas:
        raise TaserError(f"{folder} holds no prepared dataset (no {META} in it or in a split folder of it)")
    for where in metas:
        try:
            meta = read_meta(where)
        except FormatError as err:
            result.problems.append(str(err))
            continue
        result.name = result.name or dataset_name(where, meta)
        is_split = any((where / n).exists() for n in SPLIT_FILES) or where != folder or "split" in meta
        files = meta.get(FILES_KEY)
        if files is None:
            result.unhashed.append(str(where / META))
            names = [n for n in LEGACY_COUNTS if (where / n).is_file()] if is_split else []
            entries = {n: {"records": recorded_count(meta, n)} for n in names}
        else:
            entries = files
        if is_split:
            for name in SPLIT_FILES:
                if name not in entries and not (where / name).is_file():
                    result.problems.append(f"{where / name}: missing; {again(where, meta)}")
        for name, entry in entries.items():
            path = where / name
            if not path.is_file():
                result.problems.append(f"{path}: missing; {again(where, meta)}")
                continue
            result.checked.append(str(path))
            differences = []
            if "sha256" in entry and sha256_file(path) != entry["sha256"]:
                differences.append(f"sha256 {sha256_file(path)} differs from {META}'s {entry['sha256']}")
            if entry.get("records") is not None:
                try:
                    count = count_records(path)
                except FormatError as err:
                    result.problems.append(str(damaged(err, where, meta)))
                    continue
                if count != entry["records"]:
                    differences.append(f"holds {count} records but {META} says {entry['records']}")
            if differences:
                result.problems.append(f"{path}: {'; '.join(differences)}; {again(where, meta)}")
    return result
