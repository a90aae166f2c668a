"""A page's experiment at a profile is one object: `profiles.page_settings(page, profile, overrides)`.

A notebook's parameters cell holds only `profile`, `overrides` and `results_dir`; its first hidden cell resolves the
rest from `taser_book/pages.yaml` and the profile, so a plain `papermill NB OUT -p profile cpu` runs the cpu profile's
model and sizes, and `taser reproduce` injects nothing else. The move from twenty parameters per cell to that object is
result-preserving: every page runs its old code with each setting read as `settings.<name>`, and its settings at
`cpu` are the parameters its committed result recorded (checked against the notebooks at `BEFORE`, from git)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from taser_book.profiles import (PAGES_FILE, Profile, load_pages, load_profile, load_profiles, page_defaults,
                                 page_settings)
from taser_book.runner import _injected, notebook_parameters, result_status
from taser_book.scorecard import stale_reason as scorecard_stale_reason
from taser_lib.errors import ConfigError, FormatError
from git_versions import source_at

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
BEFORE = "b5b75a2"  # the last revision whose notebooks declared every setting in their parameters cells
PARAMETERS_CELL = ("profile", "overrides", "results_dir")


def _cells(nb, kind="code"):
    return [c for c in nb.cells if c.cell_type == kind]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_parameters_cell_names_no_model_or_size_and_the_next_cell_resolves_the_page(path):
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [node.targets[0].id for node in ast.parse(cell.source).body]
    assert tuple(assigned) == PARAMETERS_CELL
    after = _cells(nb)[_cells(nb).index(cell) + 1]
    tree = ast.parse(after.source)
    calls = [n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)]
    resolving = [c for c in calls if getattr(c.func, "id", None) == "page_settings"]
    moved = [c for c in calls if ast.unparse(c.func) == f"{path.stem}.settings"]  # a page module (taser_book/pages)
    assert resolving or moved, f"{path.name}: the cell after the parameters does not call page_settings"
    args = [a.value if isinstance(a, ast.Constant) else a.id for a in (resolving or moved)[0].args]
    assert args == ([path.stem] if resolving else []) + ["profile", "overrides"]
    if moved:
        assert any(isinstance(n, ast.ImportFrom) and n.module == "taser_book.pages"
                   and path.stem in [a.name for a in n.names] for n in tree.body)
    assert path.stem in load_pages()


@pytest.mark.parametrize("profile", ["smoke", "cpu", "gpu", "full"])
def test_every_page_resolves_every_packaged_profile_and_injects_only_its_name(profile):
    profiles = load_profiles()
    for path in NOTEBOOKS:
        settings = page_settings(path.stem, profile)
        assert settings.profile == profile
        body = profiles[profile]
        for name in load_pages()[path.stem].uses:   # the profile's value, unless it overrides it for this page
            want = body["notebooks"].get(path.stem, {}).get(name, body.get(name, getattr(load_profile(profile), name)))
            assert getattr(settings, name) == want, (path.stem, name)
        assert notebook_parameters(path, profile) == settings.as_dict()
        assert _injected(path, profile, settings.as_dict(), None) == {"profile": profile}
        assert _injected(path, profile, settings.as_dict(), {"n_train": 3}) == {"profile": profile,
                                                                                "overrides": {"n_train": 3}}


def test_settings_are_frozen_and_overrides_are_checked():
    s = page_settings("de_margins", "cpu", {"n_train": 7, "students": ["de-one-hot"]})
    assert (s.n_train, s.students, s.model, s.n_scored) == (7, ["de-one-hot"], "default", 200)
    with pytest.raises(AttributeError):
        s.n_train = 3
    with pytest.raises(ConfigError, match="unknown setting.*n_trian"):
        page_settings("de_margins", "cpu", {"n_trian": 7})
    with pytest.raises(ConfigError, match="unknown profile 'cpuu'"):
        page_settings("de_margins", "cpuu")
    with pytest.raises(ConfigError, match="no entry in pages.yaml"):
        page_settings("nonesuch", "cpu")
    with pytest.raises(ConfigError, match="results_dir cannot be overridden"):
        page_settings("de_margins", "cpu", {"results_dir": "x"})
    # where no profile sets a setting: the page's own default, or the Profile field's (none for `model`)
    defaults = page_defaults("baselines")
    assert defaults == {"precision": "fp32", "qa_datasets": ["squad-open"], "ood_datasets": ["scifact", "cranfield"],
                        "qa_corpus": None, "stream_corpus": None}
    assert page_defaults("nonesuch") == {}


def test_a_profile_is_a_typed_object_and_names_a_field_it_does_not_know(tmp_path):
    cpu = load_profile("cpu")
    assert isinstance(cpu, Profile) and cpu.model == "default" and cpu.n_train == 2000 and cpu.seeds == [13, 14, 15]
    extra = tmp_path / "mine.yaml"
    extra.write_text("profiles:\n  mine:\n    extends: smoke\n    n_trian: 4\n")
    with pytest.raises(FormatError, match=r"mine.yaml:2: field 'profiles.mine.n_trian' unknown field"):
        load_profile("mine", extra)
    extra.write_text("profiles:\n  mine:\n    extends: smoke\n    n_train: four\n")
    with pytest.raises(FormatError, match=r"profiles.mine.n_train' must be int \| None, got 'four'"):
        load_profile("mine", extra)
    extra.write_text("profiles:\n  mine:\n    extends: smoke\n    notebooks: {de_margins: {n_scorred: 3}}\n")
    with pytest.raises(ConfigError, match="profile 'mine' overrides for page 'de_margins'.*n_scorred"):
        page_settings("de_margins", load_profile("mine", extra))


def test_a_malformed_pages_file_names_its_line(tmp_path):
    bad = tmp_path / "pages.yaml"
    bad.write_text("a:\n  uses: [model]\nb:\n  uses: [modle]\n")
    with pytest.raises(FormatError, match=r"pages.yaml:3.*b.uses.*modle"):
        load_pages(bad)
    bad.write_text("a:\n  uses: [model]\n  own: {model: x}\n")
    with pytest.raises(FormatError, match="a.own.*model"):
        load_pages(bad)
    assert PAGES_FILE.is_file()


def _git_show(path: str) -> str:
    done = subprocess.run(["git", "show", f"{BEFORE}:{path}"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"git show {BEFORE}:{path} failed (a clone without history?): {done.stderr.strip()}"
    return done.stdout


class _Back(ast.NodeTransformer):
    """The new code read back in the old form: settings.<name> -> <name>, without the resolution lines and without
    publish's settings=."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "settings":
            return ast.Name(id=node.attr, ctx=node.ctx)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if getattr(node.func, "id", None) == "publish":
            node.keywords = [k for k in node.keywords if k.arg != "settings"]
        return node

    def visit_Dict(self, node):  # testbed's save_result(..., parameters={**settings.as_dict(), ...})
        keep = [(k, v) for k, v in zip(node.keys, node.values) if not (
            k is None and isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "as_dict"
            and isinstance(v.func.value, ast.Name) and v.func.value.id == "settings")]
        node.keys, node.values = [k for k, _ in keep], [v for _, v in keep]
        self.generic_visit(node)
        return node

    def visit_Module(self, node):
        self.generic_visit(node)
        node.body = [s for s in node.body if not (
            isinstance(s, ast.ImportFrom) and s.module == "taser_book.profiles"
            and [a.name for a in s.names] == ["page_settings"]) and not (
            isinstance(s, ast.Assign) and getattr(s.value, "func", None) is not None
            and getattr(s.value.func, "id", None) == "page_settings")]
        return node


