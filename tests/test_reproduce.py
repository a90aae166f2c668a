"""The reproduction pipeline: profiles, the papermill runner, result files, and the scorecard."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from taser_lib.errors import ConfigError, FormatError
from taser_lib.reproduce import (
    PROFILES_FILE, REQUIRED_KEYS, find_notebooks, load_profiles, load_result, profile_parameters, reproduce,
    run_notebook, save_result,
)
from taser_lib.scorecard import CLAIMS, NO_RESULT, Claim, Q, build_scorecard, profiles_with_results, \
    write_scorecard_page

REPO = Path(__file__).resolve().parents[1]


def write_notebook(path: Path, body: str, parameters: str = 'profile = "smoke"\nresults_dir = None\nn_queries = 3'):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


GOOD = """import pandas as pd
from taser_lib.reproduce import save_result
save_result(results_dir, "numbers", pd.DataFrame({"i": range(n_queries), "square": [i * i for i in range(n_queries)]}),
            {"n_queries": n_queries})
save_result(results_dir, "summary", {"profile": profile, "n_queries": n_queries})
"""
# Saves a table, then fails: a partial run whose table must never replace the good one.
PARTIAL_THEN_FAIL = """import pandas as pd
from taser_lib.reproduce import save_result
save_result(results_dir, "numbers", pd.DataFrame({"i": [-1], "square": [-1]}))
raise RuntimeError("boom in the middle")
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


# ------------------------------------------------------------------------------------------------ profiles

def test_packaged_profiles_have_every_required_key():
    profiles = load_profiles()
    assert {"smoke", "cpu", "full"} <= set(profiles)
    for name, body in profiles.items():
        missing = [k for k in REQUIRED_KEYS if k not in body]
        assert not missing, f"profile {name} lacks {missing}"
    assert profiles["smoke"]["model"] == profiles["cpu"]["model"] == "default"
    assert profiles["smoke"]["device"] == profiles["cpu"]["device"] == "cpu"
    assert profiles["smoke"]["offline"] and profiles["cpu"]["offline"]
    assert profiles["full"]["model"] == "bert-base-uncased" and profiles["full"]["device"] == "cuda"
    # smoke slices the data; cpu and full use all of it
    assert all(profiles["smoke"][k] is not None for k in ("n_train", "n_queries", "n_docs"))
    assert all(profiles["full"][k] is None for k in ("n_train", "n_queries", "n_docs"))


def test_profiles_file_is_package_data():
    assert PROFILES_FILE.parent == REPO / "taser_lib"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'taser_lib = ["*.yaml"]' in pyproject, "profiles.yaml must ship in the wheel"


def test_parameter_override_order(tmp_path, monkeypatch):
    extra = tmp_path / "mine.yaml"
    extra.write_text(yaml.safe_dump({"profiles": {"mine": {
        "extends": "smoke", "batch_size": 99,
        "notebooks": {"nb": {"batch_size": 7, "epochs": 3}},
    }}}))
    profiles = load_profiles(extra)
    params = profile_parameters("mine", "nb", overrides={"epochs": 5}, profiles=profiles)
    assert params["batch_size"] == 7           # per-notebook override beats the profile
    assert params["epochs"] == 5               # the caller beats the per-notebook override
    assert params["seed"] == profiles["smoke"]["seed"]  # inherited through `extends`
    assert params["profile"] == "mine"
    assert "notebooks" not in params and "description" not in params
    other = profile_parameters("mine", "other", profiles=profiles)
    assert other["batch_size"] == 99 and other["epochs"] == profiles["smoke"]["epochs"]
    # TASER_PROFILES is the same as passing the file
    monkeypatch.setenv("TASER_PROFILES", str(extra))
    assert "mine" in load_profiles()


def test_packaged_per_notebook_override_applies():
    full = profile_parameters("full", "de_distillation")
    assert full["max_passage_length"] == 200 and full["max_query_length"] == 30   # the second paper's App. B
    assert profile_parameters("full", "baselines")["max_passage_length"] == 256    # DPR's


