"""The ledger of `taser reproduce` legs and the wall time of one run of a whole profile from an empty run cache."""
import json

import pytest

from taser_book.book import clean_run_hours, clean_run_notebooks, clean_run_sentence
from taser_book.reproduce import reproduce
from taser_book.run_ledger import (LEDGER_NAME, Leg, clean_run, hours_into_run, read_legs, run_cache_id,
                                   runs_cache_is_empty)

from test_reproduce import GOOD, write_notebook


def leg(start, seconds, *, empty=False, only=None, notebooks=None, jobs=2, machine="Xeon (2 cores)", cache=None,
        per_notebook=None):
    return {"start_time_utc": start, "seconds": seconds, "run_cache_empty": empty, "only": only, "jobs": jobs,
            "machine": machine, "notebooks": notebooks or {}, "run_cache": cache,
            **({"notebook_seconds": per_notebook} if per_notebook is not None else {})}


def test_a_run_cache_with_only_hashes_and_locks_is_empty(tmp_path):
    assert runs_cache_is_empty(tmp_path / "missing")
    (tmp_path / "fingerprints.json").write_text("{}")
    (tmp_path / "cross-encoder-abc.lock").write_text("")
    (tmp_path / "checkpoints").mkdir()
    assert runs_cache_is_empty(tmp_path)
    (tmp_path / "cross-encoder-abc").mkdir()
    (tmp_path / "cross-encoder-abc" / "config.yaml").write_text("kind: cross-encoder\n")  # begun, not finished
    assert not runs_cache_is_empty(tmp_path)


def test_a_leg_keeps_its_time_when_killed_and_is_marked_finished_when_it_ends(tmp_path):
    now = [100.0]
    first = Leg(tmp_path, start_time_utc="2026-11-29T09:00:00", only=None, jobs=2, run_cache_empty=True,
                machine="Xeon (2 cores)", git_revision="abc", clock=lambda: now[0], heartbeat_s=3600)
    first._write()
    now[0] = 160.0
    first.record("a", "ok")          # killed after this: no __exit__
    with Leg(tmp_path, start_time_utc="2026-11-29T10:00:00", only=["b"], jobs=1, run_cache_empty=False,
             machine="Xeon (2 cores)", git_revision="abc", clock=lambda: now[0], heartbeat_s=3600) as second:
        now[0] = 190.0
        second.record("b", "failed")
    legs = read_legs(tmp_path)
    assert [(x["seconds"], x["finished"], x["notebooks"]) for x in legs] == [
        (60.0, False, {"a": "ok"}), (30.0, True, {"b": "failed"})]
    assert json.loads((tmp_path / LEDGER_NAME).read_text())[0]["only"] is None


def test_clean_run_starts_at_the_last_empty_cache_run_of_every_notebook_and_sums_its_legs():
    legs = [leg("2026-11-01", 999.0, empty=True, notebooks={"a": "ok", "b": "ok"}),           # an older clean run
            leg("2026-11-29T09", 50.0, empty=True, only=["a"], notebooks={"a": "ok"}),      # not every notebook
            leg("2026-11-29T10", 3600.0, empty=True, notebooks={"a": "ok", "b": "failed"}),  # the start
            leg("2026-11-30", 1200.0, jobs=1, machine="EPYC (2 cores)", notebooks={"a": "skipped", "b": "ok"}),
            leg("2026-12-01", 60.0, notebooks={"a": "skipped", "b": "skipped"})]            # after it was done
    run = clean_run(legs, ["a", "b"])
    assert run == {"start_time_utc": "2026-11-29T10", "legs": 2, "seconds": 4800.0, "done": 2, "notebooks": 2,
                   "complete": True, "machines": ["EPYC (2 cores)", "Xeon (2 cores)"], "jobs": [1, 2],
                   "notebook_seconds": {}, "finished_utc": {}, "legs_without_notebook_seconds": 2,
                   "legs_reconstructed": 0,
                   "done_notebooks": ["a", "b"], "spans": [["2026-11-29T10", 3600.0], ["2026-11-30", 1200.0]]}
    assert "**80 minutes (1.3 h) of wall time** in 2 legs" in clean_run_sentence("cpu", run)
    unfinished = clean_run(legs[:3], ["a", "b"])
    assert not unfinished["complete"] and unfinished["done"] == 1
    assert "1 of 2 notebooks done; it is not finished" in clean_run_sentence("cpu", unfinished)
    assert clean_run(legs[1:2], ["a", "b"]) is None
    assert "no run of every notebook" in clean_run_sentence("cpu", None)


