"""`tools/reproduce.sbatch`, the job array of book/reproduce.md: task i runs the i-th notebook of
`taser reproduce --profile P --list`, every notebook exactly once; the book job builds the book. Run here with
`taser` stubbed (it records what a task would run) and no conda, as Slurm would start each task."""

from __future__ import annotations

import subprocess
from pathlib import Path

from taser_book.cli import main
from taser_book.reproduce import planned_notebooks
from taser_book.runner import find_notebooks

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "reproduce.sbatch"


def test_list_prints_every_notebook_once_in_run_order(capsys):
    assert main(["reproduce", "--profile", "cpu", "--list", "--root", str(REPO)]) == 0
    listed = capsys.readouterr().out.split()
    assert sorted(listed) == sorted(p.stem for p in find_notebooks(REPO))
    from taser_book.profiles import load_profiles

    run_first = load_profiles()["cpu"]["run_first"]
    assert listed[:len(run_first)] == run_first                   # what other pages read is trained first
    assert planned_notebooks("cpu", ["baselines", "testbed"], root=REPO) == ["testbed", "baselines"]


def _task(tmp_path: Path, listing: list[str], *args: str, task: int | None = None) -> tuple[int, str, list[str]]:
    stub = tmp_path / "bin"
    stub.mkdir(exist_ok=True)
    record = tmp_path / "calls"
    (tmp_path / "listing").write_text("".join(f"{name}\n" for name in listing))
    (stub / "taser").write_text(f"""#!/bin/bash
if [[ " $* " == *" --list "* ]]; then cat {tmp_path / 'listing'}; exit 0; fi
echo "$*" >> {record}
""")
    (stub / "taser").chmod(0o755)
    env = {"PATH": f"{stub}:/usr/bin:/bin", "SLURM_SUBMIT_DIR": str(REPO), "TASER_CONDA_ENV": "", "HOME": str(tmp_path)}
    if task is not None:
        env["SLURM_ARRAY_TASK_ID"] = str(task)
    done = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=30)
    calls = record.read_text().splitlines() if record.is_file() else []
    record.unlink(missing_ok=True)
    return done.returncode, done.stderr, calls


def test_each_task_of_the_array_runs_one_notebook_and_the_tasks_cover_them_all(tmp_path):
    listing = planned_notebooks("full", root=REPO)
    runs = []
    for task in range(len(listing)):
        rc, err, calls = _task(tmp_path, listing, "full", task=task)
        assert rc == 0, err
        runs += calls
    assert runs == [f"reproduce --profile full --only {name} --no-book" for name in listing]

    rc, err, calls = _task(tmp_path, listing, "full", task=len(listing))   # an array sized past the notebooks
    assert rc == 1 and not calls and f"has {len(listing)} notebooks" in err
    rc, err, calls = _task(tmp_path, listing, "full")                        # not an array
    assert rc != 0 and not calls and "job array" in err
    rc, err, calls = _task(tmp_path, listing, "full", "book")               # the last job
    assert rc == 0 and calls == ["book --profile full"]


def test_the_book_shows_the_script_it_runs():
    page = (REPO / "book" / "reproduce.md").read_text()
    assert "tools/reproduce.sbatch" in page and "--list" in page
    assert "#SBATCH --array" not in SCRIPT.read_text()   # the array's size comes from --list, never a fixed number
