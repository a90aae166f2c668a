"""The performance page's figure: encode and search time against corpus size, log-log (`taser bench` scaling)."""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .style import COLUMN_WIDTH_IN, book_style


@book_style
def plot_scaling(result: dict[str, Any] | None) -> Figure | None:
    """Seconds to encode a corpus (per device) and to search it (exact faiss flat, a fixed query batch) against
    its size, both axes logarithmic, out to DPR's 21M Wikipedia passages. Measured points are filled; extrapolated
    ones hollow on a dashed line.

    `result` is the scaling benchmark's record (results/bench/scaling.json). When it holds the memory series, a
    second panel plots it (`plot_memory`). None (no scaling benchmark in the results) draws nothing.
    """
    if result is None:
        return None
    measured = result["measured"]
    implied = measured["implied_21m"]
    wiki = implied["passages"]
    memory = measured.get("memory")  # records before issue 13 have no memory series
    if memory:
        fig, (ax, mem_ax) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH_IN, 8.4))
        plot_memory(memory, mem_ax)
    else:
        fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 4.4))
    for device, enc in measured["encode"].items():
        points = list(zip(enc["sizes"], enc["seconds"], enc["measured"]))
        points.append((wiki, implied[f"encode_hours_{'gpu' if device == 'cuda' else 'cpu'}"] * 3600, False))
        line, = ax.plot([p[0] for p in points], [p[1] for p in points], "--", label=f"encode ({device})")
        for size, seconds, real in points:
            ax.plot(size, seconds, "o", color=line.get_color(), markerfacecolor=line.get_color() if real else "none")
    if "cuda" not in measured["encode"]:  # the GPU figure rests on an assumed FLOP rate
        ax.plot(wiki, implied["encode_hours_gpu"] * 3600, "D", markerfacecolor="none", label="encode (one GPU, assumed)")
    search = measured["search"]
    line, = ax.plot(search["sizes"], search["seconds"], "s-", label=f"flat search, {search['queries']} queries")
    ax.plot([search["sizes"][-1], wiki], [search["seconds"][-1],
            implied["flat_search_seconds_per_query"] * search["queries"]], "s--", color=line.get_color(),
            markerfacecolor="none")
    ax.axvline(wiki, color="grey", lw=0.8, ls=":", label="DPR's Wikipedia (21M passages)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("corpus size (passages)")
    ax.set_ylabel("time (seconds)")
    ax.set_title("Scaling (hollow markers: extrapolated)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


@book_style
def plot_memory(memory: dict[str, Any], ax=None):
    """Measured peak RAM growth of indexing against corpus size: streamed (flat, within the bound the shard size
    sets) and loaded whole first (growing with the corpus). `memory` is the scaling record's measured["memory"]."""
    if ax is None:
        _, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 4.0))
    ax.plot(memory["sizes"], memory["stream_peak_mib"], "o-", label="streamed (encode_stream_to_shards)")
    ax.plot(memory["sizes"], memory["load_peak_mib"], "s--", label="corpus loaded into memory first")
    ax.axhline(memory["bound_mib"], color="grey", lw=0.8, ls=":",
               label=f"bound from the shard size ({memory['shard_size']:,} passages)")
    ax.set_xscale("log")
    ax.set_xlabel("corpus size (GENERATED passages)")
    ax.set_ylabel("peak RAM growth (MiB)")
    ax.set_title("Indexing memory (measured)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
