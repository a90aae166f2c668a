"""The training kinds and the re-ranking losses are one table each (issue 49, item 3: names only at the edge), changes
that keep every result.

**The kinds.**
Before, each trainer registered its kind when its module was imported (`register_kind(...)` at the module's end), and
`training.config.get_kind` imported a trainer's module by name (`KIND_MODULES`) to find it. Now `training.kinds` holds
the table (`KINDS`: name, config class, trainer), `get_kind`, `train`, and the four functions that need the table,
moved from `training.config` as they were: `config_from_dict`, `load_config`, `default_config`, `default_yaml`.

Each entry of `taser_book/result_preserving_changes.yaml` shown by `test_each_file_is_its_code_before_the_table` is
its version `from` read this way (both versions from git by their digests, so the test holds after later commits):

- `training/config.py`: without the registry (`Kind`, `KINDS`, `register_kind`, `KIND_MODULES`, `discover_kinds`,
  `get_kind`), the four functions that moved (each the same definition in `kinds.py`, docstrings aside, at the
  digest the entry requires) and the imports only they used; the help text of `kind` names the kinds;
- a trainer (`mining`, `cross_encoder`, `distill`): without its `register_kind` call and that name's import;
- a book file: the moved names imported from `kinds` (`tests/test_moves.py`'s canonical form: imports as what they
  bind, docstrings aside).

`test_the_table_holds_what_the_trainers_registered` shows the table is the registry the old trainers filled: the same
names, config classes and trainers, and the same answer for a name it does not know.

**The losses.** Each loss class registered itself in `RERANK_LOSSES` through a decorator (`@_register`); now the
table is one literal after the classes. `test_the_losses_are_their_code_before_the_table`: the file is its version
before without the decorator, its function and the empty table, and the table names the same classes in the same
order (the order `training.distill` lists the names and the settings in).

**The recipe tables, read by the pages themselves.** `runs.recipes.load_variants(section)` returned
`SECTIONS[section]`, one of the two tables (`{"variants": RETRIEVERS, "reranking": RERANKERS}`), and `variant(name)`
that table's entry. The pages now read `RERANKERS` and `RETRIEVERS` directly, and both functions are gone.
`test_a_page_reads_the_recipe_tables_themselves`: each page module is its version before with exactly those reads
rewritten (`page_rewrite`), and the old functions were what this says.
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
from taser_lib.errors import ConfigError
from taser_lib.training.kinds import KINDS, get_kind

REPO = Path(__file__).resolve().parents[1]
TEST = "tests/test_name_tables.py::test_each_file_is_its_code_before_the_table"
LOSS_TEST = "tests/test_name_tables.py::test_the_losses_are_their_code_before_the_table"
LOSSES_FILE = "taser_lib/training/rerank_losses.py"
PAGES_TEST = "tests/test_name_tables.py::test_a_page_reads_the_recipe_tables_themselves"
RECIPES_FILE = "taser_book/runs/recipes.py"
# the version of recipes.py whose load_variants / variant the pages called last
RECIPES_BEFORE = "9969ffaa69e9ef874988bdcc7fdd4bedb795393a343b2d21992da87b3bd5145e"
CONFIG, KINDS_FILE = "taser_lib/training/config.py", "taser_lib/training/kinds.py"
MOVED = ("config_from_dict", "load_config", "default_config", "default_yaml")
REGISTRY = ("Kind", "KINDS", "register_kind", "KIND_MODULES", "discover_kinds", "get_kind")
TRAINERS = ("taser_lib/training/mining.py", "taser_lib/training/cross_encoder.py", "taser_lib/training/distill.py")
# (old text, new text) of training/config.py beyond the cut: the help text, and the imports only the cut code used
CONFIG_EDITS = (
    ('"what to train: retriever | the kinds other trainers register"',
     '"what to train: retriever | cross-encoder | distill (training.kinds)"'),
    ("import importlib\n", ""),
    ("from collections.abc import Callable, Sequence\n", "from collections.abc import Sequence\n"),
    ("from pathlib import Path\n", ""),
)


def _entries(test: str = TEST) -> list[dict]:
    entries = yaml.safe_load((REPO / PRESERVING_CHANGES).read_text(encoding="utf-8")) or []
    return [e for e in entries if e.get("shown_by") == test]


def _top_level(source: str) -> dict[str, ast.stmt]:
    """{name: definition or assignment} of a module's top level."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    out[target.id] = node
    return out


