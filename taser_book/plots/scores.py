"""Figures of "In defense of dual-encoders": score densities of positives and negatives (Figs. 2, 5, 6, 7),
normalised-margin histograms (Fig. 2 right, Fig. 8), train/test metric against model size with the spread over
seeds (Figs. 1, 3) and learning curves (Fig. 4). Each function takes a tidy frame and returns the Figure.

    >>> frame = score_frames(test_set, {"CA": ca, "DE": de, "DIST": dist})      # taser_lib.evaluation
    >>> plot_score_densities(frame)                          # Fig. 2: one panel per model, centred
    >>> plot_score_densities(frame, centred=False)           # Fig. 6
    >>> plot_score_densities(frames_by_stage, row="stage")   # Fig. 7: a row per value of `stage`
    >>> plot_margin_histograms(normalised_margins(frame))    # Fig. 2 right / Fig. 8, shared axes
    >>> plot_size_sweep(mrr, x="embedding_dim")              # columns model, embedding_dim, split, value[, seed]
    >>> plot_learning_curves({"CA": ca_curve, "DE": de_curve}, metric="MRR@10")   # curve.csv frames, or long
"""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy import stats

from taser_book.analyses.scores import centre_scores
from .style import COLUMN_WIDTH_IN, book_style

POS_COLOR, NEG_COLOR = "tab:orange", "tab:blue"
SPLIT_STYLES = {"train": "--", "dev": "-", "test": "-"}


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise KeyError(f"{what}: no column(s) {missing}; the frame has {list(frame.columns)}")


def _order(values: pd.Series, chosen: Sequence | None) -> list:
    present = list(dict.fromkeys(values))
    if chosen is None:
        return present
    unknown = [v for v in chosen if v not in present]
    if unknown:
        raise ValueError(f"not in the frame: {unknown}; it has {present}")
    return list(chosen)


def _finish(fig: Figure, title: str | None) -> Figure:
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


# --- score densities -------------------------------------------------------------------------------------------------

@book_style
def plot_score_densities(frame: pd.DataFrame, *, models: Sequence[str] | None = None, centred: bool = True,
                         row: str | None = None, rows: Sequence | None = None, bins: int = 50, kde: bool = False,
                         sharex: bool | None = None, title: str | None = None) -> Figure:
    """Densities of the positive and negative pairs' scores, one panel per model (a score frame of
    `analyses.scores`: model, query_id, label, score). `centred` shifts each panel's scores to mean zero (Fig. 2;
    False: Fig. 6); with `row` (a column such as "stage" or "split") there is one row of panels per value (Fig. 7),
    each panel centred on its own. `kde` adds Gaussian kernel density lines. `sharex` defaults to `centred` (one
    x-axis for centred panels, as Fig. 2; each its own range uncentred, as Fig. 6)."""
    _require(frame, ["model", "label", "score", *([row] if row else [])], "plot_score_densities")
    models = _order(frame["model"], models)
    row_values = _order(frame[row], rows) if row else [None]
    if centred:
        frame = centre_scores(frame, by=["model", row] if row else ["model"])
    sharex = centred if sharex is None else sharex
    fig, axes = plt.subplots(len(row_values), len(models), figsize=(COLUMN_WIDTH_IN, 2.6 * len(row_values)),
                             sharex=sharex, squeeze=False)
    for r, value in enumerate(row_values):
        part = frame if row is None else frame[frame[row] == value]
        for c, model in enumerate(models):
            ax = axes[r, c]
            scores = part[part["model"] == model]
            edges = np.histogram_bin_edges(scores["score"], bins=bins) if len(scores) else bins
            for label, color, name in (("neg", NEG_COLOR, "negatives"), ("pos", POS_COLOR, "positives")):
                values = scores.loc[scores["label"] == label, "score"].to_numpy(np.float64)
                if not len(values):
                    continue
                ax.hist(values, bins=edges, density=True, alpha=0.45, color=color, label=name)
                if kde and len(values) > 1 and values.std() > 0:
                    grid = np.linspace(edges[0], edges[-1], 200)
                    ax.plot(grid, stats.gaussian_kde(values)(grid), color=color, lw=1.2)
            ax.set_xlabel(f"{model} score" + (" (centred)" if centred else ""))
            ax.set_title(model if row is None else f"{model}, {row} = {value}")
            if c == 0:
                ax.set_ylabel("density")
    axes[0, -1].legend(fontsize=8)
    return _finish(fig, title)


