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
import importlib
import json
import sys
from pathlib import Path

import pytest
import yaml

from taser_book.preserving import PRESERVING_CHANGES, read_moves
from git_versions import git, source_at

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_moves.py::test_moved_code_is_the_code_before"

# The dataset registry left the core for the optional taser_lib.datasets (issue 49: the core never imports it)
DATASETS_MOVE = {
    "taser_lib.data.registry": "taser_lib.datasets.registry",
    "taser_lib.data.slicing": "taser_lib.datasets.slicing",
    "taser_lib.retrieval.datasets": "taser_lib.datasets.ready",
    "taser_lib.retrieval.streamed": "taser_lib.datasets.streamed",
    "taser_lib.training.msmarco": "taser_lib.datasets.msmarco",
    "taser_lib.data.fetch": "taser_lib.datasets.fetch",
    **{f"taser_lib.data.formats.{m}": f"taser_lib.datasets.formats.{m}"
       for m in ("answer_selection", "glasgow", "msmarco", "nfcorpus", "qa", "scifact")},
}

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
    ("ca9d172", DATASETS_MOVE, ("taser_lib.data",)),
    ("ae77a4c", {"taser_lib.models.fused": "taser_lib.speed.fused"}, ()),  # the fused linears: optional speed
]
# Functions that moved between modules, the same code (test_a_moved_function_is_the_code_it_was), with the revision
# before each move: the file hashes stayed in the core when fetching left it; the CPU precision probe left the core
# for the optional speed package (the core's `models.precision` keeps resolve_precision and autocast).
NAME_MOVES_AT = [
    ("36e63a4", {"taser_lib.data.fetch.sha256_file": "taser_lib.io.sha256_file",
                 "taser_lib.data.fetch.hash_file": "taser_lib.io.hash_file"}),
    ("ae77a4c", {f"taser_lib.models.precision.{name}": f"taser_lib.speed.precision.{name}" for name in (
        "cpu_flags", "cpu_has_native_bf16", "isa_limit", "machine_key", "load_per_core", "machine_is_busy",
        "probe_cache_path", "measure_cpu_precision", "read_probe", "store_probe", "cached_probe",
        "cpu_precision_probe", "precision_record")}),
]
NAME_MOVES = {old: new for _, moves in NAME_MOVES_AT for old, new in moves.items()}
RENAMES = {old: new for _, moves, _ in MOVES for old, new in moves.items()}

# The core reaches the moved registry through one object, `taser_lib.data.named.registry`, which stands for the
# package `taser_lib.datasets`: `registry.load_dataset` is `taser_lib.datasets.load_dataset`, defined where the
# package's __init__ imports it from, and `registry.msmarco` its (lazily imported) submodule.
PROXIES = {"taser_lib.data.named.registry": "taser_lib.datasets"}

# Declared rewrites of an old version, applied before it is compared: (file, old text, new text, why). A rewrite is a
# change beyond imports that a behavioural test shows keeps what every input got; it must match the old text once.
REWRITES = [
    ("taser_lib/training/reranking.py",
     "from ..data.registry import load_dataset, prepared_dir\n",
     "from ..data.registry import load_dataset, prepared_dir\nfrom ..data.named import registry\n",
     "binds the registry's stand-in, which the rewritten branch below names"),
    ("taser_lib/training/reranking.py",
     "# Testbeds whose module builds on this one (name -> loader(splits, k, *, limits, data_dir, progress)): they register\n"
     "# themselves when imported (training.msmarco: msmarco-passage; the trainers import it), so this module imports none.\n"
     "TESTBED_LOADERS: dict = {}\n", "",
     "the table of testbeds that registered themselves held one entry, msmarco-passage, which only training.msmarco "
     "wrote (it was imported by the trainers); the dispatch now names that loader"),
    ("taser_lib/training/reranking.py",
     "    if dataset in TESTBED_LOADERS:\n"
     "        return TESTBED_LOADERS[dataset](splits, k, limits=limits, data_dir=data_dir, progress=progress)\n",
     "    if dataset == \"msmarco-passage\":\n"
     "        return registry.msmarco.msmarco_reranking(splits, k, limits=limits, data_dir=data_dir, progress=progress)\n",
     "the same call for msmarco-passage, the table's one entry; any other name takes the branches after it as before "
     "(tests/test_training_msmarco.py loads the msmarco-passage sets through load_reranking_sets)"),
    ("taser_lib/training/retriever.py",
     "        _BEIR_READ[key] = load_evaluation_set(path, split)\n", "        _BEIR_READ[key] = resolve_dataset(path, split)\n",
     "a beir source's folder is read by the core's reader: for a folder or zip, load_evaluation_set(path, split) "
     "was resolve_dataset(path, split) (no qa_corpus, no slice; it prepares only a registered derived dataset, "
     "which a folder is not; tests/test_named.py reads one without the registry)"),
    ("taser_lib/training/retriever.py",
     "from ..retrieval.datasets import ensure_prepared, load_evaluation_set\n",
     "from ..retrieval.datasets import ensure_prepared, load_evaluation_set\nfrom ..data.resolve import resolve_dataset\n",
     "binds the reader the rewritten line above calls"),
    ("taser_lib/data/fetch.py",
     "from ..io import atomic_path, atomic_write_text\n",
     "from ..io import atomic_path, atomic_write_text, hash_file, sha256_file\n",
     "binds the file hashes, which moved to taser_lib.io (NAME_MOVES), where the functions below were"),
    ("taser_lib/data/fetch.py",
     'def sha256_file(path: str | os.PathLike) -> str:\n    return hash_file(path, ("sha256",))["sha256"]\n\n\n'
     'def hash_file(path: str | os.PathLike, algorithms: tuple[str, ...] | list[str]) -> dict[str, str]:\n'
     '    """{algorithm: hex digest} of a file, every algorithm in one read."""\n'
     '    digests = {name: hashlib.new(name) for name in algorithms}\n'
     '    with open(path, "rb") as f:\n'
     '        for block in iter(lambda: f.read(_BLOCK), b""):\n'
     '            for digest in digests.values():\n'
     '                digest.update(block)\n'
     '    return {name: digest.hexdigest() for name, digest in digests.items()}\n\n\n', "",
     "the two functions moved to taser_lib.io as they were (NAME_MOVES)"),
    ("taser_lib/training/msmarco.py",
     "from .reranking import TESTBED_LOADERS, RerankingSet, sample_ids\n", "from .reranking import RerankingSet, sample_ids\n",
     "the registration below went"),
    ("taser_lib/training/msmarco.py", "\n\nTESTBED_LOADERS[NAME] = msmarco_reranking\n", "\n",
     "load_reranking_sets calls msmarco_reranking by name instead of through the registration"),
]


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
    origin = NAME_MOVES.get(origin, origin)
    for old, new in RENAMES.items():
        if origin == old or origin.startswith(old + "."):
            return new + origin[len(old):]
    return origin


