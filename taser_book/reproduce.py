"""The reproduction pipeline: `reproduce` runs the notebooks of a profile and builds the book.

Its parts, one module each: the profiles (`taser_book.profiles`), the papermill runner (`taser_book.runner`), an
executed notebook as the book shows it (`taser_book.executed`), result files (`taser_book.results`) and the book
build (`taser_book.book`). `save_result` and `load_result` are re-exported here, where notebooks have imported them.

Layout (see book/reproduce.md):

    notebooks/<stem>.ipynb                 source notebooks, committed without outputs
    results/<profile>/<stem>/              one successful run: result tables (CSV/JSON), meta.json and the
                                           executed notebook (notebook.ipynb), swapped in whole or not at all
    results/<profile>/_failed/<stem>.ipynb the executed notebook of the last failed run, to read its traceback
    _build/book-src/                       the book's sources with each notebook replaced by its executed copy
    _build/html/                           the built book

A run executes into a staging folder beside its final place; only a run that finishes and saved at least one result
replaces results/<profile>/<stem>/, so a failed or interrupted run never replaces a good result with a partial one.

`reproduce` skips a notebook whose published result is up to date (`result_status`: same notebook, same library
files, same parameters) unless forced; forcing also sets TASER_FORCE_RETRAIN for the kernels to the time the forced
run started, so that the run cache (`taser_book.runs.cache`) retrains every run finished before then, once, even
when several notebooks share it. With one job, the kernel's output (tqdm bars included) streams to the terminal.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from taser_lib.errors import ConfigError, TaserError
from taser_lib.meta import machine_description, run_metadata
from .run_ledger import Leg, clean_run, read_legs, run_cache_id, runs_cache_is_empty
from .results import load_result, read_meta, save_result  # noqa: F401 (re-exported: notebooks import them from here)
from .book import build_book
from .profiles import load_profiles
from .runner import (NotebookRun, _dirty_files, _embeddings_kept, _force_retrain, _jax_on_the_cpu, _kernel_runs_root,
                     _threads_per_kernel, code_revision, find_notebooks, result_status, run_notebook, run_order,
                     summary_table)


def planned_notebooks(profile: str, only: list[str] | None = None, *, root: str | os.PathLike = ".",
                      profiles_file: str | os.PathLike | None = None) -> list[str]:
    """The stems `reproduce` would take in turn at `profile`: the profile's `run_first` first, then the rest by name
    (`taser reproduce --list`: one task of a job array per line)."""
    return [p.stem for p in _in_run_order(load_profiles(profiles_file), profile, Path(root).resolve(), only)]


def plan(profile: str, only: list[str] | None = None, *, root: str | os.PathLike = ".",
         results_root: str | os.PathLike | None = None, profiles_file: str | os.PathLike | None = None,
         force: bool = False) -> list[dict]:
    """What `reproduce` would do at `profile`, in run order, before it does it: for each notebook whether it runs and
    why (`result_status`: missing, or which file made it stale), and the minutes its last published result took at
    this profile (`meta.json`: every leg of it, often from a run cache that held its runs) and in the profile's last
    run from an empty run cache (`run_ledger.clean_run`); None where there is no such record."""
    root = Path(root).resolve()
    results_root = Path(results_root) if results_root is not None else root / "results"
    profiles = load_profiles(profiles_file)
    paths = _in_run_order(profiles, profile, root, only)
    try:
        clean = clean_run(read_legs(results_root / profile), [p.stem for p in find_notebooks(root)]) or {}
    except TaserError:
        clean = {}
    from_empty = clean.get("notebook_seconds") or {}
    rows = []
    for path in paths:
        reason = "--force" if force else result_status(path, profile, results_root, profiles=profiles)
        try:
            meta = read_meta(results_root / profile / path.stem) or {}
        except TaserError:
            meta = {}
        seconds = meta.get("wall_seconds_all_legs", meta.get("wall_seconds"))
        empty = from_empty.get(path.stem)
        rows.append({"notebook": path.stem, "runs": reason is not None, "why": reason or "up to date",
                     "minutes": round(seconds / 60, 1) if isinstance(seconds, (int, float)) else None,
                     "minutes_from_empty_cache": round(float(empty) / 60, 1) if empty else None})
    return rows


def plan_text(rows: list[dict], profile: str) -> str:
    """The plan as a reader wants it before hours of training: the pages that run, why, their minutes, the totals."""
    todo = [r for r in rows if r["runs"]]
    if not todo:
        return f"profile '{profile}': all {len(rows)} notebooks are up to date; nothing to run"
    width = max(len(r["notebook"]) for r in todo)

    def minutes(value):
        return f"{value:8.1f}" if value is not None else "       ?"

    lines = [f"profile '{profile}': {len(todo)} of {len(rows)} notebooks to run (the others are up to date)",
             f"  {'notebook':<{width}}  {'last run':>8}  {'from an empty run cache':>8}  why",
             f"  {'':<{width}}  {'(min)':>8}  {'(min, the last clean run)':>8}"]
    for r in todo:
        lines.append(f"  {r['notebook']:<{width}}  {minutes(r['minutes'])}  {minutes(r['minutes_from_empty_cache']):>25}"
                     f"  {r['why']}")
    for key, what in (("minutes", "as their last published runs took (a run cache that holds their runs)"),
                      ("minutes_from_empty_cache", "from an empty run cache, as in the profile's last clean run")):
        known = [r[key] for r in todo if r[key] is not None]
        missing = len(todo) - len(known)
        lines.append(f"total: about {sum(known):.0f} minutes {what}"
                     + (f"; {missing} without an estimate" if missing else ""))
    lines.append("(minutes of one lane each: with --jobs 2, two run side by side; a page that reads another page's "
                 "trained runs takes longer when those are not in the run cache yet)")
    return "\n".join(lines)


def _in_run_order(profiles: dict, profile: str, root: Path, only: list[str] | None) -> list[Path]:
    """The notebooks of `root` (or `only` those) in the order `profile` runs them; an unknown profile is an error."""
    if profile not in profiles:
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
    return run_order(find_notebooks(root, only), profiles[profile].get("run_first", []))


def reproduce(profile: str, only: list[str] | None = None, jobs: int = 1, *, root: str | os.PathLike = ".",
              results_root: str | os.PathLike | None = None, profiles_file: str | os.PathLike | None = None,
              book: bool = True, out_dir: str | os.PathLike | None = None, force: bool = False,
              allow_dirty: bool = False) -> int:
    """Run every notebook (or `only` those) at `profile`, print a summary, then build the book.

    A notebook whose published result is up to date (`result_status`) is skipped unless `force`; `force` also sets
    TASER_FORCE_RETRAIN for the kernels, one time for all of them. Keeps going past a failed notebook. Returns 0 when
    every notebook (and the book) succeeded, 1 otherwise. Results to publish (any profile but smoke) come only from
    committed code: uncommitted changes outside results/ raise ConfigError unless `allow_dirty` (the pages then show
    the revision as "+dirty").
    """
    root = Path(root).resolve()
    if profile != "smoke" and not allow_dirty and (dirty := _dirty_files(root)):
        more = f" and {len(dirty) - 3} more" if len(dirty) > 3 else ""
        raise ConfigError(f"uncommitted changes ({', '.join(dirty[:3])}{more}): commit them before publishing "
                          f"'{profile}' results, or pass --allow-dirty (the pages then say '+dirty')")
    results_root = Path(results_root) if results_root is not None else root / "results"
    profiles = load_profiles(profiles_file)
    notebooks = _in_run_order(profiles, profile, root, only)
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    run_first = profiles[profile].get("run_first", [])
    stems = {p.stem for p in find_notebooks(root)}
    stray = sorted(set(profiles[profile]["notebooks"]) - stems)
    if stray:
        print(f"note: profile '{profile}' has overrides for notebooks that do not exist yet: {', '.join(stray)}")
    stray = sorted(set(run_first) - stems)
    if stray:
        print(f"note: profile '{profile}' lists in run_first notebooks that do not exist: {', '.join(stray)}")
    if not notebooks:
        print(f"no notebooks in {root / 'notebooks'}")
    else:
        print(plan_text(plan(profile, only, root=root, results_root=results_root, profiles_file=profiles_file,
                             force=force), profile), flush=True)

    def one(i_path: tuple[int, Path]) -> NotebookRun:
        i, path = i_path
        started = time.time()
        try:
            reason = "--force" if force else result_status(path, profile, results_root, profiles=profiles)
            if reason is None:
                print(f"[{i}/{len(notebooks)}] {path.stem} at profile '{profile}': up to date, skipped\n", end="",
                      flush=True)
                return NotebookRun(path.stem, "skipped", 0.0, "up to date")
            print(f"[{i}/{len(notebooks)}] {path.stem} at profile '{profile}' ({reason})\n", end="", flush=True)
            return run_notebook(path, profile, results_root, profiles=profiles, profiles_file=profiles_file,
                                progress=jobs == 1, force=force)
        except Exception as err:  # a bad notebook file or configuration fails this notebook, not the others
            return NotebookRun(path.stem, "failed", (time.time() - started) / 60, f"{type(err).__name__}: {err}")

    work = list(enumerate(notebooks, 1))
    kernels_cache = _kernel_runs_root(root / "notebooks")  # the run cache the notebooks' kernels use
    leg = Leg(results_root / profile, start_time_utc=run_metadata()["time_utc"], only=only, jobs=jobs,
              run_cache_empty=runs_cache_is_empty(kernels_cache), run_cache=run_cache_id(kernels_cache),
              machine=machine_description()["summary"], git_revision=code_revision(root))

    def recorded(item: tuple[int, Path]) -> NotebookRun:
        leg.start(item[1].stem)
        run = one(item)
        leg.record(run.notebook, run.status)
        return run

    with leg, _force_retrain(force), _threads_per_kernel(jobs), _jax_on_the_cpu(), _embeddings_kept(root):  # one retrain time for all
        if jobs == 1:
            runs = [recorded(item) for item in work]
        else:
            with ThreadPoolExecutor(max_workers=jobs) as pool:  # each notebook runs in its own kernel process
                runs = list(pool.map(recorded, work))

    failed = [r for r in runs if r.status == "failed"]
    skipped = [r for r in runs if r.status == "skipped"]
    if runs:
        print()
        print(summary_table(runs).to_string(index=False))
        print(f"\n{len(runs) - len(failed) - len(skipped)} ok, {len(skipped)} up to date (skipped), {len(failed)} "
              f"failed; results in {results_root / profile}")
    status = 1 if failed else 0
    if book:
        try:
            index = build_book(root, results_root, out_dir=out_dir, prefer=profile)
            print(f"book: {index}")
        except TaserError as err:
            print(f"book: failed: {err}", file=sys.stderr)
            status = 1
    return status