def _declared_to(path: Path) -> str:
    """The digest this move's entry in result_preserving_changes.yaml declares for the notebook at `path`."""
    import yaml

    test = "test_every_page_runs_its_old_code_with_the_settings_it_recorded"
    entries = yaml.safe_load((REPO / "taser_book" / "result_preserving_changes.yaml").read_text(encoding="utf-8"))
    (entry,) = [e for e in entries if e["file"] == f"notebooks/{path.name}" and e["shown_by"].endswith(test)]
    return entry["to"]


def _dump(source: str, back: bool = False) -> str:
    tree = ast.parse(source)
    return ast.dump(_Back().visit(tree) if back else tree)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_page_runs_its_old_code_with_the_settings_it_recorded(path):
    """The result-preserving proof of the move (result_preserving_changes.yaml): the same prose, the same code but
    for `settings.`, the old defaults as the page's own, and at cpu exactly the parameters the committed page
    recorded (a setting its record does not name: the page's default then as now)."""
    old = nbformat.reads(_git_show(f"notebooks/{path.name}"), as_version=4)
    new = nbformat.reads(source_at(f"notebooks/{path.name}", _declared_to(path)), as_version=4)  # as the move left it
    assert [c.source for c in _cells(old, "markdown")] == [c.source for c in _cells(new, "markdown")]
    old_code, new_code = _cells(old), _cells(new)
    assert len(old_code) == len(new_code)
    for i, (a, b) in enumerate(zip(old_code, new_code)):
        if "parameters" in a.metadata.get("tags", []):
            defaults = {}
            exec(a.source, {}, defaults)
            spec = load_pages()[path.stem]
            assert set(defaults) == {*spec.names, "profile", "results_dir"}
            assert {k: defaults[k] for k in spec.own} == dict(spec.own)
            smoke = page_settings(path.stem, "smoke").as_dict()  # nbval ran the old defaults: smoke's values
            assert {k: v for k, v in defaults.items() if k != "results_dir"} == smoke, path.stem
            continue
        assert _dump(b.source, back=True) == _dump(a.source), f"{path.name}: code cell {i} differs"
    meta_path = REPO / "results" / "cpu" / path.stem / "meta.json"
    if meta_path.is_file():
        recorded = json.loads(meta_path.read_text())["parameters"]
        now = json.loads(json.dumps(page_settings(path.stem, "cpu").as_dict(), default=str))
        assert {k: v for k, v in now.items() if k in recorded} == recorded
        status = result_status(path, "cpu", REPO / "results")
        assert status is None or "parameters changed" not in status
        if status is None:  # the scorecard, which judges the premises pages share, sees it current too
            assert scorecard_stale_reason(meta_path.parent, REPO) is None