# --- margins ---------------------------------------------------------------------------------------------------------

@book_style
def plot_margin_histograms(margins: pd.DataFrame, *, models: Sequence[str] | None = None,
                           column: str = "normalised_margin", bins: int = 40,
                           value_range: tuple[float, float] | None = None, medians: bool = True,
                           title: str | None = None) -> Figure:
    """Histograms (densities, as outlines) of the normalised margins of several models on one pair of axes
    (`analyses.scores.normalised_margins`: model, normalised_margin), on common bins over `value_range` (default:
    the margins' own range), with each model's median as a dashed line when `medians`."""
    _require(margins, ["model", column], "plot_margin_histograms")
    models = _order(margins["model"], models)
    values = margins[column].dropna().to_numpy(np.float64)
    if value_range is None:
        value_range = (float(values.min()), float(values.max())) if len(values) else (-1.0, 1.0)
    edges = np.linspace(*value_range, bins + 1)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN * 0.8, 3.6))
    for i, model in enumerate(models):
        mine = margins.loc[margins["model"] == model, column].dropna().to_numpy(np.float64)
        if not len(mine):
            continue
        color = colors[i % len(colors)]
        ax.hist(mine, bins=edges, density=True, histtype="step", lw=1.6, color=color, label=model)
        if medians:
            ax.axvline(float(np.median(mine)), color=color, ls="--", lw=1)
    ax.set_xlabel("normalised margin" if column == "normalised_margin" else column)
    ax.set_ylabel("density")
    ax.legend()
    return _finish(fig, title)


# --- mean and spread over seeds --------------------------------------------------------------------------------------

def _mean_spread(frame: pd.DataFrame, x: str, value: str) -> pd.DataFrame:
    """Per x: mean, sample std (0 for one row) and count of `value`."""
    out = frame.groupby(x, sort=True)[value].agg(["mean", "std", "count"]).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


def _draw(ax, xs, stat: pd.DataFrame, spread: str, color, style: str, label: str, marker: str | None = "o") -> None:
    ax.plot(xs, stat["mean"], style, color=color, marker=marker, ms=4, label=label)
    if (stat["count"] > 1).any():
        if spread == "band":
            ax.fill_between(xs, stat["mean"] - stat["std"], stat["mean"] + stat["std"], color=color, alpha=0.2,
                            lw=0)
        else:
            ax.errorbar(xs, stat["mean"], yerr=stat["std"], fmt="none", ecolor=color, capsize=3)


SPREADS = ("band", "bars")


def _spaced_labels(ticks: Sequence[float], log_x: bool, min_gap: float = 0.14) -> list[str]:
    """A label for each tick, left to right, blank where it would sit closer than `min_gap` of the axis's range to
    the last labelled one (512 and 768 on a log axis, 0.9 and 0.99 on a linear one): a tick mark stays."""
    where = np.log2(np.asarray(ticks, dtype=float)) if log_x else np.asarray(ticks, dtype=float)
    span = float(where.max() - where.min()) or 1.0
    labels, last = [], None
    for tick, at in zip(ticks, where):
        if last is None or (at - last) / span >= min_gap:
            labels.append(f"{tick:g}")
            last = at
        else:
            labels.append("")
    return labels


