"""Modules moved out of the core are result-preserving moves (issue 49: a core as thin as its job).

A move renames modules and nothing else. Every entry of `taser_book/result_preserving_changes.yaml` shown by
`test_moved_code_is_the_code_before` is a file (or notebook) whose version `to` is its version `from` read this way:

- every import is what it binds, at its defining module: a moved module under its new name, and a name an old
  package re-exported from a moved module at that module (`from taser_lib.evaluation import score_frame` and
  `from taser_book.analyses.scores import score_frame` bind the same function); a run of imports is one set;
- a core file (taser_lib) drops the re-exports of moved modules (the core imports nothing from the book), and their
  names leave its `__all__`;
- docstrings do not count; a string (a message, a notebook's prose) may only rename the moved modules.

Both versions come from git by their digests, so the test holds after later commits change the files again.
"""

from __future__ import annotations

import ast
import functools
import json
from pathlib import Path

import pytest
import yaml

from taser_book.preserving import PRESERVING_CHANGES, read_moves
from git_versions import git, source_at

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_moves.py::test_moved_code_is_the_code_before"

# (the revision before the move, {old module: new module}, the old packages whose re-exports of them went)
MOVES = [
    ("0b7c922",
     {f"taser_lib.evaluation.{m}": f"taser_book.analyses.{m}" for m in (
         "baselines", "diffuseness", "disagreement", "hypothesis", "propositions", "reproducibility", "routing",
         "scores")}
     | {f"taser_lib.models.{m}": f"taser_lib.speed.{m}" for m in ("quantized", "onnx_int8")}
     | {"taser_lib.models.export": "taser_lib.export"},
     ("taser_lib.evaluation",)),
    ("ce3e121", {"taser_lib.models.card": "taser_lib.export.card"}, ()),
]
RENAMES = {old: new for _, moves, _ in MOVES for old, new in moves.items()}


@functools.cache
def reexports() -> dict[str, str]:
    """{package.name: defining module.name} for the names the old packages re-exported from modules that moved."""
    found = {}
    for before, moves, packages in MOVES:
        for package in packages:
            tree = ast.parse(git("show", f"{before}:{package.replace('.', '/')}/__init__.py"))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.level == 1 and f"{package}.{node.module}" in moves:
                    found.update({f"{package}.{a.name}": f"{package}.{node.module}.{a.name}" for a in node.names})
    return found


def canonical_origin(origin: str) -> str:
    origin = reexports().get(origin, origin)
    for old, new in RENAMES.items():
        if origin == old or origin.startswith(old + "."):
            return new + origin[len(old):]
    return origin


def module_name(path: str) -> tuple[str, str]:
    """(module, package) of a repository path; notebooks are __main__ with no package."""
    if path.endswith(".ipynb"):
        return "__main__", ""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def bindings(node: ast.Import | ast.ImportFrom, package: str) -> list[tuple[str, str]]:
    """(bound name, canonical origin) of each name an import binds."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], canonical_origin(a.name) if a.asname else a.name.split(".")[0])
                for a in node.names]
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*up, *([base] if base else [])])
    return [(a.asname or a.name, canonical_origin(f"{base}.{a.name}")) for a in node.names]


def canonical(source: str, path: str) -> str:
    """The syntax tree of `source` (a file at `path`) with docstrings dropped and each run of imports replaced by the
    set of what it binds, at canonical origins (see the module's docstring)."""
    module, package = module_name(path)
    core = module.split(".")[0] == "taser_lib"
    tree = ast.parse(source)
    dropped: set[str] = set()

    def rewrite(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        run: list[tuple[str, str]] = []
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name, origin in bindings(stmt, package):
                    if core and origin.split(".")[0] == "taser_book":
                        dropped.add(name)
                    else:
                        run.append((name, origin))
                continue
            if run:
                out.append(ast.Expr(ast.Constant(repr(sorted(set(run))))))
                run = []
            out.append(stmt)
        if run:
            out.append(ast.Expr(ast.Constant(repr(sorted(set(run))))))
        return out

    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                if field == "body" and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                         ast.AsyncFunctionDef)) \
                        and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                        and isinstance(body[0].value.value, str):
                    body = body[1:]
                setattr(node, field, rewrite(body) or [ast.Pass()])
        if isinstance(node, ast.Try):
            for handler in node.handlers:
                handler.body = rewrite(handler.body) or [ast.Pass()]
    for node in ast.walk(tree):  # a message naming a moved module may name it where it is now
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = prose(node.value)
    if dropped:  # the core's __all__ loses the names it no longer re-exports
        kept = []
        for stmt in tree.body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target", None)
            if isinstance(target, ast.Name) and target.id == "__all__" and isinstance(stmt.value, ast.List):
                stmt.value.elts = [e for e in stmt.value.elts if not (isinstance(e, ast.Constant)
                                                                       and e.value in dropped)]
                if not stmt.value.elts and isinstance(stmt, ast.AugAssign):
                    continue
            kept.append(stmt)
        tree.body = kept
    return ast.dump(tree)


