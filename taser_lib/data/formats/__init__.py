"""Readers for each file format family, one module each, all producing `taser_lib.data.types` objects.

beir (BEIR layout + this project's prepared layout), trec (topics, qrels), dpr (qas csv, psgs_w100.tsv), squad.
DPR's retriever json is in `taser_lib.data.training_examples`. The readers of the datasets only the registry names
(Cranfield, CISI, SciFact, NFCorpus, WikiQA, TrecQA, the QA question sets, MS MARCO) are in
`taser_lib.datasets.formats`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ...errors import FormatError
from ..types import Corpus, Document
from ._common import PathLike, SkipReport
from .beir import iter_beir_corpus, read_beir_corpus
from .dpr import iter_dpr_passages, read_dpr_passages


def _corpus_readers(path: PathLike):
    """(file, loading reader, streaming reader) for a corpus file or a prepared split folder."""
    path = Path(path)
    if path.is_dir():
        path = path / "corpus.jsonl"
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name.endswith(".jsonl"):
        return path, read_beir_corpus, iter_beir_corpus
    if name.endswith(".tsv"):
        return path, read_dpr_passages, iter_dpr_passages
    raise FormatError(path, None, None, "unknown corpus format: expected corpus.jsonl (BEIR), a DPR passages .tsv "
                      "(either optionally .gz), or a prepared dataset folder")


def load_corpus_file(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    """A corpus from a BEIR corpus.jsonl (plain or .gz), a DPR passages tsv (psgs_w100.tsv, plain or .gz), or a
    prepared split folder (its corpus.jsonl)."""
    path, read, _ = _corpus_readers(path)
    return read(path, skip_bad=skip_bad, report=report)


def iter_corpus_file(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None
                     ) -> Iterator[Document]:
    """The documents of a corpus file (the forms `load_corpus_file` reads) streamed in file order, without loading
    the file: for corpora too large for memory (DPR's 21M passages; `retrieval.dense.encode_stream_to_shards`)."""
    path, _, stream = _corpus_readers(path)
    return stream(path, skip_bad=skip_bad, report=report)