def _without(source: str, names: tuple[str, ...]) -> str:
    """`source` without the top-level definitions of `names` (their decorators too)."""
    lines = source.splitlines(keepends=True)
    for node in sorted((n for name, n in _top_level(source).items() if name in names), key=lambda n: -n.lineno):
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        del lines[start - 1:node.end_lineno]
    return "".join(lines)


def _without_registration(source: str) -> str:
    """A trainer's source without its `register_kind(...)` call and the import of that name."""
    cut = re.sub(r"^register_kind\(.*\)\n", "", source, flags=re.M)
    cut = re.sub(r"^(from \.config import .*), register_kind\n", r"\1\n", cut, flags=re.M)
    assert cut.count("register_kind") == 0 and cut != source
    return cut


def _requires(entry: dict) -> str:
    return source_at(KINDS_FILE, entry["requires"][KINDS_FILE])


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e["file"])
def test_each_file_is_its_code_before_the_table(entry, monkeypatch):
    path = entry["file"]
    before, after = source_at(path, entry["from"]), source_at(path, entry["to"])
    if path == CONFIG:
        for old, new in CONFIG_EDITS:
            assert before.count(old) == 1, old
            before = before.replace(old, new)
        moved, now = _top_level(before), _top_level(_requires(entry))
        for name in MOVED:
            assert test_moves.canonical(ast.unparse(moved[name]), CONFIG) == test_moves.canonical(
                ast.unparse(now[name]), CONFIG), f"{name} changed in its move to kinds.py (docstrings aside)"
        before = _without(before, REGISTRY + MOVED)
    elif path in TRAINERS:
        before = _without_registration(before)
    else:
        for name in (*MOVED, "get_kind"):
            monkeypatch.setitem(test_moves.NAME_MOVES, f"taser_lib.training.config.{name}",
                                f"taser_lib.training.kinds.{name}")
    assert test_moves.canonical(before, path) == test_moves.canonical(after, path), f"{path}: more changed"
    source_at(KINDS_FILE, entry["requires"][KINDS_FILE])  # the table's version it was shown with, in git


