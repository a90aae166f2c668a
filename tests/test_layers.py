"""The layering of the core library and of the book's machinery, checked on the source: the core (`taser_lib`)
imports nothing from the book's package (`taser_book`), there are no import circles, and no module imports from a
layer above its own. Imports inside functions (the lazy ones the CLI uses to start quickly) count as much as those
at the top.

The layers, lowest first, as the README lists them (each package's __init__.py repeats its list):

    taser_lib:  errors, io, meta, plugins, progress -> data, losses -> models -> retrieval -> evaluation -> training -> speed, export, datasets
    taser_book: analyses, bench -> results, preserving, claims, run_ledger, profiles, executed -> tables -> runs -> plots -> scorecard -> pages -> runner -> book -> reproduce -> cli
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CORE, BOOK = "taser_lib", "taser_book"
README = REPO / "README.md"

LAYERS: dict[str, tuple[tuple[str, ...], ...]] = {
    CORE: (
        ("errors", "io", "meta", "plugins", "progress"),
        ("data", "losses"),
        ("models",),
        ("retrieval",),
        ("evaluation",),
        ("training",),
        ("speed", "export", "datasets"),
    ),
    BOOK: (
        ("analyses", "bench"),
        ("results", "preserving", "claims", "run_ledger", "profiles", "executed"),
        ("tables",),
        ("runs",),
        ("plots",),
        ("scorecard",),
        ("pages",),
        ("runner",),
        ("book",),
        ("reproduce",),
        ("cli",),
    ),
}
# one order for both packages: every core layer below every layer of the book's package
RANK = {(package, name): rank
        for rank, (package, names) in enumerate((p, n) for p in (CORE, BOOK) for n in LAYERS[p]) for name in names}
PACKAGES = {name: REPO / name for name in (CORE, BOOK)}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module of either package that `path` imports (absolute names), at any depth of the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in PACKAGES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] not in PACKAGES:
                continue
            # `from . import x` / `from .pkg import sub` may name submodules: count them when they are modules
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if (REPO / Path(*sub.split("."))).with_suffix(".py").is_file() or \
                        (REPO / Path(*sub.split(".")) / "__init__.py").is_file():
                    found.add(sub)
                else:
                    found.add(target)
    found.discard(name)
    return found


def layer_of(module: str) -> tuple[str, str]:
    parts = module.split(".")
    return parts[0], (parts[1] if len(parts) > 1 else "")


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for root in PACKAGES.values() for p in root.rglob("*.py")}


@pytest.mark.parametrize("package", [CORE, BOOK])
def test_every_top_level_module_has_a_layer(package):
    tops = {p.stem if p.is_file() else p.name for p in PACKAGES[package].iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").is_file())}
    named = {name for names in LAYERS[package] for name in names}
    assert not tops - named, f"{package}: modules with no layer in tests/test_layers.py: {sorted(tops - named)}"


def test_the_core_imports_nothing_from_the_books_package():
    bad = sorted(f"{module} imports {target}" for module, targets in graph().items()
                 if module.split(".")[0] == CORE for target in targets if target.split(".")[0] == BOOK)
    assert not bad, "the core library depends on the book's machinery:\n" + "\n".join(bad)
    # nor by a name in a string (importlib, mock targets)
    mentions = sorted(str(p.relative_to(REPO)) for p in PACKAGES[CORE].rglob("*.py")
                      if re.search(rf"\b{BOOK}\b", p.read_text(encoding="utf-8")))
    assert not mentions, f"core files that name {BOOK}: {mentions}"


def test_no_module_imports_from_a_layer_above_its_own():
    bad = []
    for module, targets in graph().items():
        if module in PACKAGES:
            continue
        for target in targets:
            if target in PACKAGES:  # a package's own __init__ (its version); the core's import of taser_book is
                continue            # the test above
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                bad.append(f"{module} ({layer_of(module)[1]}) imports {target} ({layer_of(target)[1]})")
    assert not bad, "imports from a higher layer:\n" + "\n".join(sorted(bad))


def _cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `edges`, or None (depth-first search with colours)."""
    colour: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if colour.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = 2
        return None

    for node in sorted(edges):
        if colour.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circles_between_modules():
    # A package's __init__ re-exports its submodules; a submodule importing its own package's __init__ would be a
    # circle, and so would two modules importing each other, at any depth.
    circle = _cycle(graph())
    assert circle is None, "import circle: " + " -> ".join(circle)


def test_no_import_circles_between_layers():
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        for target in targets:
            a, b = layer_of(module), layer_of(target)
            if a[1] and b[1] and a != b:
                edges.setdefault(a, set()).add(b)
    circle = _cycle(edges)
    assert circle is None, "circle between top-level modules: " + " -> ".join(circle)


def test_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


FIRST_LAYER = {CORE: "errors", BOOK: "analyses"}


@pytest.mark.parametrize("package,source", [(CORE, README), (CORE, PACKAGES[CORE] / "__init__.py"),
                                            (BOOK, README), (BOOK, PACKAGES[BOOK] / "__init__.py")])
def test_the_documented_layer_list_matches(package, source):
    text = source.read_text(encoding="utf-8")
    line = next((ln for ln in text.splitlines() if "->" in ln and ln.lstrip(" `*").split(":")[-1].lstrip(" `")
                 .startswith(FIRST_LAYER[package])), None)
    assert line is not None, f"{source.name} lists no layers of {package}"
    rank = {name: r for (p, name), r in RANK.items() if p == package}
    documented = [re.findall(r"[a-z_]+", part) for part in re.split(r"->", line.split(":")[-1])]
    documented = [[w for w in words if w in rank] for words in documented]
    documented = [words for words in documented if words]
    ranks = [{rank[w] for w in words} for words in documented]
    assert all(len(r) == 1 for r in ranks), f"{source.name}: one step of its layer list mixes layers: {documented}"
    order = [r.pop() for r in ranks]
    assert order == sorted(order), f"{source.name}: its layer list is out of order: {documented}"
    named = {w for words in documented for w in words}
    assert named == set(rank), f"{source.name} and this test disagree on {sorted(set(rank) ^ named)}"
