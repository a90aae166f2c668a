"""Declared result-preserving library changes do not make pages stale (`taser_book.preserving`)."""

import hashlib
import json
import re
from pathlib import Path

import nbformat
import pytest
import yaml

from taser_book import scorecard
from taser_book.preserving import PRESERVING_CHANGES, read_preserving_changes
from taser_book.runner import page_stale_reason
from taser_book.results import notebook_sha256
from taser_lib.errors import FormatError
from git_versions import source_at

REPO = Path(__file__).resolve().parents[1]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def page(tmp_path):
    """A checkout with one page that loaded taser_lib/stats.py at version 'old'."""
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "taser_lib").mkdir()
    (repo / "taser_book").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    nbformat.write(nb, repo / "notebooks" / "tiny.ipynb")
    (repo / "taser_lib" / "stats.py").write_text("old")
    (repo / "taser_lib" / "fast.py").write_text("fast v1")
    result = tmp_path / "results" / "cpu" / "tiny"
    result.mkdir(parents=True)
    (result / "meta.json").write_text(json.dumps({
        "library_files": {"taser_lib/stats.py": _sha("old")},
        "notebook_source": {"path": "notebooks/tiny.ipynb", "sha256": notebook_sha256(repo / "notebooks" / "tiny.ipynb")}}))
    return repo, result


def _declare(repo: Path, *entries: dict) -> None:
    (repo / PRESERVING_CHANGES).write_text(yaml.safe_dump(list(entries)))


def _change(before: str, after: str, **extra) -> dict:
    return {"file": "taser_lib/stats.py", "from": _sha(before), "to": _sha(after), "why": "faster, same numbers",
            "shown_by": "tests/test_x.py::test_same", **extra}


@pytest.mark.parametrize("stale", [page_stale_reason, scorecard.stale_reason])
def test_a_declared_change_keeps_the_page_current_and_any_other_does_not(page, stale):
    repo, result = page
    assert stale(result, repo) is None
    (repo / "taser_lib" / "stats.py").write_text("new")
    assert stale(result, repo) == "library file taser_lib/stats.py changed since the result was made"
    _declare(repo, _change("old", "new", requires={"taser_lib/fast.py": _sha("fast v1")}))
    assert stale(result, repo) is None
    (repo / "taser_lib" / "fast.py").write_text("fast v2")  # what the new version brought in changed: stale again
    assert "taser_lib/stats.py changed" in stale(result, repo)
    (repo / "taser_lib" / "fast.py").write_text("fast v1")
    (repo / "taser_lib" / "stats.py").write_text("newer")  # an undeclared change after a declared one
    assert "taser_lib/stats.py changed" in stale(result, repo)
    _declare(repo, _change("old", "new", requires={"taser_lib/fast.py": _sha("fast v1")}), _change("new", "newer"))
    assert stale(result, repo) is None  # declared changes chain
    _declare(repo, _change("new", "newer"))  # but not from a version the page never recorded
    assert "taser_lib/stats.py changed" in stale(result, repo)


@pytest.mark.parametrize("stale", [page_stale_reason, scorecard.stale_reason])
def test_a_declared_move_keeps_the_page_current_while_the_moved_file_is_as_declared(page, stale):
    repo, result = page
    (repo / "taser_lib" / "stats.py").unlink()
    (repo / "taser_book" / "stats.py").write_text("old, moved")
    assert stale(result, repo) == "library file taser_lib/stats.py (removed) changed since the result was made"
    moved = _change("old", "old, moved", moved_to="taser_book/stats.py")
    _declare(repo, moved)
    assert stale(result, repo) is None
    (repo / "taser_book" / "stats.py").write_text("changed after the move")
    assert "taser_lib/stats.py (removed)" in stale(result, repo)
    _declare(repo, moved, {**_change("old, moved", "changed after the move"), "file": "taser_book/stats.py"})
    assert stale(result, repo) is None  # a move chains with the moved file's own declared changes
    (repo / "taser_lib" / "stats.py").write_text("old")  # a file back at the old path is read there, as ever
    assert stale(result, repo) is None
    (repo / "taser_lib" / "stats.py").write_text("other")
    assert "taser_lib/stats.py changed" in stale(result, repo)