def test_a_leg_keeps_each_notebooks_seconds_while_it_runs_and_when_killed(tmp_path):
    now = [0.0]
    with Leg(tmp_path, start_time_utc="2026-11-29T09:00:00", only=None, jobs=2, run_cache_empty=True,
             machine="Xeon (2 cores)", git_revision="abc", clock=lambda: now[0], heartbeat_s=3600) as first:
        first.start("a"), first.start("b"), first.start("c")
        now[0] = 10.0
        first.record("c", "skipped")   # up to date: no time spent on its page
        now[0] = 40.0
        first._write()                 # a beat while a and b run
        assert read_legs(tmp_path)[0]["notebook_seconds"] == {"a": 40.0, "b": 40.0}
        now[0] = 100.0
        first.record("a", "ok")
        now[0] = 130.0
        first.record("b", "failed")     # a failed attempt's time counts too
    assert read_legs(tmp_path)[0]["notebook_seconds"] == {"a": 100.0, "b": 130.0}
    killed = Leg(tmp_path, start_time_utc="2026-11-29T10:00:00", only=None, jobs=2, run_cache_empty=False,
                 machine="Xeon (2 cores)", git_revision="abc", clock=lambda: now[0], heartbeat_s=3600)
    killed._write()
    killed.start("b")
    now[0] = 150.0
    killed._write()                    # its last beat before the session ended
    assert read_legs(tmp_path)[1]["notebook_seconds"] == {"b": 20.0} and not read_legs(tmp_path)[1]["finished"]


def test_clean_run_sums_each_notebooks_seconds_over_legs_and_attempts():
    legs = [leg("2026-11-29T09", 900.0, empty=True, notebooks={"a": "ok"}),                    # before the ledger kept them
            leg("2026-11-29T10", 600.0, notebooks={"a": "ok", "b": "failed"}, per_notebook={"a": 60.0, "b": 600.0}),
            leg("2026-11-29T11", 300.0, notebooks={"a": "ok", "b": "ok"}, per_notebook={"a": 30.0, "b": 300.0})]
    legs[1]["notebook_seconds_reconstructed"] = "filled in from the pages' meta.json"
    run = clean_run(legs, ["a", "b"])
    assert run["notebook_seconds"] == {"a": 90.0, "b": 900.0}
    assert run["legs_without_notebook_seconds"] == 1 and run["legs_reconstructed"] == 1
    lines = clean_run_notebooks(run)
    rows = [line for line in lines if line.startswith("| [")]
    assert rows == ["| [b](../notebooks/b.ipynb) | 15.0 |", "| [a](../notebooks/a.ipynb) | 1.5 |"]  # most first
    assert "1 of its legs ran before the ledger kept" in "".join(lines)
    assert "1 leg recorded no per-notebook seconds" in "".join(lines)
    assert clean_run_notebooks(clean_run(legs[:1], ["a", "b"])) == [] and clean_run_notebooks(None) == []


def test_a_run_cache_keeps_its_identity_and_legs_on_another_cache_are_not_counted(tmp_path):
    first = run_cache_id(tmp_path / "runs")
    assert first and run_cache_id(tmp_path / "runs") == first and runs_cache_is_empty(tmp_path / "runs")
    assert run_cache_id(tmp_path / "other") != first
    legs = [leg("2026-11-29T10", 600.0, empty=True, cache=first, notebooks={"a": "ok"}),
            leg("2026-11-29T11", 60.0, cache="elsewhere", notebooks={"b": "ok"}),  # another checkout's cache
            leg("2026-11-30", 300.0, cache=first, notebooks={"b": "ok"})]
    run = clean_run(legs, ["a", "b"])
    assert run["legs"] == 2 and run["seconds"] == 900.0 and run["complete"]


def test_reproduce_records_its_leg(tmp_path, monkeypatch):
    monkeypatch.setenv("TASER_RUNS_DIR", str(tmp_path / "runs"))
    root, results = tmp_path / "proj", tmp_path / "results"
    write_notebook(root / "notebooks" / "a.ipynb", GOOD)
    write_notebook(root / "notebooks" / "b.ipynb", "raise ValueError('broken')")
    assert reproduce("smoke", root=root, results_root=results, book=False, jobs=2) == 1
    (only,) = read_legs(results / "smoke")
    assert only["finished"] and only["run_cache_empty"] and only["jobs"] == 2 and only["seconds"] > 0
    assert only["notebooks"] == {"a": "ok", "b": "failed"}
    assert set(only["notebook_seconds"]) == {"a", "b"} and all(v > 0 for v in only["notebook_seconds"].values())
    assert only["run_cache"] == run_cache_id(tmp_path / "runs")
    assert json.loads((results / "smoke" / "a" / "meta.json").read_text())["run_cache"] == only["run_cache"]
    run = clean_run(read_legs(results / "smoke"), ["a", "b"])
    assert run["legs"] == 1 and run["done"] == 1 and not run["complete"]


@pytest.mark.parametrize("content", ["not json", "{}"])
def test_an_unreadable_ledger_reads_as_no_legs(tmp_path, content):
    (tmp_path / LEDGER_NAME).write_text(content)
    assert read_legs(tmp_path) == []


