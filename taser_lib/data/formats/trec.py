"""TREC topics ("qid<TAB>text", plain or .gz) and TREC qrels ("qid iter docid grade", whitespace separated)."""

from __future__ import annotations

from ...errors import FormatError
from ..types import Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, iter_lines, parse_int, read_id_text_lines, split_columns


def read_trec_topics(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    """Topics as "query_id<TAB>text" lines (the Anserini/Pyserini tsv form). Blank lines are ignored."""
    texts = read_id_text_lines(path, "query_id", "query", require_text=True, skip_bad=skip_bad, report=report)
    return {qid: Query(qid, text) for qid, text in texts.items()}


def read_trec_qrels(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Qrels:
    """Qrels as "query_id iteration doc_id grade" lines; the iteration column ("0" or "Q0") is ignored.

    A (query, doc) pair judged twice is an error: which grade holds would otherwise be a guess.
    """
    on_bad, qrels = OnBad(skip_bad, report), {}
    names = ("query_id", "iteration", "doc_id", "relevance")
    for lineno, line in iter_lines(path, on_bad=on_bad):
        if not line.strip():
            continue
        try:
            # whitespace-separated columns cannot be empty: an empty id shows as a missing column
            qid, _, doc_id, grade = split_columns(line, None, names, str(path), lineno)
            grade_value = parse_int(grade, str(path), lineno, "relevance")
            if doc_id in qrels.get(qid, {}):
                raise FormatError(path, lineno, "doc_id", f"({qid}, {doc_id}) judged twice")
        except FormatError as err:
            on_bad(err)
            continue
        qrels.setdefault(qid, {})[doc_id] = grade_value
    return qrels
