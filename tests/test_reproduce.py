"""The reproduction pipeline: profiles, the papermill runner, result files and their staleness (the scorecard's
tests are in test_scorecard.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from taser_lib.errors import ConfigError, FormatError
from taser_book.profiles import PROFILES_FILE, REQUIRED_KEYS, load_profiles, profile_parameters
from taser_book.reproduce import load_result, reproduce, save_result
from taser_book.runner import find_notebooks, run_notebook, run_order

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
from taser_book.reproduce import save_result
save_result(results_dir, "numbers", pd.DataFrame({"i": range(n_queries), "square": [i * i for i in range(n_queries)]}),
            {"n_queries": n_queries})
save_result(results_dir, "summary", {"profile": profile, "n_queries": n_queries})
"""
# Saves a table, then fails: a partial run whose table must never replace the good one.
PARTIAL_THEN_FAIL = """import pandas as pd
from taser_book.reproduce import save_result
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
    # smoke checks code paths on the tiny random BERT; cpu's numbers come from the packaged model
    assert profiles["smoke"]["model"] == profiles["smoke"]["cross_encoder_model"] == "tiny"
    assert profiles["cpu"]["model"] == profiles["cpu"]["cross_encoder_model"] == "default"
    assert profiles["smoke"]["device"] == profiles["cpu"]["device"] == "cpu"
    assert profiles["smoke"]["offline"] and profiles["cpu"]["offline"]
    assert profiles["full"]["model"] == "bert-base-uncased" and profiles["full"]["device"] == "cuda"
    # smoke slices the data; cpu and full use all of it
    assert all(profiles["smoke"][k] is not None for k in ("n_train", "n_queries", "n_docs"))
    assert all(profiles["full"][k] is None for k in ("n_train", "n_queries", "n_docs"))


def test_profiles_file_is_package_data():
    assert PROFILES_FILE.parent == REPO / "taser_book"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'taser_book = ["*.yaml"]' in pyproject, "profiles.yaml and pages.yaml must ship in the wheel"


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


def test_a_profiles_budget_is_read_but_never_injected_into_a_notebook():
    assert load_profiles()["cpu"]["budget_hours"] == 4 and load_profiles()["gpu"]["budget_hours"] is None
    assert "budget_hours" not in profile_parameters("cpu", "de_capacity")


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
    ({"broken": {"extends": "smoke", "budget_hours": "four"}}, "profiles.broken.budget_hours"),
    ({"broken": {"extends": "smoke", "budget_hours": 0}}, "profiles.broken.budget_hours"),
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
    with pytest.raises(ConfigError, match="unknown profile 'nonesuch'"):
        profile_parameters("nonesuch", "nb")
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


def test_save_result_compresses_a_large_table_reproducibly_and_replaces_its_other_form(tmp_path, monkeypatch):
    import taser_book.results as results
    monkeypatch.setattr(results, "COMPRESS_ABOVE_BYTES", 200)
    small = pd.DataFrame({"query_id": ["q1"], "value": [1.0]})
    large = pd.DataFrame({"query_id": [f"q{i}" for i in range(100)], "value": [i / 3 for i in range(100)]})
    assert save_result(tmp_path, "per_query", small) == tmp_path / "per_query.csv"
    first = save_result(tmp_path, "per_query", large)
    assert first == tmp_path / "per_query.csv.gz" and not (tmp_path / "per_query.csv").exists()
    assert load_result(tmp_path, "per_query").equals(large)
    blob = first.read_bytes()
    save_result(tmp_path, "per_query", large)
    assert first.read_bytes() == blob  # no timestamp: the same table gives the same bytes
    assert json.loads((tmp_path / "meta.json").read_text())["tables"]["per_query"]["file"] == "per_query.csv.gz"
    assert save_result(tmp_path, "per_query", small) == tmp_path / "per_query.csv"
    assert not first.exists() and load_result(tmp_path, "per_query").equals(small)


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
    assert executed.metadata.papermill.input_path == "tiny.ipynb" and str(tmp_path) not in json.dumps(
        executed.metadata.papermill)                                   # a committed copy names no machine's folders
    assert meta["results_dir"] == os.path.relpath(out, repo)
    assert not (results / "smoke" / ".staging").exists()


NOISY = GOOD + """import sys
print("wall time 12 s")
print("questions compared: 5")
print("a warning", file=sys.stderr)
pd.DataFrame({"model": ["a", "b"], "value": [1.0, float("nan")]})
"""


def test_the_committed_executed_copy_is_tidied_as_the_book_shows_it(repo, tmp_path):
    """A reader who opens results/<profile>/<page>/notebook.ipynb sees the page: the injected parameters (with their
    results path) collapsed, and no stderr, timers or NaN in the outputs."""
    write_notebook(repo / "notebooks" / "noisy.ipynb", NOISY)
    run = run_notebook(repo / "notebooks" / "noisy.ipynb", "smoke", tmp_path / "results", progress=False)
    assert run.status == "ok", run.note
    executed = nbformat.read(tmp_path / "results" / "smoke" / "noisy" / "notebook.ipynb", as_version=4)
    injected = [c for c in executed.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "hide-input" in injected[0].metadata["tags"]
    outputs = json.dumps([c.get("outputs", []) for c in executed.cells], ensure_ascii=False)
    assert "questions compared: 5" in outputs and "12 s" not in outputs and "a warning" not in outputs
    assert "NaN" not in outputs and "–" in outputs


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


def test_a_library_changed_while_running_fails_the_run_and_keeps_the_result(repo, tmp_path, monkeypatch):
    from taser_book import runner

    results = tmp_path / "results"
    notebook = repo / "notebooks" / "tiny.ipynb"
    assert run_notebook(notebook, "smoke", results, progress=False).status == "ok"  # unchanged: it publishes
    out = results / "smoke" / "tiny"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real = runner._library_snapshot()
    assert "taser_book/results.py" in json.loads((out / "meta.json").read_text())["library_files"]
    # as if taser_book/results.py (which the kernel imports to save) had been edited after the run started
    monkeypatch.setattr(runner, "_library_snapshot", lambda: {**real, "taser_book/results.py": "0" * 64})
    run = run_notebook(notebook, "smoke", results, progress=False)
    assert run.status == "failed" and "library files changed while it ran (taser_book/results.py)" in run.note
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_judging_file_changed_while_running_does_not_fail_the_run():
    # the claims and the scorecard judge a page when the book is built: as for staleness, a change to them does not
    # make a page's run record code it did not run
    from taser_book.runner import _changed_while_running

    recorded = {"library_files": {"taser_book/scorecard.py": "new", "taser_lib/io.py": "same"}}
    assert _changed_while_running(recorded, {"taser_book/scorecard.py": "old", "taser_lib/io.py": "same"}) == []
    assert _changed_while_running(recorded, {"taser_book/scorecard.py": "new", "taser_lib/io.py": "old"}) == [
        "taser_lib/io.py"]


def test_an_interrupted_run_leaves_no_staging_folder(repo, tmp_path, monkeypatch):
    import papermill
    results = tmp_path / "results"
    notebook = repo / "notebooks" / "tiny.ipynb"
    assert run_notebook(notebook, "smoke", results, progress=False).status == "ok"
    out = results / "smoke" / "tiny"
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(input_path, output_path, **kwargs):  # Ctrl-C after the kernel wrote part of the notebook
        Path(output_path).write_text(Path(input_path).read_text())
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_notebook(notebook, "smoke", results, progress=False)
    assert not (results / "smoke" / ".staging").exists()
    assert (results / "smoke" / "_failed" / "tiny.ipynb").exists()       # what ran is kept for a look
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before      # the published result is untouched


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
    assert table == {"a_fails": "failed", "b_saves_nothing": "failed", "c_good": "ok"}, out
    assert "saved no result" in out
    assert (results / "smoke" / "c_good" / "meta.json").is_file()
    assert not (results / "smoke" / "a_fails").exists() and not (results / "smoke" / "b_saves_nothing").exists()
    # only the good one, alone: success
    assert reproduce("smoke", only=["c_good"], root=root, results_root=results, book=False) == 0


CWD_PROBE = """import os
from taser_book.results import save_result
save_result(results_dir, "cwd", {"cwd": os.getcwd()})
"""


def test_parallel_kernels_start_in_the_notebook_folder_without_changing_this_process_folder(tmp_path, monkeypatch):
    # --jobs runs notebooks in threads of one process: a chdir by one thread moves the others (papermill's `cwd`
    # did, nteract/papermill#473), so a kernel could start elsewhere and write its relative results_dir there
    root = tmp_path / "proj"
    for name in ("p1", "p2", "p3", "p4"):
        write_notebook(root / "notebooks" / f"{name}.ipynb", CWD_PROBE)
    here = os.getcwd()
    chdir = os.chdir

    def only_here(path):  # papermill's file handler "changes" to the folder it started in: harmless
        if os.path.realpath(path) != os.path.realpath(here):
            raise AssertionError(f"the runner changed this process's folder to {path}")
        chdir(path)

    monkeypatch.setattr(os, "chdir", only_here)
    results = tmp_path / "results"
    assert reproduce("smoke", root=root, results_root=results, book=False, jobs=2) == 0
    assert os.getcwd() == here
    for name in ("p1", "p2", "p3", "p4"):
        assert load_result(results / "smoke" / name, "cwd")["cwd"] == str((root / "notebooks").resolve())


LEG_PROBE = """import json, os, time
from taser_book.results import save_result
time.sleep(1.0)
leg = json.load(open(os.path.join(results_dir, ".heartbeat.json")))
save_result(results_dir, "leg", {"seconds": leg["seconds"]})
"""


def test_a_killed_leg_counts_into_the_wall_time_of_the_run_that_resumes(tmp_path, monkeypatch):
    from taser_book import runner

    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.2)
    notebook = write_notebook(tmp_path / "notebooks" / "legs.ipynb", LEG_PROBE)
    staging = tmp_path / "results" / "smoke" / ".staging"
    # a leg killed outright an hour ago (its heartbeat stopped), one still beating (another runner), one from a
    # runner before heartbeats, and another notebook's killed leg
    for name, leg in (("legs-dead0001", {"seconds": 600.0, "last_seen": time.time() - 3600}),
                      ("legs-live0002", {"seconds": 60.0, "last_seen": time.time() + 3600}),
                      ("legs-old00003", None),
                      ("legs_other-dead0004", {"seconds": 900.0, "last_seen": time.time() - 3600})):
        (staging / name).mkdir(parents=True)
        if leg is not None:
            record = {"start_time_utc": "2026-01-01T00:00:00", **leg}
            (staging / name / ".heartbeat.json").write_text(json.dumps(record))
    run = run_notebook(notebook, "smoke", tmp_path / "results", progress=False)
    assert run.status == "ok", run.note
    out = tmp_path / "results" / "smoke" / "legs"
    meta = json.loads((out / "meta.json").read_text())
    assert meta["earlier_legs"] == [{"start_time_utc": "2026-01-01T00:00:00", "seconds": 600.0}]
    assert meta["wall_seconds_all_legs"] == pytest.approx(600.0 + meta["wall_seconds"], abs=0.1)
    assert load_result(out, "leg")["seconds"] > 0           # the heartbeat ran while the notebook did
    assert not (out / ".heartbeat.json").exists()                 # and is never published
    assert sorted(p.name for p in staging.iterdir()) == ["legs-live0002", "legs-old00003", "legs_other-dead0004"]

    from taser_book.book import _provenance_line, run_times
    assert "in 2 legs" in _provenance_line(meta)
    table = run_times(tmp_path, tmp_path / "results")
    assert table.loc[table.notebook == "legs", "legs"].item() == 2
    assert table.loc[table.notebook == "legs", "minutes"].item() == round(meta["wall_seconds_all_legs"] / 60, 1)


def test_a_leg_killed_after_taking_over_an_earlier_one_hands_both_on(tmp_path, monkeypatch):
    """Three sessions: the first leg is killed, the second takes it over (removing its staging folder) and is killed
    in turn; the third counts both, because the second's heartbeat carried the first."""
    from taser_book import runner

    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.2)
    notebook = write_notebook(tmp_path / "notebooks" / "legs.ipynb", LEG_PROBE)
    staging = tmp_path / "results" / "smoke" / ".staging"
    first = {"start_time_utc": "2026-01-01T00:00:00", "seconds": 600.0}
    (staging / "legs-second01").mkdir(parents=True)
    (staging / "legs-second01" / ".heartbeat.json").write_text(json.dumps(
        {"start_time_utc": "2026-01-02T00:00:00", "seconds": 300.0, "last_seen": time.time() - 3600,
         "earlier_legs": [first]}))
    run = run_notebook(notebook, "smoke", tmp_path / "results", progress=False)
    assert run.status == "ok", run.note
    meta = json.loads((tmp_path / "results" / "smoke" / "legs" / "meta.json").read_text())
    assert meta["earlier_legs"] == [first, {"start_time_utc": "2026-01-02T00:00:00", "seconds": 300.0}]
    assert meta["wall_seconds_all_legs"] == pytest.approx(900.0 + meta["wall_seconds"], abs=0.1)

    # and a running leg's heartbeat carries what it took over, for the next session to find if it is killed
    with runner._Heartbeat(staging, "2026-01-03T00:00:00", [first]):
        time.sleep(0.5)
        beat = json.loads((staging / ".heartbeat.json").read_text())
    assert beat["earlier_legs"] == [first] and beat["seconds"] > 0


