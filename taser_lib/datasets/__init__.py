"""The dataset registry: named datasets, where their files come from, how each is read and prepared.

An optional subpackage above the core (`taser_lib.data` reads folders and files, `resolve_dataset` among them; this
package knows the names):

    >>> from taser_lib import datasets
    >>> datasets.load_dataset("scifact", "test")             # fetched from the offline mirror, read, canonical
    >>> datasets.load_evaluation_set("squad-open:test")      # prepared first when it is a derived dataset
    >>> datasets.prepare("squad-open")                       # what `taser data prepare squad-open` writes

- `registry`: the entries (URL, sha256, license, citation, loader), `fetch`, `load_dataset`, `prepare` by name;
- `fetch`: where the files live (`resolve_data_dir`, `resolve_mirror`) and how they get there, verified;
- `ready`: `prepare` with squad-open's mined hard negatives, `ensure_prepared`, `load_evaluation_set`;
- `streamed` (imported when first used): retrieval from a corpus too large to load (DPR's 21M passages);
- `msmarco` (imported when first used): the MS MARCO passage re-ranking testbed and its released T1 teacher scores;
- `formats`: the readers of the datasets only the registry names (Cranfield/CISI, SciFact, NFCorpus, WikiQA/TrecQA,
  the QA question sets, MS MARCO's files); the generic ones (BEIR, DPR, TREC, SQuAD) are the core's.

Importing it installs it as `taser_lib.data.named.registry`, the one door through which a core module that takes a
dataset name in a config (`data.dataset: wikiqa`) reaches it.
"""

from __future__ import annotations

import importlib
import sys

from ..data.named import install
from .ready import ensure_prepared, load_evaluation_set, prepare
from .registry import (REGISTRY, DatasetEntry, fetch, get, load_dataset, local_status, names, no_negatives,
                       prepared_dir, training_examples, verify_prepared)
from ..data.resolve import DatasetSpec, parse_dataset_spec, registry_name, resolve_dataset

LAZY = ("msmarco", "streamed")  # submodules that load torch or faiss: imported on first use

__all__ = ["DatasetEntry", "DatasetSpec", "REGISTRY", "ensure_prepared", "fetch", "get", "load_dataset",
           "load_evaluation_set", "local_status", "names", "no_negatives", "parse_dataset_spec", "prepare",
           "prepared_dir", "registry_name", "resolve_dataset", "training_examples", "verify_prepared"]


def __getattr__(name: str):
    if name in LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


install(sys.modules[__name__])
