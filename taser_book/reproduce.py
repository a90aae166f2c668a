"""The reproduction pipeline: profiles, the papermill runner, result files, and the book build.

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

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from taser_lib.errors import ConfigError, FormatError, TaserError
from taser_lib.io import atomic_path, atomic_write_json, atomic_write_text
from taser_lib.meta import machine_description, run_metadata
from taser_lib.progress import PROGRESS_ENV
from .run_ledger import Leg, Ticker, clean_run, hours_into_run, read_legs, run_cache_id, runs_cache_is_empty
from .scorecard import (JUDGING_FILES, NOT_TESTABLE, TESTABLE, claim_anchor, claim_link, escape_markdown,
                        verdict_counts_table)
from .results import (  # noqa: F401 (load_result, save_result re-exported)
    EXECUTED_NAME, META_NAME, PROFILE_ORDER, load_result, notebook_sha256, read_meta, save_result,
)
from .preserving import preserved_files
from .results import stale_reason as _recorded_stale_reason
from .results import _PACKAGES, _file_sha256, _package_root

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
# Every profile must set these (after `extends`): the knobs every notebook may rely on.
REQUIRED_KEYS = (
    "description", "model", "pooling", "device", "seed", "seeds", "bf16", "offline", "max_query_length",
    "max_passage_length", "batch_size", "eval_batch_size", "epochs", "learning_rate", "n_train", "n_queries",
    "n_docs", "top_k", "cell_timeout_s",
)
RUNNER_PARAMETERS = ("profile", "results_dir")  # set by the runner only
_NOT_PARAMETERS = ("description", "extends", "notebooks", "run_first", "cell_timeout_s", "budget_hours")  # never injected
KERNEL = "python3"
FORCE_ENV = "TASER_FORCE_RETRAIN"  # a forced run's start time (Unix): the run cache retrains runs finished before


# ----------------------------------------------------------------------------------------------- profiles

def _key_lines(path: Path, text: str) -> dict[str, int]:
    """1-based line of each `profiles.<name>` key, so errors can name it."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "profiles" and isinstance(value, yaml.MappingNode):
                for name_node, _ in value.value:
                    lines[f"profiles.{name_node.value}"] = name_node.start_mark.line + 1
    return lines


def _read_profiles_file(path: Path) -> tuple[dict[str, dict], dict[str, int]]:
    from taser_lib.data.text import read_text  # strict UTF-8: an undecodable line is a FormatError naming it

    text = read_text(path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise FormatError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {err}") from err
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise FormatError(path, None, "profiles", "expected a mapping 'profiles: {name: {...}}'")
    lines = _key_lines(path, text)
    for name, body in data["profiles"].items():
        if not isinstance(body, dict):
            raise FormatError(path, lines.get(f"profiles.{name}"), f"profiles.{name}", "must be a mapping")
    return data["profiles"], lines


def load_profiles(extra: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """The packaged profiles plus those of `extra` (or $TASER_PROFILES), `extends` resolved, each validated.

    A profile in the extra file with the name of a packaged one replaces it; `extends: NAME` starts from NAME.
    """
    raw, lines = _read_profiles_file(PROFILES_FILE)
    sources = {name: PROFILES_FILE for name in raw}
    extra = extra or os.environ.get("TASER_PROFILES")
    if extra:
        extra_path = Path(extra)
        if not extra_path.is_file():
            raise ConfigError(f"profiles file {extra_path} does not exist")
        more, more_lines = _read_profiles_file(extra_path)
        raw.update(more)
        lines.update(more_lines)
        sources.update({name: extra_path for name in more})

    resolved: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if name in resolved:
            return resolved[name]
        body = dict(raw[name])
        own = set(body)
        parent = body.pop("extends", None)
        if parent is not None:
            if parent not in raw:
                raise FormatError(sources[name], lines.get(f"profiles.{name}"), f"profiles.{name}.extends",
                                  f"unknown profile '{parent}' (known: {', '.join(raw)})")
            if parent in chain:
                raise FormatError(sources[name], lines.get(f"profiles.{name}"), f"profiles.{name}.extends",
                                  f"circular: {' -> '.join(chain + (parent,))}")
            base = resolve(parent, chain + (parent,))
            notebooks = {k: dict(v) for k, v in base.get("notebooks", {}).items()}
            for stem, over in (body.pop("notebooks", None) or {}).items():
                notebooks.setdefault(stem, {}).update(over)
            body = {**base, **body, "notebooks": notebooks}
        # `seed` and `seeds` follow each other unless the profile sets both
        if "seed" in own and "seeds" not in own and body["seed"] is not None:
            body["seeds"] = [body["seed"]]
        elif "seeds" in own and "seed" not in own and isinstance(body["seeds"], list) and body["seeds"]:
            body["seed"] = body["seeds"][0]
        resolved[name] = _validate(name, body, sources[name], lines.get(f"profiles.{name}"))
        return resolved[name]

    for name in raw:
        resolve(name, (name,))
    return resolved


def _validate(name: str, body: dict[str, Any], path: Path, line: int | None) -> dict[str, Any]:
    missing = [k for k in REQUIRED_KEYS if k not in body]
    if missing:
        raise FormatError(path, line, f"profiles.{name}", f"missing required key(s): {', '.join(missing)}")
    seeds = body["seeds"]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and not isinstance(x, bool)
                                                           for x in seeds):
        raise FormatError(path, line, f"profiles.{name}.seeds", f"must be a non-empty list of integers, got {seeds!r}")
    notebooks = body.get("notebooks") or {}
    if not isinstance(notebooks, dict) or not all(isinstance(v, dict) for v in notebooks.values()):
        raise FormatError(path, line, f"profiles.{name}.notebooks", "must map notebook stems to mappings")
    run_first = body.get("run_first", [])
    if not isinstance(run_first, list) or not all(isinstance(s, str) for s in run_first):
        raise FormatError(path, line, f"profiles.{name}.run_first", f"must be a list of notebook stems, got "
                                                                     f"{run_first!r}")
    budget = body.get("budget_hours")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, (int, float)) or budget <= 0):
        raise FormatError(path, line, f"profiles.{name}.budget_hours", f"must be a positive number of hours or null, "
                                                                        f"got {budget!r}")
    for where, keys in [(f"profiles.{name}", body), *((f"profiles.{name}.notebooks.{s}", o)
                                                      for s, o in notebooks.items())]:
        reserved = [k for k in RUNNER_PARAMETERS if k in keys]
        if reserved:
            raise FormatError(path, line, where, f"{', '.join(reserved)} is set by the runner, not by a profile")
    return {**body, "notebooks": notebooks}


