"""The papermill runner: one notebook at one profile, executed into a staging folder and published whole or not at all
(`run_notebook`), and whether a published result is still up to date (`result_status`, `page_stale_reason`)."""

from __future__ import annotations

import contextlib
import functools
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from taser_lib.errors import ConfigError, FormatError
from taser_lib.io import atomic_path, atomic_write_json
from taser_lib.meta import machine_description, run_metadata
from taser_lib.progress import PROGRESS_ENV
from .run_ledger import Ticker, run_cache_id
from .scorecard import JUDGING_FILES, stale_beside_preserved_notebook
from .results import EXECUTED_NAME, META_NAME, notebook_sha256, read_meta
from .preserving import preserved_files
from .executed import load_missing_value_notes, tidy_executed
from .profiles import RUNNER_PARAMETERS, load_profiles, page_defaults, page_settings, profile_parameters
from .results import _PACKAGES, _file_sha256, _package_root
KERNEL = "python3"
FORCE_ENV = "TASER_FORCE_RETRAIN"  # a forced run's start time (Unix): the run cache retrains runs finished before


@dataclass(frozen=True)
class NotebookRun:
    notebook: str
    status: str          # "ok", "failed" or "skipped" (its published result is up to date)
    minutes: float
    note: str = ""       # where the results went, or why it failed


