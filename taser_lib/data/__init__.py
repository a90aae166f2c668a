"""Datasets: registry, fetching, loaders and the SQuAD-open builder, all producing `types` objects."""

from .types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query, Run

__all__ = ["Candidates", "Corpus", "Dataset", "Document", "Qrels", "Queries", "Query", "Run"]
