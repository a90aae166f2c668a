"""`taser reproduce --dry-run`: before any training, each notebook it would run, why, and its minutes (its last
published run's, and from an empty run cache in the profile's last clean run), with the totals; it runs nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from taser_book.reproduce import plan, plan_text
from taser_book.runner import result_status

REPO = Path(__file__).resolve().parents[1]


def test_the_plan_runs_exactly_the_pages_that_are_missing_or_stale():
    rows = plan("cpu", root=REPO)
    assert len(rows) == len(list((REPO / "notebooks").glob("*.ipynb")))
    for row in rows:
        status = result_status(REPO / "notebooks" / f"{row['notebook']}.ipynb", "cpu", REPO / "results")
        assert row["runs"] == (status is not None) and row["why"] == (status or "up to date")
        assert row["minutes"] is not None   # every committed cpu page records its wall time
    forced = plan("cpu", root=REPO, force=True)
    assert all(r["runs"] and r["why"] == "--force" for r in forced)
    text = plan_text(forced, "cpu")
    assert f"{len(forced)} of {len(forced)} notebooks to run" in text and "from an empty run cache" in text
    total = sum(r["minutes"] for r in forced)
    assert f"total: about {total:.0f} minutes as their last published runs took" in text


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "taser_book.cli", "reproduce", "--profile", "smoke", "--dry-run",
                           "--results", str(tmp_path), "--only", "de_margins", "baselines"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 notebooks to run" in done.stdout and "no result yet" in done.stdout
    assert "de_margins" in done.stdout and "baselines" in done.stdout
    assert list(tmp_path.iterdir()) == []   # no staging folder, no ledger, no result
    assert plan_text([{"notebook": "x", "runs": False, "why": "up to date", "minutes": 1.0,
                       "minutes_from_empty_cache": None}], "cpu").endswith("nothing to run")
