"""`taser bench`: the library measured against its peers and the hardware limit (one module per benchmark).

    >>> from taser_book.bench import BenchConfig, run_benchmark, summary_rows
    >>> result = run_benchmark("encoding", BenchConfig(quick=True))
    >>> summary_rows([result])       # benchmark, metric, measured, target, met

Each benchmark returns a JSON-ready record: `rows` (the summary table: measured value, target, met), `measured`
(every timing with its median and spread), `sizes`, `notes`, and `meta` (versions, git revision, device, load
average before and after, wall time).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from taser_lib.io import atomic_write_json
from .config import BenchConfig

# The benchmarks in the suite's order; each is the module taser_book.bench.<name> with NAME, TITLE and run(cfg).
# Imported on use, so that `taser --help` does not load torch.
NAMES: tuple[str, ...] = ("encoding", "precision", "hardware", "routing", "training", "matching", "search",
                          "scaling")
# Benchmarks run only when named (`taser bench --only NAME`): too long for the suite.
OPT_IN: tuple[str, ...] = ("bf16_training_quality", "peers", "step_parts")


def run_benchmark(name: str, cfg: BenchConfig) -> dict[str, Any]:
    """Run one benchmark and return its record."""
    if name not in NAMES + OPT_IN:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {', '.join(NAMES + OPT_IN)}")
    from .core import load_average, record

    module = importlib.import_module(f"{__name__}.{name}")
    started, load_before = time.perf_counter(), load_average()
    return record(name, module.TITLE, cfg, module.run(cfg), started, load_before)


def write_result(result: dict[str, Any], out_dir: str | Path) -> Path:
    """<out_dir>/<benchmark>.json, written atomically."""
    path = Path(out_dir) / f"{result['benchmark']}.json"
    atomic_write_json(path, result)
    return path


def load_results(out_dir: str | Path) -> list[dict[str, Any]]:
    """Every benchmark record in a folder, in the suite's order."""
    found = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in Path(out_dir).glob("*.json")}
    return [found[name] for name in NAMES + OPT_IN if name in found]


def summary_rows(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per summary line of every record: benchmark, metric, value, unit, target (as text), met."""
    rows = []
    for result in results:
        for r in result["rows"]:
            target = f"{r['op']} {r['target']:g}" if r["target"] is not None else ""
            rows.append({"benchmark": result["benchmark"], "metric": r["metric"], "value": r["value"],
                         "unit": r["unit"], "target": target, "met": r["met"]})
    return rows


def machine_line(results: Iterable[dict[str, Any]]) -> str:
    """Where the benchmarks ran and what `auto` chose there: "AMD EPYC (2 cores, 2 torch threads), torch 2.13.0;
    auto precision: encode fp32, train fp32 (no native bf16)" -- from the first result's meta."""
    for result in results:
        meta = result.get("meta", {})
        device, precision = meta.get("device", {}), meta.get("precision") or {}
        cap = f", oneDNN capped at {device['isa_limit']}" if device.get("isa_limit") else ""
        where = (f"{device.get('name')} ({device.get('cores')} cores, {device.get('torch_threads')} torch threads{cap})"
                 if device.get("type") == "cpu" else str(device.get("name")))
        line = f"machine: {where}, torch {meta.get('versions', {}).get('torch')}"
        choice = auto_choice(precision)
        if device.get("type") == "cuda" and choice == "not resolved":   # no probe on a GPU: bf16 where supported
            choice = "bf16 (the rule on a GPU with bf16)" if precision.get("native_bf16") else "fp32"
        if choice:
            line += f"; auto precision: {choice}"
        if precision.get("probe"):
            speed = ", ".join(f"{p} {x:.2f}x" for p, x in precision["probe"]["speedup"].items())
            line += f" (measured bf16 over fp32: {speed})"
        return line
    return "machine: (no results)"


def auto_choice(precision: dict[str, Any]) -> str | None:
    """What `auto` chose, from a result's `meta["precision"]`: "encode bf16, train fp32" (the probe's choice),
    "fp32 (no native bf16 on this CPU)", "not resolved"; None when the record does not say."""
    if precision.get("probe"):
        choice = precision["probe"]["choice"]
        return f"encode {choice['encode']}, train {choice['train']}"
    if precision:
        return "fp32 (no native bf16 on this CPU)" if not precision.get("native_bf16") else "not resolved"
    return None


def format_table(results: Iterable[dict[str, Any]]) -> str:
    """The summary as a plain-text table (what `taser bench` prints), after the machine it ran on."""
    results = list(results)
    lines = [("benchmark", "metric", "measured", "target", "met?")]
    for r in summary_rows(results):
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        lines.append((r["benchmark"], r["metric"], f"{r['value']:.4g} {r['unit']}".rstrip(), r["target"], met))
    widths = [max(len(line[i]) for line in lines) for i in range(5)]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([machine_line(results), "", *text])


__all__ = ["BenchConfig", "NAMES", "OPT_IN", "format_table", "load_results", "machine_line", "run_benchmark",
           "summary_rows",
           "write_result"]