def prose(text: str) -> str:
    """A notebook's prose with the moved modules' old names read as their new ones."""
    for old, new in RENAMES.items():
        text = text.replace(old, new).replace(old.split(".", 1)[1], new.split(".", 1)[1])
    return text


def same_code(before: str, after: str, old_path: str, new_path: str) -> None:
    if not old_path.endswith(".ipynb"):
        assert canonical(before, old_path) == canonical(after, new_path), f"{new_path}: more than its imports changed"
        return
    old_cells, new_cells = json.loads(before)["cells"], json.loads(after)["cells"]
    assert [c["cell_type"] for c in old_cells] == [c["cell_type"] for c in new_cells], f"{new_path}: cells changed"
    for i, (old, new) in enumerate(zip(old_cells, new_cells)):
        old_text, new_text = ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                              for c in (old, new))
        if old["cell_type"] == "code":
            assert canonical(old_text, old_path) == canonical(new_text, new_path), f"{new_path} cell {i}: code changed"
        else:
            assert prose(old_text) == new_text, f"{new_path} cell {i}: prose changed beyond the moved modules' names"


def _entries() -> list[dict]:
    entries = yaml.safe_load((REPO / PRESERVING_CHANGES).read_text(encoding="utf-8")) or []
    return [e for e in entries if e.get("shown_by") == TEST]


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["file"])
def test_moved_code_is_the_code_before(entry):
    new_path = entry.get("moved_to") or entry["file"]
    before = source_at(entry["file"], entry["from"])
    after = source_at(new_path, entry["to"])
    same_code(before, after, entry["file"], new_path)
    for required, digest in (entry.get("requires") or {}).items():
        source_at(required, digest)  # a version the move brought in, in git


def test_every_moved_module_is_declared_where_a_result_recorded_it():
    """Each old path a committed result recorded has a move entry from the digest it recorded."""
    moves = read_moves(REPO / PRESERVING_CHANGES)
    recorded = {}
    for meta in REPO.glob("results/**/meta.json"):
        recorded.update(json.loads(meta.read_text(encoding="utf-8")).get("library_files") or {})
    old_files = {old.replace(".", "/") + ".py" for old in RENAMES}
    missing = [f for f in old_files & recorded.keys() if (f, recorded[f]) not in moves]
    assert not missing, f"recorded, moved and not declared: {missing}"
    assert not any((REPO / f).exists() for f in old_files), "a moved module is still at its old path"


def test_canonical_form_sees_a_change_beyond_imports():
    before = "from taser_lib.evaluation import score_frame\n\ndef f(x):\n    return score_frame(x)\n"
    same = "from taser_book.analyses.scores import score_frame\n\ndef f(x):\n    return score_frame(x)\n"
    assert canonical(before, "taser_book/x.py") == canonical(same, "taser_book/x.py")
    for changed in (same.replace("return score_frame(x)", "return score_frame(x, 1)"),
                    same.replace("analyses.scores import score_frame", "analyses.scores import score_frames as "
                                                                          "score_frame")):
        assert canonical(before, "taser_book/x.py") != canonical(changed, "taser_book/x.py")
    core_before = ("from .metrics import evaluate\nfrom .scores import score_frame\n"
                   "__all__ = ['evaluate']\n__all__ += ['score_frame']\n")
    assert canonical(core_before, "taser_lib/evaluation/__init__.py") == canonical(
        "from .metrics import evaluate\n__all__ = ['evaluate']\n", "taser_lib/evaluation/__init__.py")
