"""taser_book.bench.report: the performance page's tables, from benchmark records written as `taser bench` does."""

from __future__ import annotations

from taser_book.bench import load_results, write_result
from taser_book.bench.report import (
    SPREAD_KEYS, conditions_table, describe_source, find_results, implied_21m_table, machine_folders, machines_table,
    spread_table, summary_table,
)


def _spread(median: float) -> dict[str, float]:
    return {"median": median, "q1": median - 0.1, "q3": median + 0.1, "min": median - 0.2, "max": median + 0.3, "n": 7}


def _record(name: str, measured: dict, rows: list[dict], quick: bool = False, **more) -> dict:
    meta = {"device": {"type": "cpu", "name": "Some CPU", "cores": 2}, "git_revision": "abc123",
            "time_utc": "2025-01-01T00:00:00+00:00", "wall_seconds": 12.5, "load_average_before": [0.5, 0.4, 0.3],
            "load_average_after": [1.5, 0.9, 0.4]}
    return {"benchmark": name, "title": name, "quick": quick, "rows": rows, "measured": measured,
            "sizes": {"passages": 10}, "notes": [], "meta": meta, **more}


def _row(metric: str, value: float, unit: str, target: float | None = None, met: bool | None = None) -> dict:
    return {"metric": metric, "value": value, "unit": unit, "op": ">=", "target": target, "met": met}


def test_report_tables_from_written_records(tmp_path):
    bench = tmp_path / "bench"
    write_result(_record("encoding", {"speedup": _spread(1.8)},  # no stock-kernel contender: left out below
                         [_row("speed-up", 1.8, "x", 1.5, True), _row("passages/s", 250.0, "")]), bench)
    write_result(_record("routing", {"ratio_to_bert": {"taser": _spread(1.02), "every_expert": _spread(1.4)}},
                         [_row("TASER / BERT", 1.02, "x", 1.05, False)]), bench)
    write_result(_record("scaling", {"implied_21m": {
        "passages": 21_015_324, "encode_hours_cpu": 50.0, "bert_base_flop_factor": 6.0,
        "encode_hours_cpu_bert_base": 300.0, "encode_hours_gpu": 0.5, "encode_hours_gpu_bert_base": 3.0,
        "gpu_basis": "assumed", "flat_search_seconds_per_query": 0.25, "index_bytes_fp32": 21_015_324 * 384 * 4},
        "encode": {"cpu": {"precision": "fp32"}}, "search": {"sizes": [1_000, 100_000]}},
        [], notes=["extrapolated"]), bench)

    (tmp_path / "empty").mkdir()  # a folder without records is passed over, like one that does not exist
    results, source = find_results([tmp_path / "missing", tmp_path / "empty", bench])
    assert source == str(bench) and [r["benchmark"] for r in results] == ["encoding", "routing", "scaling"]

    summary = summary_table(results)
    assert list(summary.columns) == ["benchmark", "metric", "measured", "target", "met"]
    assert list(summary["met"]) == ["yes", "", "NO"]
    assert list(summary["measured"]) == ["1.8 x", "250", "1.02 x"]
    assert list(summary["target"]) == [">= 1.5", "", ">= 1.05"]

    spreads = spread_table(results)
    assert list(spreads["quantity"]) == ["speed-up over sentence-transformers", "TASER / BERT forward",
                                         "every-expert / BERT forward"]
    assert list(spreads.columns) == ["benchmark", "quantity", *SPREAD_KEYS]
    assert spreads.loc[1, "median"] == 1.02 and spreads.loc[2, "n"] == 7

    conditions = conditions_table(results)
    assert list(conditions["wall (s)"]) == [12.5] * 3 and conditions.loc[0, "load after (1/5/15 min)"] == "1.5 / 0.9 / 0.4"
    assert list(conditions["sizes"]) == ["passages 10"] * 3  # a line of text, not a dict's repr

    implied = implied_21m_table(results).set_index("DPR's Wikipedia")
    assert list(implied.columns) == ["the default model", "BERT-base", "basis"]
    assert implied.loc["passages", "the default model"] == "21,015,324"
    assert implied.loc["encode on this CPU"].tolist()[:2] == ["50.0 h", "300 h"]
    assert "(precision fp32)" in implied.loc["encode on this CPU", "basis"]
    assert implied.loc["flat fp32 index"].tolist() == ["30.1 GiB", "", "21M x 384 x 4 bytes"]
    assert "up to 100,000 passages" in implied.loc["flat search, per query", "basis"]
    # a line a reader can use: the machine, the revision and the day, not the folder the records were read from
    assert describe_source(results, source) == ["Measured on Some CPU (2 cores), revision abc123, 2025-01-01."]
    later = _record("search", {}, [])
    later["meta"] = {**later["meta"], "git_revision": "def4567890abc", "time_utc": "2025-02-03T00:00:00+00:00"}
    assert describe_source(results + [later], source) == [
        "Measured in 2 runs: encoding, routing, scaling on Some CPU (2 cores), revision abc123, 2025-01-01; "
        "search on Some CPU (2 cores), revision def4567890, 2025-02-03."]
    write_result(_record("hardware", {}, [], quick=True), tmp_path / "quick")
    assert describe_source(load_results(tmp_path / "quick"), None)[1].startswith("QUICK: ")


