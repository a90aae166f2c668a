"""SciFact (Wadden et al., 2020) from the CSV export of allenai/scifact (one zip: corpus_train.csv,
claims_{train,validation,test}.csv), turned into BEIR SciFact (Thakur et al., 2021):

- corpus: doc_id, title, text = the abstract's sentences joined by single spaces (BEIR's construction). The CSV
  stores each abstract as a numpy array repr (string literals separated by whitespace, inside brackets), which is
  parsed by a strict small parser (`parse_string_list`: quotes and repr's escapes only), never evaluated;
- queries: one per claim id (claims repeat once per evidence document in the CSV; repeats must agree);
- qrels: (claim, cited document) pairs, grade 1. BEIR's *test* split is SciFact's validation claims: 300 queries,
  339 qrels; "train" is the 809 training claims.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

from ...errors import FormatError
from ...data.types import Corpus, Dataset, Document, Qrels, Queries, Query
from ...data.formats._common import CsvLines, OnBad, PathLike, SkipReport, display_name, parse_string_list, require_id

CLAIM_FILES = {"train": "claims_train.csv", "test": "claims_validation.csv"}
CORPUS_FILE = "corpus_train.csv"
_DOC_IDS = re.compile(r"^\[\s*(\d+(?:\s+\d+)*)?\s*\]$")


def parse_string_array(value: str, where: str, lineno: int, field_name: str) -> list[str]:
    """`['a' "b's"\\n 'c']` (a numpy array of strings, as printed) -> ["a", "b's", "c"], parsed strictly (no eval)."""
    return parse_string_list(value, where, lineno, field_name, commas=False)


def parse_doc_ids(value: str, where: str, lineno: int, field_name: str) -> list[str]:
    """`[ 5152028 11705328]` (a numpy integer array, as printed) -> ["5152028", "11705328"]."""
    match = _DOC_IDS.match(value.strip())
    if match is None:
        raise FormatError(where, lineno, field_name, f"expected a bracketed list of integers, got {value!r}")
    return match.group(1).split() if match.group(1) else []


def _csv_rows(zip_path: PathLike, member: str, columns: tuple[str, ...],
              on_bad: OnBad) -> Iterator[tuple[int, dict[str, str]]]:
    """(first line of the record, row) for each CSV record; the header must hold `columns` (once each). A record
    with the wrong number of columns or an undecodable line is a FormatError (or, with skip_bad, skipped)."""
    where = display_name(zip_path, member)
    lines = CsvLines(zip_path, member)
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
        _, decode_error = lines.record()
        if decode_error is not None:
            raise decode_error
        missing = [c for c in columns if c not in (header or [])]
        if missing:
            raise FormatError(where, 1, missing[0], f"header lacks column(s) {missing}")
        if len(set(header)) != len(header):
            raise FormatError(where, 1, None, f"header repeats a column: {header}")
        for row in reader:
            start, decode_error = lines.record()
            if not row and decode_error is None:
                continue
            try:
                if decode_error is not None:
                    raise decode_error
                if len(row) != len(header):
                    raise FormatError(where, start, None, f"expected {len(header)} columns, got {len(row)}")
            except FormatError as err:
                on_bad(err)
                continue
            yield start, dict(zip(header, row))
    except csv.Error as err:  # an unclosed quote runs to the end of the file: not skippable
        raise FormatError(where, lines.record()[0], None, f"CSV error: {err}") from None


def read_scifact_corpus(zip_path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    on_bad, where, corpus = OnBad(skip_bad, report), display_name(zip_path, CORPUS_FILE), {}
    for lineno, row in _csv_rows(zip_path, CORPUS_FILE, ("doc_id", "title", "abstract"), on_bad):
        try:
            doc_id = row["doc_id"].strip()
            if not re.fullmatch(r"[0-9]+", doc_id):
                raise FormatError(where, lineno, "doc_id", f"expected an integer id, got {doc_id!r}")
            if doc_id in corpus:
                raise FormatError(where, lineno, "doc_id", f"duplicate document id {doc_id!r}")
            sentences = parse_string_array(row["abstract"], where, lineno, "abstract")
        except FormatError as err:
            on_bad(err)
            continue
        corpus[doc_id] = Document(doc_id, " ".join(sentences), row["title"])
    return corpus


def read_scifact_claims(zip_path: PathLike, split: str = "test", *, skip_bad: bool = False,
                        report: SkipReport | None = None) -> tuple[Queries, Qrels]:
    """Claims of `split` ("train" or "test" = SciFact's validation claims) and their cited documents."""
    if split not in CLAIM_FILES:
        raise ValueError(f"SciFact split must be one of {sorted(CLAIM_FILES)}, got {split!r}")
    member = CLAIM_FILES[split]
    on_bad, where = OnBad(skip_bad, report), display_name(zip_path, member)
    queries: Queries = {}
    qrels: Qrels = {}
    for lineno, row in _csv_rows(zip_path, member, ("id", "claim", "cited_doc_ids"), on_bad):
        try:
            qid, claim = require_id(row["id"], where, lineno, "id", "claim").strip(), row["claim"].strip()
            if not claim:
                raise FormatError(where, lineno, "claim", f"claim {qid!r} has no text")
            cited = parse_doc_ids(row["cited_doc_ids"], where, lineno, "cited_doc_ids")
            if qid in queries and (queries[qid].text != claim or list(qrels.get(qid, {})) != cited):
                raise FormatError(where, lineno, "id", f"claim {qid!r} repeats with a different text or citations")
        except FormatError as err:
            on_bad(err)
            continue
        if qid not in queries:
            queries[qid] = Query(qid, claim)
            if cited:
                qrels[qid] = {doc_id: 1 for doc_id in cited}
    return queries, qrels


def load_scifact(zip_path: PathLike, split: str = "test", *, skip_bad: bool = False,
                 report: SkipReport | None = None) -> Dataset:
    """BEIR SciFact from the CSV zip. `split="test"`: 5,183 documents, 300 queries, 339 qrels."""
    zip_path = Path(zip_path)
    on_bad = OnBad(skip_bad, report)
    corpus = read_scifact_corpus(zip_path, skip_bad=skip_bad, report=on_bad.report)
    queries, qrels = read_scifact_claims(zip_path, split, skip_bad=skip_bad, report=on_bad.report)
    for qid, judged in list(qrels.items()):
        dangling = [d for d in judged if d not in corpus]
        if dangling:
            on_bad(FormatError(display_name(zip_path, CLAIM_FILES[split]), None, "cited_doc_ids",
                               f"claim {qid!r} cites documents not in the corpus: {dangling}"))
            qrels[qid] = {d: g for d, g in judged.items() if d in corpus}
    return Dataset("scifact", split, corpus, queries, qrels)
