"""Datasets: registry, fetching, loaders and the SQuAD-open builder, all producing `types` objects;
`resolve_dataset` reads any dataset spec (registered NAME[:SPLIT], prepared folder, BEIR folder or zip)."""

from .fetch import DataFile, resolve_data_dir, resolve_mirror, sha256_file
from .formats._common import SkipReport
from .registry import (REGISTRY, DatasetEntry, fetch, get, load_dataset, local_status, names, no_negatives, prepare,
                       prepared_dir, training_examples)
from .resolve import DatasetSpec, parse_dataset_spec, resolve_dataset
from .squad_open import SquadOpen, build_squad_open, load_squad_open, write_squad_open
from .training_examples import (TrainingExample, iter_dpr_retriever_json, qrels_training_examples,
                                read_dpr_retriever_json, write_dpr_retriever_json)
from .types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query, Run

__all__ = ["Candidates", "Corpus", "Dataset", "Document", "Qrels", "Queries", "Query", "Run",
           "DataFile", "DatasetEntry", "DatasetSpec", "REGISTRY", "SkipReport", "SquadOpen", "TrainingExample",
           "build_squad_open", "fetch", "get", "iter_dpr_retriever_json", "load_dataset", "load_squad_open",
           "local_status", "names", "no_negatives", "parse_dataset_spec", "prepare", "prepared_dir",
           "qrels_training_examples", "read_dpr_retriever_json", "resolve_data_dir", "resolve_dataset",
           "resolve_mirror", "sha256_file", "training_examples", "write_dpr_retriever_json", "write_squad_open"]