def old_module_names(monkeypatch) -> None:
    """Let code written before the registry's move (a notebook as a committed result counts it, run from git) import
    what it imported: each moved module under its old name too, and each name `taser_lib.data` re-exported from one on
    that package again, for the test's duration; and the recipe tables' old accessors (below)."""
    for old, new in DATASETS_MOVE.items():
        monkeypatch.setitem(sys.modules, old, importlib.import_module(new))
    for name, origin in reexports().items():
        package, attr = name.rsplit(".", 1)
        if package == "taser_lib.data" and not hasattr(importlib.import_module(package), attr):
            module, value = canonical_origin(origin).rsplit(".", 1)
            monkeypatch.setattr(importlib.import_module(package), attr, getattr(importlib.import_module(module), value),
                                raising=False)
    # Code written before the pages read the recipe tables themselves (tests/test_name_tables.py) imports
    # runs.recipes' load_variants(section) and variant(name, section): the tables and their entries, as those gave.
    from taser_book.runs import recipes

    tables = {"variants": recipes.RETRIEVERS, "reranking": recipes.RERANKERS}
    monkeypatch.setattr(recipes, "load_variants", lambda section="variants": tables[section], raising=False)
    monkeypatch.setattr(recipes, "variant", lambda name, section="variants": tables[section][name], raising=False)


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


def is_core(path: str) -> bool:
    module = module_name(path)[0]
    return module.split(".")[0] == "taser_lib" and not module.startswith(OPTIONAL)


