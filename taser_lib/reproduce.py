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
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from .errors import ConfigError, FormatError, TaserError
from .io import atomic_path, atomic_write_json
from .meta import git_revision, run_metadata
from .results import EXECUTED_NAME, META_NAME, PROFILE_ORDER, load_result, read_meta, save_result  # noqa: F401 (re-exported)

PROFILES_FILE = Path(__file__).with_name("profiles.yaml")
# Every profile must set these (after `extends`): the knobs every notebook may rely on.
REQUIRED_KEYS = (
    "description", "model", "pooling", "device", "seed", "offline", "max_query_length", "max_passage_length",
    "batch_size", "eval_batch_size", "epochs", "learning_rate", "n_train", "n_queries", "n_docs", "top_k",
    "cell_timeout_s",
)
RUNNER_PARAMETERS = ("profile", "results_dir")  # set by the runner only
_NOT_PARAMETERS = ("description", "extends", "notebooks", "cell_timeout_s")  # profile keys never injected
KERNEL = "python3"


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
    text = path.read_text(encoding="utf-8")
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
        resolved[name] = _validate(name, body, sources[name], lines.get(f"profiles.{name}"))
        return resolved[name]

    for name in raw:
        resolve(name, (name,))
    return resolved


def _validate(name: str, body: dict[str, Any], path: Path, line: int | None) -> dict[str, Any]:
    missing = [k for k in REQUIRED_KEYS if k not in body]
    if missing:
        raise FormatError(path, line, f"profiles.{name}", f"missing required key(s): {', '.join(missing)}")
    notebooks = body.get("notebooks") or {}
    if not isinstance(notebooks, dict) or not all(isinstance(v, dict) for v in notebooks.values()):
        raise FormatError(path, line, f"profiles.{name}.notebooks", "must map notebook stems to mappings")
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
    status: str          # "ok" or "failed"
    minutes: float
    note: str = ""       # where the results went, or why it failed


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _declared_parameters(path: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(path)))


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


def _point_at(executed: Path, staged: str, final: str) -> None:
    """Make the executed notebook's injected `results_dir` name where its results end up, not the staging folder."""
    import nbformat
    from papermill.translators import PythonTranslator

    nb = nbformat.read(executed, as_version=nbformat.NO_CONVERT)
    old, new = PythonTranslator.translate_str(staged), PythonTranslator.translate_str(final)
    for cell in nb.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell.source = cell.source.replace(old, new)
    nb.metadata.get("papermill", {}).get("parameters", {})["results_dir"] = final
    with atomic_path(executed) as tmp:
        nbformat.write(nb, str(tmp))


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty: another run is staging there
        pass


def run_notebook(path: str | os.PathLike, profile: str, results_root: str | os.PathLike = "results", *,
                 overrides: Mapping[str, Any] | None = None,
                 profiles: Mapping[str, Mapping[str, Any]] | None = None,
                 progress: bool = True) -> NotebookRun:
    """Execute one notebook with papermill at `profile`; publish its results only if it succeeds.

    Raises ConfigError when the notebook cannot be parameterised (no `profile`/`results_dir` in its parameters
    cell, or a per-notebook override it does not declare); an execution error is returned as a failed run.
    """
    import papermill

    path = Path(path).resolve()
    stem = path.stem
    profiles = profiles if profiles is not None else load_profiles()
    params = profile_parameters(profile, stem, overrides, profiles)
    declared = _declared_parameters(path)
    lacking = [p for p in RUNNER_PARAMETERS if p not in declared]
    if lacking:
        raise ConfigError(f"{path}: its cell tagged 'parameters' must declare {', '.join(lacking)}")
    undeclared = sorted(set(profiles[profile]["notebooks"].get(stem, {})) - declared)
    if undeclared:
        raise ConfigError(f"profile '{profile}' overrides {', '.join(undeclared)} for notebook '{stem}', "
                          f"which its parameters cell does not declare")
    params = {k: v for k, v in params.items() if k in declared}

    profile_dir = Path(results_root).resolve() / profile
    staging = profile_dir / ".staging" / f"{stem}-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    params["results_dir"] = os.path.relpath(staging, path.parent)
    cell_timeout = profiles[profile].get("cell_timeout_s")
    executed = staging / EXECUTED_NAME
    started = time.time()
    start_utc = run_metadata()["time_utc"]
    error: str | None = None
    try:
        papermill.execute_notebook(str(path), str(executed), parameters=params, kernel_name=KERNEL,
                                   cwd=str(path.parent), progress_bar=progress, execution_timeout=cell_timeout)
        meta = read_meta(staging)
        if meta is None or not meta.get("tables"):
            error = "saved no result (a notebook must call taser_lib.reproduce.save_result)"
    except papermill.PapermillExecutionError as err:
        error = f"{err.ename}: {err.evalue}".strip()
    except Exception as err:  # a dead kernel or a cell timeout: this notebook failed, the others still run
        error = f"{type(err).__name__}: {err}"
    wall = time.time() - started

    failed_copy = profile_dir / "_failed" / f"{stem}.ipynb"
    if error is not None:
        note = error.splitlines()[0][:200] if error else "failed"
        if executed.exists():
            failed_copy.parent.mkdir(parents=True, exist_ok=True)
            os.replace(executed, failed_copy)
            note += f" (executed notebook: {failed_copy})"
        shutil.rmtree(staging, ignore_errors=True)
        _remove_if_empty(staging.parent)
        return NotebookRun(stem, "failed", wall / 60, note)

    final = profile_dir / stem
    meta = read_meta(staging) or {}
    meta.update(run_metadata())
    meta.update({
        "notebook": stem, "profile": profile, "status": "ok", "results_dir": str(final),
        "parameters": {k: v for k, v in params.items() if k != "results_dir"},  # the staging path is not one
        "start_time_utc": start_utc, "wall_seconds": round(wall, 3),
        "notebook_source": {"path": str(path), "sha256": _sha256(path), "git_revision": git_revision(path.parent)},
    })
    atomic_write_json(staging / META_NAME, meta)
    _point_at(executed, params["results_dir"], os.path.relpath(final, path.parent))
    _publish(staging, final)
    failed_copy.unlink(missing_ok=True)
    _remove_if_empty(staging.parent)
    return NotebookRun(stem, "ok", wall / 60, str(final))