@book_style
def plot_size_sweep(table: pd.DataFrame, *, x: str = "size", value: str = "value", panel: str = "split",
                    hue: str = "model", row: str | None = None, models: Sequence[str] | None = None,
                    panels: Sequence | None = None, spread: str = "band", log_x: bool = False,
                    ylabel: str = "MRR@10", xlabel: str | None = None, title: str | None = None,
                    paper: pd.DataFrame | None = None, paper_label: str = "paper") -> Figure:
    """Figs. 1 and 3: `value` against `x` (e.g. embedding size), one panel per value of `panel` (train, test), one
    line per `hue` (CA, DE, DIST); with several rows per point (seeds) the line is their mean and `spread` their
    standard deviation, as a band or error bars. `row` adds a row of panels per value (e.g. depth). A numeric `x`
    is plotted to scale (`log_x`: base 2), any other as ordered categories.

    `paper`: the paper's numbers in the same columns, drawn dashed with hollow markers in the colour of the same
    `hue`, on each panel's right-hand axis (the paper's dataset sits at another level than ours: compare the trends,
    not the heights); `paper_label` names them in the legend and on that axis (e.g. "paper, MS MARCO dev")."""
    _require(table, [x, value, panel, hue, *([row] if row else [])], "plot_size_sweep")
    if paper is not None:
        _require(paper, [x, value, panel, hue, *([row] if row else [])], "plot_size_sweep (paper)")
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {SPREADS}, got {spread!r}")
    hues = _order(table[hue], models)
    if paper is not None:  # the paper's own lines (a model we did not train) get colours after ours
        paper = paper[paper[panel].isin(_order(table[panel], panels))]
        hues += [h for h in dict.fromkeys(paper[hue]) if h not in hues]
    cols = _order(table[panel], panels)
    row_values = list(dict.fromkeys(table[row])) if row else [None]
    numeric = pd.api.types.is_numeric_dtype(table[x])
    both = table[x] if paper is None else pd.concat([table[x], paper[x]], ignore_index=True)
    categories = list(dict.fromkeys(both)) if not numeric else None
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    legend_in = 0.0 if paper is None or not len(paper) else 0.25 + 0.2 * len(hues)  # rows of a 2-column legend
    fig, axes = plt.subplots(len(row_values), len(cols), squeeze=False,
                             figsize=(COLUMN_WIDTH_IN, 3.0 * len(row_values) + legend_in))
    for r, rv in enumerate(row_values):
        part = table if row is None else table[table[row] == rv]
        for c, cv in enumerate(cols):
            ax = axes[r, c]
            for i, h in enumerate(hues):
                mine = part[(part[panel] == cv) & (part[hue] == h)]
                if not len(mine):
                    continue
                if numeric:
                    stat = _mean_spread(mine, x, value)
                    xs = stat[x].to_numpy(np.float64)
                else:
                    stat = _mean_spread(mine.assign(_pos=mine[x].map(categories.index)), "_pos", value)
                    xs = stat["_pos"].to_numpy(np.float64)
                _draw(ax, xs, stat, spread, colors[i % len(colors)], "-", str(h))
            theirs = None if paper is None else paper[(paper[panel] == cv)
                                                      & ((paper[row] == rv) if row else True)]
            if theirs is not None and len(theirs):
                right = ax.twinx()
                for i, h in enumerate(hues):
                    line = theirs[theirs[hue] == h].sort_values(x)
                    if len(line):
                        xs = (line[x] if numeric else line[x].map(categories.index)).to_numpy(np.float64)
                        right.plot(xs, line[value].to_numpy(np.float64), "--", color=colors[i % len(colors)],
                                   marker="o", ms=4, mfc="none", label=f"{h} ({paper_label})")
                right.set_ylabel(paper_label)
                right.spines["right"].set_visible(True)
            if numeric and log_x:
                ax.set_xscale("log", base=2)
            if not numeric:
                ax.set_xticks(range(len(categories)), [str(v) for v in categories])
            if numeric:
                ticks = sorted(set(both))
                ax.set_xticks(ticks, _spaced_labels(ticks, log_x))
            ax.set_xlabel(xlabel or x)
            ax.set_ylabel(f"{ylabel} {cv}")
            ax.set_title(f"{cv}" if row is None else f"{cv}, {row} = {rv}")
    if legend_in:  # ours solid, the paper's dashed and hollow, in one legend under the panels
        seen = {}
        for panel_ax in fig.axes:
            for handle, label in zip(*panel_ax.get_legend_handles_labels()):
                seen.setdefault(label, handle)
        fig.legend(list(seen.values()), list(seen), fontsize=8, loc="lower center", ncol=2, frameon=False)
        if title:
            fig.suptitle(title)
        fig.tight_layout(rect=(0, (0.1 + 0.2 * math.ceil(len(seen) / 2)) / fig.get_figheight(), 1, 1))
        return fig
    axes[0, -1].legend(fontsize=8)
    return _finish(fig, title)