@pytest.mark.parametrize("body, field", [
    ({"broken": {"extends": "smoke", "seed": None, "model": "x"}}, None),
    ({"broken": {"description": "no other keys"}}, "profiles.broken"),
    ({"broken": {"extends": "nowhere"}}, "profiles.broken.extends"),
    ({"broken": {"extends": "smoke", "results_dir": "/tmp/x"}}, "profiles.broken"),
    ({"broken": {"extends": "smoke", "notebooks": {"nb": {"profile": "cpu"}}}}, "profiles.broken.notebooks.nb"),
    ({"a": {"extends": "b"}, "b": {"extends": "a"}}, "extends"),
])
def test_bad_profiles_name_file_and_field(tmp_path, body, field):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"profiles": body}))
    if field is None:  # a valid profile (seed may be null): loads
        assert load_profiles(path)["broken"]["model"] == "x"
        return
    with pytest.raises(FormatError) as err:
        load_profiles(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_invalid_yaml_names_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("profiles:\n  x: [unclosed\n")
    with pytest.raises(FormatError, match=rf"{path}:\d+"):
        load_profiles(path)


def test_unknown_profile_and_runner_parameters_are_refused():
    with pytest.raises(ConfigError, match="unknown profile 'gpu'"):
        profile_parameters("gpu", "nb")
    with pytest.raises(ConfigError, match="results_dir"):
        profile_parameters("smoke", "nb", overrides={"results_dir": "elsewhere"})


# ------------------------------------------------------------------------------------------------ results

def test_save_result_writes_atomically_with_meta(tmp_path):
    frame = pd.DataFrame({"model": ["bm25"], "value": [71.1]})
    path = save_result(tmp_path, "retrieval", frame, {"profile": "cpu", "k": 20})
    assert path == tmp_path / "retrieval.csv"
    assert load_result(tmp_path, "retrieval").equals(frame)
    indexed = pd.DataFrame({"value": [0.3]}, index=pd.Index(["de"], name="model"))
    save_result(tmp_path, "indexed", indexed)
    assert load_result(tmp_path, "indexed").equals(indexed.reset_index())  # the index is kept as a column
    save_result(tmp_path, "extra", {"alpha": 1.1})
    assert load_result(tmp_path, "extra") == {"alpha": 1.1}
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert set(meta["tables"]) == {"retrieval", "indexed", "extra"}
    assert meta["tables"]["retrieval"]["rows"] == 1 and meta["profile"] == "cpu"
    assert meta["parameters"] == {"profile": "cpu", "k": 20}
    assert "torch" in meta["versions"] and "git_revision" in meta
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left
    with pytest.raises(ValueError):
        save_result(tmp_path, "../escape", frame)
    with pytest.raises(TypeError):
        save_result(tmp_path, "bad", [1, 2, 3])


def test_save_result_without_results_dir_says_so(capsys):
    assert save_result(None, "x", {"a": 1}) is None
    assert "not saved" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------ running

@pytest.fixture
def repo(tmp_path):
    """A git repository holding one good notebook, committed."""
    root = tmp_path / "repo"
    write_notebook(root / "notebooks" / "tiny.ipynb", GOOD)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "tiny")
    return root