def test_report_without_results_says_what_to_run(tmp_path):
    results, source = find_results([tmp_path / "nothing"])
    assert (results, source) == ([], None)
    assert "taser bench" in describe_source(results, source)[0]
    assert summary_table(results).empty and spread_table(results).empty and conditions_table(results).empty
    assert implied_21m_table(results).empty


def test_machines_table_reads_each_machine_from_its_own_records(tmp_path):
    bench = tmp_path / "bench"
    main = _record("encoding", {"speedup": _spread(1.29), "fp32_speedup": _spread(1.29)}, [])
    main["meta"]["precision"] = {"auto": {"encode": "fp32"}, "native_bf16": False, "probe": None}
    write_result(main, bench)
    write_result(_record("search", {"squad_open": {"flat_speedup_over_numpy": _spread(1.5)}}, []), bench)
    xeon = _record("encoding", {"speedup": _spread(4.8), "int8_speedup": _spread(2.1),
                                "int8_engine": {"choice": "onnxruntime"}, "int8_torch_speedup": _spread(1.7)}, [])
    xeon["meta"]["device"]["name"] = "Other CPU"
    xeon["meta"]["precision"] = {"native_bf16": True, "probe": {"choice": {"encode": "bf16", "train": "fp32"}}}
    xeon["meta"]["time_utc"] = "2025-02-02T00:00:00+00:00"
    write_result(xeon, bench / "machines" / "other")
    write_result(_record("precision", {"int8_delta_points": {"R@1": -0.9, "R@20": -0.25}}, []),
                 bench / "machines" / "other")
    write_result(_record("training", {"default_precision": "bf16"}, []), bench / "machines" / "other")
    (bench / "machines" / "empty").mkdir()  # no records: no column

    assert machine_folders(bench) == [bench, bench / "machines" / "other"]
    table = machines_table(bench)
    assert list(table.columns) == ["Some CPU (2 cores)", "Other CPU (2 cores)"]
    some, other = table["Some CPU (2 cores)"], table["Other CPU (2 cores)"]
    assert some["auto precision (first record that says)"] == "fp32 (no native bf16 on this CPU)"
    assert other["auto precision (first record that says)"] == "encode bf16, train fp32 (probe)"
    assert some["training: the precision it ran at (auto)"] == "–"
    assert other["training: the precision it ran at (auto)"] == "bf16"
    assert some["encoding: ours at auto over sentence-transformers"] == "1.29x"
    assert other["encoding: ours at auto over sentence-transformers"] == "4.80x"
    assert other["encoding: our int8 (indexing) over sentence-transformers"] == "2.10x"
    assert some["encoding: our int8 (indexing) over sentence-transformers"] == "–"  # not measured there
    assert other["encoding: the int8 engine (its probe's pick)"] == "onnxruntime"
    torch_int8 = "encoding: int8 on PyTorch's kernels over sentence-transformers, where ONNX Runtime was picked"
    assert other[torch_int8] == "1.70x" and some[torch_int8] == "–"
    assert other["SQuAD-open test R@20, int8 - fp32"] == "-0.25 points"
    assert other["SQuAD-open test R@1, int8 - fp32"] == "-0.90 points"
    assert some["search: faiss flat over numpy, SQuAD-open"] == "1.50x"
    assert other["search: faiss flat over numpy, SQuAD-open"] == "–"  # the other machine's run had no search
    assert other["measured on (days of its records)"] == "2025-01-01, 2025-02-02"
    assert machines_table(tmp_path / "none").empty


def test_a_benchmark_under_a_onednn_isa_cap_says_so(tmp_path, monkeypatch):
    from taser_book.bench import machine_line
    from taser_book.bench.core import describe_device

    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    assert "isa_limit" not in describe_device("cpu")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "avx512_core_bf16")
    assert describe_device("cpu")["isa_limit"] == "AVX512_CORE_BF16"
    capped = _record("encoding", {"speedup": _spread(1.4)}, [])
    capped["meta"]["device"]["isa_limit"] = "AVX512_CORE_BF16"
    write_result(capped, tmp_path / "bench")
    assert list(machines_table(tmp_path / "bench").columns) == ["Some CPU (2 cores, oneDNN capped at AVX512_CORE_BF16)"]
    assert "oneDNN capped at AVX512_CORE_BF16" in machine_line([capped])