# Records whether the runner asked it to retrain, and prints to stdout and (like tqdm) to stderr.
ENV_PROBE = """import os, sys
import pandas as pd
from taser_book.results import save_result
print("hello from the kernel", n_queries)
sys.stderr.write("probe 50%|#####     | 1/2\\r")
save_result(results_dir, "env", {"force": os.environ.get("TASER_FORCE_RETRAIN"), "n_queries": n_queries})
"""


def test_result_records_provenance_and_goes_stale(repo, tmp_path):
    from taser_book.results import notebook_sha256, stale_reason

    results = tmp_path / "results"
    notebook = repo / "notebooks" / "tiny.ipynb"
    assert run_notebook(notebook, "smoke", results, progress=False).status == "ok"
    out = results / "smoke" / "tiny"
    meta = json.loads((out / "meta.json").read_text())
    import taser_lib
    assert meta["library_version"] == taser_lib.__version__
    assert meta["hardware"]["cpu"] and meta["hardware"]["cpu_cores"] >= 1 and meta["hardware"]["summary"]
    assert meta["notebook_source"]["path"] == "notebooks/tiny.ipynb"
    assert meta["notebook_source"]["sha256"] == notebook_sha256(notebook)
    # the kernel imported taser_book.reproduce (and through it taser_book.results): both are recorded with their hash
    for module in ("taser_book/reproduce.py", "taser_book/results.py", "taser_lib/__init__.py"):
        assert meta["library_files"][module] == hashlib.sha256((REPO / module).read_bytes()).hexdigest()
    assert "taser_book/cli/train.py" not in meta["library_files"]  # never loaded by this notebook

    # a copy of both packages beside the notebooks stands for the checkout: up to date, until a file changes
    for package in ("taser_lib", "taser_book"):
        shutil.copytree(REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    assert stale_reason(out, repo) is None
    with open(repo / "taser_book" / "results.py", "a") as f:
        f.write("\n# changed\n")
    assert stale_reason(out, repo) == "library file taser_book/results.py changed since the result was made"
    shutil.copy2(REPO / "taser_book" / "results.py", repo / "taser_book" / "results.py")
    with open(repo / "taser_lib" / "__init__.py", "a") as f:   # a file of the core counts as much
        f.write("\n# changed\n")
    assert stale_reason(out, repo) == "library file taser_lib/__init__.py changed since the result was made"
    shutil.copy2(REPO / "taser_lib" / "__init__.py", repo / "taser_lib" / "__init__.py")
    # re-tagging a cell or executing the notebook does not change it; editing a cell does
    nb = nbformat.read(notebook, as_version=4)
    nb.cells[1].metadata["tags"] = ["hide-input"]
    nbformat.write(nb, notebook)
    assert stale_reason(out, repo) is None
    nb.cells[1].source += "\n# edited"
    nbformat.write(nb, notebook)
    assert stale_reason(out, repo) == "notebook notebooks/tiny.ipynb changed since the result was made"
    notebook.unlink()
    assert "no longer exists" in stale_reason(out, repo)
    # a result made before library files were recorded is stale, saying why
    del meta["library_files"]
    (out / "meta.json").write_text(json.dumps(meta))
    assert "made before" in stale_reason(out, repo)


def test_reproduce_skips_up_to_date_results_and_force_retrains(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TASER_FORCE_RETRAIN", raising=False)
    root = tmp_path / "proj"
    notebook = write_notebook(root / "notebooks" / "probe.ipynb", ENV_PROBE)
    shutil.copytree(REPO / "taser_lib", root / "taser_lib", ignore=shutil.ignore_patterns("__pycache__"))
    results = tmp_path / "results"

    assert reproduce("smoke", root=root, results_root=results, book=False) == 0
    out = capsys.readouterr().out
    n = load_profiles()["smoke"]["n_queries"]
    # progress inside a cell reaches the terminal while it runs, not just cell counts
    assert f"hello from the kernel {n}" in out and "[probe] cell 3/3" in out and "(no result yet)" in out
    assert load_result(results / "smoke" / "probe", "env") == {"force": None, "n_queries": n}
    made = (results / "smoke" / "probe" / "meta.json").read_text()

    assert reproduce("smoke", root=root, results_root=results, book=False) == 0
    out = capsys.readouterr().out
    assert "probe at profile 'smoke': up to date, skipped" in out and "hello from the kernel" not in out
    assert (results / "smoke" / "probe" / "meta.json").read_text() == made

    # other parameters (a profile that changes n_queries) make it run again, and say why
    extra = tmp_path / "p.yaml"
    extra.write_text(yaml.safe_dump({"profiles": {"smoke": {"extends": "cpu", "n_queries": n + 1, "n_docs": 5,
                                                            "n_train": 1}}}))
    assert reproduce("smoke", root=root, results_root=results, book=False, profiles_file=extra) == 0
    assert "parameters changed since the result was made: n_queries" in capsys.readouterr().out

    before = time.time()
    assert reproduce("smoke", root=root, results_root=results, book=False, force=True) == 0
    out = capsys.readouterr().out
    assert "(--force)" in out and "hello from the kernel" in out
    # the kernel was told to retrain runs finished before the forced run started
    assert before <= float(load_result(results / "smoke" / "probe", "env")["force"]) <= time.time()
    assert json.loads((results / "smoke" / "probe" / "meta.json").read_text())["forced"] is True
    assert "TASER_FORCE_RETRAIN" not in os.environ                             # ... and only the kernel
    assert notebook.is_file()


def test_seeds_follow_seed_and_are_validated(tmp_path):
    profiles = load_profiles()
    assert profiles["smoke"]["seeds"] == [13]
    assert profiles["cpu"]["seeds"] == profiles["gpu"]["seeds"] == profiles["full"]["seeds"] == [13, 14, 15]
    assert all(p["seed"] == p["seeds"][0] for p in profiles.values())
    gpu, cpu = profiles["gpu"], profiles["cpu"]
    assert gpu["device"] == "cuda" and gpu["bf16"] and gpu["batch_size"] > cpu["batch_size"]
    assert gpu["model"] == cpu["model"] and gpu["ood_datasets"] == cpu["ood_datasets"]  # extends cpu
    extra = tmp_path / "seeds.yaml"
    extra.write_text(yaml.safe_dump({"profiles": {"one": {"extends": "cpu", "seed": 7},
                                                  "many": {"extends": "cpu", "seeds": [1, 2]},
                                                  "both": {"extends": "cpu", "seed": 3, "seeds": [4, 5]}}}))
    mine = load_profiles(extra)
    assert (mine["one"]["seed"], mine["one"]["seeds"]) == (7, [7])
    assert (mine["many"]["seed"], mine["many"]["seeds"]) == (1, [1, 2])
    assert (mine["both"]["seed"], mine["both"]["seeds"]) == (3, [4, 5])
    extra.write_text(yaml.safe_dump({"profiles": {"bad": {"extends": "cpu", "seeds": []}}}))
    with pytest.raises(FormatError, match="profiles.bad.seeds"):
        load_profiles(extra)


def test_gpu_and_full_train_every_notebook_with_three_seeds():
    """`gpu` extends `cpu` and inherits its per-notebook overrides, including the one-seed pages (Tables 6-9, 12):
    the larger profiles must put the seeds back, or their verdicts would rest on one seed."""
    profiles = load_profiles()
    for profile in ("gpu", "full"):
        for nb in find_notebooks(REPO):
            params = profile_parameters(profile, nb.stem)
            assert params.get("seeds", [13, 14, 15]) == [13, 14, 15], (profile, nb.stem)
            # and every other seed list a profile sets for the page (e.g. de_distillation's small_seeds), where None
            # means "seeds"
            for key in profiles[profile]["notebooks"].get(nb.stem, {}):
                if key.endswith("_seeds"):
                    assert params[key] in (None, [13, 14, 15]), (profile, nb.stem, key, params[key])
    assert profile_parameters("cpu", "de_k_sweep")["seeds"] == [13]
    assert profile_parameters("cpu", "de_distillation")["small_seeds"] == [13]


def test_run_first_orders_the_notebooks_and_is_validated(tmp_path, capsys):
    paths = [Path(f"notebooks/{s}.ipynb") for s in ["a", "b", "c", "d"]]
    assert [p.stem for p in run_order(paths, ["c", "zz", "a"])] == ["c", "a", "b", "d"]
    assert run_order(paths, []) == paths
    cpu = load_profiles()["cpu"]["run_first"]
    stems = {p.stem for p in find_notebooks(REPO)}
    assert cpu and set(cpu) <= stems and len(set(cpu)) == len(cpu)
    # producers before the pages that only evaluate their runs
    assert cpu.index("taser_in_domain") < cpu.index("taser_out_of_domain")
    assert cpu.index("de_capacity") < cpu.index("de_learning_curves")   # the subject CAs both pages compare
    assert "run_first" not in profile_parameters("cpu", "baselines")    # not a notebook parameter
    extra = tmp_path / "order.yaml"
    extra.write_text(yaml.safe_dump({"profiles": {"bad": {"extends": "cpu", "run_first": "baselines"}}}))
    with pytest.raises(FormatError, match="profiles.bad.run_first"):
        load_profiles(extra)
    for stem in ["b", "a"]:
        write_notebook(tmp_path / "repo" / "notebooks" / f"{stem}.ipynb", "x = 1")
    extra.write_text(yaml.safe_dump({"profiles": {"ordered": {"extends": "smoke", "run_first": ["b", "gone"],
                                                              "notebooks": {}}}}))
    reproduce("ordered", root=tmp_path / "repo", profiles_file=extra, book=False, jobs=1)
    out = capsys.readouterr().out
    assert out.index("[1/2] b") < out.index("[2/2] a")
    assert "run_first notebooks that do not exist: gone" in out


def test_only_names_must_exist(tmp_path):
    write_notebook(tmp_path / "notebooks" / "one.ipynb", GOOD)
    assert [p.stem for p in find_notebooks(tmp_path, ["one.ipynb"])] == ["one"]
    with pytest.raises(ConfigError, match="no notebook named two"):
        find_notebooks(tmp_path, ["two"])
    write_notebook(tmp_path / "notebooks" / "three.ipynb", GOOD)  # "a,b" as a user may type it: two names
    assert [p.stem for p in find_notebooks(tmp_path, ["three,one", "one"])] == ["three", "one"]
    with pytest.raises(ConfigError, match="no notebook named two in "):
        find_notebooks(tmp_path, ["one,two"])


# ------------------------------------------------------------------------------------------------ the book

def test_book_shows_the_largest_profile_unless_told(tmp_path):
    from taser_book.book import executed_notebook

    for profile in ("smoke", "cpu"):
        (tmp_path / profile / "nb").mkdir(parents=True)
        (tmp_path / profile / "nb" / "notebook.ipynb").write_text("{}")
    assert executed_notebook(tmp_path, "nb") == tmp_path / "cpu" / "nb" / "notebook.ipynb"
    assert executed_notebook(tmp_path, "nb", prefer="smoke") == tmp_path / "smoke" / "nb" / "notebook.ipynb"
    assert executed_notebook(tmp_path, "other") is None


def test_cli_reports_user_errors(tmp_path, capsys):
    from taser_book.cli import main

    assert main(["reproduce", "--profile", "nonesuch", "--root", str(tmp_path), "--no-book"]) == 2
    assert "unknown profile 'nonesuch'" in capsys.readouterr().err
    assert main(["book", "--root", str(tmp_path)]) == 2
    assert "_config.yml is missing" in capsys.readouterr().err


THREADS_PROBE = """import os
from taser_book.results import save_result
save_result(results_dir, "threads", {"omp": os.environ.get("OMP_NUM_THREADS"), "mkl": os.environ.get("MKL_NUM_THREADS")})
"""


def test_parallel_kernels_share_the_cores(tmp_path, monkeypatch):
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(4)), raising=False)
    root = tmp_path / "proj"
    for name in ("one", "two"):
        write_notebook(root / "notebooks" / f"{name}.ipynb", THREADS_PROBE)
    results = tmp_path / "results"
    assert reproduce("smoke", root=root, results_root=results, book=False, jobs=2) == 0
    for name in ("one", "two"):  # 4 cores, 2 kernels at a time: 2 threads each
        assert load_result(results / "smoke" / name, "threads") == {"omp": "2", "mkl": "2"}
    assert "OMP_NUM_THREADS" not in os.environ  # restored after the run
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the caller's choice is kept
    assert reproduce("smoke", root=root, results_root=results, book=False, jobs=2, force=True) == 0
    assert load_result(results / "smoke" / "one", "threads")["omp"] == "3"


