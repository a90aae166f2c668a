"""Library changes declared result-preserving: a faster path to the same numbers does not make pages stale.

A page is stale when a library file it loaded changed since it ran (`results.stale_reason`). Some changes cannot
change any number a page computes: a test shows the new code gives the old code's results, bit for bit. Each such
change is one entry of `taser_book/result_preserving_changes.yaml` (data, not code):

    - file: taser_lib/evaluation/significance.py
      from: <sha256 of the file the pages recorded>
      to: <sha256 of the file now>
      why: what changed and why the results cannot
      shown_by: the test that compares the two
      requires: {taser_lib/evaluation/permutation.py: <sha256>}   # optional: files the new version loads
      code_sha256: <code_sha256 of the file at `from`>             # optional: a change of docstrings or comments
      moved_to: <the file's path now>                              # optional: the file moved; `to` is its digest there

An entry with `code_sha256` declares that only docstrings and comments changed: `code_sha256(source)` hashes the
file's syntax tree without its docstrings (comments are never in it), and `tests/test_preserving.py` checks that the
file at `to` has the hash recorded from the file at `from`.

A result recorded with `from` counts as current while the file is at `to`, or at any version reached from `to` by
further entries, and while every file in `requires` (which the page never recorded: the new version brought it in) is
still at its digest, or reached from it the same way. A change without an entry stales its pages as before.

An entry with `moved_to` declares that the file left `file`: its version `from` lives on at `moved_to`, at `to` (its
own imports rewritten for its new package). A result that recorded the old path at `from` counts as current while the
file at `moved_to` is at `to`, or at a version reached from it by further entries of `moved_to`.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from taser_lib.errors import FormatError
from .results import _file_sha256, library_path, read_meta

PRESERVING_CHANGES = "taser_book/result_preserving_changes.yaml"
FIELDS = ("file", "from", "to", "why", "shown_by")
OPTIONAL = ("requires", "code_sha256", "moved_to")
Changes = dict[tuple[str, str], dict[str, dict[str, str]]]  # {(file, from): {to: requires}}
Moves = dict[tuple[str, str], dict[tuple[str, str], dict[str, str]]]  # {(file, from): {(moved_to, to): requires}}
_cache: dict[tuple[str, int, int], tuple[Changes, Moves]] = {}


def read_preserving_changes(path: str | os.PathLike) -> Changes:
    """{(file, from digest): {to digest: {required file: digest}}} of the entries in `path` that keep their file where
    it was; an absent file declares none."""
    return _read(Path(path))[0]


def read_moves(path: str | os.PathLike) -> Moves:
    """{(file, from digest): {(moved_to, to digest): {required file: digest}}} of the entries in `path` that moved
    their file (`moved_to`); an absent file declares none."""
    return _read(Path(path))[1]


def _read(path: Path) -> tuple[Changes, Moves]:
    import yaml

    if not path.is_file():
        return {}, {}
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _cache:
        text = path.read_text(encoding="utf-8")
        try:
            entries, document = yaml.safe_load(text) or [], yaml.compose(text)
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from None
        if not isinstance(entries, list):
            raise FormatError(path, 1, None, f"expected a list of changes, got {type(entries).__name__}")
        table: Changes = {}
        moves: Moves = {}
        for i, (entry, node) in enumerate(zip(entries, document.value), 1):
            line = node.start_mark.line + 1
            if not isinstance(entry, dict):
                raise FormatError(path, line, None, f"change {i}: expected a mapping with {', '.join(FIELDS)}")
            missing = [k for k in FIELDS if not entry.get(k)]
            if missing:
                raise FormatError(path, line, missing[0], f"change {i}: missing")
            unknown = sorted(set(entry) - set(FIELDS) - set(OPTIONAL))
            if unknown:
                raise FormatError(path, line, unknown[0], f"change {i}: unknown (expected {', '.join(FIELDS + OPTIONAL)})")
            requires = entry.get("requires") or {}
            if not isinstance(requires, dict):
                raise FormatError(path, line, "requires", f"change {i}: must map files to their sha256")
            requires = {str(k): str(v) for k, v in requires.items()}
            before = (str(entry["file"]), str(entry["from"]))
            if entry.get("moved_to"):
                if str(entry["moved_to"]) == before[0]:
                    raise FormatError(path, line, "moved_to", f"change {i}: names the file it moves from")
                moves.setdefault(before, {})[(str(entry["moved_to"]), str(entry["to"]))] = requires
            else:
                table.setdefault(before, {})[str(entry["to"])] = requires
        _cache[key] = table, moves
    return _cache[key]


def code_sha256(source: str) -> str:
    """sha256 of a Python file's syntax tree without its docstrings: equal for two versions that differ only in
    docstrings, comments and layout."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()


def preserved_digests(rel_file: str, digest: str, changes: Changes) -> dict[str, dict[str, str]]:
    """{version: the files it requires} for `digest` and every version of `rel_file` reached from it through
    declared result-preserving changes (a version's requirements include those of the versions before it)."""
    reached: dict[str, dict[str, str]] = {digest: {}}
    todo = [digest]
    while todo:
        before = todo.pop()
        for after, requires in changes.get((rel_file, before), {}).items():
            if after not in reached:
                reached[after] = {**reached[before], **requires}
                todo.append(after)
    return reached


def preserved_files(result_folder: str | os.PathLike, repo_root: str | os.PathLike = ".") -> Callable[[str], bool]:
    """A predicate for `results.stale_reason(ignore=...)`: true for a library file the result recorded that changed
    since only by declared result-preserving changes."""
    meta = read_meta(Path(result_folder)) or {}
    recorded = meta.get("library_files") or {}
    changes, moves = _read(library_path(PRESERVING_CHANGES, repo_root))

    def current(rel_file: str, digest: str, seen: frozenset[str] = frozenset()) -> dict[str, str] | None:
        """What the file's version now requires, when that version is `digest` or reached from it (at its path, or
        where a declared move took it); else None."""
        path = library_path(rel_file, repo_root)
        versions = preserved_digests(rel_file, digest, changes)
        if path.is_file():
            return versions.get(_file_sha256(path))
        for version, requires in versions.items():
            for (moved_to, after), more in moves.get((rel_file, version), {}).items():
                if moved_to not in seen and (now := current(moved_to, after, seen | {rel_file})) is not None:
                    return {**requires, **more, **now}
        return None

    def preserved(rel_file: str) -> bool:
        if not (changes or moves) or rel_file not in recorded:
            return False
        requires = current(rel_file, recorded[rel_file])
        return requires is not None and all(current(f, d) is not None for f, d in requires.items())

    return preserved
