"""Datasets: registry, fetching, loaders and the SQuAD-open builder, all producing `types` objects."""

from .fetch import DataFile, resolve_data_dir, resolve_mirror, sha256_file
from .formats._common import SkipReport
from .registry import (REGISTRY, DatasetEntry, fetch, get, load_dataset, local_status, names, prepare, prepared_dir,
                       training_examples)
from .squad_open import SquadOpen, build_squad_open, load_squad_open, write_squad_open
from .training_examples import (TrainingExample, iter_dpr_retriever_json, read_dpr_retriever_json,
                                write_dpr_retriever_json)
from .types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query, Run

__all__ = ["Candidates", "Corpus", "Dataset", "Document", "Qrels", "Queries", "Query", "Run",
           "DataFile", "DatasetEntry", "REGISTRY", "SkipReport", "SquadOpen", "TrainingExample",
           "build_squad_open", "fetch", "get", "iter_dpr_retriever_json", "load_dataset", "load_squad_open",
           "local_status", "names", "prepare", "prepared_dir", "read_dpr_retriever_json", "resolve_data_dir",
           "resolve_mirror", "sha256_file", "training_examples", "write_dpr_retriever_json", "write_squad_open"]