@pytest.mark.parametrize("text, message", [
    ("- file: taser_lib/stats.py\n  from: a\n  to: b\n  why: w\n", "yaml:1: field 'shown_by' change 1: missing"),
    ("file: x\n", "yaml:1: expected a list of changes"),
    ("- {file: f, from: a, to: b, why: w, shown_by: t}\n- [not, a, mapping]\n", "yaml:2: change 2: expected"),
    ("- {file: [\n", "invalid YAML"),
    ("- {file: f, from: a, to: b, why: w, shown_by: t, reason: r}\n", "yaml:1: field 'reason' change 1: unknown"),
    ("- just a string\n", "yaml:1: change 1: expected a mapping"),
    ("- {file: f, from: a, to: b, why: w, shown_by: t, moved_to: f}\n", "yaml:1: field 'moved_to' change 1: names the"),
    ("- {file: f, from: a, to: b, why: w, shown_by: t, requires: [x]}\n", "yaml:1: field 'requires' change 1: must map files"),
])
def test_a_malformed_declaration_names_the_file_and_the_change(page, text, message):
    repo, result = page
    (repo / PRESERVING_CHANGES).write_text(text)
    with pytest.raises(FormatError, match=re.escape(message)) as raised:
        page_stale_reason(result, repo)
    assert PRESERVING_CHANGES.rsplit("/", 1)[-1] in str(raised.value)


def test_every_committed_declaration_names_a_test_that_exists():
    changes = yaml.safe_load((REPO / PRESERVING_CHANGES).read_text())
    assert read_preserving_changes(REPO / PRESERVING_CHANGES)
    moved_later = {e["file"] for e in changes if e.get("moved_to")}  # a file that a later entry takes elsewhere
    for entry in changes:
        test_file, _, test_name = entry["shown_by"].partition("::")
        assert re.search(rf"^def {re.escape(test_name)}\(", (REPO / test_file).read_text(), re.M), entry["shown_by"]
        where = entry.get("moved_to") or entry["file"]
        assert (REPO / where).is_file() or where in moved_later, where
        for required in entry.get("requires") or {}:
            assert (REPO / required).is_file() or required in moved_later, required


def test_code_sha256_sees_code_and_not_docstrings_or_comments():
    from taser_book.preserving import code_sha256

    base = '"""Module."""\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n\n\nclass C:\n    """C."""\n'
    assert code_sha256(base) == code_sha256(base.replace("Module.", "Another module.").replace("# one", "# two")
                                            .replace('"""Doc."""', '"""Other\n    doc."""'))
    assert code_sha256(base) == code_sha256(base.replace('    """Doc."""\n', ""))  # a docstring dropped
    # a second string after the docstring is an expression statement: code
    assert code_sha256(base) != code_sha256(base.replace('    """C."""\n', '    """C."""\n    """Not a docstring."""\n'))
    assert code_sha256(base) != code_sha256(base.replace("x + 1", "x + 2"))


def test_docstring_only_changes_keep_the_code():
    """Each committed entry with code_sha256: the file at `to` has the code hash recorded from the file at `from`."""
    from taser_book.preserving import code_sha256

    checked = 0
    for entry in yaml.safe_load((REPO / PRESERVING_CHANGES).read_text()):
        if "code_sha256" not in entry:
            continue
        text = source_at(entry["file"], entry["to"])  # the version it declared, in git if it changed since
        assert code_sha256(text) == entry["code_sha256"], entry["file"]
        checked += 1
    assert checked >= 1


def test_prose_only_notebook_changes_keep_the_code():
    """Each committed notebook entry shown by this test: the notebook at `to` has the cells of the notebook at `from`,
    in order, with the same code; only the text of markdown cells changed."""
    checked = 0
    for entry in yaml.safe_load((REPO / PRESERVING_CHANGES).read_text()):
        if not entry["shown_by"].endswith("::test_prose_only_notebook_changes_keep_the_code"):
            continue
        before, after = (json.loads(source_at(entry["file"], entry[end]))["cells"] for end in ("from", "to"))
        assert [c["cell_type"] for c in before] == [c["cell_type"] for c in after], entry["file"]
        code = [("".join(b["source"]), "".join(a["source"])) for b, a in zip(before, after) if b["cell_type"] == "code"]
        assert all(b == a for b, a in code), entry["file"]
        checked += 1
    assert checked >= 1