def profile_parameters(profile: str, notebook: str, overrides: Mapping[str, Any] | None = None,
                       profiles: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The parameters a notebook gets at `profile`: profile values < per-notebook overrides < `overrides`.

    Includes `profile`; the runner adds `results_dir`.
    """
    profiles = profiles if profiles is not None else load_profiles()
    if profile not in profiles:
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
    body = profiles[profile]
    params = {k: v for k, v in body.items() if k not in _NOT_PARAMETERS}
    params.update(body["notebooks"].get(notebook, {}))
    params.update(overrides or {})
    reserved = [k for k in RUNNER_PARAMETERS if k in (overrides or {})]
    if reserved:
        raise ConfigError(f"{', '.join(reserved)} is set by the runner and cannot be overridden")
    params["profile"] = profile
    return params


# ----------------------------------------------------------------------------------------------- running

@dataclass(frozen=True)
class NotebookRun:
    notebook: str
    status: str          # "ok", "failed" or "skipped" (its published result is up to date)
    minutes: float
    note: str = ""       # where the results went, or why it failed


def _declared_parameters(path: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(path)))


def notebook_parameters(path: str | os.PathLike, profile: str, overrides: Mapping[str, Any] | None = None,
                        profiles: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What the runner injects into notebook `path` at `profile` (all but `results_dir`): the parameters it declares.

    Raises ConfigError when the notebook cannot be parameterised (no `profile`/`results_dir` in its parameters cell,
    or a per-notebook override it does not declare)."""
    path = Path(path)
    profiles = profiles if profiles is not None else load_profiles()
    params = profile_parameters(profile, path.stem, overrides, profiles)
    declared = _declared_parameters(path)
    lacking = [p for p in RUNNER_PARAMETERS if p not in declared]
    if lacking:
        raise ConfigError(f"{path}: its cell tagged 'parameters' must declare {', '.join(lacking)}")
    undeclared = sorted(set(profiles[profile]["notebooks"].get(path.stem, {})) - declared)
    if undeclared:
        raise ConfigError(f"profile '{profile}' overrides {', '.join(undeclared)} for notebook '{path.stem}', "
                          f"which its parameters cell does not declare")
    return {k: v for k, v in params.items() if k in declared}


def page_stale_reason(result_folder: str | os.PathLike, repo_root: str | os.PathLike = ".") -> str | None:
    """Why a page's published result must be made again (None when it is up to date): its notebook or a library file
    it loaded changed (`results.stale_reason`). The claims loader and the scorecard do not count: the book judges every
    page's tables again when it is built. A figure function does count (unlike for the scorecard's verdicts): the
    page's figures were drawn by the old one. Nor do changes declared result-preserving (`preserving`)."""
    preserved = preserved_files(result_folder, repo_root)
    return _recorded_stale_reason(result_folder, repo_root, ignore=lambda f: f in JUDGING_FILES or preserved(f))


def result_status(path: str | os.PathLike, profile: str, results_root: str | os.PathLike = "results", *,
                  overrides: Mapping[str, Any] | None = None,
                  profiles: Mapping[str, Mapping[str, Any]] | None = None) -> str | None:
    """Why notebook `path` must run at `profile`: None when its published result is up to date (same notebook, same
    library files, same parameters), else a short reason. The repository root is the notebook folder's parent."""
    path = Path(path).resolve()
    folder = Path(results_root) / profile / path.stem
    try:
        meta = read_meta(folder)
    except FormatError as err:
        return f"unreadable meta.json ({err})"
    if meta is None:
        return "no result yet"
    reason = page_stale_reason(folder, path.parent.parent)
    if reason:
        return reason
    wanted = json.loads(json.dumps(notebook_parameters(path, profile, overrides, profiles), default=str))
    recorded = meta.get("parameters") or {}
    changed = sorted(k for k in set(wanted) | set(recorded) if wanted.get(k) != recorded.get(k))
    if changed:
        return f"parameters changed since the result was made: {', '.join(changed)}"
    return None


_FORCE = {"users": 0, "saved": None}
_FORCE_LOCK = threading.Lock()


@contextlib.contextmanager
def _threads_per_kernel(jobs: int):
    """With `jobs` kernels at a time, each gets an equal share of this machine's cores as OMP_NUM_THREADS and
    MKL_NUM_THREADS (which the kernels inherit): two kernels of a 2-core machine each using both cores run several
    times slower than one core each. Thread counts the caller set are kept."""
    if jobs <= 1 or any(os.environ.get(v) for v in THREAD_ENVS):
        yield
        return
    share = str(max(1, available_cores() // jobs))
    for var in THREAD_ENVS:
        os.environ[var] = share
    try:
        yield
    finally:
        for var in THREAD_ENVS:
            os.environ.pop(var, None)


THREAD_ENVS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@contextlib.contextmanager
def _kernel_env(var: str, value: str):
    """The kernels inherit `var`=`value` for the run, unless the caller set `var` (then theirs is kept)."""
    if os.environ.get(var):
        yield
        return
    os.environ[var] = value
    try:
        yield
    finally:
        os.environ.pop(var, None)


def _jax_on_the_cpu():
    """The kernels see JAX_PLATFORMS=cpu. No page uses JAX, but importing bm25s runs one `jax.lax.top_k` where JAX is
    installed, and on a GPU node that claims 75% of the GPU's memory per kernel: the first `make gpu-check` on an
    H200 (2026-11-30) failed so, each kernel out of memory beside another's 105 GiB."""
    return _kernel_env(JAX_ENV, "cpu")


JAX_ENV = "JAX_PLATFORMS"


def _kernel_runs_root(folder: Path) -> Path:
    """The run cache a kernel started in `folder` trains into and reads (`runs.cache.default_runs_root` from there)."""
    from .runs.cache import ENV_RUNS_DIR, repository_root

    if os.environ.get(ENV_RUNS_DIR):
        return Path(os.environ[ENV_RUNS_DIR]).expanduser().resolve()
    repo = repository_root(folder)
    return repo / "runs" / "cache" if repo else Path.home() / ".cache" / "taser" / "runs"


@contextlib.contextmanager
def _embeddings_kept(root: Path):
    """The kernels keep their corpus embeddings on disk beside the run cache (`tables.seeded.SeededModels`), so that
    pages evaluating the same models over the same passages, and a page rerun, encode each corpus once per model. A
    folder the caller chose ($TASER_EMBEDDINGS_DIR) is kept."""
    from .tables.seeded import ENV_EMBEDDINGS_DIR

    with _kernel_env(ENV_EMBEDDINGS_DIR, str(_kernel_runs_root(root / "notebooks") / "embeddings")):
        yield


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@contextlib.contextmanager
def _force_retrain(on: bool):
    """TASER_FORCE_RETRAIN=<now> in this process's environment, which the kernels started meanwhile inherit; nested
    and parallel users share the first one's time (as `runs.cache.force_retrain_env()` writes it)."""
    if not on:
        yield
        return
    with _FORCE_LOCK:
        if _FORCE["users"] == 0:
            _FORCE["saved"] = os.environ.get(FORCE_ENV)
            os.environ[FORCE_ENV] = f"{time.time():.6f}"
        _FORCE["users"] += 1
    try:
        yield
    finally:
        with _FORCE_LOCK:
            _FORCE["users"] -= 1
            if _FORCE["users"] == 0:
                if _FORCE["saved"] is None:
                    os.environ.pop(FORCE_ENV, None)
                else:
                    os.environ[FORCE_ENV] = _FORCE["saved"]


class _Echo:
    """File-like: papermill writes the kernel's stream output here as it arrives; it goes on to the terminal (looked
    up at each write, so captured streams work)."""

    def __init__(self, name: str):
        self.name = name

    def write(self, text: str) -> int:
        stream = getattr(sys, self.name)
        stream.write(text)
        stream.flush()
        return len(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()


class _CellHeaders(logging.Handler):
    """Turns papermill's 'Executing Cell N' log lines into one line per cell; drops its other log lines (the stream
    output, which `_Echo` already shows raw)."""

    def __init__(self, stem: str, total: int):
        super().__init__(logging.INFO)
        self.stem, self.total = stem, total

    def emit(self, record: logging.LogRecord) -> None:
        match = re.match(r"Executing Cell (\d+)", record.getMessage())
        if match:
            sys.stdout.write(f"[{self.stem}] cell {match[1]}/{self.total}\n")
            sys.stdout.flush()


@contextlib.contextmanager
def _streaming(stem: str, total: int):
    logger = logging.getLogger("papermill")
    handler = _CellHeaders(stem, total)
    saved = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    saved_progress = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = "text"  # the kernel's progress bars as text, which streams here (not widgets)
    try:
        yield {"log_output": True, "stdout_file": _Echo("stdout"), "stderr_file": _Echo("stderr")}
    finally:
        if saved_progress is None:
            os.environ.pop(PROGRESS_ENV, None)
        else:
            os.environ[PROGRESS_ENV] = saved_progress
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def _publish(staging: Path, final: Path) -> None:
    """Put `staging` where `final` is. The old result is renamed aside first and restored if the swap fails."""
    backup = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}") if final.exists() else None
    if backup:
        os.rename(final, backup)
    try:
        os.rename(staging, final)
    except BaseException:
        if backup:
            os.rename(backup, final)
        raise
    if backup:
        shutil.rmtree(backup)


def tidy_executed(nb, missing_note: str | None = None) -> None:
    """The committed executed notebook as the book shows it (`book_notebook`): its injected parameters cell collapsed
    (`hide-input`) and its outputs cleaned (`_clean_outputs`: no stderr, timers, machine paths or NaN), so a reader
    who opens `results/<profile>/<page>/notebook.ipynb` sees what the page shows."""
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and "hide-input" not in tags:
            cell.metadata["tags"] = [*tags, "hide-input"]
        if cell.get("cell_type") == "code":
            cell.outputs = _clean_outputs(cell.get("outputs", []), missing_note)


def _point_at(executed: Path, staged: str, final: str, missing_note: str | None = None) -> None:
    """Make the executed notebook's injected `results_dir` name where its results end up, not the staging folder,
    and tidy it as the book shows it (`tidy_executed`)."""
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(executed, as_version=nbformat.NO_CONVERT)
    old, new = PythonTranslator.translate_str(staged), PythonTranslator.translate_str(final)
    for cell in nb.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell.source = cell.source.replace(old, new)
    tidy_executed(nb, missing_note)
    papermill_meta = nb.metadata.get("papermill", {})
    papermill_meta.get("parameters", {})["results_dir"] = final
    # paths as seen from the notebook's folder, like `results_dir`: a committed copy names no machine's folders
    papermill_meta["input_path"] = Path(papermill_meta.get("input_path", "")).name
    papermill_meta["output_path"] = f"{final}/{EXECUTED_NAME}"
    with atomic_path(executed) as tmp:
        nbformat.write(nb, str(tmp))


LEG_NAME = ".heartbeat.json"   # in a staging folder while its notebook runs: when it started and how long it has run
HEARTBEAT_S = 30.0      # how often the runner rewrites it


class _Heartbeat:
    """While a notebook runs, `staging/.heartbeat.json` says when the run started and how long it has run so far,
    rewritten every HEARTBEAT_S seconds. A run killed outright (SIGKILL, a session or machine that goes away) cannot
    record its time, but leaves this file behind: the next run of the notebook counts that leg into the page's wall
    time (`_earlier_legs`), so a page whose trained runs resumed across sessions reports all of its time, not only
    its last leg. The legs this run took over (`earlier`, whose staging folders it removed) are written with it, so
    that a run killed in turn hands all of them on, not only its own."""

    def __init__(self, staging: Path, start_utc: str, earlier: Sequence[Mapping[str, Any]] = ()):
        self.path, self.start_utc, self.started = staging / LEG_NAME, start_utc, time.time()
        self.earlier = [dict(leg) for leg in earlier]
        self._ticker = Ticker(self._write, HEARTBEAT_S, f"heartbeat-{staging.name}")

    def _write(self) -> None:
        now = time.time()
        try:
            atomic_write_json(self.path, {"start_time_utc": self.start_utc, "seconds": round(now - self.started, 1),
                                          "last_seen": now, "earlier_legs": self.earlier})
        except OSError:  # the staging folder went away (published or discarded): nothing left to record
            pass

    def __enter__(self) -> "_Heartbeat":
        self._ticker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ticker.__exit__(*exc)
        self.path.unlink(missing_ok=True)  # never published with the results


def _earlier_legs(staging_root: Path, stem: str) -> list[dict]:
    """The legs of earlier runs of notebook `stem` that were killed outright: each staging folder of that notebook
    whose heartbeat stopped more than three beats ago. Their staging folders are removed once read (a live run's,
    whose heartbeat is recent, is left alone; a folder without a heartbeat, from a runner before heartbeats, too).
    A killed leg's own earlier legs (those it had taken over, `_Heartbeat`) come with it."""
    legs = []
    now = time.time()
    for folder in sorted(staging_root.glob(f"{stem}-*")) if staging_root.is_dir() else []:
        if folder.name.rsplit("-", 1)[0] != stem or not (folder / LEG_NAME).is_file():
            continue
        try:
            leg = json.loads((folder / LEG_NAME).read_text(encoding="utf-8"))
            seconds, last_seen = float(leg["seconds"]), float(leg["last_seen"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if now - last_seen <= 3 * HEARTBEAT_S:
            continue
        carried = leg.get("earlier_legs") if isinstance(leg.get("earlier_legs"), list) else []
        legs += [dict(e) for e in carried if isinstance(e, dict) and isinstance(e.get("seconds"), (int, float))]
        legs.append({"start_time_utc": leg.get("start_time_utc"), "seconds": round(seconds, 1)})
        shutil.rmtree(folder, ignore_errors=True)
    return sorted(legs, key=lambda leg: str(leg["start_time_utc"]))


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty: another run is staging there
        pass


def _discard(staging: Path, executed: Path, failed_copy: Path) -> bool:
    """Remove a run's staging folder, first moving its executed notebook (if any) to `failed_copy`; True if moved.
    The published result, if any, is never touched."""
    moved = executed.exists()
    if moved:
        failed_copy.parent.mkdir(parents=True, exist_ok=True)
        os.replace(executed, failed_copy)
    shutil.rmtree(staging, ignore_errors=True)
    _remove_if_empty(staging.parent)
    return moved


def code_revision(root: str | os.PathLike) -> str | None:
    """The checkout's commit, with '+dirty' when a tracked file outside results/ has uncommitted changes (a run's own
    outputs under results/ are not code: publishing one notebook must not mark the next one dirty); None outside
    git."""
    root = Path(root)
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return rev.stdout.strip() + ("+dirty" if _dirty_files(Path(top)) else "")


def _dirty_files(root: Path) -> list[str]:
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)results"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    return [line[3:] for line in out.splitlines() if line.strip()]


def run_notebook(path: str | os.PathLike, profile: str, results_root: str | os.PathLike = "results", *,
                 overrides: Mapping[str, Any] | None = None,
                 profiles: Mapping[str, Mapping[str, Any]] | None = None,
                 progress: bool = True, force: bool = False) -> NotebookRun:
    """Execute one notebook with papermill at `profile`; publish its results only if it succeeds.

    `progress` streams the kernel's output (tqdm bars included) and one line per cell to the terminal. `force` sets
    TASER_FORCE_RETRAIN for the kernel (see `_force_retrain`). Raises ConfigError when the notebook cannot be
    parameterised (see `notebook_parameters`); an execution error is returned as a failed run.
    """
    import papermill

    path = Path(path).resolve()
    stem = path.stem
    profiles = profiles if profiles is not None else load_profiles()
    params = notebook_parameters(path, profile, overrides, profiles)
    source = {"path": f"{path.parent.name}/{path.name}", "sha256": notebook_sha256(path),
              "git_revision": code_revision(path.parent)}  # taken before the run: the version that ran

    code_before = _library_snapshot()  # the library as the kernel will import it (see _changed_while_running)
    profile_dir = Path(results_root).resolve() / profile
    earlier = _earlier_legs(profile_dir / ".staging", stem)  # legs of this notebook killed before they could finish
    staging = profile_dir / ".staging" / f"{stem}-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    params["results_dir"] = os.path.relpath(staging, path.parent)
    cell_timeout = profiles[profile].get("cell_timeout_s")
    executed = staging / EXECUTED_NAME
    failed_copy = profile_dir / "_failed" / f"{stem}.ipynb"
    started = time.time()
    start_utc = run_metadata()["time_utc"]
    error: str | None = None
    total_cells = len(json.loads(path.read_text(encoding="utf-8")).get("cells", [])) + 1  # + injected parameters
    try:
        with _force_retrain(force), _Heartbeat(staging, start_utc, earlier), \
                (_streaming(stem, total_cells) if progress else contextlib.nullcontext({})) as out:
            # The kernel starts in the notebook's folder through nbclient's resources, not papermill's `cwd`:
            # that one chdirs the whole process, which races between the threads of --jobs (nteract/papermill#473)
            # and can start a kernel in another folder, where its relative results_dir points elsewhere.
            papermill.execute_notebook(str(path), str(executed), parameters=params, kernel_name=KERNEL,
                                       resources={"metadata": {"path": str(path.parent)}}, progress_bar=False,
                                       execution_timeout=cell_timeout, **out)
        meta = read_meta(staging)
        if meta is None or not meta.get("tables"):
            error = "saved no result (a notebook must call taser_book.reproduce.save_result)"
        elif changed := _changed_while_running(meta, code_before):
            more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
            error = (f"library files changed while it ran ({', '.join(changed[:3])}{more}): its result would record "
                     f"code that did not run; run it again")
    except papermill.PapermillExecutionError as err:
        error = f"{err.ename}: {err.evalue}".strip()
    except Exception as err:  # a dead kernel or a cell timeout: this notebook failed, the others still run
        error = f"{type(err).__name__}: {err}"
    except BaseException:  # Ctrl-C (or SystemExit): keep what ran in _failed, leave no staging folder behind
        _discard(staging, executed, failed_copy)
        raise
    wall = time.time() - started

    if error is not None:
        note = error.splitlines()[0][:200] if error else "failed"
        if _discard(staging, executed, failed_copy):
            note += f" (executed notebook: {failed_copy})"
        return NotebookRun(stem, "failed", wall / 60, note)

    final = profile_dir / stem
    meta = read_meta(staging) or {}
    meta.update(run_metadata())
    if source["git_revision"] is not None:  # the code that ran, not the results published meanwhile
        meta["git_revision"] = source["git_revision"]
    meta.update({
        "notebook": stem, "profile": profile, "status": "ok",
        "results_dir": os.path.relpath(final, path.parent.parent),  # from the repository root: no machine's path
        "parameters": {k: v for k, v in params.items() if k != "results_dir"},  # the staging path is not one
        "start_time_utc": start_utc, "wall_seconds": round(wall, 3), "forced": force,
        # a run that resumed after earlier legs were killed: their time too (trained runs resume from the run cache)
        **({"earlier_legs": earlier, "wall_seconds_all_legs": round(wall + sum(leg["seconds"] for leg in earlier), 1)}
           if earlier else {}),
        "notebook_source": {**meta.get("notebook_source", {}), **source},
    })
    meta.setdefault("library_version", sys.modules[__package__].__version__)
    meta.setdefault("hardware", machine_description())  # the kernel's record, when it saved one, names the GPU too
    meta.setdefault("run_cache", run_cache_id(_kernel_runs_root(path.parent), create=False))  # whose runs it read
    atomic_write_json(staging / META_NAME, meta)
    try:
        missing_note = load_missing_value_notes(path.parent.parent).get(stem)
    except ConfigError:  # a malformed book/missing_values.yaml: the book build names it; the page keeps the default
        missing_note = None
    _point_at(executed, params["results_dir"], os.path.relpath(final, path.parent), missing_note)
    _publish(staging, final)
    failed_copy.unlink(missing_ok=True)
    _remove_if_empty(staging.parent)
    return NotebookRun(stem, "ok", wall / 60, str(final))


def _library_snapshot() -> dict[str, str]:
    """{"taser_lib/<path>.py": sha256} of every file of the packages a kernel imports, as they are now."""
    root = _package_root()
    return {path.relative_to(root).as_posix(): _file_sha256(path)
            for package in _PACKAGES for path in sorted((root / package).rglob("*.py"))}


def _changed_while_running(meta: Mapping[str, Any], before: Mapping[str, str]) -> list[str]:
    """The library files a result records that changed between its run's start and its end (a checkout updated or
    edited meanwhile). A kernel hashes the files it loaded when it saves (`results.library_files`), so without this
    check a page would record the new code while it ran the old, and read as up to date when it is not. The judging
    files (claims, scorecard) do not count, as they do not for staleness: a page is judged when the book is built."""
    return sorted(f for f, digest in (meta.get("library_files") or {}).items()
                  if f not in JUDGING_FILES and before.get(f) != digest)  # judging, as for staleness, is not running


def find_notebooks(root: str | os.PathLike = ".", only: list[str] | None = None) -> list[Path]:
    """notebooks/*.ipynb under `root`, sorted; `only` picks by stem (or file name; "a,b" names two) and must all
    exist."""
    folder = Path(root) / "notebooks"
    found = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))
    if not only:
        return found
    by_stem = {p.stem: p for p in found}
    wanted = [Path(name.strip()).stem for names in only for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in by_stem]
    if unknown:
        raise ConfigError(f"no notebook named {', '.join(unknown)} in {folder} (there are: "
                          f"{', '.join(by_stem) or 'none'})")
    return [by_stem[name] for name in dict.fromkeys(wanted)]


def summary_table(runs: list[NotebookRun]) -> pd.DataFrame:
    return pd.DataFrame([{"notebook": r.notebook, "status": r.status, "minutes": round(r.minutes, 2),
                          "note": r.note} for r in runs], columns=["notebook", "status", "minutes", "note"])


def run_order(notebooks: list[Path], run_first: list[str]) -> list[Path]:
    """`notebooks` with the stems of `run_first` first, in that order, then the rest as given (sorted by name).

    Notebooks share trained runs through the run cache, and a kernel that asks for a run another kernel is training
    waits on its lock. With `--jobs 2` the kernels take notebooks in this order, so a profile lists first the
    notebooks that train runs no other running notebook needs (at `cpu`: the retrievers in taser_in_domain beside
    the CA teacher and its students in de_distillation), and the pages that only evaluate those runs later."""
    rank = {stem: i for i, stem in enumerate(run_first)}
    return sorted(notebooks, key=lambda p: rank.get(p.stem, len(rank)))  # stable: the rest keep their order


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
    if profile not in profiles:
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    run_first = profiles[profile].get("run_first", [])
    notebooks = run_order(find_notebooks(root, only), run_first)
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
            return run_notebook(path, profile, results_root, profiles=profiles, progress=jobs == 1, force=force)
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


# ----------------------------------------------------------------------------------------------- the book

def executed_notebook(results_root: str | os.PathLike, stem: str, prefer: str | None = None) -> Path | None:
    """The executed copy of notebook `stem` the book shows: from profile `prefer` if it ran there, else from the
    largest profile that ran it (full, then cpu, then smoke, then any other)."""
    results_root = Path(results_root)
    others = sorted(p.name for p in results_root.iterdir() if p.is_dir()) if results_root.is_dir() else []
    order = [prefer] if prefer else []
    order += [p for p in reversed(PROFILE_ORDER) if p not in order]
    order += [p for p in others if p not in order]
    for profile in order:
        candidate = results_root / profile / stem / EXECUTED_NAME
        if candidate.is_file():
            return candidate
    return None


_PROGRESS_LINE = re.compile(r"\d+%\|.*\||\[\d+:\d+(:\d+)?<|\d+(\.\d+)?(it|s)/(s|it)\]")
_HIDDEN_TAGS = ("hide-input", "hide-output", "hide-cell", "remove-input", "remove-output", "remove-cell")


def _clean_text(text: str) -> str:
    """What a terminal would show of `text` (each line's last carriage-return segment), without progress bars."""
    lines = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join(line for line in lines if not _PROGRESS_LINE.search(line))


# What a reader has no use for: timers, the machine's paths, a path object echoed by the last line of a cell, and
# pandas' marks for a missing value (shown as "–").
_TIMER_LINE = re.compile(r"\b\d+(\.\d+)? s so far\b|^\s*wall time \d+(\.\d+)? s\s*$")
_MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|tmp|root|home|Users|scratch|private)(?:/[\w.+-]+)*/([\w.+-]+)")
_MISSING_HTML = re.compile(r"<td>(?:NaN|&lt;NA&gt;|None)</td>")
_MISSING_TEXT = re.compile(r"(?<![\w.])(?:NaN|<NA>)(?![\w.])")


def _scrub(text: str, html: bool = False) -> tuple[str, int]:
    """`text` without machine paths, and with "–" for each missing value; and how many values were missing."""
    text = _MACHINE_PATH.sub(r"\1", text)
    return _MISSING_HTML.subn("<td>–</td>", text) if html else _MISSING_TEXT.subn("–", text)


# Why a page's tables have cells without a value (page -> one sentence): data, in book/missing_values.yaml. The book
# shows the sentence under each table in which it put a "–".
MISSING_VALUES_FILE = "book/missing_values.yaml"
UNEXPLAINED_MISSING = "no value (the page does not say why)"


def _read_yaml(path: Path) -> Any:
    """The YAML data file `path` (None when empty); invalid YAML is a ConfigError naming the file and line."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None


def load_missing_value_notes(root: str | os.PathLike) -> dict[str, str]:
    """{page: why its tables have "–" cells} from book/missing_values.yaml (nothing when the file is absent). A
    malformed file is a ConfigError naming the file, and the line or the page."""
    path = Path(root) / MISSING_VALUES_FILE
    if not path.is_file():
        return {}
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of page names to one sentence each")
    for page, note in data.items():
        if not isinstance(note, str) or not note.strip():
            raise ConfigError(f"{path}: page '{page}': the note must be a non-empty sentence")
    return {str(page): note.strip() for page, note in data.items()}


def _missing_footnote(note: str | None, html: bool) -> str:
    note = note or UNEXPLAINED_MISSING
    if not html:
        return f"\n– {note}"
    return '\n<p class="missing-note">– ' + re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(note)) + "</p>\n"


def _clean_outputs(outputs: list, missing_note: str | None = None) -> list:
    """A cell's outputs as the book shows them: no stderr (warnings, progress bars, logging), no widgets, no
    progress-bar debris or timers in stdout, no echoed path objects, no machine paths (a run folder shows as its
    name), and "–" for a missing value, with `missing_note` (why the page's tables have cells without a value) under
    a table that has one."""
    kept = []
    for out in outputs:
        if out.get("output_type") == "stream":
            if out.get("name") != "stdout":
                continue
            text = _clean_text("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
            text = "\n".join(line for line in text.split("\n") if not _TIMER_LINE.search(line))
            if not text.strip():
                continue
            out["text"] = _scrub(text)[0]
        elif out.get("output_type") in ("display_data", "execute_result"):
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data and len(data) <= 2:  # a widget, or it and its text
                continue
            plain = data.get("text/plain", "")
            plain = "".join(plain) if isinstance(plain, list) else plain
            if set(data) <= {"text/plain"} and plain.lstrip("[(").startswith("PosixPath("):
                continue
            for kind in ("text/plain", "text/html"):
                if kind in data:
                    value = "".join(data[kind]) if isinstance(data[kind], list) else data[kind]
                    value, n_missing = _scrub(value, html=kind == "text/html")
                    data[kind] = value + (_missing_footnote(missing_note, kind == "text/html") if n_missing else "")
        kept.append(out)
    return kept


def _admonition(kind: str, title: str, body: str) -> str:
    return f"```{{admonition}} {title}\n:class: {kind}\n{body}\n```"


def wall_seconds(meta: Mapping[str, Any]) -> float | None:
    """A result's wall time: every leg of its run (`wall_seconds_all_legs`, when earlier legs were killed and the
    run resumed), else its one leg."""
    value = meta.get("wall_seconds_all_legs", meta.get("wall_seconds"))
    return value if isinstance(value, (int, float)) else None


def _provenance_line(meta: Mapping[str, Any]) -> str:
    """One line under the title: which run made the page's numbers."""
    hardware = (meta.get("hardware") or {}).get("summary") or meta.get("machine") or "an unrecorded machine"
    minutes = wall_seconds(meta)
    legs = 1 + len(meta.get("earlier_legs") or [])
    when = str(meta.get("start_time_utc") or meta.get("time_utc") or "")[:10]
    revision = str(meta.get("git_revision") or "")
    revision = revision.split("+")[0][:12] + ("+dirty" if revision.endswith("+dirty") else "")
    parts = [f"profile `{meta.get('profile')}`", when,
             (f"{minutes / 60:.1f} min" + (f" in {legs} legs" if legs > 1 else "") + f" on {hardware}")
             if isinstance(minutes, (int, float)) else f"on {hardware}"]
    if revision:
        parts.append(f"revision `{revision}`")
    runs = " (see [Run times](../book/runs.md))"
    return "*Computed by `taser reproduce`: " + ", ".join(p for p in parts if p) + runs + ".*"


def _cell(text: Any) -> str:
    """Text for one Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def short_statement(statement: str, limit: int = 110) -> str:
    """A claim's statement in one line for the verdict box: without its parenthetical qualifiers (the quotes from the
    paper, the "here: ..." notes, the model details) and what follows a semicolon, which the dropdown below the box
    keeps, and cut at a word before `limit` characters."""
    text = " ".join(statement.split())
    start = text.find(" (")
    while start >= 0:  # a parenthetical opens after a space and closes before a space or a mark: (1/8)·x is math
        depth, end = 0, None
        for i in range(start + 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            if depth == 0:
                end = i
                break
        if end is not None and (end + 1 == len(text) or text[end + 1] in " ,.;:"):
            text = text[:start] + text[end + 1:]
            start = text.find(" (", start)
        else:
            start = text.find(" (", start + 1)
    text = text.split("; ")[0].rstrip(" ,:")
    if len(text) > limit:
        text = text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"
    return text


VERDICT_BOX_COLUMNS = (("claim", 34), ("verdict", 17), ("paper", 20), ("ours", 21), ("ER", 8))  # name, % of width


VERDICT_BOX_TITLES = {"ER": "effect ratio (Breuer et al., SIGIR 2020): our improvement over the paper's "
                               "(1: the whole effect came back; 0 or less: none, or reversed)"}


def _box_unit(ours: str) -> str:
    """Our numbers as the verdict box shows them: the unit at their end without its own parentheticals ("test R@K at
    the deciding cutoff (R@1 on SQuAD-open; ...), %" -> "test R@K at the deciding cutoff, %"), so that a row is a few
    lines, not a dozen; the dropdown below the box keeps the unit in full."""
    if not ours.endswith(")"):
        return ours
    depth, start = 0, None
    for i in range(len(ours) - 1, -1, -1):  # the parenthesis that opens the unit at the end
        depth += {")": 1, "(": -1}.get(ours[i], 0)
        if depth == 0:
            start = i
            break
    if not start:
        return ours
    unit = ours[start + 1:-1]
    while (short := re.sub(r"\s*\([^()]*\)", "", unit)) != unit:  # nested parentheticals, innermost first
        unit = short
    return f"{ours[:start]}({unit})"


def _verdict_box(claims: pd.DataFrame) -> str:
    """The page's claims and verdicts as a short table (the first thing under the title): each claim in one line with
    its id and where the paper makes it, on the anchor the scorecard and the chapter pages link to, its verdict, the
    paper's numbers and ours; then a dropdown with each claim in full and the test behind its verdict. The table is
    HTML so that its columns get widths that fit the text column (a Markdown table gives the claim a sliver)."""
    from html import escape

    rows = []
    details = []
    for row in claims.itertuples(index=False):
        where = getattr(row, "where", "") or ""
        statement = " ".join(str(getattr(row, "claim", "") or "").split())
        short = short_statement(statement)
        label = f"<strong>{escape(str(row.id))}</strong>" + (f" ({escape(str(where))})" if where else "")
        claim = f'<span id="{claim_anchor(row.id)}"></span>' + (
            f"{escape(short)}<br><small>{label}</small>" if short else label)
        ours = str(row.ours or "")
        cells = [claim, escape(str(row.verdict)), escape(str(row.paper)), escape(_box_unit(ours)) or "–"]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells)
                    + f'<td class="number">{escape(str(row.ER or "")) or "–"}</td></tr>')
        detail = " ".join(str(getattr(row, "detail", "") or "").split())
        if statement or detail:
            details.append(f"- **{escape_markdown(row.id)}**: {escape_markdown(statement)}"
                           + (f" *Ours*: {escape_markdown(ours)}." if ours and _box_unit(ours) != ours else "")
                           + (f" *Verdict*: {escape_markdown(detail)}" if detail else ""))
    widths = "".join(f'<col style="width: {w}%">' for _, w in VERDICT_BOX_COLUMNS)
    heads = "".join(f'<th title="{escape(VERDICT_BOX_TITLES[name])}">{name}</th>' if name in VERDICT_BOX_TITLES
                    else f"<th>{name}</th>" for name, _ in VERDICT_BOX_COLUMNS)
    lines = ["**Claims and verdicts** (judged when the book was built, from this page's saved tables; ER: our effect "
             "over the paper's; the [scorecard](../book/scorecard.md) explains the tests):", "",
             f'<table class="table verdict-box"><colgroup>{widths}</colgroup>',
             f"<thead><tr>{heads}</tr></thead><tbody>", *rows, "</tbody></table>"]
    if details:
        lines += ["", ":::{dropdown} The claims in full, with the test behind each verdict", "", *details, "", ":::"]
    return "\n".join(lines)


def _precondition_box(preconditions: pd.DataFrame) -> str:
    """A page that measures preconditions rather than claims (the testbed page): each precondition, its status and
    its status per setting, as the first thing under the title."""

    lines = ["**Preconditions measured here** (judged when the book was built, from this page's saved tables; the "
             "claims that rest on them read *not testable here* where they do not hold, see the "
             "[scorecard](../book/scorecard.md)):", "", "| precondition | status | per setting |", "| --- | --- | --- |"]
    for row in preconditions.itertuples(index=False):
        name = f'<span id="{claim_anchor(row.precondition)}"></span>**{_cell(row.precondition)}**'
        lines.append(f"| {name} | {_cell(row.status)} | {_cell(getattr(row, 'per_setting', '')) or '–'} |")
    return "\n".join(lines)


def _shows_claims(source: str) -> bool:
    """Whether a notebook cell ends by showing the page's claims: `publish(...)` (its tables saved, then its claims
    judged on them) or `notebook_claims(...)`."""
    return "publish(" in source or "notebook_claims(" in source


_VERDICT_ORDER = ("holds", "fails", "within noise", "not testable here", "not run", "planned")


def _claims_output(claims: pd.DataFrame) -> dict:
    """The output of a notebook's `publish(...)` or `notebook_claims(...)` cell in the book: the page's verdicts,
    judged again from the current claims and tests, counted in one line that points to the box at the top of the page
    (which shows them claim by claim; the table in full, as a notebook run prints it, would repeat that box)."""
    import nbformat

    verdicts = [str(v) for v in claims.get("verdict", pd.Series(dtype=str))]
    counts = {word: sum(v.startswith(word) for v in verdicts) for word in _VERDICT_ORDER}
    counts["other"] = len(verdicts) - sum(counts.values())
    told = ", ".join(f"{n} {word}" for word, n in counts.items() if n)
    line = (f"{len(verdicts)} claim{'s' if len(verdicts) != 1 else ''} judged from this page's tables ({told}): "
            "each with its test in *Claims and verdicts* at the top of the page.")
    return nbformat.v4.new_output("display_data", data={"text/markdown": line, "text/plain": line})


def book_notebook(source: str | os.PathLike, executed: str | os.PathLike | None, dest: str | os.PathLike, *,
                  stale: str | None = None, meta: Mapping[str, Any] | None = None,
                  claims: pd.DataFrame | None = None, preconditions: pd.DataFrame | None = None,
                  missing_note: str | None = None) -> None:
    """Write the notebook page the book shows: the executed copy (else the source, with a note that it has not run),
    with the source's current cell tags (so `hide-input` set-up cells collapse), without stderr, warnings and
    progress bars, and, under its title, which run made it and, when `stale`, a warning saying why. `claims` (the
    page's claims judged now, `scorecard.notebook_claims`) opens the page as its verdict box and replaces the output
    of the notebook's own `publish(...)` (or `notebook_claims(...)`) cell, which was judged when the notebook ran.
    `missing_note` (book/missing_values.yaml) says why its tables have cells without a value."""
    import nbformat

    source_nb = nbformat.read(str(source), as_version=4)
    nb = nbformat.read(str(executed), as_version=4) if executed is not None else source_nb
    tags_by_source = {}
    for cell in source_nb.cells:
        tags_by_source.setdefault(cell.source, cell.metadata.get("tags", []))
    for cell in nb.cells:
        tags = list(cell.metadata.get("tags", []))
        wanted = tags_by_source.get(cell.source, [])
        tags = [t for t in tags if t not in _HIDDEN_TAGS or t in wanted] + [t for t in wanted if t not in tags]
        if tags:
            cell.metadata["tags"] = tags
    tidy_executed(nb, missing_note)  # as the runner left it; a copy made before it did is tidied here
    for cell in nb.cells:
        if cell.cell_type == "code" and claims is not None and executed is not None and _shows_claims(cell.source) \
                and "import" not in cell.source:
            cell.outputs = [_claims_output(claims)]
    nb.metadata.pop("widgets", None)  # the progress-bar widgets' saved state: their outputs are gone

    notes = []
    if executed is None:
        notes.append(_admonition("note", "Not run yet",
                                 "No profile has run this notebook yet, so it shows no results: run "
                                 f"`taser reproduce --profile cpu --only {Path(source).stem}`."))
    else:
        if meta:
            notes.append(_provenance_line(meta))
        if stale:  # above the verdict box: in the first screen, before any number it qualifies
            profile = (meta or {}).get("profile", "cpu")
            notes.append(_admonition("warning", "Stale result",
                                     f"The results on this page are out of date: {escape_markdown(stale)}. Run "
                                     f"`taser reproduce --profile {profile} --only {Path(source).stem}` "
                                     "to bring them up to date."))
        if claims is not None and not claims.empty and "verdict" in claims.columns:
            notes.append(_verdict_box(claims))
        elif preconditions is not None and not preconditions.empty and "status" in preconditions.columns:
            notes.append(_precondition_box(preconditions.rename(columns={"per setting": "per_setting"})))
    if notes:
        first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
        text = "\n\n".join(notes)
        if first is not None and first.source.startswith("# "):
            title, _, rest = first.source.partition("\n")
            first.source = f"{title}\n\n{text}\n\n{rest.lstrip()}"
        else:
            nb.cells.insert(0, nbformat.v4.new_markdown_cell(text))
    with atomic_path(Path(dest)) as tmp:
        nbformat.write(nb, str(tmp))


def _result_profiles(results_root: Path) -> list[str]:
    """Profile folders under results_root, in PROFILE_ORDER and then by name (bench folders are not profiles)."""
    found = [p.name for p in results_root.iterdir() if p.is_dir() and not p.name.startswith((".", "_", "bench"))] \
        if results_root.is_dir() else []
    return [p for p in PROFILE_ORDER if p in found] + sorted(p for p in found if p not in PROFILE_ORDER)


def run_times(root: str | os.PathLike, results_root: str | os.PathLike) -> pd.DataFrame:
    """One row per notebook and profile with a published result: wall minutes, date, machine, and whether it is up
    to date with the checkout at `root`."""
    root, results_root = Path(root), Path(results_root)
    rows = []
    for source in find_notebooks(root):
        for profile in _result_profiles(results_root):
            folder = results_root / profile / source.stem
            try:
                meta = read_meta(folder)
            except FormatError:
                meta = None
            if meta is None:
                continue
            wall = wall_seconds(meta)
            rows.append({
                "notebook": source.stem, "profile": profile,
                "minutes": round(wall / 60, 1) if wall is not None else None,
                "legs": 1 + len(meta.get("earlier_legs") or []),
                "date": str(meta.get("start_time_utc") or meta.get("time_utc") or "")[:10],
                "machine": (meta.get("hardware") or {}).get("summary") or meta.get("machine") or "",
                "up to date": "yes" if (reason := page_stale_reason(folder, root)) is None else f"no: {reason}",
            })
    return pd.DataFrame(rows, columns=["notebook", "profile", "minutes", "legs", "date", "machine", "up to date"])


def claims_judged(card: pd.DataFrame | None, notebook: str, profile: str) -> str:
    """What a page's result decides at `profile`, from the scorecard: "3 of 5 judged (2 not testable here)"; "–"
    for a page without claims or without the scorecard."""
    column = f"verdict ({profile})"
    if card is None or column not in card:
        return "–"
    verdicts = card.loc[card["notebook"] == notebook, column]
    if verdicts.empty:
        return "–"
    judged, untestable = _judged(card, notebook, profile), int((verdicts == NOT_TESTABLE).sum())
    return f"{judged} of {len(verdicts)} judged" + (f" ({untestable} {NOT_TESTABLE})" if untestable else "")


def clean_run_sentence(profile: str, run: Mapping[str, Any] | None) -> str:
    """What the Run times page says of the latest run of a whole profile from an empty run cache (`clean_run`)."""
    if run is None:
        return (f"`{profile}`: no run of every notebook from an empty run cache is recorded yet, so the minutes above "
                "are each notebook's own, summed (a notebook that found its models in the run cache counts only its "
                "evaluation).")
    minutes = run["seconds"] / 60
    jobs = "/".join(str(j) for j in run["jobs"])
    legs = f" in {run['legs']} legs (sessions; the run cache resumes)" if run["legs"] > 1 else ""
    head = (f"`{profile}`: `taser reproduce --profile {profile} --jobs {jobs}` from an empty run cache, started "
            f"{str(run['start_time_utc'])[:10]} on {' and '.join(run['machines']) or 'an unrecorded machine'}")
    if run["complete"]:
        return f"{head}: **{minutes:.0f} minutes ({minutes / 60:.1f} h) of wall time**{legs}, every notebook done."
    return (f"{head}: {minutes:.0f} minutes ({minutes / 60:.1f} h) of wall time so far{legs}, {run['done']} of "
            f"{run['notebooks']} notebooks done; it is not finished.")


def clean_run_notebooks(run: Mapping[str, Any] | None) -> list[str]:
    """The Run times page's table of the minutes a clean run (`clean_run`) spent on each notebook, summed over its legs
    and attempts, most first; no lines when it recorded none."""
    seconds = (run or {}).get("notebook_seconds") or {}
    if not seconds:
        return []
    missing, rebuilt = run.get("legs_without_notebook_seconds", 0), run.get("legs_reconstructed", 0)
    notes = []
    if rebuilt:
        notes.append(f"{rebuilt} of its legs ran before the ledger kept each notebook's seconds; theirs were filled in "
                     "afterwards from the pages' `meta.json` and heartbeats, as the ledger says")
    if missing:
        notes.append(f"{missing} leg{'' if missing == 1 else 's'} recorded no per-notebook seconds, not in these "
                     "minutes")
    lines = ["", "The minutes this run spent on each notebook, over every leg and every attempt (a page run again after "
             "its notebook or a library file it loads changed counts each time, which its `meta.json` above, the "
             "time of the result it now holds, does not show)" + ("; " + "; ".join(notes) if notes else "") + ":", "",
             "| notebook | minutes in this run |", "| --- | ---: |"]
    for notebook, value in sorted(seconds.items(), key=lambda item: -item[1]):
        lines.append(f"| [{notebook}](../notebooks/{notebook}.ipynb) | {value / 60:.1f} |")
    return lines


def _judged(card: pd.DataFrame | None, notebook: str, profile: str) -> int | None:
    """How many of a notebook's claims have a verdict (holds, fails, within noise) at `profile`; None without the
    scorecard's column."""
    column = f"verdict ({profile})"
    if card is None or column not in card:
        return None
    return int(card.loc[card["notebook"] == notebook, column].isin(TESTABLE).sum())


def _profile_budgets() -> dict[str, float | None]:
    """Each profile's `budget_hours` (the wall time a whole run of it is sized for); none when profiles.yaml cannot
    be read, so the Run times page still builds."""
    try:
        return {name: body.get("budget_hours") for name, body in load_profiles().items()}
    except TaserError:
        return {}


def clean_run_hours(run: Mapping[str, Any] | None, profile_dir: str | os.PathLike, card: pd.DataFrame | None,
                    profile: str, budget_hours: float | None) -> list[str]:
    """What each hour of a clean run (`clean_run`) buys: the notebooks it has done in the order their results were
    written (the time the run's ledger recorded, else each `meta.json`'s `time_utc`: a page made again after the run
    keeps its place; placed on the run's wall clock by `hours_into_run`), with the claims
    each decides at `profile` and the running count, then how many were done within `budget_hours` and what the
    hours past it bought. No lines without a run or a done notebook."""
    if not run or not run.get("done_notebooks"):
        return []
    rows = []
    for notebook in run["done_notebooks"]:
        try:
            meta = read_meta(Path(profile_dir) / notebook) or {}
        except FormatError:
            meta = {}
        when = (run.get("finished_utc") or {}).get(notebook) or meta.get("time_utc")
        rows.append((hours_into_run(run, when), notebook, _judged(card, notebook, profile)))
    rows.sort(key=lambda row: (row[0] is None, row[0] or 0.0, row[1]))
    lines = ["", "What the hours bought: each notebook the run has done, at the hour of the run's wall time when its "
             "result was written (sessions' gaps left out; a page the run made twice, after its notebook or a library file changed, stands at the second time), with the claims its page decides at this profile (holds, "
             "fails or within noise, in the scorecard now; a claim whose premise another page measures counts on its "
             "own page):", "", "| hours into the run | notebook | claims decided | decided so far |",
             "| ---: | --- | ---: | ---: |"]
    total = 0
    for hours, notebook, judged in rows:
        total += judged or 0
        lines.append(f"| {'–' if hours is None else f'{hours:.1f}'} | [{notebook}](../notebooks/{notebook}.ipynb) | "
                     f"{'–' if judged is None else judged} | {total if judged is not None else '–'} |")
    if budget_hours and card is not None:
        within = [r for r in rows if r[0] is not None and r[0] <= budget_hours]
        after = [r for r in rows if r not in within]
        hours = run["seconds"] / 3600
        lines += ["", f"Within the profile's {budget_hours:g}-hour budget the run did {len(within)} of "
                  f"{run['notebooks']} notebooks, deciding {sum(r[2] or 0 for r in within)} claims; the "
                  f"{hours - budget_hours:.1f} hours past it " + ("so far " if not run["complete"] else "")
                  + f"did {len(after)} more, deciding {sum(r[2] or 0 for r in after)}."
                  if hours > budget_hours else
                  f"The run took {hours:.1f} of the profile's {budget_hours:g}-hour budget."]
    return lines


def write_runs_page(root: str | os.PathLike, results_root: str | os.PathLike, out_md: str | os.PathLike,
                    card: pd.DataFrame | None = None) -> None:
    """The book's page of run times (book/runs.md in the assembled sources); with the scorecard (`card`), what each
    page's minutes decide (`claims_judged`)."""
    table = run_times(root, results_root)
    lines = ["# Run times", "",
             "How long each notebook took at each profile that has published results, when, and on which machine "
             "(the wall time of the whole notebook, from the `meta.json` beside its results). A run that was killed "
             "(a session that ended) and run again resumes its trained runs from the run cache; its minutes are then "
             "those of every leg, and *legs* says how many. A page run when its models were already in the run cache "
             "(trained by another page, or by an earlier run of its own) counts only its evaluation; what the "
             "training cost is on the *Reproducing* page. *Claims* says how many of the page's claims its result decides "
             "(holds, fails or within noise): what those minutes buy. A result that is not up to date was made from "
             "an older version of its notebook or of a library file it uses; its page says so too.", ""]
    if table.empty:
        lines.append("No notebook has published results yet: run `taser reproduce --profile cpu`.")
    else:
        lines += ["| notebook | profile | minutes | legs | claims | date | machine | up to date |",
                  "| --- | --- | ---: | ---: | --- | --- | --- | --- |"]
        for row in table.to_dict("records"):
            cells = [f"[{row['notebook']}](../notebooks/{row['notebook']}.ipynb)", f"`{row['profile']}`",
                     "–" if pd.isna(row["minutes"]) else f"{row['minutes']:.1f}", row["legs"],
                     claims_judged(card, row["notebook"], row["profile"]), row["date"],
                     row["machine"], row["up to date"]]
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
        totals = table.groupby("profile", sort=False)["minutes"].sum()
        lines += ["", "In all: " + "; ".join(f"`{p}` {m:g} minutes" for p, m in totals.items()) + "."]
        stems = [p.stem for p in find_notebooks(root)]
        lines += ["", "## One run of the whole profile", ""]
        budgets = _profile_budgets()
        for p in totals.index:
            if p != "smoke":
                run = clean_run(read_legs(Path(results_root) / p), stems)
                lines += [clean_run_sentence(p, run), *clean_run_notebooks(run),
                          *clean_run_hours(run, Path(results_root) / p, card, p, budgets.get(p)), ""]
    atomic_write_text(Path(out_md), "\n".join(lines) + "\n")


def _write_root_favicon(png: Path, ico: Path) -> None:
    """The book's icon also as /favicon.ico at the site's root: the root index.html is a bare redirect without an icon
    link, and a browser then asks for /favicon.ico (a 404 in its console otherwise)."""
    if not png.is_file():
        return
    from PIL import Image

    ico.parent.mkdir(parents=True, exist_ok=True)
    with Image.open(png) as image:
        image.save(ico, format="ICO")


MATHJAX_PARTS = ("tex-mml-chtml.js", "input", "output", "ui", "a11y", "adaptors")  # what the CHTML component loads


def _copy_mathjax(dest: Path) -> None:
    """MathJax 3 (es5 build) from the `mathjax` package of django-static-mathjax into the book's extra files (copied
    to the site as they are, not linked into every page), so that math renders offline. Without the package the book still builds, and its math stays as raw TeX."""
    try:
        import mathjax
    except ImportError:
        logging.getLogger(__name__).warning("django-static-mathjax is not installed: math will not render offline "
                                            "(pip install django-static-mathjax)")
        return
    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    dest.mkdir(parents=True, exist_ok=True)
    for part in MATHJAX_PARTS:
        source = es5 / part
        if source.is_dir():
            shutil.copytree(source, dest / part, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, dest / part)


# ------------------------------------------------------------------------------------------------ the book's ways in
# Both papers' tables and figures listed on the front page, and each chapter's notebooks with their claims' verdicts,
# every claim linked to its row in its page's verdict box. The list of tables and figures is data: book/papers.yaml.

PAPERS_FILE = "book/papers.yaml"


@dataclass(frozen=True)
class PaperItem:
    """One table or figure of a paper and the notebook page that reproduces it."""

    paper: str
    ref: str
    what: str
    notebook: str


@dataclass(frozen=True)
class PageVerdicts:
    """A notebook page's claims judged at the profile the book shows it at (`scorecard.card_claims`)."""

    profile: str
    claims: pd.DataFrame
    preconditions: pd.DataFrame | None = None  # a page without claims: the preconditions it measures


def load_paper_items(root: str | os.PathLike) -> tuple[dict[str, str], list[PaperItem]]:
    """The papers' titles (key -> title) and their tables and figures, in the file's order, from book/papers.yaml.
    A missing file gives nothing; a malformed one is a ConfigError naming the file and the entry."""
    path = Path(root) / PAPERS_FILE
    if not path.is_file():
        return {}, []
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of paper keys to {{title, items}}")
    titles, items = {}, []
    for key, paper in data.items():
        if not isinstance(paper, dict) or not isinstance(paper.get("items"), list):
            raise ConfigError(f"{path}: paper '{key}' needs a title and a list of items")
        titles[str(key)] = str(paper.get("title", key))
        for i, item in enumerate(paper["items"], 1):
            missing = [f for f in ("ref", "what", "notebook") if not isinstance(item, dict) or not item.get(f)]
            if missing:
                raise ConfigError(f"{path}: paper '{key}', item {i}: field '{missing[0]}' is missing")
            items.append(PaperItem(str(key), str(item["ref"]), str(item["what"]), str(item["notebook"])))
    return titles, items


_REFS = re.compile(r"\b(Table|Figure)s?\s+([A-Z]?\d+(?:\s*(?:,|and|-)\s*[A-Z]?\d+)*)")


def paper_refs(text: str) -> set[tuple[str, str]]:
    """The tables and figures `text` names: 'Tables 4 and 5, Figure 2' -> {(Table, 4), (Table, 5), (Figure, 2)}."""
    found = set()
    for kind, numbers in _REFS.findall(text):
        found |= {(kind, n) for n in re.findall(r"[A-Z]?\d+", numbers)}
    return found


def _claim_links(page: PageVerdicts | None, notebook: str, ref: str | None = None) -> str:
    """'ID verdict; ...' with each ID linked to its row in the page's verdict box, for a Markdown table cell. With
    `ref` (a paper's table or figure), only the claims whose `where` names it, when any does."""
    if page is None:
        return "not run yet"
    if page.claims.empty:
        if page.preconditions is None or page.preconditions.empty or "status" not in page.preconditions.columns:
            return "no claims to judge"
        return f"`{page.profile}`, preconditions: " + "; ".join(
            f"{claim_link(str(row.precondition), notebook)} {escape_markdown(str(row.status))}"
            for row in page.preconditions.itertuples(index=False))
    rows = page.claims
    if ref is not None and (wanted := paper_refs(ref)):
        mine = rows[[bool(paper_refs(str(w)) & wanted) for w in rows["where"]]]
        rows = mine if not mine.empty else rows
    parts = []
    for row in rows.itertuples(index=False):
        word = str(row.verdict).split(":")[0].replace(" · stale", " (stale)")
        parts.append(f"{claim_link(str(row.id), notebook)} {escape_markdown(word)}")
    return f"`{page.profile}`: " + "; ".join(parts)


def verdicts_section(card: pd.DataFrame, profiles: Sequence[str]) -> str:
    """Markdown for the front page: the verdict counts per profile."""
    lines = ["## The verdicts at a glance", "",
             "Every headline claim of both papers, judged from the saved results (the [scorecard](scorecard.md) "
             "has each claim, its test and its numbers; {ref}`both papers, table by table <both-papers>` links "
             "each claim to its page):", ""]
    lines += verdict_counts_table(card, profiles) if not card.empty else ["No claims files were found.", ""]
    return "\n".join(lines)


def papers_section(titles: Mapping[str, str], items: Sequence[PaperItem],
                   pages: Mapping[str, PageVerdicts | None]) -> str:
    """Markdown for the front page: every table and figure of both papers, each linked to the page that reproduces
    it, with the verdicts of that page's claims about it. A notebook not in `pages` is not written yet."""
    lines = ["(both-papers)=", "## Both papers, table by table", "",
             "Each table and figure of the two papers, the page that reproduces it, and the verdicts of that "
             "page's claims about it (each links to the claim on its page).", ""]
    for key, title in titles.items():
        lines += [f"### {escape_markdown(title)}", "", "| paper | what it shows | page | claims and verdicts |",
                  "| --- | --- | --- | --- |"]
        for item in (i for i in items if i.paper == key):
            page = f"[{item.notebook}](../notebooks/{item.notebook}.ipynb)" if item.notebook in pages \
                else f"{escape_markdown(item.notebook)} (not written yet)"
            lines.append(f"| {escape_markdown(item.ref)} | {escape_markdown(item.what)} | {page} | "
                         f"{_claim_links(pages.get(item.notebook), item.notebook, item.ref)} |")
        lines.append("")
    return "\n".join(lines)


_CHAPTER_ROW = re.compile(  # | [title](../notebooks/<nb>.ipynb) | what it reproduces | in this book |
    r"^(\|\s*\[[^\]]+\]\(\.\./notebooks/(?P<nb>[\w-]+)\.ipynb\)\s*\|.*\|)\s*in this book\s*\|\s*$")


def chapter_verdicts(text: str, pages: Mapping[str, PageVerdicts | None]) -> str:
    """A chapter page's notebook table with its last column ('status', each row 'in this book') replaced by the
    page's claims and verdicts, each linked to its row on the page."""
    out = []
    for line in text.split("\n"):
        if line.strip() == "| notebook | reproduces | status |":
            line = "| notebook | reproduces | claims and verdicts |"
        elif (m := _CHAPTER_ROW.match(line)):
            line = f"{m.group(1)} {_claim_links(pages.get(m.group('nb')), m.group('nb'))} |"
        out.append(line)
    return "\n".join(out)


def insert_before_heading(text: str, section: str, heading: str = "## Citing") -> str:
    """`section` placed before the line `heading` of a Markdown page (at its end when there is none)."""
    lines = text.split("\n")
    if heading in lines:
        i = lines.index(heading)
        return "\n".join(lines[:i] + [section, ""] + lines[i:])
    return text.rstrip("\n") + "\n\n" + section + "\n"


def _write_ways_in(root: Path, src: Path, card: pd.DataFrame, profiles: list[str],
                   pages: dict[str, PageVerdicts | None]) -> None:
    """The front page gets the verdict counts and both papers' tables and figures, each linked; the chapter pages'
    notebook tables get each page's claims and verdicts (in the copied sources, not the repository's)."""
    titles, items = load_paper_items(root)
    intro = src / "book" / "intro.md"
    if intro.is_file():
        text = insert_before_heading(intro.read_text(encoding="utf-8"), verdicts_section(card, profiles),
                                     "## The two papers")
        if items:
            text = insert_before_heading(text, papers_section(titles, items, pages), "## Citing")
        atomic_write_text(intro, text)
    for chapter in sorted((src / "book").glob("*.md")):
        text = chapter.read_text(encoding="utf-8")
        if "](../notebooks/" in text:
            new = chapter_verdicts(text, pages)
            if new != text:
                atomic_write_text(chapter, new)


def build_book(root: str | os.PathLike = ".", results_root: str | os.PathLike | None = None, *,
               out_dir: str | os.PathLike | None = None, prefer: str | None = None) -> Path:
    """Assemble the book's sources with the executed notebooks and the scorecard, and build it with Jupyter Book
    (notebooks are not re-executed) into `<out_dir>/_build/html`. Returns the path of index.html."""
    from .scorecard import card_claims, notebook_preconditions, profiles_with_results, write_scorecard_page

    root = Path(root).resolve()
    results_root = Path(results_root) if results_root is not None else root / "results"
    out_dir = Path(out_dir).resolve() if out_dir is not None else root
    for needed in ("_config.yml", "_toc.yml", "book"):
        if not (root / needed).exists():
            raise ConfigError(f"{root / needed} is missing: build the book from the repository root")

    src = out_dir / "_build" / "book-src"
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    shutil.copy2(root / "_config.yml", src / "_config.yml")
    shutil.copy2(root / "_toc.yml", src / "_toc.yml")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    shutil.copytree(root / "book", src / "book", ignore=ignore)
    for folder in ("_static", "_ext"):
        if (root / folder).is_dir():
            shutil.copytree(root / folder, src / folder, ignore=ignore)
    _copy_mathjax(src / "_extra" / "mathjax")
    _write_root_favicon(src / "_static" / "favicon.png", src / "_extra" / "favicon.ico")
    card = write_scorecard_page(results_root, src / "book" / "scorecard.md", root=root)  # every verdict, judged once
    pages: dict[str, PageVerdicts | None] = {}
    missing_notes = load_missing_value_notes(root)
    if (root / "notebooks").is_dir():
        shutil.copytree(root / "notebooks", src / "notebooks", ignore=ignore)
        for source in find_notebooks(root):
            executed = executed_notebook(results_root, source.stem, prefer)
            stale = meta = claims = preconditions = None
            if executed is not None:
                meta = read_meta(executed.parent)
                stale = page_stale_reason(executed.parent, root)
                claims = card_claims(card, source.stem, executed.parent.parent.name)
                if claims.empty:
                    preconditions = notebook_preconditions(source.stem, executed.parent, root=root)
                pages[source.stem] = PageVerdicts(executed.parent.parent.name, claims, preconditions)
            else:
                pages[source.stem] = None
            book_notebook(source, executed, src / "notebooks" / source.name, stale=stale, meta=meta, claims=claims,
                          preconditions=preconditions, missing_note=missing_notes.get(source.stem))
    _write_ways_in(root, src, card, profiles_with_results(results_root), pages)
    write_runs_page(root, results_root, src / "book" / "runs.md", card)

    log = out_dir / "_build" / "book.log"
    cmd = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())",
           "build", str(src), "--path-output", str(out_dir), "--builder", "html", "--warningiserror",
           "--keep-going"]
    with open(log, "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=src)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-25:])
        raise TaserError(f"jupyter-book build failed (exit {proc.returncode}); full log: {log}\n{tail}")
    return out_dir / "_build" / "html" / "index.html"