JAX_PROBE = """import os
from taser_book.results import save_result
save_result(results_dir, "jax", {"platforms": os.environ.get("JAX_PLATFORMS")})
"""


def test_kernels_keep_jax_off_the_gpu(tmp_path, monkeypatch):
    """bm25s runs a JAX op at import where JAX is installed, claiming 75% of a GPU per kernel: the kernels get
    JAX_PLATFORMS=cpu, unless the caller chose a platform."""
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    root = tmp_path / "proj"
    write_notebook(root / "notebooks" / "one.ipynb", JAX_PROBE)
    results = tmp_path / "results"
    assert reproduce("smoke", root=root, results_root=results, book=False) == 0
    assert load_result(results / "smoke" / "one", "jax") == {"platforms": "cpu"}
    assert "JAX_PLATFORMS" not in os.environ  # restored after the run
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")
    assert reproduce("smoke", root=root, results_root=results, book=False, force=True) == 0
    assert load_result(results / "smoke" / "one", "jax") == {"platforms": "cuda"}


def test_results_are_published_only_from_committed_code(tmp_path):
    """Uncommitted code refuses a publishing run unless allowed; changes under results/ are outputs, not code."""
    import subprocess

    from taser_lib.errors import ConfigError
    from taser_book.reproduce import reproduce
    from taser_book.runner import code_revision

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "results" / "cpu").mkdir(parents=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "results" / "cpu" / "table.csv").write_text("a\n1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (tmp_path / "results" / "cpu" / "table.csv").write_text("a\n2\n")     # a published result changed: still clean
    assert not code_revision(tmp_path).endswith("+dirty")
    assert reproduce("cpu", root=tmp_path, book=False) == 0
    (tmp_path / "code.py").write_text("x = 2\n")                           # code changed: dirty
    assert code_revision(tmp_path).endswith("+dirty")
    with pytest.raises(ConfigError, match=r"uncommitted changes \(code.py\).*--allow-dirty"):
        reproduce("cpu", root=tmp_path, book=False)
    assert reproduce("cpu", root=tmp_path, book=False, allow_dirty=True) == 0
    assert reproduce("smoke", root=tmp_path, book=False) == 0              # smoke results are never published


def test_a_kernel_that_died_before_answering_is_started_again(monkeypatch):
    """Two kernels started at once can pick the same port (`--jobs 2`); the one that loses dies before it answers,
    having run no cell, and its notebook is started again. Any other error is the notebook's."""
    from taser_book import runner

    monkeypatch.setattr(runner.time, "sleep", lambda seconds: None)
    calls = []

    def flaky(fails: int, error: Exception):
        def execute():
            calls.append(1)
            if len(calls) <= fails:
                raise error
            return "ran"
        return execute

    died = RuntimeError("Kernel died before replying to kernel_info")
    assert runner._execute_started(flaky(2, died)) == "ran" and len(calls) == 3
    calls.clear()
    with pytest.raises(RuntimeError, match="Kernel died"):
        runner._execute_started(flaky(3, died))
    assert len(calls) == runner.KERNEL_START_TRIES
    calls.clear()
    with pytest.raises(RuntimeError, match="a cell failed"):
        runner._execute_started(flaky(1, RuntimeError("a cell failed")))
    assert len(calls) == 1
