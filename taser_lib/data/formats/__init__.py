"""Readers for each file format family, one module each, all producing `taser_lib.data.types` objects.

beir (BEIR layout + this project's prepared layout), trec (topics, qrels), glasgow (Cranfield, CISI), scifact,
nfcorpus, answer_selection (WikiQA, TrecQA), qa (NQ-open, WebQuestions, CuratedTREC, EntityQuestions),
dpr (qas csv, psgs_w100.tsv), squad. DPR's retriever json is in `taser_lib.data.training_examples`.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import FormatError
from ..types import Corpus
from ._common import PathLike, SkipReport
from .beir import read_beir_corpus
from .dpr import read_dpr_passages


def load_corpus_file(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    """A corpus from a BEIR corpus.jsonl (plain or .gz), a DPR passages tsv (psgs_w100.tsv, plain or .gz), or a
    prepared split folder (its corpus.jsonl)."""
    path = Path(path)
    if path.is_dir():
        path = path / "corpus.jsonl"
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    if name.endswith(".jsonl"):
        return read_beir_corpus(path, skip_bad=skip_bad, report=report)
    if name.endswith(".tsv"):
        return read_dpr_passages(path, skip_bad=skip_bad, report=report)
    raise FormatError(path, None, None, "unknown corpus format: expected corpus.jsonl (BEIR), a DPR passages .tsv "
                      "(either optionally .gz), or a prepared dataset folder")
