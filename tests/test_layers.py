"""The library's layering, checked on the source: no import circles, and no module imports from a layer above its
own. Imports inside functions (the lazy ones the CLI uses to start quickly) count as much as those at the top.

The layers, lowest first, as the README lists them (taser_lib/__init__.py repeats the list):

    errors, io, meta, progress -> data, losses -> models -> retrieval -> evaluation -> training -> plots -> results
    -> reproduce, scorecard, claims, bench -> cli
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "taser_lib"
README = PACKAGE.parent / "README.md"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "io", "meta", "progress"),
    ("data", "losses"),
    ("models",),
    ("retrieval",),
    ("evaluation",),
    ("training",),
    ("plots",),
    ("results",),
    ("reproduce", "scorecard", "claims", "bench"),
    ("cli",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every taser_lib module `path` imports (absolute names), at any depth of the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("taser_lib"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("taser_lib"):
                continue
            # `from . import x` / `from .pkg import sub` may name submodules: count them when they are modules
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").is_file() or \
                        (PACKAGE.parent / Path(*sub.split(".")) / "__init__.py").is_file():
                    found.add(sub)
                else:
                    found.add(target)
    found.discard(name)
    return found


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_every_top_level_module_has_a_layer():
    tops = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
            if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").is_file())}
    assert not tops - set(RANK), f"modules with no layer in tests/test_layers.py: {sorted(tops - set(RANK))}"


def test_no_module_imports_from_a_layer_above_its_own():
    bad = []
    for module, targets in graph().items():
        if module == "taser_lib":
            continue
        for target in targets:
            if target == "taser_lib":
                continue
            if RANK[layer_of(target)] > RANK[layer_of(module)]:
                bad.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
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
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)
    circle = _cycle(edges)
    assert circle is None, "circle between top-level modules: " + " -> ".join(circle)


def test_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.parametrize("source", [README, PACKAGE / "__init__.py"])
def test_the_documented_layer_list_matches(source):
    text = source.read_text(encoding="utf-8")
    line = next((ln for ln in text.splitlines() if "->" in ln and "data" in ln and "cli" in ln), None)
    assert line is not None, f"{source.name} lists no layers"
    documented = [re.findall(r"[a-z_]+", part) for part in re.split(r"->", line)]
    documented = [[w for w in words if w in RANK] for words in documented]
    documented = [words for words in documented if words]
    ranks = [{RANK[w] for w in words} for words in documented]
    assert all(len(r) == 1 for r in ranks), f"{source.name}: one step of its layer list mixes layers: {documented}"
    order = [r.pop() for r in ranks]
    assert order == sorted(order), f"{source.name}: its layer list is out of order: {documented}"
    named = {w for words in documented for w in words}
    assert named == set(RANK), f"{source.name} and this test disagree on {sorted(set(RANK) ^ named)}"