# --- learning curves -------------------------------------------------------------------------------------------------

def learning_curve_table(curves: Mapping[str, pd.DataFrame], metric: str = "MRR@10",
                         splits: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Long table (model, step, split, value[, seed]) from the training loop's curve frames (`curve.csv`: step,
    `train/<metric>`, `dev/<metric>`, ...), one per model. `splits` maps a column prefix to the split name shown
    (default {"train": "train", "dev": "test"}: the dev set the loop evaluates is the held-out curve; rename as the
    page needs). A frame may carry a `seed` column (several runs stacked)."""
    splits = dict(splits or {"train": "train", "dev": "test"})
    parts = []
    for model, curve in curves.items():
        _require(curve, ["step"], f"learning curve of {model!r}")
        found = False
        for prefix, name in splits.items():
            column = f"{prefix}/{metric}"
            if column in curve.columns:
                found = True
                keep = ["step", column] + (["seed"] if "seed" in curve.columns else [])
                part = curve[keep].dropna(subset=[column]).rename(columns={column: "value"})
                parts.append(part.assign(model=model, split=name))
        if not found:
            raise KeyError(f"learning curve of {model!r} has no column {[f'{p}/{metric}' for p in splits]}; "
                           f"it has {list(curve.columns)}")
    out = pd.concat(parts, ignore_index=True)
    return out[["model", "step", "split", "value", *(["seed"] if "seed" in out.columns else [])]]


@book_style
def plot_learning_curves(curves: pd.DataFrame | Mapping[str, pd.DataFrame], *, metric: str = "MRR@10",
                         models: Sequence[str] | None = None, spread: str = "band", title: str | None = None
                         ) -> Figure:
    """Fig. 4: `metric` over training steps, one colour per model and one line style per split (train dashed,
    test solid), on one pair of axes. `curves` is a long table (model, step, split, value[, seed]) or {model:
    curve.csv frame} (see `learning_curve_table`); several seeds give the mean line and a standard-deviation
    band (or error bars)."""
    table = learning_curve_table(curves, metric) if isinstance(curves, Mapping) else curves
    _require(table, ["model", "step", "split", "value"], "plot_learning_curves")
    if spread not in SPREADS:
        raise ValueError(f"spread must be one of {SPREADS}, got {spread!r}")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH_IN, 3.8))
    for i, model in enumerate(_order(table["model"], models)):
        for split in dict.fromkeys(table.loc[table["model"] == model, "split"]):
            mine = table[(table["model"] == model) & (table["split"] == split)]
            stat = _mean_spread(mine, "step", "value")
            _draw(ax, stat["step"].to_numpy(np.float64), stat, spread, colors[i % len(colors)],
                  SPLIT_STYLES.get(split, ":"), f"{model} {split}", marker=None)
    ax.set_xlabel("training step")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8, ncols=2)
    return _finish(fig, title)
