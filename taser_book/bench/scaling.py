"""Benchmark 7: encode and search time as the corpus grows (1k, 10k, 100k passages), and what they imply for DPR's
21M-passage Wikipedia.

Encoding is measured on SQuAD-open passages (cycled past the corpus size) up to a slice size and extrapolated
linearly beyond it from the rate at the largest measured size (encoding is linear in the passage count; the output
marks every extrapolated point). Search is exact faiss flat search of a fixed query batch over seeded random unit
vectors of the model's dimension, measured at every size; exact search is linear in the corpus size, so its 21M
figure is the largest measurement scaled up. The 21M encoding time is given on this machine's CPU, and on one GPU:
measured when run with --device cuda, else from an assumed sustained GPU FLOP rate (stated in the output).
DPR's own encoder is BERT-base; its time is ours scaled by the FLOP ratio (same token lengths, same achieved rate).

Memory: the peak RAM that indexing adds, measured in a fresh process per corpus size (`bench.memory`), for a
GENERATED corpus (no real corpus of a million passages is offline) streamed through `encode_stream_to_shards` (what
`taser encode` does) and, for contrast, loaded whole first (what loading a corpus file into a dict does). A stub
encoder stands in for the model, so the series shows the pipeline's own memory; the model's is a constant on top.
Target: the streamed peak stays within the bound computed from the shard size (`memory.shard_bound_bytes`) at every
corpus size.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

import numpy as np
from transformers import BertConfig

from taser_lib.retrieval import DenseIndex
from . import inputs
from .core import BenchConfig, interleaved, row, spread
from .hardware import encoder_flops
from .memory import shard_bound_bytes, stream_peak_memory

NAME = "scaling"
TITLE = "Scaling of encoding and search, and DPR's 21M passages"
WIKIPEDIA_PASSAGES = 21_015_324  # DPR's psgs_w100.tsv
# Without a GPU to measure: one A100 at half its fp32 peak of 19.5 TFLOP/s (PyTorch runs fp32 matmuls without TF32
# by default). An assumption, stated in the output; run with --device cuda to measure instead.
ASSUMED_GPU_FLOP_PER_S = 0.5 * 19.5e12
HOUR = 3600.0
MIB = 2 ** 20


def memory_scaling(sizes: list[int], shard_size: int, dim: int) -> dict[str, Any]:
    """Peak RAM growth (MiB) of indexing each generated corpus size, streamed and loaded (module docstring)."""
    peaks: dict[str, list[float]] = {"stream": [], "load": []}
    method = None
    for n in sizes:
        for mode in peaks:
            with tempfile.TemporaryDirectory(prefix="taser-memory-") as out:
                probe = stream_peak_memory(n, shard_size, dim, out, mode)
                peaks[mode].append(probe["peak_growth_bytes"] / MIB)
                method = probe["method"]
    return {"sizes": sizes, "shard_size": shard_size, "dim": dim, "stream_peak_mib": peaks["stream"],
            "load_peak_mib": peaks["load"], "bound_mib": shard_bound_bytes(shard_size, dim) / MIB,
            "method": f"peak resident memory of a child process per size: {method}"}


def encode_scaling(cfg: BenchConfig, device: str, sizes: list[int], slice_size: int, repeats: int
                   ) -> dict[str, Any]:
    """Seconds to encode each size on `device`: measured up to `slice_size`, extrapolated beyond."""
    dev_cfg = dataclasses.replace(cfg, device=device)
    enc = inputs.encoder(dev_cfg, precision="auto")  # what `taser encode` and `taser index` use by default
    enc.show_progress = False
    enc.encode_passages(inputs.passages(cfg, enc.batch_size))  # warm-up
    seconds, measured, rates = [], [], {}
    for n in sizes:
        if n <= slice_size:
            passages = inputs.passages(cfg, n)
            times, _ = interleaved({"encode": lambda: enc.encode_passages(passages)}, repeats, device, warmup=0)
            rates[n] = n / spread(times["encode"])["median"]
            seconds.append(spread(times["encode"])["median"])
            measured.append(True)
        else:
            if not rates:
                raise ValueError(f"slice_size {slice_size} is below the smallest size {min(sizes)}")
            seconds.append(n / rates[max(rates)])
            measured.append(False)
    return {"sizes": sizes, "seconds": seconds, "measured": measured,
            "passages_per_second": rates[max(rates)], "rate_measured_at": max(rates),
            "precision": enc.resolved_precision}


def search_scaling(cfg: BenchConfig, sizes: list[int], dim: int, n_queries: int, repeats: int) -> dict[str, Any]:
    queries = inputs.random_unit_vectors(n_queries, dim, cfg.seed + 1)
    seconds, spreads, on_gpu = [], [], False
    for n in sizes:
        corpus = inputs.random_unit_vectors(n, dim, cfg.seed)
        index = DenseIndex.from_embeddings(corpus, [str(i) for i in range(n)], "flat")
        on_gpu = index.on_gpu
        times, _ = interleaved({"flat": lambda: index.index.search(queries, 100)}, repeats, cfg.device)
        spreads.append(spread(times["flat"]))
        seconds.append(spreads[-1]["median"])
    return {"sizes": sizes, "seconds": seconds, "spread": spreads, "queries": n_queries, "on_gpu": on_gpu}


def run(cfg: BenchConfig) -> dict[str, Any]:
    sizes = list(cfg.pick((1_000, 10_000, 100_000), (10, 20, 50)))
    repeats = cfg.pick(3, 1)
    slice_size = {"cpu": cfg.pick(1_000, 10), "cuda": cfg.pick(20_000, 20)}
    n_queries = cfg.pick(1_000, 5)
    devices = ["cpu"] + (["cuda"] if cfg.device == "cuda" else [])
    encode = {d: encode_scaling(cfg, d, sizes, slice_size[d], repeats) for d in devices}
    enc = inputs.encoder(cfg)
    lengths = [len(x) for x in enc.tokenize_passages(inputs.passages(cfg, slice_size["cpu"]))["input_ids"]]
    ours_flops = encoder_flops(enc.model.config, lengths) / len(lengths)
    bert_base_factor = encoder_flops(BertConfig(), lengths) / len(lengths) / ours_flops
    search = search_scaling(cfg, sizes, enc.dim, n_queries, repeats)
    memory = memory_scaling(list(cfg.pick((10_000, 100_000, 1_000_000), (2_000, 8_000))), cfg.pick(10_000, 1_000),
                            enc.dim)

    cpu_hours = WIKIPEDIA_PASSAGES / encode["cpu"]["passages_per_second"] / HOUR
    if "cuda" in encode:
        gpu_rate, gpu_basis = encode["cuda"]["passages_per_second"], "measured with --device cuda"
    else:
        gpu_rate = ASSUMED_GPU_FLOP_PER_S / ours_flops
        gpu_basis = (f"assumed: one GPU sustaining {ASSUMED_GPU_FLOP_PER_S / 1e12:.2f} TFLOP/s on this encoder "
                     "(half an A100's fp32 peak); run with --device cuda to measure")
    gpu_hours = WIKIPEDIA_PASSAGES / gpu_rate / HOUR
    per_query_21m = search["seconds"][-1] / n_queries * WIKIPEDIA_PASSAGES / sizes[-1]
    implied = {
        "passages": WIKIPEDIA_PASSAGES,
        "encode_hours_cpu": cpu_hours, "encode_hours_gpu": gpu_hours, "gpu_basis": gpu_basis,
        "bert_base_flop_factor": bert_base_factor,
        "encode_hours_cpu_bert_base": cpu_hours * bert_base_factor,
        "encode_hours_gpu_bert_base": gpu_hours * bert_base_factor,
        "flat_search_seconds_per_query": per_query_21m,
        "index_bytes_fp32": WIKIPEDIA_PASSAGES * enc.dim * 4,
    }
    return {
        "rows": [
            row("21M passages: encode on this CPU", cpu_hours, "h"),
            row("21M passages: encode on one GPU", gpu_hours, "h"),
            row("21M passages: flat search per query", per_query_21m * 1e3, "ms"),
            *[row(f"encode {n:,} passages{'' if m else ' (extrapolated)'}", s, "s")
              for n, s, m in zip(sizes, encode[cfg.device]["seconds"], encode[cfg.device]["measured"])],
            *[row(f"flat search {n_queries} queries over {n:,}", s, "s") for n, s in zip(sizes, search["seconds"])],
            row("streamed indexing: peak RAM growth, largest over corpus sizes", max(memory["stream_peak_mib"]), "MiB",
                target=round(memory["bound_mib"], 1), op="<="),
            *[row(f"indexing {n:,} generated passages: peak RAM growth, {mode}", peak, "MiB")
              for mode in ("stream", "load") for n, peak in zip(memory["sizes"], memory[f"{mode}_peak_mib"])],
        ],
        "measured": {"encode": encode, "search": search, "implied_21m": implied, "memory": memory,
                     "flops_per_passage": ours_flops, "mean_tokens": float(np.mean(lengths))},
        "sizes": {"corpus_sizes": sizes, "encode_slice": slice_size, "queries": n_queries, "repeats": repeats,
                  "devices": devices, "memory_corpus_sizes": memory["sizes"], "shard_size": memory["shard_size"]},
        "notes": [*[f"encoding on {d} beyond {slice_size[d]:,} passages is extrapolated from the rate measured there"
                   f" (precision auto: {encode[d]['precision']})" for d in devices],
                  f"GPU: {gpu_basis}",
                  f"DPR's BERT-base encoder costs {bert_base_factor:.1f}x our model's FLOPs per passage: "
                  f"{cpu_hours * bert_base_factor:,.0f} h on this CPU, {gpu_hours * bert_base_factor:,.1f} h on "
                  "one GPU at the same achieved rate",
                  f"a flat fp32 index of 21M x {enc.dim} needs {implied['index_bytes_fp32'] / 2 ** 30:.0f} GiB",
                  "search scaling: random unit vectors, exact faiss flat search; 21M scaled linearly from "
                  f"{sizes[-1]:,}",
                  f"memory: GENERATED corpora of {', '.join(f'{n:,}' for n in memory['sizes'])} ~600-character "
                  f"passages, shards of {memory['shard_size']:,}, a stub encoder of dimension {enc.dim}; streamed "
                  f"peak {max(memory['stream_peak_mib']):.0f} MiB at most (bound {memory['bound_mib']:.0f} MiB from "
                  f"the shard size), loaded whole {memory['load_peak_mib'][-1]:.0f} MiB at "
                  f"{memory['sizes'][-1]:,}; {memory['method']}"],
    }