def _declared_parameters(path: Path) -> set[str]:
    stat = Path(path).stat()
    return set(_declared_in(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=256)
def _declared_in(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The parameters a notebook's parameters cell declares (papermill's reading), once per file version."""
    import papermill

    return tuple(papermill.inspect_notebook(path))


def notebook_parameters(path: str | os.PathLike, profile: str, overrides: Mapping[str, Any] | None = None,
                        profiles: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """What notebook `path` runs with at `profile` (all but `results_dir`), as its meta.json records it.

    A page (a notebook whose parameters cell takes `overrides`) resolves its own settings from the profile's name
    (`profiles.page_settings`, declared in `pages.yaml`): these are its settings. Any other notebook gets the profile's
    value of each parameter its cell declares. Raises ConfigError when the notebook cannot be parameterised (no
    `profile`/`results_dir` in its parameters cell, or a per-notebook override it does not take)."""
    path = Path(path)
    profiles = profiles if profiles is not None else load_profiles()
    declared = _declared_parameters(path)
    lacking = [p for p in RUNNER_PARAMETERS if p not in declared]
    if lacking:
        raise ConfigError(f"{path}: its cell tagged 'parameters' must declare {', '.join(lacking)}")
    if PAGE_PARAMETER in declared:
        return page_settings(path.stem, profile, overrides, profiles=profiles).as_dict()
    params = profile_parameters(profile, path.stem, overrides, profiles)
    undeclared = sorted(set(profiles[profile]["notebooks"].get(path.stem, {})) - declared)
    if undeclared:
        raise ConfigError(f"profile '{profile}' overrides {', '.join(undeclared)} for notebook '{path.stem}', "
                          f"which its parameters cell does not declare")
    return {k: v for k, v in params.items() if k in declared}


PAGE_PARAMETER = "overrides"  # a page's parameters cell: profile, overrides, results_dir; it resolves the rest


def _injected(path: Path, profile: str, params: Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """What papermill injects: into a page only its profile's name and the caller's overrides (the page resolves its
    settings from them, as it does under a plain `papermill -p profile NAME`); into any other notebook its
    parameters."""
    if PAGE_PARAMETER in _declared_parameters(path):
        return {"profile": profile, **({PAGE_PARAMETER: dict(overrides)} if overrides else {})}
    return dict(params)


def page_stale_reason(result_folder: str | os.PathLike, repo_root: str | os.PathLike = ".") -> str | None:
    """Why a page's published result must be made again (None when it is up to date): its notebook or a library file
    it loaded changed (`results.stale_reason`). The claims loader and the scorecard do not count: the book judges every
    page's tables again when it is built. A figure function does count (unlike for the scorecard's verdicts): the
    page's figures were drawn by the old one. Nor do changes declared result-preserving (`preserving`), of a library
    file or of the notebook itself."""
    preserved = preserved_files(result_folder, repo_root)
    ignore = lambda f: f in JUDGING_FILES or preserved(f)  # noqa: E731
    return stale_beside_preserved_notebook(result_folder, repo_root, ignore)


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
    # a result recorded before pages recorded every setting ran with its page's defaults where it names none
    recorded = {**json.loads(json.dumps(page_defaults(path.stem), default=str)), **(meta.get("parameters") or {})}
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
REPRODUCE_ENV = "TASER_REPRODUCE"  # set for the kernels it runs: a page then leaves the saying where to the runner


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


KERNEL_START_TRIES = 3
_KERNEL_DID_NOT_START = "Kernel died before replying to kernel_info"


def _execute_started(execute: Callable[[], Any], tries: int = KERNEL_START_TRIES) -> Any:
    """`execute()` (one papermill run), started again when its kernel died before it answered: no cell had run. Two
    kernels started at once (`--jobs 2`) can pick the same free port and one of them fails to bind it
    (`zmq.error.ZMQError: Address already in use`: nteract/papermill#511, jupyter/jupyter_client#487); any other
    error is raised at once."""
    for attempt in range(1, tries + 1):
        try:
            return execute()
        except RuntimeError as err:
            if _KERNEL_DID_NOT_START not in str(err) or attempt == tries:
                raise
            time.sleep(0.5 * attempt)


def run_notebook(path: str | os.PathLike, profile: str, results_root: str | os.PathLike = "results", *,
                 overrides: Mapping[str, Any] | None = None,
                 profiles: Mapping[str, Mapping[str, Any]] | None = None,
                 profiles_file: str | os.PathLike | None = None,
                 progress: bool = True, force: bool = False) -> NotebookRun:
    """Execute one notebook with papermill at `profile`; publish its results only if it succeeds.

    `progress` streams the kernel's output (tqdm bars included) and one line per cell to the terminal. `force` sets
    TASER_FORCE_RETRAIN for the kernel (see `_force_retrain`). Raises ConfigError when the notebook cannot be
    parameterised (see `notebook_parameters`); an execution error is returned as a failed run. A page gets only
    `profile`, `overrides` and `results_dir`, and resolves its settings in its kernel: `profiles_file` (the extra
    profiles `profiles` was loaded with) reaches the kernel as $TASER_PROFILES, and a page whose kernel resolved
    other settings than `profiles` gives is a failed run.
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
    inject = {**_injected(path, profile, params, overrides), "results_dir": os.path.relpath(staging, path.parent)}
    cell_timeout = profiles[profile].get("cell_timeout_s")
    executed = staging / EXECUTED_NAME
    failed_copy = profile_dir / "_failed" / f"{stem}.ipynb"
    started = time.time()
    start_utc = run_metadata()["time_utc"]
    error: str | None = None
    total_cells = len(json.loads(path.read_text(encoding="utf-8")).get("cells", [])) + 1  # + injected parameters
    try:
        extra_profiles = (_kernel_env("TASER_PROFILES", str(Path(profiles_file).resolve())) if profiles_file
                          else contextlib.nullcontext())
        with _force_retrain(force), _Heartbeat(staging, start_utc, earlier), extra_profiles, \
                _kernel_env(REPRODUCE_ENV, "1"), \
                (_streaming(stem, total_cells) if progress else contextlib.nullcontext({})) as out:
            # The kernel starts in the notebook's folder through nbclient's resources, not papermill's `cwd`:
            # that one chdirs the whole process, which races between the threads of --jobs (nteract/papermill#473)
            # and can start a kernel in another folder, where its relative results_dir points elsewhere.
            _execute_started(lambda: papermill.execute_notebook(
                str(path), str(executed), parameters=inject, kernel_name=KERNEL,
                resources={"metadata": {"path": str(path.parent)}}, progress_bar=False,
                execution_timeout=cell_timeout, **out))
        meta = read_meta(staging)
        if meta is None or not meta.get("tables"):
            error = "saved no result (a notebook must call taser_book.reproduce.save_result)"
        elif differ := _settings_differ(meta, params):
            error = (f"the page ran with other settings than the runner resolved ({', '.join(differ[:3])}): its "
                     f"kernel read another profiles file (pass it with --profiles, or set TASER_PROFILES)")
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
        "parameters": dict(params),
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
    _point_at(executed, inject["results_dir"], os.path.relpath(final, path.parent), missing_note)
    _publish(staging, final)
    failed_copy.unlink(missing_ok=True)
    _remove_if_empty(staging.parent)
    return NotebookRun(stem, "ok", wall / 60, str(final))


def _settings_differ(meta: Mapping[str, Any], params: Mapping[str, Any]) -> list[str]:
    """The settings a page's kernel recorded (`publish(..., settings=...)`) with other values than the runner's
    `params`; none for a notebook that records none of them."""
    recorded = meta.get("settings") or {}
    wanted = json.loads(json.dumps(dict(params), default=str))
    return sorted(k for k in recorded if k in wanted and recorded[k] != wanted[k])


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