def canonical(source: str, path: str, core: bool | None = None) -> str:
    """The syntax tree of `source` (a file at `path`) with docstrings dropped and each run of imports replaced by the
    set of what it binds, at canonical origins (see the module's docstring)."""
    module, package = module_name(path)
    core = is_core(path) if core is None else core
    tree = ast.parse(source)
    dropped: set[str] = set()
    through_registry: dict[str, str] = {}  # a core file's names bound to the moved registry: {name: what it is}

    def rewrite(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        run: list[tuple[str, str]] = []
        for stmt in body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name, origin in bindings(stmt, package):
                    if core and origin.split(".")[0] == "taser_book":
                        dropped.add(name)
                    elif core and (origin in PROXIES or origin.startswith(OPTIONAL)):
                        dropped.add(name)
                        through_registry[name] = PROXIES.get(origin, origin)
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
    if through_registry:
        tree = _ResolveRegistry(through_registry).visit(tree)
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


OPTIONAL = "taser_lib.datasets"  # the optional subpackage: the core reaches it only through PROXIES


@functools.cache
def registry_names() -> dict[str, str]:
    """{taser_lib.datasets.name: defining module.name} of the names the package's __init__ imports."""
    tree = ast.parse((REPO / "taser_lib/datasets/__init__.py").read_text(encoding="utf-8"))
    return {f"{OPTIONAL}.{a.asname or a.name}": f"{OPTIONAL}.{node.module}.{a.name}" for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module for a in node.names}


class _ResolveRegistry(ast.NodeTransformer):
    """Each use of a name bound to the moved registry, and each attribute of one, read as what it is: the same
    marker for `load_dataset` imported from taser_lib.data.registry and for `registry.load_dataset` through the
    stand-in."""

    def __init__(self, bound: dict[str, str]):
        self.bound = bound

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.bound:
            return ast.Constant(f"<{self.bound[node.id]}>")
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        value = node.value
        if isinstance(node.ctx, ast.Load) and isinstance(value, ast.Constant) and isinstance(value.value, str) \
                and value.value.startswith("<") and value.value.endswith(">"):
            dotted = f"{value.value[1:-1]}.{node.attr}"
            return ast.Constant(f"<{registry_names().get(dotted, dotted)}>")
        return node


def prose(text: str) -> str:
    """A notebook's prose with the moved modules' old names read as their new ones."""
    for old, new in RENAMES.items():
        text = text.replace(old, new).replace(old.split(".", 1)[1], new.split(".", 1)[1])
    return text


def same_code(before: str, after: str, old_path: str, new_path: str) -> None:
    if not old_path.endswith(".ipynb"):
        core = is_core(new_path)
        assert canonical(before, old_path, core) == canonical(after, new_path, core), \
            f"{new_path}: more than its imports changed"
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


def rewritten(path: str, source: str) -> str:
    """`source` (a version of `path`) with the REWRITES declared for that file applied, each where it matches."""
    for file, old, new, _ in REWRITES:
        if file == path and source.count(old) == 1:
            source = source.replace(old, new)
    return source


def _entries() -> list[dict]:
    entries = yaml.safe_load((REPO / PRESERVING_CHANGES).read_text(encoding="utf-8")) or []
    return [e for e in entries if e.get("shown_by") == TEST]


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["file"])
def test_moved_code_is_the_code_before(entry):
    new_path = entry.get("moved_to") or entry["file"]
    before = rewritten(entry["file"], source_at(entry["file"], entry["from"]))
    after = source_at(new_path, entry["to"])
    same_code(before, after, entry["file"], new_path)
    for required, digest in (entry.get("requires") or {}).items():
        source_at(required, digest)  # a version the move brought in, in git


def test_every_declared_rewrite_is_applied_to_a_declared_change():
    """A rewrite names text of the `from` version of one entry of its file (and only there, once)."""
    entries = [e for e in _entries() if e["file"] in {r[0] for r in REWRITES}]
    for file, old, new, why in REWRITES:
        matched = [e for e in entries if e["file"] == file and source_at(file, e["from"]).count(old) == 1]
        assert len(matched) == 1 and why, (file, old[:60])
        assert rewritten(file, source_at(file, matched[0]["from"])) != source_at(file, matched[0]["from"])


def test_a_moved_function_is_the_code_it_was():
    """Each NAME_MOVES function is, where it is now, the definition it had, and so is each module constant it reads."""
    def definitions(source: str) -> tuple[dict[str, ast.FunctionDef], dict[str, str]]:
        tree = ast.parse(source)
        return ({n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)},
                {t.id: ast.dump(n.value) for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                 if isinstance(t, ast.Name)})

    for revision, old, new in ((r, o, n) for r, moves in NAME_MOVES_AT for o, n in moves.items()):
        (old_module, name), (new_module, new_name) = old.rsplit(".", 1), new.rsplit(".", 1)
        before, before_constants = definitions(git("show", f"{revision}:{old_module.replace('.', '/')}.py"))
        after, after_constants = definitions((REPO / f"{new_module.replace('.', '/')}.py").read_text(encoding="utf-8"))
        assert name == new_name and ast.dump(before[name]) == ast.dump(after[name]), old
        constants = {n.id for n in ast.walk(after[name]) if isinstance(n, ast.Name) and n.id in after_constants}
        assert constants <= before_constants.keys() and all(
            before_constants[c] == after_constants[c] for c in constants), old


def test_every_moved_module_is_declared_where_a_result_recorded_it():
    """Each old path a committed result recorded has a move entry from the digest it recorded."""
    moves = read_moves(REPO / PRESERVING_CHANGES)
    recorded = {}
    for meta in REPO.glob("results/**/meta.json"):
        recorded.update(json.loads(meta.read_text(encoding="utf-8")).get("library_files") or {})
    old_files = {old.replace(".", "/") + ".py" for old in RENAMES}
    missing = [f for f in old_files & recorded.keys() if (f, recorded[f]) not in moves
               and not _reaches_a_move(f, recorded[f], moves)]
    assert not missing, f"recorded, moved and not declared: {missing}"
    assert not any((REPO / f).exists() for f in old_files), "a moved module is still at its old path"


def _reaches_a_move(path: str, digest: str, moves) -> bool:
    """A recorded version that declared in-place changes take to a version that a move takes on."""
    from taser_book.preserving import preserved_digests, read_preserving_changes

    changes = read_preserving_changes(REPO / PRESERVING_CHANGES)
    return any((path, version) in moves for version in preserved_digests(path, digest, changes))


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
