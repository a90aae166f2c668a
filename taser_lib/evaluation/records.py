"""Evaluation records on disk: aggregates as JSON and, beside them, every query's value as CSV, so that a finished
run can be tested against another one later (`evaluation.significance`).

    >>> record_evaluation("runs/ca/test_metrics.json", {"nDCG@10": 0.61}, {"nDCG@10": {"q1": 1.0, "q2": 0.22}})
    >>> read_per_query("runs/ca")                    # a run folder, its test_per_query.csv, or a *.eval.json
    {"nDCG@10": {"q1": 1.0, "q2": 0.22}}

The per-query file is long CSV with the header `query_id,metric,value`: one row per (query, metric), metrics in
the order of the aggregates, queries sorted; values written with full float precision (repr), so that the mean
of a metric's rows equals its aggregate. Metric names are those of the aggregates; where one evaluation holds
two families (`taser evaluate`: answer recall and ir-measures, both with an "R@100"), names are qualified as
`family/name` ("answer_recall/R@20"), and a bare name that matches one qualified name only is accepted on reading.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..io import atomic_write_json, atomic_write_text
from ..meta import run_metadata

PerQuery = dict[str, dict[str, float]]  # metric -> query id -> value
COLUMNS = ("query_id", "metric", "value")
TEST_METRICS = "test_metrics.json"  # what a finished training run writes (trainers) ...
TEST_PER_QUERY = "test_per_query.csv"  # ... and beside it


def per_query_path(metrics_path: str | Path) -> Path:
    """The per-query file beside an aggregates file: X_metrics.json -> X_per_query.csv,
    X.eval.json -> X.per_query.csv, X.json -> X.per_query.csv."""
    path = Path(metrics_path)
    name = path.name
    for suffix, replacement in (("_metrics.json", "_per_query.csv"), (".eval.json", ".per_query.csv"),
                                (".json", ".per_query.csv")):
        if name.endswith(suffix):
            return path.with_name(name[:-len(suffix)] + replacement)
    return path.with_name(name + ".per_query.csv")


def write_per_query(path: str | Path, values: Mapping[str, Mapping[str, float]]) -> Path:
    """Write {metric: {query id: value}} atomically as long CSV (see the module docstring)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for metric, by_query in values.items():
        for qid in sorted(by_query):
            writer.writerow((qid, metric, repr(float(by_query[qid]))))
    atomic_write_text(path, buffer.getvalue())
    return Path(path)


def flatten(families: Mapping[str, Mapping[str, Mapping[str, float]]]) -> PerQuery:
    """{family: {metric: {qid: value}}} -> {"family/metric": {qid: value}} (one file for several families)."""
    return {f"{family}/{metric}": values for family, metrics in families.items() for metric, values in metrics.items()}


def _resolve_file(source: str | Path) -> Path:
    """A per-query CSV from a run folder (its test_per_query.csv), a CSV path, or an aggregates JSON naming one."""
    path = Path(source)
    if path.is_dir():
        path = path / TEST_PER_QUERY
        if not path.is_file():
            raise FileNotFoundError(f"{source} holds no {TEST_PER_QUERY}: was the run evaluated (test split) "
                                    f"with this version of taser_lib?")
        return path
    if path.suffix == ".json":
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist")
        named = json.loads(path.read_text(encoding="utf-8")).get("per_query")
        candidate = path.parent / named if named else per_query_path(path)
        if not candidate.is_file():
            raise FileNotFoundError(f"{path} has no per-query file beside it ({candidate.name})")
        return candidate
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist")
    return path


def read_per_query(source: str | Path) -> PerQuery:
    """{metric: {query id: value}} from a per-query CSV (or a run folder / aggregates JSON beside one); a bad row
    raises a FormatError naming the file, line and field."""
    path = _resolve_file(source)
    out: PerQuery = {}
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(header) != COLUMNS:
            raise FormatError(path, 1, None, f"expected the header {','.join(COLUMNS)}, got {header}")
        for row in reader:
            line = reader.line_num
            if len(row) != len(COLUMNS):
                raise FormatError(path, line, None, f"expected {len(COLUMNS)} fields, got {len(row)}")
            qid, metric, text = row
            if not qid:
                raise FormatError(path, line, "query_id", "is empty")
            if not metric:
                raise FormatError(path, line, "metric", "is empty")
            try:
                value = float(text)
            except ValueError:
                raise FormatError(path, line, "value", f"{text!r} is not a number") from None
            if math.isnan(value):
                raise FormatError(path, line, "value", "is NaN")
            values = out.setdefault(metric, {})
            if qid in values:
                raise FormatError(path, line, "query_id", f"{qid!r} appears twice for metric {metric!r}")
            values[qid] = value
    return out


def select_metric(values: Mapping[str, Mapping[str, float]], metric: str, source: Any = "") -> dict[str, float]:
    """One metric's {query id: value}: by its exact name, or by a bare name that ends exactly one qualified name
    (`R@20` for `answer_recall/R@20`)."""
    if metric in values:
        return dict(values[metric])
    matches = [m for m in values if m.rsplit("/", 1)[-1] == metric]
    where = f" in {source}" if source else ""
    if len(matches) == 1:
        return dict(values[matches[0]])
    if matches:
        raise ValueError(f"metric {metric!r} is ambiguous{where}: name one of {matches}")
    raise KeyError(f"no per-query values of {metric!r}{where}; it holds {list(values)}")


def record_evaluation(path: str | Path, aggregates: Mapping[str, Any], per_query: Mapping[str, Mapping[str, float]],
                      **extra: Any) -> Path:
    """Write the aggregates JSON at `path` (with `extra` fields, the per-query file's name and run metadata) and
    the per-query CSV beside it (`per_query_path`), each atomically; the CSV first, so that a JSON that exists
    always has its per-query file. Returns the CSV's path."""
    path = Path(path)
    csv_path = write_per_query(per_query_path(path), per_query)
    atomic_write_json(path, {**extra, "metrics": dict(aggregates), "per_query": csv_path.name,
                             "metadata": run_metadata()})
    return csv_path