def test_the_table_holds_what_the_trainers_registered():
    """The old trainers' `register_kind(name, ConfigClass, run)` calls, read from their versions before the table:
    the table has each name with that class and that trainer, from that trainer's module, and nothing else; an unknown
    name gets the message old `get_kind` gave (it listed KIND_MODULES, whose names these are)."""
    trainers = [e for e in _entries() if e["file"] in TRAINERS]
    assert sorted(e["file"] for e in trainers) == sorted(TRAINERS)
    registered = {}
    for entry in trainers:
        module = entry["file"].removesuffix(".py").replace("/", ".")
        for node in ast.walk(ast.parse(source_at(entry["file"], entry["from"]))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "register_kind":
                name, config_class, run = node.args
                registered[name.value] = (config_class.id, run.id, module)
    table = {name: (k.config_class.__name__, k.run.__name__, k.run.__module__) for name, k in KINDS.items()}
    assert table == registered
    (config_entry,) = [e for e in _entries() if e["file"] == CONFIG]
    old_modules = ast.literal_eval(_top_level(source_at(CONFIG, config_entry["from"]))["KIND_MODULES"].value)
    assert set(old_modules) == set(KINDS)
    with pytest.raises(ConfigError, match=re.escape(f"known: {', '.join(sorted(old_modules))}")):
        get_kind("colbert")


@pytest.mark.parametrize("entry", _entries(LOSS_TEST), ids=lambda e: e["file"])
def test_the_losses_are_their_code_before_the_table(entry):
    assert entry["file"] == LOSSES_FILE
    before, after = source_at(LOSSES_FILE, entry["from"]), source_at(LOSSES_FILE, entry["to"])
    registered = [node.name for node in ast.parse(before).body if isinstance(node, ast.ClassDef)
                  and any(getattr(d, "id", None) == "_register" for d in node.decorator_list)]
    (table,) = [node for node in ast.parse(after).body if isinstance(node, ast.AnnAssign)
                and node.target.id == "RERANK_LOSSES"]
    assert [e.id for e in table.value.generators[0].iter.elts] == registered and len(registered) == 8
    assert before.count("@_register\n") == len(registered)
    old = _without(before.replace("@_register\n", ""), ("RERANK_LOSSES", "_register"))
    new = _without(after, ("RERANK_LOSSES",))
    assert test_moves.canonical(old, LOSSES_FILE) == test_moves.canonical(new, LOSSES_FILE)


def page_rewrite(source: str) -> str:
    """A page module's source with its reads of the recipe tables through `load_variants` / `variant` rewritten as
    reads of the tables themselves, and its import of those names as an import of the tables."""
    table = "RERANKERS" if re.search(r"section=[\"']reranking[\"']", source) else "RETRIEVERS"
    out = re.sub(r"load_variants\(section=[\"']reranking[\"']\)", "RERANKERS", source)
    out = out.replace("load_variants()", "RETRIEVERS")
    out = re.sub(r"(?<![\w.])variant\((name|'taser' if name == 'taser-cocondenser' else name)\)", r"RETRIEVERS[\1]",
                 out)

    def imports(match: re.Match) -> str:
        names = {{"load_variants": table, "variant": "RETRIEVERS"}.get(n, n) for n in match.group(2).split(", ")}
        return match.group(1) + ", ".join(sorted(names, key=lambda n: (not n.isupper(), n)))

    return re.sub(r"^(from \.\.runs\.recipes import )(.*)$", imports, out, flags=re.M)


@pytest.mark.parametrize("entry", _entries(PAGES_TEST), ids=lambda e: e["file"])
def test_a_page_reads_the_recipe_tables_themselves(entry):
    before, after = source_at(entry["file"], entry["from"]), source_at(entry["file"], entry["to"])
    assert page_rewrite(before) != before and "load_variants" not in after and "variant(" not in after
    assert test_moves.canonical(page_rewrite(before), entry["file"]) == test_moves.canonical(after, entry["file"])
    old = _top_level(source_at(RECIPES_FILE, RECIPES_BEFORE))
    assert ast.unparse(old["SECTIONS"]) == "SECTIONS = {'variants': RETRIEVERS, 'reranking': RERANKERS}"
    assert "return SECTIONS[section]" in ast.unparse(old["load_variants"])
    assert "recipes = load_variants(section)" in ast.unparse(old["variant"]) and \
        "return recipes[name]" in ast.unparse(old["variant"])
    assert ast.unparse(old["load_variants"].args.defaults[0]) == "'variants'"


def test_the_reading_sees_a_change_beyond_the_declared_ones():
    old = ("from .config import TrainConfig, register_kind\n\n\ndef run(c):\n    return c\n\n\n"
           "register_kind('r', TrainConfig, run)\n")
    path = TRAINERS[0]
    same = "from .config import TrainConfig\n\n\ndef run(c):\n    return c\n"
    assert test_moves.canonical(_without_registration(old), path) == test_moves.canonical(same, path)
    assert test_moves.canonical(_without_registration(old), path) != test_moves.canonical(
        same.replace("return c", "return c.loop"), path)
    assert _without("@dataclass\nclass Kind:\n    x: int\n\n\ndef f():\n    pass\n", ("Kind",)).strip() == \
        "def f():\n    pass"
