"""Datasets ready to retrieve from, the same for every caller: `taser data prepare`, `taser index | search |
evaluate`, `taser train` and the notebooks all come through here.

- `prepare(name)`: the data layer's prepare plus what only this layer can do, mining squad-open's BM25 hard
  negatives. The CLI and `ensure_prepared` both call it with the same defaults, so their folders are identical.
- `load_evaluation_set(spec, split, ...)`: any dataset spec (`taser_lib.datasets.resolve`: a registered NAME[:SPLIT],
  a prepared folder, a BEIR folder or zip), prepared first when it is a derived one that is not, with a QA corpus
  attached to a question set that has none, and a seeded slice for small profiles.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .registry import get, load_dataset, no_negatives, prepared_dir
from .registry import prepare as prepare_data
from ..data.resolve import parse_dataset_spec, resolve_dataset
from .slicing import slice_dataset
from ..data.squad_open import HARD_NEGATIVES
from ..data.types import Dataset
from ..retrieval.negatives import squad_open_miner

PathLike = str | os.PathLike


def prepare(name: str, splits: list[str] | None = None, *, data_dir: PathLike | None = None,
            mirror: PathLike | None = None, seed: int | None = None, hard_negatives: int = HARD_NEGATIVES,
            progress: bool = True) -> dict[str, Any]:
    """`taser_lib.datasets.registry.prepare`, with squad-open's `hard_negatives` BM25 hard negatives per training
    question mined here (0: none). Returns the data layer's summary."""
    if hard_negatives < 0:
        raise ValueError(f"hard_negatives must be >= 0, got {hard_negatives}")
    miner = None
    if name == "squad-open":
        miner = squad_open_miner(hard_negatives, progress=progress) if hard_negatives else no_negatives
    return prepare_data(name, splits, data_dir=data_dir, mirror=mirror, seed=seed, negatives=miner)


def ensure_prepared(name: str, *, data_dir: PathLike | None = None, mirror: PathLike | None = None) -> Path:
    """The prepared folder of a derived dataset (squad-open), built now with `prepare`'s defaults (the same folder
    `taser data prepare NAME` writes) if it is missing. An existing copy is never rebuilt here."""
    folder = prepared_dir(name, data_dir)
    if not (folder / "meta.json").is_file():
        prepare(name, data_dir=data_dir, mirror=mirror, progress=False)
    return folder


def load_evaluation_set(spec: PathLike, split: str | None = None, *, n_queries: int | None = None,
                        n_docs: int | None = None, seed: int = 0, qa_corpus: str | None = None,
                        data_dir: PathLike | None = None, mirror: PathLike | None = None) -> Dataset:
    """One split of the dataset `spec` names, ready to retrieve from and score:
    - a derived registered dataset (squad-open) is prepared first if it is not (`ensure_prepared`);
    - a question set without a corpus (nq-open, ...) retrieves from `qa_corpus`'s (a registered name, e.g.
      "dpr-wiki"), when given;
    - `n_queries` / `n_docs` cut a seeded slice that keeps every judged document of the kept queries
      (`taser_lib.datasets.slicing.slice_dataset`); None keeps all.
    """
    parsed = parse_dataset_spec(spec, split)
    if parsed.kind == "registry" and get(parsed.target).derived_from:
        ensure_prepared(parsed.target, data_dir=data_dir, mirror=mirror)
    dataset = resolve_dataset(spec, split, data_dir=data_dir, mirror=mirror)
    if not dataset.corpus and qa_corpus:
        dataset.corpus = load_dataset(qa_corpus, data_dir=data_dir, mirror=mirror).corpus
    if n_queries is None and n_docs is None:
        return dataset
    return slice_dataset(dataset, n_queries, n_docs, seed)