def test_run_notebook_writes_results_meta_and_executed_copy(repo, tmp_path):
    results = tmp_path / "results"
    run = run_notebook(repo / "notebooks" / "tiny.ipynb", "smoke", results, progress=False)
    assert run.status == "ok", run.note
    out = results / "smoke" / "tiny"
    n = load_profiles()["smoke"]["n_queries"]  # injected from the profile, not the notebook's default of 3
    numbers = load_result(out, "numbers")
    assert list(numbers["square"]) == [i * i for i in range(n)]
    assert load_result(out, "summary") == {"profile": "smoke", "n_queries": n}
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "ok" and meta["profile"] == "smoke" and meta["notebook"] == "tiny"
    assert meta["parameters"] == {"profile": "smoke", "n_queries": n}
    assert meta["notebook_source"]["git_revision"] == git(repo, "rev-parse", "HEAD")  # clean checkout: no +dirty
    assert meta["versions"]["pandas"] == pd.__version__
    assert meta["wall_seconds"] > 0 and meta["start_time_utc"] <= meta["time_utc"]
    executed = nbformat.read(out / "notebook.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert f"n_queries = {n}" in injected[0].source
    # it names where its results ended up, not the staging folder it ran in
    assert f'results_dir = "{os.path.relpath(out, repo / "notebooks")}"' in injected[0].source
    assert not (results / "smoke" / ".staging").exists()


def test_failed_run_keeps_the_good_result(repo, tmp_path):
    results = tmp_path / "results"
    notebook = repo / "notebooks" / "tiny.ipynb"
    assert run_notebook(notebook, "smoke", results, progress=False).status == "ok"
    out = results / "smoke" / "tiny"
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    write_notebook(notebook, PARTIAL_THEN_FAIL)
    run = run_notebook(notebook, "smoke", results, progress=False)
    assert run.status == "failed" and "boom in the middle" in run.note
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched, not even the partial table
    failed = nbformat.read(results / "smoke" / "_failed" / "tiny.ipynb", as_version=4)
    assert any(o.get("ename") == "RuntimeError" for c in failed.cells for o in c.get("outputs", []))
    assert not (results / "smoke" / ".staging").exists()

    write_notebook(notebook, GOOD)  # a later success replaces the result and clears the failure
    assert run_notebook(notebook, "smoke", results, progress=False).status == "ok"
    assert not (results / "smoke" / "_failed" / "tiny.ipynb").exists()


def test_notebook_must_declare_runner_parameters_and_overrides(tmp_path):
    nb = write_notebook(tmp_path / "notebooks" / "bare.ipynb", GOOD, parameters="n_queries = 3")
    with pytest.raises(ConfigError, match="must declare profile, results_dir"):
        run_notebook(nb, "smoke", tmp_path / "results")
    nb = write_notebook(tmp_path / "notebooks" / "typo.ipynb", GOOD)
    extra = tmp_path / "p.yaml"
    extra.write_text(yaml.safe_dump({"profiles": {"t": {"extends": "smoke", "notebooks": {"typo": {"n_qeuries": 5}}}}}))
    with pytest.raises(ConfigError, match="n_qeuries"):
        run_notebook(nb, "t", tmp_path / "results", profiles=load_profiles(extra))


def test_reproduce_keeps_going_and_fails_overall(tmp_path, capsys):
    root = tmp_path / "proj"
    write_notebook(root / "notebooks" / "a_fails.ipynb", "raise ValueError('broken notebook')")
    write_notebook(root / "notebooks" / "b_saves_nothing.ipynb", "x = 1")
    write_notebook(root / "notebooks" / "c_good.ipynb", GOOD)
    results = tmp_path / "results"
    assert reproduce("smoke", root=root, results_root=results, book=False, jobs=2) == 1
    out = capsys.readouterr().out
    table = {line.split()[0]: line.split()[1] for line in out.splitlines()
             if line.split()[:1] and line.split()[0] in ("a_fails", "b_saves_nothing", "c_good")
             and len(line.split()) > 2 and line.split()[1] in ("ok", "failed")}
    assert table == {"a_fails": "failed", "b_saves_nothing": "failed", "c_good": "ok"}
    assert "saved no result" in out
    assert (results / "smoke" / "c_good" / "meta.json").is_file()
    assert not (results / "smoke" / "a_fails").exists() and not (results / "smoke" / "b_saves_nothing").exists()
    # only the good one, alone: success
    assert reproduce("smoke", only=["c_good"], root=root, results_root=results, book=False) == 0


def test_only_names_must_exist(tmp_path):
    write_notebook(tmp_path / "notebooks" / "one.ipynb", GOOD)
    assert [p.stem for p in find_notebooks(tmp_path, ["one.ipynb"])] == ["one"]
    with pytest.raises(ConfigError, match="no notebook named two"):
        find_notebooks(tmp_path, ["two"])


# ------------------------------------------------------------------------------------------------ scorecard

def test_every_claim_is_well_formed():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids))
    assert {c.paper for c in CLAIMS} == {"TASER", "DE"}
    for claim in CLAIMS:
        assert claim.statement and claim.paper_numbers and claim.where
        # the direction test uses only the claim's quantities, and evaluates
        values = {name: 1.0 for name in claim.quantities}
        assert isinstance(bool(pd.eval(claim.test, local_dict=values, engine="python")), bool), claim.id


def test_scorecard_without_results_lists_every_claim(tmp_path):
    card = build_scorecard(tmp_path / "nothing")
    assert list(card["id"]) == [c.id for c in CLAIMS]
    assert (card["ours"] == NO_RESULT).all() and (card["holds"] == NO_RESULT).all()
    page = tmp_path / "scorecard.md"
    write_scorecard_page(tmp_path / "nothing", page)
    text = page.read_text()
    assert all(c.id in text for c in CLAIMS)
    assert "No profile has run yet" in text


def _fake(results: Path, profile: str, notebook: str, table: str, frame: pd.DataFrame) -> None:
    save_result(results / profile / notebook, table, frame, {"profile": profile})


