"""A finished run's training log (`log.jsonl`, one line per `loop.log_every` steps) read back, e.g. TASER's routing
entropy over training.

    >>> routing_entropy_curve(run.dir)            # step, epoch, h_unit, h_batch, l_ent (learned routing only)
    >>> routing_entropy_curve(run.result["paths"]["log"])

Each line holds the values of that one step (not a mean since the previous line): with learned routing (Seq-R,
Tok-R) `h_unit` is the mean per-unit routing entropy and `h_batch` the entropy of the batch-averaged routing (how
evenly the batch uses the experts), both averaged over the specialized blocks and the question and passage passes
(`training.retriever.retriever_loss`), and `l_ent` the entropy term under the model's entropy mode. Both entropies
lie in [0, log I]. A run with hard-negative mining (TASER App. B) keeps one log per round; a run folder is read
at its final round (`round2/` when there is one), or pass the round's folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from ..errors import FormatError

LOG_FILE = "log.jsonl"
ENTROPY_COLUMNS = ["step", "epoch", "h_unit", "h_batch", "l_ent"]


def log_path(run: str | os.PathLike) -> Path:
    """The log file of a run folder (its final round's for a mined run) or the file itself."""
    path = Path(run)
    if path.is_dir():
        for candidate in (path / LOG_FILE, path / "round2" / LOG_FILE):
            if candidate.is_file():
                return candidate
        raise FileNotFoundError(f"no {LOG_FILE} in {path} (nor in {path / 'round2'}): not a training run folder")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such training log")
    return path


def read_log(run: str | os.PathLike) -> pd.DataFrame:
    """Every line of a run's log.jsonl as a row (columns: the keys logged; missing values NaN). A line that is not
    a JSON object with a `step` is a FormatError naming the file and line."""
    path = log_path(run)
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise FormatError(path, number, None, f"not JSON: {err}") from None
        if not isinstance(row, dict) or "step" not in row:
            raise FormatError(path, number, "step", "a log line must be a JSON object with a 'step'")
        rows.append(row)
    return pd.DataFrame(rows)


def routing_entropy_curve(run: str | os.PathLike) -> pd.DataFrame:
    """The routing entropies over training (ENTROPY_COLUMNS, one row per logged step, in step order); a run without
    learned routing (Det-R, shared, DPR: no `h_unit` logged) is a FormatError naming its log."""
    log = read_log(run)
    if "h_unit" not in log.columns or log["h_unit"].isna().all():
        raise FormatError(log_path(run), None, "h_unit", "no routing entropy logged: only runs with learned routing "
                                                         "(Seq-R, Tok-R) log it")
    log = log[log["h_unit"].notna()].sort_values("step", kind="stable")
    for column in ENTROPY_COLUMNS:
        if column not in log.columns:
            log[column] = float("nan")
    return log[ENTROPY_COLUMNS].reset_index(drop=True)