def find_notebooks(root: str | os.PathLike = ".", only: list[str] | None = None) -> list[Path]:
    """notebooks/*.ipynb under `root`, sorted; `only` picks by stem (or file name) and must all exist."""
    folder = Path(root) / "notebooks"
    found = sorted(p for p in folder.glob("*.ipynb") if not p.name.startswith("."))
    if not only:
        return found
    by_stem = {p.stem: p for p in found}
    wanted = [Path(name).stem for name in only]
    unknown = [name for name in wanted if name not in by_stem]
    if unknown:
        raise ConfigError(f"no notebook named {', '.join(unknown)} in {folder} (there are: "
                          f"{', '.join(by_stem) or 'none'})")
    return [by_stem[name] for name in dict.fromkeys(wanted)]


def summary_table(runs: list[NotebookRun]) -> pd.DataFrame:
    return pd.DataFrame([{"notebook": r.notebook, "status": r.status, "minutes": round(r.minutes, 2),
                          "note": r.note} for r in runs], columns=["notebook", "status", "minutes", "note"])


def reproduce(profile: str, only: list[str] | None = None, jobs: int = 1, *, root: str | os.PathLike = ".",
              results_root: str | os.PathLike | None = None, profiles_file: str | os.PathLike | None = None,
              book: bool = True, out_dir: str | os.PathLike | None = None) -> int:
    """Run every notebook (or `only` those) at `profile`, print a summary, then build the book.

    Keeps going past a failed notebook. Returns 0 when every notebook (and the book) succeeded, 1 otherwise.
    """
    root = Path(root).resolve()
    results_root = Path(results_root) if results_root is not None else root / "results"
    profiles = load_profiles(profiles_file)
    if profile not in profiles:
        raise ConfigError(f"unknown profile '{profile}' (known: {', '.join(profiles)})")
    if jobs < 1:
        raise ConfigError(f"--jobs must be at least 1, got {jobs}")
    notebooks = find_notebooks(root, only)
    stems = {p.stem for p in find_notebooks(root)}
    stray = sorted(set(profiles[profile]["notebooks"]) - stems)
    if stray:
        print(f"note: profile '{profile}' has overrides for notebooks that do not exist yet: {', '.join(stray)}")
    if not notebooks:
        print(f"no notebooks in {root / 'notebooks'}")

    def one(i_path: tuple[int, Path]) -> NotebookRun:
        i, path = i_path
        print(f"[{i}/{len(notebooks)}] {path.stem} at profile '{profile}'\n", end="", flush=True)  # one write
        started = time.time()
        try:
            return run_notebook(path, profile, results_root, profiles=profiles, progress=jobs == 1)
        except Exception as err:  # a bad notebook file or configuration fails this notebook, not the others
            return NotebookRun(path.stem, "failed", (time.time() - started) / 60, f"{type(err).__name__}: {err}")

    work = list(enumerate(notebooks, 1))
    if jobs == 1:
        runs = [one(item) for item in work]
    else:
        with ThreadPoolExecutor(max_workers=jobs) as pool:  # each notebook runs in its own kernel process
            runs = list(pool.map(one, work))

    failed = [r for r in runs if r.status != "ok"]
    if runs:
        print()
        print(summary_table(runs).to_string(index=False))
        print(f"\n{len(runs) - len(failed)} ok, {len(failed)} failed; results in {results_root / profile}")
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


def build_book(root: str | os.PathLike = ".", results_root: str | os.PathLike | None = None, *,
               out_dir: str | os.PathLike | None = None, prefer: str | None = None) -> Path:
    """Assemble the book's sources with the executed notebooks and the scorecard, and build it with Jupyter Book
    (notebooks are not re-executed) into `<out_dir>/_build/html`. Returns the path of index.html."""
    from .scorecard import write_scorecard_page

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
    if (root / "notebooks").is_dir():
        shutil.copytree(root / "notebooks", src / "notebooks", ignore=ignore)
        for source in find_notebooks(root):
            executed = executed_notebook(results_root, source.stem, prefer)
            if executed is not None:
                shutil.copy2(executed, src / "notebooks" / source.name)
    write_scorecard_page(results_root, src / "book" / "scorecard.md")

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