def test_scorecard_evaluates_directions(tmp_path):
    results = tmp_path / "results"
    # TASER Table A3: 128M vs 218M -> ratio 0.587 <= 0.6 holds
    _fake(results, "cpu", "taser_architecture", "params", pd.DataFrame({
        "arch": ["dpr", "taser", "taser", "taser"], "routing": [None, "deterministic", "shared", "sequence"],
        "experts": [None, 2, 1, 4], "params": [218_000_000, 128_000_000, 109_000_000, 166_000_000]}))
    # taser beats dpr on squad-open but not on scifact (hand-made numbers)
    _fake(results, "cpu", "taser_in_domain", "retrieval", pd.DataFrame({
        "model": ["taser", "dpr", "taser", "dpr"], "dataset": ["squad-open", "squad-open", "nq", "nq"],
        "metric": ["R@20"] * 4, "value": [80.0, 70.0, 60.0, 70.0]}))
    # a second profile where the params table is too big for the claim
    _fake(results, "smoke", "taser_architecture", "params", pd.DataFrame({
        "arch": ["dpr", "taser"], "routing": [None, "deterministic"], "experts": [None, 2],
        "params": [100, 90]}))

    claims = {c.id: c for c in CLAIMS}
    chosen = (claims["T-A3-params"], claims["T1-taser-vs-dpr"], claims["T1-dpr-below-bm25-squad"],
              claims["D-T1-ca-beats-de"])
    card = build_scorecard(results, chosen).set_index("id")
    assert profiles_with_results(results) == ["smoke", "cpu"]
    assert card.loc["T-A3-params", "holds (cpu)"] == "yes"
    assert card.loc["T-A3-params", "ours (cpu)"] == "taser=128.0M, dpr=218.0M"
    assert card.loc["T-A3-params", "holds (smoke)"] == "no"   # 90 / 100 > 0.6
    # per dataset: fails on nq (60 < 70 - 0.5), holds on squad-open
    assert card.loc["T1-taser-vs-dpr", "holds (cpu)"] == "no (fails on nq)"
    assert "squad-open: taser=80, dpr=70" in card.loc["T1-taser-vs-dpr", "ours (cpu)"]
    assert card.loc["T1-taser-vs-dpr", "holds (smoke)"] == NO_RESULT
    assert card.loc["T1-dpr-below-bm25-squad", "holds (cpu)"] == NO_RESULT   # no bm25 row
    assert card.loc["D-T1-ca-beats-de", "holds (cpu)"] == NO_RESULT          # notebook never ran

    page = tmp_path / "scorecard.md"
    write_scorecard_page(results, page, chosen)
    text = page.read_text()
    assert "| cpu | 1 | 1 | 2 | 0 |" in text and "| smoke | 0 | 1 | 3 | 0 |" in text


def test_scorecard_reports_malformed_tables(tmp_path):
    results = tmp_path / "results"
    claim = Claim("X", "TASER", "t", "s", "p", "nb", "tab", {"a": Q(model="a"), "b": Q(model="b")}, "a > b")
    _fake(results, "cpu", "nb", "tab", pd.DataFrame({"model": ["a", "a", "b"], "value": [1, 2, 0]}))
    assert build_scorecard(results, (claim,)).loc[0, "holds (cpu)"].startswith("error: 2 rows match a")
    _fake(results, "cpu", "nb", "tab", pd.DataFrame({"name": ["a", "b"], "value": [1, 0]}))
    assert build_scorecard(results, (claim,)).loc[0, "holds (cpu)"] == "error: nb/tab has no column model"


def test_book_shows_the_largest_profile_unless_told(tmp_path):
    from taser_lib.reproduce import executed_notebook

    for profile in ("smoke", "cpu"):
        (tmp_path / profile / "nb").mkdir(parents=True)
        (tmp_path / profile / "nb" / "notebook.ipynb").write_text("{}")
    assert executed_notebook(tmp_path, "nb") == tmp_path / "cpu" / "nb" / "notebook.ipynb"
    assert executed_notebook(tmp_path, "nb", prefer="smoke") == tmp_path / "smoke" / "nb" / "notebook.ipynb"
    assert executed_notebook(tmp_path, "other") is None


def test_cli_reports_user_errors(tmp_path, capsys):
    from taser_lib.cli import main

    assert main(["reproduce", "--profile", "gpu", "--root", str(tmp_path), "--no-book"]) == 2
    assert "unknown profile 'gpu'" in capsys.readouterr().err
    assert main(["book", "--root", str(tmp_path)]) == 2
    assert "_config.yml is missing" in capsys.readouterr().err