def test_papermill_runs_a_page_at_the_profile_it_is_given_and_records_it(tmp_path):
    """`papermill NB OUT -p profile NAME` alone: the page takes that profile's model and sizes (a profile from
    $TASER_PROFILES that changes one for the page) and the overrides it is given, and records them in meta.json."""
    profiles = tmp_path / "profiles.yaml"
    profiles.write_text("profiles:\n  fixture:\n    extends: smoke\n    description: a test profile\n"
                        "    n_queries: 12\n    ood_datasets: [scifact]\n")
    out = tmp_path / "results"
    env = {**os.environ, "TASER_PROFILES": str(profiles)}
    done = subprocess.run([sys.executable, "-m", "papermill", str(REPO / "notebooks" / "baselines.ipynb"),
                           str(tmp_path / "out.ipynb"), "-p", "profile", "fixture", "-p", "results_dir", str(out),
                           "-y", "overrides: {n_docs: 240}", "--cwd", str(REPO / "notebooks"), "--no-progress-bar"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((out / "meta.json").read_text())
    want = page_settings("baselines", load_profile("fixture", profiles), {"n_docs": 240}).as_dict()
    assert meta["settings"] == json.loads(json.dumps(want))
    assert (meta["settings"]["profile"], meta["settings"]["model"], meta["settings"]["n_queries"],
            meta["settings"]["n_docs"], meta["settings"]["ood_datasets"]) == ("fixture", "tiny", 12, 240, ["scifact"])
    assert {k: meta["parameters"][k] for k in ("profile", "n_queries", "n_docs")} == {
        "profile": "fixture", "n_queries": 12, "n_docs": 240}


PROFILES_CACHE_FROM = "e9acaac26cf3b10892e9a8c9864f3f252b48ea0b11974c3299a7307669d84151"


def test_a_profiles_file_is_parsed_once_per_version_and_read_as_before(tmp_path):
    """`_read_profiles_file` parses a file version once and hands each caller its own copies of what the parse gave;
    the parse is the function it was (the version results recorded), renamed."""
    import taser_book.profiles as P

    old = next(n for n in ast.parse(source_at("taser_book/profiles.py", PROFILES_CACHE_FROM)).body
               if isinstance(n, ast.FunctionDef) and n.name == "_read_profiles_file")
    new = next(n for n in ast.parse((REPO / "taser_book/profiles.py").read_text()).body
               if isinstance(n, ast.FunctionDef) and n.name == "_parse_profiles_file")
    old.name = new.name
    assert ast.dump(old) == ast.dump(new)
    first, lines = P._read_profiles_file(P.PROFILES_FILE)
    assert (first, lines) == P._parse_profiles_file(P.PROFILES_FILE)
    first["cpu"]["n_train"] = -1
    assert P._read_profiles_file(P.PROFILES_FILE)[0]["cpu"]["n_train"] == 2000
    mine = tmp_path / "mine.yaml"
    mine.write_text("profiles:\n  mine:\n    extends: smoke\n    n_train: 4\n")
    assert P._read_profiles_file(mine)[0] == {"mine": {"extends": "smoke", "n_train": 4}}
    mine.write_text("profiles:\n  mine:\n    extends: smoke\n    n_train: 40\n")
    assert P._read_profiles_file(mine)[0] == {"mine": {"extends": "smoke", "n_train": 40}}
