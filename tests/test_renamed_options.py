"""`loop.lr` is `loop.learning_rate` (issue 53: one spelling of the learning rate from notebook to config, the one of
transformers' `TrainingArguments`), a change that keeps every result.

Each entry of `taser_book/result_preserving_changes.yaml` shown by `test_the_code_is_its_code_before_with_the_name`
is its version `from` with the field's reads renamed (`config.lr` -> `config.learning_rate`, and the messages that
name it), compared in `tests/test_moves.py`'s canonical form (docstrings aside). The loop's config also gained
`LoopConfig.unknown_key_hint`, which only words the error for a config file that still says `lr:`. The run key keeps
the old name (`runs.cache.RENAMED_OPTIONS`, shown by `tests/test_recipe_keys.py` and `tests/test_run_cache.py`), so
every cached run is found as before.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

import test_moves
from git_versions import source_at
from taser_book.preserving import PRESERVING_CHANGES

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_renamed_options.py::test_the_code_is_its_code_before_with_the_name"
READS = re.compile(r"\b(self\.config|self|config|loop)\.lr\b")
FIELD = ("    lr: float = _described(", "    learning_rate: float = _described(")
MESSAGES = (("loop.lr must be > 0", "loop.learning_rate must be > 0"), ('f"loop.lr, now', 'f"loop.learning_rate, now'))
ADDED = {"taser_lib/training/loop.py": ("LoopConfig", "unknown_key_hint")}  # (class, method) the change added


def _entries() -> list[dict]:
    entries = yaml.safe_load((REPO / PRESERVING_CHANGES).read_text(encoding="utf-8")) or []
    return [e for e in entries if e.get("shown_by") == TEST]


def renamed(source: str) -> str:
    """`source` with the learning rate read and named as `learning_rate`."""
    out = READS.sub(r"\1.learning_rate", source).replace(*FIELD)
    for old, new in MESSAGES:
        out = out.replace(old, new)
    return out


def without_method(source: str, cls: str, method: str) -> str:
    tree = ast.parse(source)
    (owner,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    (node,) = [n for n in owner.body if isinstance(n, ast.FunctionDef) and n.name == method]
    lines = source.splitlines(keepends=True)
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    del lines[start - 1:node.end_lineno]
    return "".join(lines)


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["file"])
def test_the_code_is_its_code_before_with_the_name(entry):
    path = entry["file"]
    before, after = source_at(path, entry["from"]), source_at(path, entry["to"])
    assert renamed(before) != before and "config.lr" not in after and "loop.lr" not in after
    if path in ADDED:
        after = without_method(after, *ADDED[path])
    assert test_moves.canonical(renamed(before), path) == test_moves.canonical(after, path), f"{path}: more changed"


def test_the_renaming_sees_a_change_beyond_the_name():
    before = "def f(config):\n    return config.lr * 2\n"
    assert renamed(before) == "def f(config):\n    return config.learning_rate * 2\n"
    assert test_moves.canonical(renamed(before), "x.py") != test_moves.canonical(
        "def f(config):\n    return config.learning_rate * 3\n", "x.py")
