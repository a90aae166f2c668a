"""Students of other sizes and other testbeds for the re-ranking runs of "In defense of dual-encoders"
(`recipes.reranking_run(..., changes=...)`, typed changes of the run's config: `runs.changes`).

**Sizes** (Tables 4, 5; Figures 1, 3) are written as Turc et al.'s small BERTs are named, `"L-H"`: L transformer
layers, embeddings of size H (the paper's students: 6-768, 6-128, 2-768). Two ways to get one:

- `source="truncate"` (offline; the cpu and gpu profiles): the profile's model (the packaged MiniLM-L6-H384) keeps
  its first L layers (`model.overrides.num_hidden_layers`) and gains a learned linear map of the pooled vector to H
  dimensions (`model.overrides.projection_dim`). This stands in for a smaller BERT: the hidden width inside the
  layers stays the model's own (384), only the depth and the embedding shrink. `L` may be left out (`"-128"`: every
  layer). The rule is `capacity.size_changes`' (the capacity pages' DEs): an L or H equal to the model's own
  gives no change, so "2-384" on MiniLM-L6-H384 is its first 2 layers with no projection, the very run (same
  cache key) that de_capacity trains at that size, and "6-384" is the model itself.
- `source="hub"` (`full`): Turc et al.'s checkpoint `google/bert_uncased_L-{L}_H-{H}_A-{H/64}` (BERT's 64-dim heads),
  which needs the network or a filled Hugging Face cache.
"""

from __future__ import annotations

from taser_lib.errors import ConfigError
from . import capacity, changes
from .changes import Change

SOURCES: tuple[str, ...] = ("truncate", "hub")
TESTBEDS: tuple[str, ...] = ("squad-open", "wikiqa", "trecqa", "msmarco-passage")


def parse_size(size: str) -> tuple[int | None, int]:
    """"6-128" -> (6, 128); "-128" -> (None, 128): layers (None: all) and embedding size."""
    return capacity.parse_layers_dim(size, "student size", all_layers=True)


def hub_name(size: str) -> str:
    """Turc et al.'s checkpoint of this size: google/bert_uncased_L-{L}_H-{H}_A-{H/64}."""
    layers, dim = parse_size(size)
    if layers is None:
        raise ConfigError(f"student size {size!r}: Turc et al.'s BERTs need L (L in 2..12, H in 128, 256, 512, 768)")
    return capacity.turc_checkpoint(layers, dim)


def size_changes(size: str, source: str = "truncate", model: str = "default") -> list[Change]:
    """The changes of a re-ranking student's config that make it a student of `size` (module docstring); `model` is
    the checkpoint the student starts from (its shape decides which changes are needed)."""
    if source not in SOURCES:
        raise ConfigError(f"student size source must be one of {SOURCES}, got {source!r}")
    if source == "hub":
        return [changes.model(name_or_path=hub_name(size))]
    layers, dim = parse_size(size)
    shape = capacity.checkpoint_shape(model)
    return capacity.size_changes(capacity.Size(shape[0] if layers is None else layers, dim), "distill", shape)


def testbed_changes(testbed: str) -> list[Change]:
    """The change that moves a re-ranking run (CA or student) to `testbed`: none for SQuAD-open (the configs' own
    data, so its runs stay the cached runs every notebook shares), `data(dataset=<name>)` for WikiQA / TrecQA (their
    own candidate lists) and for MS MARCO passage (the paper's testbed, `full` only: its files are online, fetched
    with `taser data fetch msmarco-passage` and `msmarco-passage-t1`; see datasets/msmarco.py). The same change
    serves the CA and its students, so on MS MARCO the students distil from the notebook's own CA;
    `teacher(released="msmarco-passage-t1")` (distill configs only) would use the paper's T1 scores instead."""
    if testbed not in TESTBEDS:
        raise ConfigError(f"testbed must be one of {TESTBEDS}, got {testbed!r}")
    return [] if testbed == "squad-open" else [changes.data(dataset=testbed)]
