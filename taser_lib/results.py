"""Result files of a notebook run: `save_result` / `load_result`, `meta.json`, and the order of profiles.

Below both the runner (`taser_lib.reproduce`) and the scorecard (`taser_lib.scorecard`), which read and write these
files, so neither imports the other. Layout: `results/<profile>/<notebook>/<table>.csv|json` plus `meta.json`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from .errors import FormatError
from .io import atomic_path, atomic_write_json
from .meta import run_metadata

PROFILE_ORDER = ("smoke", "cpu", "gpu", "full")
META_NAME = "meta.json"
EXECUTED_NAME = "notebook.ipynb"
_RESULT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def save_result(results_dir: str | os.PathLike | None, name: str, data: pd.DataFrame | Mapping[str, Any],
                parameters: Mapping[str, Any] | None = None) -> Path | None:
    """Write one result table (`<name>.csv` for a DataFrame, `<name>.json` for a mapping) atomically and record it
    in `meta.json` with the parameters, package versions and git revision.

    Notebooks call it with the `results_dir` parameter the runner injects. With `results_dir=None` (a notebook opened
    by hand) nothing is written, and it says so.
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
        path = folder / f"{name}.csv"
        with atomic_path(path) as tmp:
            frame.to_csv(tmp, index=False)
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
    """A table written by `save_result` (DataFrame from CSV, dict from JSON), or None if there is none."""
    folder = Path(folder)
    if (folder / f"{name}.csv").is_file():
        return pd.read_csv(folder / f"{name}.csv")
    if (folder / f"{name}.json").is_file():
        return json.loads((folder / f"{name}.json").read_text(encoding="utf-8"))
    return None
