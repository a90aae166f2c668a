"""The capacity axis of "In defense of dual-encoders" (Figures 1 and 3, Table 2): a model size "L-H" (L layers,
embedding size H) turned into typed changes of the re-ranking training configs (`runs.changes`), for the CA and
for the DE.

    >>> sizes = parse_sizes(["2-64", "6-384"])                        # the profile's `sizes`
    >>> shape = checkpoint_shape("default")                          # (6, 384): MiniLM-L6-H384
    >>> size_changes(sizes[0], "distill", shape)
    [model_overrides(num_hidden_layers=2, projection_dim=64)]
    >>> size_changes(sizes[0], "cross-encoder", shape)
    [model_overrides(num_hidden_layers=2)]
    >>> size_changes(sizes[1], "distill", shape)                     # the checkpoint itself: no change at all
    []

A size names its model in one of two ways:

- **On the profile's model** (a string "L-H", the smoke and cpu profiles): the DE keeps the checkpoint's first L
  layers (`model.overrides.num_hidden_layers`) and maps its pooled vector to H dimensions with a learned linear
  projection (`model.overrides.projection_dim`), a stand-in for Turc et al.'s small BERTs (not available offline).
  An L or H equal to the checkpoint's own gives no change, so the size that is the checkpoint itself is the very
  run (same cache key) that every other notebook trains with the profile's model. An H equal to the hidden size
  thus means "no projection", not an identity-initialised one.
- **A checkpoint of that size** (a mapping `{size: "2-128", checkpoint: google/bert_uncased_L-2_H-128_A-2}`, the
  full profile; `label: bert-base` names a row otherwise than by its size): the run starts from that checkpoint
  (`model.name_or_path`), for the CA as for the DE, as the paper trains both from each small BERT.
  `turc_checkpoint(L, H)` gives the hub name of Turc et al.'s uncased models (A = H / 64 heads).

The CA's capacity axis is its depth alone: a projection before the CA's linear scoring head is one more linear map
(the head of a projected [CLS] is a head on the unprojected one), so on the profile's model the CA of "6-64" and
of "6-384" is the same run. With checkpoint sizes the CA changes with H too (a different BERT).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from taser_lib.errors import ConfigError
from . import changes
from .changes import Change
from .run_tables import train_test_rows

KINDS = ("cross-encoder", "distill")
TURC = "google/bert_uncased_L-{layers}_H-{hidden}_A-{heads}"
_SIZE = re.compile(r"^\s*(\d*)\s*-\s*(\d+)\s*$")
_ENTRY_KEYS = ("size", "checkpoint", "label")


@dataclass(frozen=True)
class Size:
    """One point of the capacity axis: `layers` transformer layers and an embedding of `dim`; `checkpoint` a model of
    exactly that shape (None: the profile's model cut and projected); `label` how tables name it."""

    layers: int
    dim: int
    checkpoint: str | None = None
    label: str = ""

    def __post_init__(self):
        if self.layers < 1 or self.dim < 1:
            raise ConfigError(f"a size needs at least 1 layer and 1 dimension, got {self.layers}-{self.dim}")
        if not self.label:
            object.__setattr__(self, "label", f"{self.layers}-{self.dim}")

    @property
    def name(self) -> str:
        """"L-H" whatever the label."""
        return f"{self.layers}-{self.dim}"


def turc_checkpoint(layers: int, hidden: int) -> str:
    """The hub name of Turc et al.'s uncased BERT with `layers` layers and hidden size `hidden` (heads = hidden/64),
    e.g. google/bert_uncased_L-6_H-768_A-12 (released: L in 2, 4, 6, 8, 10, 12 and H in 128, 256, 512, 768)."""
    if hidden % 64:
        raise ConfigError(f"Turc et al.'s BERTs have a hidden size that is a multiple of 64, got {hidden}")
    return TURC.format(layers=layers, hidden=hidden, heads=hidden // 64)


def parse_layers_dim(text: str, where: str = "size", *, all_layers: bool = False) -> tuple[int | None, int]:
    """"6-128" -> (6, 128): layers and embedding size; with `all_layers`, "-128" -> (None, 128) (every layer of the
    model). The one reader of "L-H" (also `students.parse_size`)."""
    match = _SIZE.match(str(text))
    if not match or (not match.group(1) and not all_layers):
        shape = "'L-H' or '-H'" if all_layers else "'L-H'"
        raise ConfigError(f"{where}: a size is {shape} (layers-embedding size, e.g. '6-384'), got {text!r}")
    layers = int(match.group(1)) if match.group(1) else None
    dim = int(match.group(2))
    if (layers is not None and layers < 1) or dim < 1:
        raise ConfigError(f"{where}: a size needs at least 1 layer and 1 dimension, got {text!r}")
    return layers, dim


def _parse_text(text: str, where: str) -> tuple[int, int]:
    layers, dim = parse_layers_dim(text, where)
    assert layers is not None
    return layers, dim


def parse_size(entry: str | Mapping[str, Any], where: str = "sizes") -> Size:
    """A size from "L-H" or {size: "L-H", checkpoint: name[, label: text]} (see the module docstring)."""
    try:
        return _parse_size(entry, where)
    except ConfigError as err:
        message = str(err)
        raise ConfigError(message if message.startswith(where) else f"{where}: {message}") from None


def _parse_size(entry: str | Mapping[str, Any], where: str) -> Size:
    if isinstance(entry, str):
        return Size(*_parse_text(entry, where))
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected 'L-H' or {{size: 'L-H', checkpoint: ...}}, got {entry!r}")
    unknown = sorted(set(entry) - set(_ENTRY_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (a size entry has {', '.join(_ENTRY_KEYS)})")
    if "size" not in entry:
        raise ConfigError(f"{where}: a size entry needs 'size' ('L-H'), got {dict(entry)}")
    layers, dim = _parse_text(entry["size"], f"{where}.size")
    checkpoint = entry.get("checkpoint")
    if checkpoint is not None and (not isinstance(checkpoint, str) or not checkpoint.strip()):
        raise ConfigError(f"{where}.checkpoint: expected a model name or folder, got {checkpoint!r}")
    return Size(layers, dim, checkpoint.strip() if checkpoint else None, str(entry.get("label") or ""))


def parse_sizes(entries: Iterable[str | Mapping[str, Any]]) -> list[Size]:
    """Sizes in the given order; an empty list or a repeated label is an error (a label names one row of a table)."""
    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    sizes = [parse_size(e, f"sizes[{i}]") for i, e in enumerate(entries)]
    if not sizes:
        raise ConfigError("sizes: give at least one size")
    labels = [s.label for s in sizes]
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise ConfigError(f"sizes: label {repeated[0]!r} appears more than once")
    return sizes


def checkpoint_shape(name_or_path: str) -> tuple[int, int]:
    """(num_hidden_layers, hidden_size) of a checkpoint's config.json ("default", a folder or a cached hub name)."""
    from taser_lib.models.weights import resolve_checkpoint

    path = resolve_checkpoint(name_or_path) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        return int(config["num_hidden_layers"]), int(config["hidden_size"])
    except (OSError, ValueError, KeyError) as err:
        raise ConfigError(f"{path}: cannot read num_hidden_layers and hidden_size ({err})") from None


def size_changes(size: Size, kind: str, shape: tuple[int, int]) -> list[Change]:
    """The changes that give a `kind` run (cross-encoder: the CA; distill: a DE student) this size, starting from a
    checkpoint of `shape` (its (layers, hidden size), `checkpoint_shape`) unless the size names its own. None when
    the size is the checkpoint's own, so that run is the cached run every other page shares."""
    if kind not in KINDS:
        raise ConfigError(f"size_changes: kind must be one of {KINDS}, got {kind!r}")
    if size.checkpoint is not None:
        return [changes.model(name_or_path=size.checkpoint)]
    layers, hidden = shape
    if size.layers > layers:
        raise ConfigError(f"size {size.label}: the model has {layers} layers, cannot keep {size.layers}")
    settings = {} if size.layers == layers else {"num_hidden_layers": size.layers}
    if kind == "distill" and size.dim != hidden:
        settings["projection_dim"] = size.dim
    return [changes.model_overrides(**settings)] if settings else []


def largest(sizes: Sequence[Size], label: str | None = None) -> Size:
    """The size that stands for the paper's 6-768 (where DE should match CA on train): the one labelled `label`,
    else the deepest, the widest among those (the last listed on a tie). At `full` name it ("6-768"): BERT-base
    (12 layers) is deeper but is a row of Table 2, not the point of Figure 1."""
    if not sizes:
        raise ConfigError("largest: no sizes")
    if label is not None:
        found = [s for s in sizes if s.label == str(label)]
        if not found:
            raise ConfigError(f"largest_size {label!r} is not one of the sizes {[s.label for s in sizes]}")
        return found[0]
    return max(reversed(list(sizes)), key=lambda s: (s.layers, s.dim))


def capacity_table(runs: Mapping[str, Mapping[tuple[str, int], Any]], sizes: Sequence[Size], *,
                   largest_size: Size | None = None, metric: str = "MRR@10") -> pd.DataFrame:
    """The `mrr` table of Figures 1 and 3 / Table 2 from finished runs: `runs` maps a model name (ca, de, dist) to
    {(size label, seed): CachedRun}; one train and one test row per run (`run_tables.train_test_rows`: the selected
    model on the training slice and on the test split). Columns model, size, layers, dim, split, seed, value, metric,
    run, largest (True for `largest_size`, default `largest(sizes)`). A run shared by several sizes (the CA of one
    depth) gives the same numbers in each of their rows, and the same `run`."""
    by_label = {s.label: s for s in sizes}
    top = largest_size or largest(sizes)
    rows = []
    for model, by_key in runs.items():
        for (label, seed), run in by_key.items():
            if label not in by_label:
                raise ConfigError(f"capacity_table: {model} run for size {label!r}, which is not one of "
                                  f"{list(by_label)}")
            size = by_label[label]
            rows += train_test_rows(run, metric, model=model, size=label, layers=size.layers, dim=size.dim,
                                    seed=seed, largest=label == top.label)
    columns = ["model", "size", "layers", "dim", "split", "seed", "value", "metric", "run", "largest"]
    return pd.DataFrame(rows, columns=columns)


# --- Table 6: K documents per query ------------------------------------------------------------------------------

def documents_changes(k: int, candidates: int, teacher: Any) -> list[Change]:
    """The changes of a DE student trained on K documents per query (Table 6: `training.group_size`) out of
    `candidates` per query (`data.candidates`; `data.bm25_depth` deepened to it when the teacher run's is
    shallower), distilled from `teacher` (the finished CA run, a `cache.CachedRun`).

    Give every K of one sweep the same `candidates` (the largest K): the candidate lists are then the same for every
    K, the test split's included, so every student re-ranks the same test candidates and only the supervision
    changes -- the teacher's top K of them (a one-hot student: a positive and K - 1 sampled negatives of them). On
    SQuAD-open and MS MARCO (whose training lists are its top candidates by T1 score), a `data.candidates` other
    than the teacher run's means the teacher scores those lists anew; they are
    then cached in `teacher_scores-candidates-<n>` beside its model rather than replacing the `teacher_scores` that
    its own lists use (`teacher.cache` is not part of a run's key). WikiQA and TrecQA keep their own lists whatever
    `data.candidates` says: there K only selects within them."""
    if k < 2:
        raise ConfigError(f"K must be at least 2 (a positive and a negative), got {k}")
    if k > candidates:
        raise ConfigError(f"K = {k} exceeds data.candidates = {candidates}: no query would have K documents")
    from taser_lib.training.reranking import CANDIDATE_CAPPED  # the training data layer; not needed to import this module
    data = teacher.config.data
    out = [changes.training(group_size=k),
           changes.data(candidates=candidates, bm25_depth=max(int(data.bm25_depth), candidates))]
    if data.dataset in CANDIDATE_CAPPED and candidates != data.candidates:
        out.append(changes.teacher(cache=str(Path(teacher.model_path).parent
                                             / f"teacher_scores-candidates-{candidates}")))
    return out
