"""SciFact (Wadden et al., 2020) from the CSV export of allenai/scifact (one zip: corpus_train.csv,
claims_{train,validation,test}.csv), turned into BEIR SciFact (Thakur et al., 2021):

- corpus: doc_id, title, text = the abstract's sentences joined by single spaces (BEIR's construction). The CSV
  stores each abstract as a numpy array repr (string literals separated by whitespace, inside brackets), which is
  parsed literal by literal, never with eval;
- queries: one per claim id (claims repeat once per evidence document in the CSV; repeats must agree);
- qrels: (claim, cited document) pairs, grade 1. BEIR's *test* split is SciFact's validation claims: 300 queries,
  339 qrels; "train" is the 809 training claims.
"""

from __future__ import annotations

import ast
import csv
import re
from collections.abc import Iterator
from pathlib import Path

from ...errors import FormatError
from ..types import Corpus, Dataset, Document, Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, display_name, open_text

CLAIM_FILES = {"train": "claims_train.csv", "test": "claims_validation.csv"}
CORPUS_FILE = "corpus_train.csv"
_LITERAL = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""", re.S)
_DOC_IDS = re.compile(r"^\[\s*(\d+(?:\s+\d+)*)?\s*\]$")


def parse_string_array(value: str, where: str, lineno: int, field_name: str) -> list[str]:
    """`['a' "b's"\\n 'c']` (a numpy array of strings, as printed) -> ["a", "b's", "c"]."""
    text = value.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise FormatError(where, lineno, field_name, "expected a bracketed list of string literals")
    inner, items, pos = text[1:-1], [], 0
    for match in _LITERAL.finditer(inner):
        if inner[pos:match.start()].strip():
            raise FormatError(where, lineno, field_name, f"unexpected text {inner[pos:match.start()].strip()[:40]!r}")
        items.append(ast.literal_eval(match.group()))
        pos = match.end()
    if inner[pos:].strip():
        raise FormatError(where, lineno, field_name, f"unexpected text {inner[pos:].strip()[:40]!r}")
    return items


def parse_doc_ids(value: str, where: str, lineno: int, field_name: str) -> list[str]:
    """`[ 5152028 11705328]` (a numpy integer array, as printed) -> ["5152028", "11705328"]."""
    match = _DOC_IDS.match(value.strip())
    if match is None:
        raise FormatError(where, lineno, field_name, f"expected a bracketed list of integers, got {value!r}")
    return match.group(1).split() if match.group(1) else []


def _csv_rows(zip_path: PathLike, member: str, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(first line of the record, row) for each CSV record; the header must hold `columns`."""
    where = display_name(zip_path, member)
    with open_text(zip_path, member) as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(where, 1, missing[0], f"header lacks column(s) {missing}")
        start = reader.line_num + 1
        try:
            for row in reader:
                if None in row or any(v is None for v in row.values()):
                    raise FormatError(where, start, None, f"expected {len(reader.fieldnames)} columns")
                yield start, row
                start = reader.line_num + 1
        except csv.Error as err:
            raise FormatError(where, reader.line_num, None, f"CSV error: {err}") from None


def read_scifact_corpus(zip_path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    on_bad, where, corpus = OnBad(skip_bad, report), display_name(zip_path, CORPUS_FILE), {}
    for lineno, row in _csv_rows(zip_path, CORPUS_FILE, ("doc_id", "title", "abstract")):
        try:
            doc_id = row["doc_id"].strip()
            if not doc_id.isdigit():
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
    for lineno, row in _csv_rows(zip_path, member, ("id", "claim", "cited_doc_ids")):
        try:
            qid, claim = row["id"].strip(), row["claim"].strip()
            if not qid:
                raise FormatError(where, lineno, "id", "empty claim id")
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
