"""DE paper Table 3 as a figure: every (query, candidate) pair of a re-ranking set placed by two models' scores,
each put on [0, 1] over the set (`analyses.disagreement.normalised_scores`), positives and negatives in two
colours, the pairs of a disagreement table circled and numbered as its rows."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from taser_book.analyses.disagreement import normalised_scores
from .style import book_style

POS_COLOR, NEG_COLOR = "tab:orange", "tab:blue"


@book_style
def plot_disagreement_scatter(frame: pd.DataFrame, low: str, high: str, *, pairs: pd.DataFrame | None = None,
                              method: str = "range", title: str | None = None) -> Figure:
    """Scatter of model `high`'s normalised score (y) against model `low`'s (x) for every pair both score (a score
    frame: model, query_id, doc_id, label, score); pairs above the diagonal are placed higher by `high`. `pairs`
    (query_id, doc_id rows, e.g. `disagreements(frame, low, high)`) are circled and numbered 1, 2, ... in order."""
    for name in (low, high):
        if name not in set(frame["model"]):
            raise KeyError(f"model {name!r} is not in the score frame")
    both = frame[frame["model"].isin([low, high])].assign(norm=lambda f: normalised_scores(f, method))
    wide = both.pivot_table(index=["query_id", "doc_id", "label"], columns="model", values="norm").reset_index()
    fig, ax = plt.subplots(figsize=(5.0, 4.6))
    for label, color, name in (("neg", NEG_COLOR, "negative"), ("pos", POS_COLOR, "positive")):
        part = wide[wide["label"] == label]
        ax.scatter(part[low], part[high], s=10, alpha=0.5, color=color, label=f"{name} ({len(part)})", lw=0)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    if pairs is not None and len(pairs):
        keyed = wide.set_index(["query_id", "doc_id"])
        for i, (q, d) in enumerate(zip(pairs["query_id"], pairs["doc_id"]), start=1):
            x, y = keyed.loc[(q, d), low], keyed.loc[(q, d), high]
            ax.scatter([x], [y], s=90, facecolors="none", edgecolors="black", lw=1.0)
            ax.annotate(str(i), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=8)
    scale = "range" if method == "range" else "percentile rank"
    ax.set_xlabel(f"{low} score ({scale}, 0-1)")
    ax.set_ylabel(f"{high} score ({scale}, 0-1)")
    ax.legend(fontsize=8, loc="lower right")
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig
