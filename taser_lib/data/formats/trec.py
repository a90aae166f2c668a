"""TREC topics ("qid<TAB>text", plain or .gz) and TREC qrels ("qid iter docid grade", whitespace separated)."""

from __future__ import annotations

from ...errors import FormatError
from ..types import Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, open_text, parse_int, split_columns


def read_trec_topics(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    """Topics as "query_id<TAB>text" lines (the Anserini/Pyserini tsv form). Blank lines are ignored."""
    on_bad, queries = OnBad(skip_bad, report), {}
    with open_text(path) as lines:
        for lineno, line in enumerate(lines, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                if "\t" not in line:
                    raise FormatError(path, lineno, "text", "expected 'query_id<TAB>text'")
                qid, text = (part.strip() for part in line.split("\t", 1))
                if not qid:
                    raise FormatError(path, lineno, "query_id", "empty query id")
                if not text:
                    raise FormatError(path, lineno, "text", f"query {qid!r} has no text")
                if qid in queries:
                    raise FormatError(path, lineno, "query_id", f"duplicate query id {qid!r}")
            except FormatError as err:
                on_bad(err)
                continue
            queries[qid] = Query(qid, text)
    return queries


def read_trec_qrels(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Qrels:
    """Qrels as "query_id iteration doc_id grade" lines; the iteration column ("0" or "Q0") is ignored.

    A (query, doc) pair judged twice is an error: which grade holds would otherwise be a guess.
    """
    on_bad, qrels = OnBad(skip_bad, report), {}
    names = ("query_id", "iteration", "doc_id", "relevance")
    with open_text(path) as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                qid, _, doc_id, grade = split_columns(line, None, names, str(path), lineno)
                grade_value = parse_int(grade, str(path), lineno, "relevance")
                if doc_id in qrels.get(qid, {}):
                    raise FormatError(path, lineno, "doc_id", f"({qid}, {doc_id}) judged twice")
            except FormatError as err:
                on_bad(err)
                continue
            qrels.setdefault(qid, {})[doc_id] = grade_value
    return qrels
