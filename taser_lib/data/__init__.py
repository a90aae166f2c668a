"""Data the core reads: the types, the readers of the generic formats (BEIR, DPR, TREC, SQuAD), DPR's training json,
the prepared SQuAD-open folder, and `resolve_dataset` (a prepared or BEIR folder, a BEIR zip, or a
registered name). The registry of named datasets and their fetching are the optional `taser_lib.datasets`."""

from ..io import sha256_file
from .formats._common import SkipReport
from .resolve import DatasetSpec, parse_dataset_spec, resolve_dataset
from .squad_open import SquadOpen, build_squad_open, load_squad_open, write_squad_open
from .training_examples import (TrainingExample, iter_dpr_retriever_json, qrels_training_examples,
                                read_dpr_retriever_json, write_dpr_retriever_json)
from .types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query, Run

__all__ = ["Candidates", "Corpus", "Dataset", "Document", "Qrels", "Queries", "Query", "Run",
           "DatasetSpec", "SkipReport", "SquadOpen", "TrainingExample",
           "build_squad_open", "iter_dpr_retriever_json", "load_squad_open", "parse_dataset_spec",
           "qrels_training_examples", "read_dpr_retriever_json", "resolve_dataset", "sha256_file",
           "write_dpr_retriever_json", "write_squad_open"]
