"""The benchmark records of `taser bench` as the performance page shows them: tables and summary lines.

    >>> from taser_book.bench.report import find_results, summary_table, spread_table
    >>> results, source = find_results(["../results/bench", "../results/bench-quick"])
    >>> summary_table(results)        # benchmark, metric, measured, target, met
    >>> spread_table(results)         # median, quartiles and extremes of the targeted ratios

Every function takes the records `load_results` returns (one dict per benchmark, see `taser_book.bench`) and reads
only them: the page runs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from . import auto_choice, load_results, summary_rows

# benchmark -> the targeted quantities whose spread over rounds the page shows: (label, path into "measured")
SPREADS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "encoding": [("speed-up over sentence-transformers", ("speedup",)),
                 ("our fp32 over sentence-transformers", ("fp32_speedup",)),
                 ("bf16 over our fp32", ("bf16_over_fp32",)),
                 ("fused CPU linears over stock kernels", ("fused_over_stock",))],
    "hardware": [("fraction of matmul peak, length 256, per round", ("fraction_per_round", "full")),
                 ("fraction of matmul peak, SQuAD-open, per round", ("fraction_per_round", "real"))],
    "routing": [("TASER / BERT forward", ("ratio_to_bert", "taser")),
                ("every-expert / BERT forward", ("ratio_to_bert", "every_expert"))],
    "training": [("TASER / DPR step time", ("step_time_ratio_to_dpr", "TASER")),
                 ("TASER_Shared / DPR step time", ("step_time_ratio_to_dpr", "TASER_Shared")),
                 *[(f"{name} bf16 step speed-up over fp32", ("bf16_speedup", name))
                   for name in ("DPR", "TASER", "TASER_Shared")]],
    "matching": [("speed-up over reference", ("speedup",))],
}
SPREAD_KEYS = ("median", "q1", "q3", "min", "max", "n")


def find_results(folders: Sequence[str | os.PathLike]) -> tuple[list[dict[str, Any]], str | None]:
    """The records of the first folder that holds any, and that folder (None, [] when none does)."""
    for folder in folders:
        results = load_results(folder) if Path(folder).is_dir() else []
        if results:
            return results, str(folder)
    return [], None


def by_name(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["benchmark"]: r for r in results}


def describe_source(results: Sequence[dict[str, Any]], source: str | None) -> list[str]:
    """Which machine made the records, at which revision and when (a line a reader can use, without the folder
    they were read from, which `source` names for callers that want it); says so when there are none."""
    if not results:
        return ["No benchmark results: run `taser bench` (or `taser bench --quick` for a smoke run), then rebuild "
                "the book."]
    runs: dict[tuple[str, str, str], list[str]] = {}   # records of several runs (a benchmark rerun later) say so
    for record in results:
        meta = record["meta"]
        device = meta["device"]
        name = f"{device['name']} ({device.get('cores', '?')} cores)" if device.get("type") == "cpu" \
            else device["name"]
        revision = str(meta.get("git_revision") or "an unrecorded revision")[:10]
        runs.setdefault((name, revision, str(meta.get("time_utc") or "")[:10]), []).append(record["benchmark"])
    if len(runs) == 1:
        (name, revision, day), = runs
        lines = [f"Measured on {name}, revision {revision}, {day}."]
    else:
        lines = ["Measured in " + f"{len(runs)} runs: " + "; ".join(
            f"{', '.join(names)} on {name}, revision {revision}, {day}"
            for (name, revision, day), names in sorted(runs.items(), key=lambda kv: kv[0][2])) + "."]
    if any(r.get("quick") for r in results):
        lines.append("QUICK: smoke-sized runs; these are not measurements.")
    return lines


def summary_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """One row per measured quantity: benchmark, metric, measured (value and unit), target, met ("yes", "NO", "")."""
    table = pd.DataFrame(summary_rows(results), columns=["benchmark", "metric", "value", "unit", "target", "met"])
    measured = [f"{v:.4g} {u}".rstrip() for v, u in zip(table["value"], table["unit"])]
    met = [("" if m is None or m != m else ("yes" if m else "NO")) for m in table["met"]]  # m != m: NaN
    return pd.DataFrame({"benchmark": table["benchmark"], "metric": table["metric"], "measured": measured,
                         "target": table["target"], "met": met})


def _walk(record: dict[str, Any], path: Sequence[str]) -> Any:
    value: Any = record.get("measured")
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def spread_table(results: Iterable[dict[str, Any]],
                 spreads: dict[str, list[tuple[str, tuple[str, ...]]]] | None = None,
                 digits: int | None = 3) -> pd.DataFrame:
    """benchmark, quantity, median, q1, q3, min, max, n of every quantity in `spreads` (default SPREADS) that the
    records hold (one a benchmark does not measure, e.g. stock kernels on a GPU, is left out), rounded to
    `digits` (None: as measured)."""
    found = by_name(results)
    rows = []
    for name, quantities in (SPREADS if spreads is None else spreads).items():
        if name not in found:
            continue
        for label, path in quantities:
            value = _walk(found[name], path)
            if not isinstance(value, dict):
                continue
            rows.append({"benchmark": name, "quantity": label, **{k: value.get(k) for k in SPREAD_KEYS}})
    table = pd.DataFrame(rows, columns=["benchmark", "quantity", *SPREAD_KEYS])
    return table.round(digits) if digits is not None else table


def _listed(value: Any) -> str:
    """A record's list or mapping as one line of text for a table cell ("" when absent)."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_listed(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return " / ".join(_listed(v) for v in value)
    return "" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def conditions_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Wall time of each benchmark, the 1/5/15-minute load averages before and after it, and its sizes, as text."""
    return pd.DataFrame([{"benchmark": r["benchmark"], "wall (s)": r["meta"].get("wall_seconds"),
                          "load before (1/5/15 min)": _listed(r["meta"].get("load_average_before")),
                          "load after (1/5/15 min)": _listed(r["meta"].get("load_average_after")),
                          "sizes": _listed(r.get("sizes"))} for r in results],
                        columns=["benchmark", "wall (s)", "load before (1/5/15 min)", "load after (1/5/15 min)",
                                 "sizes"])


def _count(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "an unrecorded number of"


def implied_21m_table(results: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """What the scaling benchmark implies for DPR's Wikipedia: one row per quantity (the default model, and BERT-base
    where the benchmark scales it), with what it rests on; no rows without the scaling benchmark."""
    columns = ["DPR's Wikipedia", "the default model", "BERT-base", "basis"]
    scaling = by_name(results).get("scaling")
    if scaling is None:
        return pd.DataFrame(columns=columns)
    measured, sizes = scaling["measured"], scaling.get("sizes", {})
    implied = measured["implied_21m"]
    cpu = measured["encode"].get("cpu", {})
    dim = round(implied["index_bytes_fp32"] / implied["passages"] / 4)
    rows = [
        ["passages", f"{implied['passages']:,}", "", "DPR's psgs_w100.tsv"],
        ["encode on this CPU", f"{implied['encode_hours_cpu']:,.1f} h", f"{implied['encode_hours_cpu_bert_base']:,.0f} h",
         f"the rate measured on {_count(sizes.get('encode_slice', {}).get('cpu'))} passages (precision "
         f"{cpu.get('precision', '?')}), scaled linearly; BERT-base: {implied['bert_base_flop_factor']:.1f}x the "
         "FLOPs per passage at the same achieved rate"],
        ["encode on one GPU", f"{implied['encode_hours_gpu']:,.2f} h", f"{implied['encode_hours_gpu_bert_base']:,.1f} h",
         implied["gpu_basis"]],
        ["flat search, per query", f"{implied['flat_search_seconds_per_query'] * 1e3:,.1f} ms", "",
         f"exact faiss flat search of random unit vectors, measured up to {measured['search']['sizes'][-1]:,} "
         "passages and scaled linearly"],
        ["flat fp32 index", f"{implied['index_bytes_fp32'] / 2 ** 30:,.1f} GiB", "", f"21M x {dim} x 4 bytes"],
    ]
    memory = measured.get("memory")  # records before issue 13 have no memory series
    if memory:
        rows.append(["indexing peak RAM growth, streamed", f"{max(memory['stream_peak_mib']):,.0f} MiB", "",
                     f"measured up to {memory['sizes'][-1]:,} generated passages in shards of "
                     f"{memory['shard_size']:,} (bound {memory['bound_mib']:,.0f} MiB); loaded whole first: "
                     f"{memory['load_peak_mib'][-1]:,.0f} MiB"])
    return pd.DataFrame(rows, columns=columns)


# --- the same ratios on every machine the benchmarks ran on -----------------------------------------------------------

MACHINES_FOLDER = "machines"  # results/bench/machines/<machine>/: other machines' runs beside results/bench's own
# (label, benchmark, path into "measured", how the value reads): each machine's ratios come from its own records
MACHINE_QUANTITIES: list[tuple[str, str, tuple[str, ...], str]] = [
    ("encoding: ours at auto over sentence-transformers", "encoding", ("speedup", "median"), "x"),
    ("encoding: our fp32 over sentence-transformers", "encoding", ("fp32_speedup", "median"), "x"),
    ("encoding: our bf16 over our fp32", "encoding", ("bf16_over_fp32", "median"), "x"),
    ("encoding: our int8 (indexing) over sentence-transformers", "encoding", ("int8_speedup", "median"), "x"),
    ("encoding: our int8 (indexing) over ours at auto", "encoding", ("int8_over_auto", "median"), "x"),
    ("encoding: the int8 engine (its probe's pick)", "encoding", ("int8_engine", "choice"), "text"),
    ("encoding: int8 on PyTorch's kernels over sentence-transformers, where ONNX Runtime was picked", "encoding",
     ("int8_torch_speedup", "median"), "x"),
    ("encoding: ours at auto over sentence-transformers' best float backend", "peers",
     ("auto_over_best_float", "median"), "x"),
    ("encoding: ours at auto, compiled (torch.compile), over sentence-transformers' best float backend", "peers",
     ("compiled_over_best_float", "median"), "x"),
    ("encoding: sentence-transformers' best float backend (peers benchmark)", "peers", ("best_float",), "text"),
    ("encoding: our int8 over sentence-transformers' best int8 backend", "peers", ("int8_over_best_int8", "median"),
     "x"),
    ("encoding: sentence-transformers' best int8 backend (peers benchmark)", "peers", ("best_int8",), "text"),
    ("SQuAD-open test R@1, int8 - fp32", "precision", ("int8_delta_points", "R@1"), "points"),
    ("SQuAD-open test R@20, int8 - fp32", "precision", ("int8_delta_points", "R@20"), "points"),
    ("SQuAD-open test R@20, bf16 - fp32", "precision", ("delta_points", "R@20"), "points"),
    ("training step: TASER bf16 over fp32", "training", ("bf16_speedup", "TASER", "median"), "x"),
    ("training step: DPR bf16 over fp32", "training", ("bf16_speedup", "DPR", "median"), "x"),
    ("training: the precision it ran at (auto)", "training", ("default_precision",), "text"),
    ("training step: DPR at fp32, fraction of the fp32 matmul peak", "training", ("fraction_of_peak", "DPR fp32"),
     "fraction"),
    ("training step: the CA at fp32, fraction of the fp32 matmul peak", "training", ("fraction_of_peak", "CA fp32"),
     "fraction"),
    ("training step: ColBERT at fp32, fraction of the fp32 matmul peak", "training",
     ("fraction_of_peak", "ColBERT fp32"), "fraction"),
    ("encoding at length 256: fraction of the matmul peak", "hardware", ("fraction", "full"), "fraction"),
    *[(f"training step: DPR bf16 over fp32, {variant} (step parts benchmark)", "step_parts",
       ("bf16_speedup", variant, "median"), "x")
      for variant in ("as the trainer builds it", "no attention dropout", "no dropout", "fused AdamW",
                      "compiled forward")],
    ("search: faiss flat over numpy, SQuAD-open", "search", ("squad_open", "flat_speedup_over_numpy", "median"), "x"),
    ("search: faiss flat over numpy, random 100k", "search", ("random", "flat_speedup_over_numpy", "median"), "x"),
]


def machine_folders(bench_dir: str | os.PathLike) -> list[Path]:
    """`bench_dir` itself and every `bench_dir/machines/<machine>/` folder that holds benchmark records."""
    root = Path(bench_dir)
    others = sorted(p for p in (root / MACHINES_FOLDER).glob("*") if p.is_dir())
    return [p for p in [root, *others] if p.is_dir() and load_results(p)]


def _machine_label(results: Sequence[dict[str, Any]]) -> str:
    device = results[0]["meta"].get("device", {})
    if device.get("type") != "cpu":
        return str(device.get("name"))
    cap = f", oneDNN capped at {device['isa_limit']}" if device.get("isa_limit") else ""
    return f"{device.get('name')} ({device.get('cores')} cores{cap})"


def _auto_choice(results: Sequence[dict[str, Any]]) -> str:
    """What `auto` chose on the machine, for encoding and training, from the first record that says."""
    for result in results:
        precision = result["meta"].get("precision") or {}
        choice = auto_choice(precision)
        if choice and choice != "not resolved":
            return choice + (" (probe)" if precision.get("probe") else "")
    return "–"


def _reading(value: Any, unit: str) -> str:
    if unit == "text":
        return str(value) if isinstance(value, str) and value else "–"
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "–"
    if unit == "fraction":
        return f"{value:.0%}"
    return f"{value:+.2f} points" if unit == "points" else f"{value:.2f}x"


def machines_table(bench_dir: str | os.PathLike) -> pd.DataFrame:
    """One column per machine folder (`machine_folders`), one row per quantity of `MACHINE_QUANTITIES`, each read
    from that folder's own records (each ratio is measured within one benchmark run, its contenders timed round-robin);
    "–" where the folder's records do not measure it (a benchmark not run there, or run before it measured that
    quantity). The last row gives the days of the folder's records: records of different days may come from different
    CPUs sold under one name (a cloud's "AMD EPYC" with or without native bf16), which the rows of what `auto` chose
    show."""
    columns = {}
    for folder in machine_folders(bench_dir):
        results = load_results(folder)
        found = by_name(results)
        cells = {"auto precision (first record that says)": _auto_choice(results)}
        for label, bench, path, unit in MACHINE_QUANTITIES:
            cells[label] = _reading(_walk(found[bench], path) if bench in found else None, unit)
        days = sorted({(r["meta"].get("time_utc") or "")[:10] for r in results} - {""})
        cells["measured on (days of its records)"] = ", ".join(days) if days else "–"
        label = _machine_label(results)
        columns[label if label not in columns else f"{label}, {folder.name}"] = cells
    return pd.DataFrame(columns)


def step_parts_table(bench_dir: str | os.PathLike) -> pd.DataFrame:
    """Where a DPR training step's time goes, from each machine folder's `step_parts` record (benchmark
    `step_parts`): one column per machine and precision, the median seconds of the step and of its three parts
    (timed), then the profiled seconds of each op family over the whole step (`torch.profiler` self time of one
    step, summed over its parts). Empty where no folder holds such a record."""
    from .step_parts import OP_FAMILIES, PARTS

    families = [*OP_FAMILIES, "other"]
    columns = {}
    for folder in machine_folders(bench_dir):
        results = load_results(folder)
        record = by_name(results).get("step_parts")
        if record is None:
            continue
        measured = record["measured"]
        for precision, parts in measured["part_seconds"].items():
            cells = {"step (s, median)": measured["step_seconds_spread"][precision]["median"]}
            cells |= {f"part: {part} (s, median)": parts[part]["median"] for part in PARTS}
            profile = measured["profile_self_seconds"][precision]
            cells |= {f"ops: {family} (s, profiled)": sum(profile[part].get(family, 0.0) for part in PARTS)
                      for family in families}
            columns[f"{_machine_label(results)}: {precision}"] = {k: round(v, 3) for k, v in cells.items()}
    return pd.DataFrame(columns)
