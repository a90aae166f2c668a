"""Result files of a notebook run: `save_result` / `load_result`, `meta.json`, provenance, staleness, profile order.

Below both the runner (`taser_book.reproduce`) and the scorecard (`taser_book.scorecard`), which read and write these
files, so neither imports the other. Layout: `results/<profile>/<notebook>/<table>.csv|json` plus `meta.json`; a
table whose CSV would pass `COMPRESS_ABOVE_BYTES` (the per-question tables behind the paired tests: 2,192 questions x
models x cutoffs) is written as `<table>.csv.gz` instead, byte-for-byte reproducible (no timestamp in the gzip
header), and `load_result` reads either.

Provenance in `meta.json` (written by `save_result` inside the notebook's kernel; the runner adds the rest):
    library_version     taser_lib.__version__
    hardware            `taser_lib.meta.machine_description()`: CPU model and cores, GPU name, one-line summary
    precision           `speed.precision.precision_record()`: what `auto` resolved to on the CPU (encode, train),
                        whether the CPU has native bf16, and the probe's timings behind the choice
    fused_linears       `speed.fused.fusion_record()`: whether encoding ran oneDNN's fused linears (auto), and the
                        probe's timings behind the choice (only where something encoded on the CPU)
    library_files       {"taser_lib/<module>.py": sha256} of every taser_lib and taser_book module loaded in the kernel, i.e. the
                        library files the result depends on
    notebook_source     {"path": "notebooks/<stem>.ipynb", "sha256": `notebook_sha256`, "git_revision"}
    wall_seconds, git_revision, start_time_utc, parameters   (the runner)

A result is *stale* (`stale_reason`) when its notebook or one of its library files changed since it was made.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from taser_lib.errors import FormatError
from taser_lib.io import atomic_write_bytes, atomic_write_json
from taser_lib.meta import machine_description, run_metadata

PROFILE_ORDER = ("smoke", "cpu", "gpu", "full")
META_NAME = "meta.json"
EXECUTED_NAME = "notebook.ipynb"
_RESULT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PACKAGE = "taser_lib"
_PACKAGES = ("taser_lib", "taser_book")  # the core and this package: a result depends on the files of both
COMPRESS_ABOVE_BYTES = 2 ** 20  # a table's CSV over 1 MiB is committed gzip-compressed (results/ stays under 25 MB)


def _file_sha256(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def notebook_sha256(path: str | os.PathLike) -> str:
    """sha256 of a notebook's cells (type and source, in order); outputs, tags and other metadata do not count, so
    executing a notebook or re-tagging a cell does not change it, and editing any code or prose does."""
    path = Path(path)
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise FormatError(path, None, "cells", f"not a Jupyter notebook: {err}") from err
    content = [[c.get("cell_type"), "".join(c["source"]) if isinstance(c.get("source"), list) else c.get("source", "")]
               for c in cells]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()


def _package_root() -> Path:
    """The folder holding the taser_lib package (the repository root in a checkout)."""
    return Path(sys.modules[_PACKAGE].__file__).resolve().parent.parent


def library_path(rel_file: str, repo_root: str | os.PathLike) -> Path:
    """Where library file `rel_file` ("taser_lib/io.py") lives for the checkout at `repo_root`: in the checkout when
    it holds that package, else where the installed package is."""
    root = Path(repo_root)
    return (root if (root / rel_file.split("/", 1)[0]).is_dir() else _package_root()) / rel_file


def library_files() -> dict[str, str]:
    """{"taser_lib/<path>.py": sha256} of every taser_lib and taser_book module loaded in this process (sorted)."""
    root = _package_root()
    found: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        if name.split(".", 1)[0] not in _PACKAGES:
            continue
        file = getattr(module, "__file__", None)
        if not file or not file.endswith(".py"):
            continue
        path = Path(file).resolve()
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:  # a module loaded from elsewhere: not one of this checkout's files
            continue
        if path.is_file():
            found[rel] = _file_sha256(path)
    return dict(sorted(found.items()))


def save_result(results_dir: str | os.PathLike | None, name: str, data: pd.DataFrame | Mapping[str, Any],
                parameters: Mapping[str, Any] | None = None, *,
                notebook: str | os.PathLike | None = None) -> Path | None:
    """Write one result table (`<name>.csv` for a DataFrame, `<name>.json` for a mapping) atomically and record it
    in `meta.json` with the parameters, package versions, git revision, library version, machine and the library
    files loaded so far (see the module's docstring).

    Notebooks call it with the `results_dir` parameter the runner injects (the runner records the notebook's hash
    itself; `notebook`, a path, records it for a result made without the runner). With `results_dir=None` (a
    notebook opened by hand) nothing is written, and it says so.
    """
    if not _RESULT_NAME.match(name) or name in ("meta", "notebook"):
        raise ValueError(f"result name {name!r}: use letters, digits, '_', '-', '.' (and not 'meta' or 'notebook')")
    if results_dir is None:
        print(f"save_result: results_dir is None, '{name}' not saved (run through `taser reproduce` to record it)")
        return None
    folder = Path(results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(data, pd.DataFrame):
        plain_index = isinstance(data.index, pd.RangeIndex) and data.index.start == 0 and data.index.step == 1 \
            and data.index.name is None
        frame = data if plain_index else data.reset_index()  # a meaningful index becomes a column
        text = frame.to_csv(index=False).encode("utf-8")
        compress = len(text) > COMPRESS_ABOVE_BYTES
        path = folder / (f"{name}.csv.gz" if compress else f"{name}.csv")
        atomic_write_bytes(path, gzip.compress(text, mtime=0) if compress else text)
        (folder / (f"{name}.csv" if compress else f"{name}.csv.gz")).unlink(missing_ok=True)  # its other form
        entry = {"file": path.name, "rows": len(frame), "columns": [str(c) for c in frame.columns]}
    elif isinstance(data, Mapping):
        path = folder / f"{name}.json"
        atomic_write_json(path, dict(data))
        entry = {"file": path.name, "keys": sorted(str(k) for k in data)}
    else:
        raise TypeError(f"save_result({name!r}): expected a pandas DataFrame or a mapping, got {type(data).__name__}")

    meta = read_meta(folder) or {}
    tables = dict(meta.get("tables", {}))
    tables[name] = {**entry, "parameters": dict(parameters or {})}
    meta.update(run_metadata())
    meta["tables"] = tables
    meta["library_version"] = sys.modules[_PACKAGE].__version__
    meta["hardware"] = machine_description()
    if f"{_PACKAGE}.models.precision" in sys.modules:  # loaded only where something encoded or trained
        from taser_lib.speed.precision import precision_record

        meta["precision"] = precision_record()
    fused = sys.modules.get(f"{_PACKAGE}.speed.fused")
    if fused is not None and (record := fused.fusion_record())["fused"]:
        meta["fused_linears"] = record
    meta["library_files"] = dict(sorted({**meta.get("library_files", {}), **library_files()}.items()))
    if notebook is not None:
        notebook = Path(notebook)
        meta["notebook_source"] = {**meta.get("notebook_source", {}),
                                   "path": f"{notebook.resolve().parent.name}/{notebook.name}",
                                   "sha256": notebook_sha256(notebook)}
    if parameters:
        meta["parameters"] = {**meta.get("parameters", {}), **dict(parameters)}
        if "profile" in parameters:
            meta["profile"] = parameters["profile"]
    atomic_write_json(folder / META_NAME, meta)
    return path


def read_meta(folder: str | os.PathLike) -> dict[str, Any] | None:
    path = Path(folder) / META_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"invalid JSON: {err.msg}") from err


def load_result(folder: str | os.PathLike, name: str) -> pd.DataFrame | dict[str, Any] | None:
    """A table written by `save_result` (DataFrame from CSV or compressed CSV, dict from JSON), or None if there is
    none."""
    folder = Path(folder)
    if (folder / f"{name}.csv").is_file():
        return pd.read_csv(folder / f"{name}.csv")
    if (folder / f"{name}.csv.gz").is_file():
        return pd.read_csv(io.BytesIO(gzip.decompress((folder / f"{name}.csv.gz").read_bytes())))
    if (folder / f"{name}.json").is_file():
        return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    return None


def stale_reason(result_folder: str | os.PathLike, repo_root: str | os.PathLike = ".",
                 ignore: Callable[[str], bool] | None = None) -> str | None:
    """None when the result in `result_folder` is up to date with the checkout at `repo_root`; otherwise a short
    reason: its notebook changed, or a library file it depends on changed, or it predates that record. A library
    file for which `ignore(rel_file)` is true does not count."""
    folder, root = Path(result_folder), Path(repo_root)
    meta = read_meta(folder)
    if meta is None:
        return "no meta.json: no result was made here"
    source = meta.get("notebook_source") or {}
    rel = source.get("path") or f"notebooks/{meta.get('notebook', folder.name)}.ipynb"
    if Path(rel).is_absolute():  # results made before paths were recorded relative to the repository
        rel = f"notebooks/{Path(rel).name}"
    if "library_files" not in meta or "sha256" not in source:
        return "made before results recorded the notebook and library files they depend on"
    notebook = root / rel
    if not notebook.is_file():
        return f"notebook {rel} no longer exists"
    if notebook_sha256(notebook) != source["sha256"]:
        return f"notebook {rel} changed since the result was made"
    changed = []
    for rel_file, digest in meta["library_files"].items():
        if ignore is not None and ignore(rel_file):
            continue
        path = library_path(rel_file, root)
        if not path.is_file():
            changed.append(f"{rel_file} (removed)")
        elif _file_sha256(path) != digest:
            changed.append(rel_file)
    if not changed:
        return None
    more = f" and {len(changed) - 1} other(s)" if len(changed) > 1 else ""
    return f"library file {changed[0]}{more} changed since the result was made"
