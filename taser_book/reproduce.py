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
from .run_ledger import Leg, run_cache_id, runs_cache_is_empty
from .results import load_result, save_result  # noqa: F401 (re-exported: notebooks import them from here)
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