def test_hours_into_run_puts_a_time_on_the_runs_wall_clock_without_the_gaps_between_sessions():
    run = clean_run([leg("2026-11-29T09:00:00+00:00", 3600.0, empty=True, notebooks={"a": "ok"}),
                     leg("2026-11-29T12:00:00+00:00", 1800.0, notebooks={"b": "ok"})], ["a", "b"])
    assert run["spans"] == [["2026-11-29T09:00:00+00:00", 3600.0], ["2026-11-29T12:00:00+00:00", 1800.0]]
    assert hours_into_run(run, "2026-11-29T09:30:00+00:00") == 0.5
    assert hours_into_run(run, "2026-11-29T11:00:00+00:00") == 1.0      # between the legs: the end of the first
    assert hours_into_run(run, "2026-11-29T10:00:20") == 1.0           # a beat after a killed leg's last record
    assert hours_into_run(run, "2026-11-29T12:15:00Z") == 1.25
    assert hours_into_run(run, "2026-11-29T08:00:00+00:00") is None    # before the run: another run's result
    assert hours_into_run(run, "2026-11-29T13:00:00+00:00") is None    # after its last leg
    assert hours_into_run(run, "not a time") is None and hours_into_run(run, None) is None


def test_the_run_times_page_says_what_each_hour_of_the_run_bought(tmp_path):
    import pandas as pd

    for notebook, finished in [("a", "2026-11-29T11:00:00+00:00"), ("b", "2026-11-29T14:30:00+00:00"),
                               ("c", "2026-11-28T08:00:00+00:00")]:
        (tmp_path / notebook).mkdir()
        (tmp_path / notebook / "meta.json").write_text(json.dumps({"time_utc": finished, "status": "ok"}))
    legs = [leg("2026-11-29T09:00:00+00:00", 3 * 3600.0, empty=True, notebooks={"a": "ok", "c": "ok"}),
            leg("2026-11-29T14:00:00+00:00", 2 * 3600.0, notebooks={"b": "ok"})]
    run = clean_run(legs, ["a", "b", "c", "d"])
    card = pd.DataFrame({"notebook": ["a", "a", "b", "b", "b"],
                         "verdict (cpu)": ["holds", "not testable here", "fails", "within noise", "holds"]})
    lines = clean_run_hours(run, tmp_path, card, "cpu", budget_hours=3)
    rows = [line for line in lines if line.startswith("| ") and "[" in line]
    assert rows == ["| 2.0 | [a](../notebooks/a.ipynb) | 1 | 1 |",
                    "| 3.5 | [b](../notebooks/b.ipynb) | 3 | 4 |",
                    "| – | [c](../notebooks/c.ipynb) | 0 | 4 |"]    # written before the run: not placed on its clock
    assert ("Within the profile's 3-hour budget the run did 1 of 4 notebooks, deciding 1 claims; the 2.0 hours past "
            "it so far did 2 more, deciding 3.") in lines[-1]
    assert "took 5.0 of the profile's 6-hour budget" in clean_run_hours(run, tmp_path, card, "cpu", 6)[-1]
    assert clean_run_hours(None, tmp_path, card, "cpu", 3) == []
    no_card = clean_run_hours(run, tmp_path, None, "cpu", 3)
    assert "| 2.0 | [a](../notebooks/a.ipynb) | – | – |" in no_card and not no_card[-1].startswith("Within")


def test_a_leg_records_when_each_notebook_made_its_result(tmp_path):
    now = [1_796_000_000.0]   # 2026-11-30T00:53:20 UTC
    with Leg(tmp_path, start_time_utc="2026-11-30T00:50:00+00:00", only=None, jobs=2, run_cache_empty=True,
             machine="Xeon (2 cores)", git_revision="abc", clock=lambda: now[0], heartbeat_s=3600) as one:
        one.start("a")
        now[0] += 60
        one.record("a", "ok")
        one.record("b", "skipped")
        one.start("c")
        one.record("c", "failed")
    entry = read_legs(tmp_path)[-1]
    assert entry["notebook_finished_utc"] == {"a": "2026-11-30T00:54:20+00:00"}   # not the skipped or failed ones
    assert clean_run([entry], ["a"])["finished_utc"] == {"a": "2026-11-30T00:54:20+00:00"}


def test_a_page_made_again_after_the_run_keeps_its_place_on_the_runs_clock(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "meta.json").write_text(json.dumps({"time_utc": "2026-12-01T10:00:00+00:00", "status": "ok"}))
    made = leg("2026-11-29T09:00:00+00:00", 3 * 3600.0, empty=True, notebooks={"a": "ok"})
    run = clean_run([made], ["a"])
    assert clean_run_hours(run, tmp_path, None, "cpu", None)[-1].startswith("| – |")   # its meta is a later run's
    made["notebook_finished_utc"] = {"a": "2026-11-29T11:30:00+00:00"}
    run = clean_run([made, leg("2026-12-01T09:50:00+00:00", 900.0, notebooks={"a": "ok"},
                               cache=None)], ["a"])
    assert run["legs"] == 1   # the run was complete after its first leg: the later one is another run's
    assert clean_run_hours(run, tmp_path, None, "cpu", None)[-1].startswith("| 2.5 | [a]")
