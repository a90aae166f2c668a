"""A loss name and a routing mode reach their code as objects: outside the one module that owns each (the loss
objects of `training/rerank_losses.py`, the routing strategies of `models/routing.py`) no code compares a loss or
routing name with a string, and the book's run recipes and notebooks change a run's config with typed changes
(`taser_book.runs.changes`), never with dotted `key=value` strings parsed back by the config loader (those are
for a user's `taser train --set`, read where they come in)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWNERS = {"taser_lib/training/rerank_losses.py", "taser_lib/models/routing.py"}
NAMES = {"loss", "routing", "loss_name", "routing_name"}
DOTTED_SETTING = re.compile(r"^(model|data|training|teacher|loop|mining)\.[a-z_.]+=")


def _final_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # cfg["loss"] by its key; routing[label] by what it indexes
        return str(node.slice.value) if isinstance(node.slice, ast.Constant) else _final_name(node.value)
    return None


def _strings(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    return False


def name_comparisons(source: str) -> list[str]:
    """`loss == "mse"`, `config.routing != "token"`, `cfg["loss"] in ("a", "b")`, ... in `source`."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Compare) and _final_name(node.left) in NAMES
            and any(_strings(c) for c in node.comparators)]


def dotted_settings(source: str) -> list[str]:
    """String literals (f-strings by their leading text) that spell a config setting as `section.key=value`."""
    found = set()  # a set: an f-string's leading text is also a constant node of its own
    for node in ast.walk(ast.parse(source)):
        text = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            text = str(node.values[0].value)
        if text and DOTTED_SETTING.match(text):
            found.add(text)
    return sorted(found)


def test_the_checks_find_what_they_look_for():
    assert name_comparisons('if config.training.loss == "mse":\n    pass') == ["config.training.loss == 'mse'"]
    assert name_comparisons('x = routing in ("token", "sequence")') == ["routing in ('token', 'sequence')"]
    assert name_comparisons('if loss is None:\n    pass') == []
    assert name_comparisons('learned = [x for x in paths if routing[x] in ("sequence", "token")]') == [
        "routing[x] in ('sequence', 'token')"]
    assert dotted_settings('sets = [f"training.loss={name}", "loop.max_steps=3", "a=b"]') == ["loop.max_steps=3",
                                                                                         "training.loss="]


def test_no_code_outside_its_owner_branches_on_a_loss_or_routing_name():
    found = []
    for path in sorted([*REPO.glob("taser_lib/**/*.py"), *REPO.glob("taser_book/**/*.py")]):
        rel = path.relative_to(REPO).as_posix()
        if rel not in OWNERS:
            found += [f"{rel}: {c}" for c in name_comparisons(path.read_text(encoding="utf-8"))]
    assert not found, "ask the loss object or the routing strategy instead:\n" + "\n".join(found)


def test_no_notebook_branches_on_a_loss_or_routing_name():
    found = []
    for path in sorted(REPO.glob("notebooks/*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                found += [f"{path.name} cell {i}: {c}" for c in name_comparisons(source)]
    assert not found, "ask the loss object or the routing strategy instead:\n" + "\n".join(found)


def test_run_recipes_and_notebooks_change_configs_with_typed_changes():
    found = []
    for path in sorted(REPO.glob("taser_book/**/*.py")):
        if path.parent.name == "cli":  # `taser train --set KEY=VALUE`: a user's settings, read where they come in
            continue
        found += [f"{path.relative_to(REPO)}: {s}" for s in dotted_settings(path.read_text(encoding="utf-8"))]
    for path in sorted(REPO.glob("notebooks/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in cells:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                found += [f"{path.relative_to(REPO)}: {s}" for s in dotted_settings(source)]
    assert not found, "use taser_book.runs.changes (data(...), training(...), ...):\n" + "\n".join(found)
