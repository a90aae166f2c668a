"""`models.auto` reads a config field's annotation without `eval` (issue 49: no code evaluates names), a change that
keeps every result: for every field of every architecture's config class (and for the other shapes an annotation can
take), the type it reads is the one the old `eval` gave, so `check_overrides` coerces and refuses exactly as before."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

import yaml

from git_versions import source_at
from taser_book.preserving import PRESERVING_CHANGES
from taser_lib.models import auto

REPO = Path(__file__).resolve().parents[1]
FILE = "taser_lib/models/auto.py"
TEST = "tests/test_auto_hints.py::test_every_annotation_reads_as_the_old_eval_read_it"
MORE = ("int", "float | None", "dict[str, list[int]] | None", "Literal['a', 'b']", "torch.dtype", "str | torch.dtype",
        "Optional[int]", "list", "None")


def _old_hint(source: str):
    """The `_hint` function of an old version of models/auto.py, on its own."""
    (node,) = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "_hint"]
    namespace = {"Any": typing.Any}
    exec(compile(ast.Module([node], []), FILE, "exec"), namespace)  # noqa: S102 - the repository's own old code
    return namespace["_hint"]


def test_every_annotation_reads_as_the_old_eval_read_it():
    (entry,) = [e for e in yaml.safe_load((REPO / PRESERVING_CHANGES).read_text(encoding="utf-8"))
                if e.get("shown_by") == TEST]
    old = _old_hint(source_at(FILE, entry["from"]))
    assert "eval(" in source_at(FILE, entry["from"]) and "eval(" not in source_at(FILE, entry["to"])
    fields = {f.type for cls in auto.CONFIG_CLASSES.values() for f in dataclasses.fields(cls)}
    assert len(fields) >= 15
    for annotation in [*fields, *MORE]:
        assert auto._hint(annotation) == old(annotation), annotation
