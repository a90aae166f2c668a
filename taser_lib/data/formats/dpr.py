"""DPR's question and passage files (Karpukhin et al., 2020; github.com/facebookresearch/DPR):

- qas csv (`nq-test.qa.csv`, ...): tab-separated "question<TAB>answers", answers a printed Python list of string
  literals (parsed strictly by `parse_string_list`, never evaluated); ids are the 0-based row positions.
  CuratedTREC's answers are regular expressions: pass `answers_are_patterns=True`.
- `psgs_w100.tsv` (21M Wikipedia passages of 100 words): a header "id<TAB>text<TAB>title", then one passage per
  row, CSV-quoted as DPR writes it. Plain or .gz.
The retriever json (training examples) lives in `taser_lib.data.training_examples`.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator

from ...progress import tqdm

from ...errors import FormatError
from ..types import Corpus, Document, Queries, Query
from ._common import CsvLines, OnBad, PathLike, SkipReport, parse_string_list, require_id

PASSAGES_HEADER = ("id", "text", "title")


def read_dpr_qas(path: PathLike, *, answers_are_patterns: bool = False, skip_bad: bool = False,
                 report: SkipReport | None = None) -> Queries:
    on_bad, queries, where = OnBad(skip_bad, report), {}, str(path)
    lines = CsvLines(path)
    reader, position = csv.reader(lines, delimiter="\t"), 0
    try:
        for row in reader:
            lineno, decode_error = lines.record()
            if not row and decode_error is None:
                continue
            qid, position = str(position), position + 1
            try:
                if decode_error is not None:
                    raise decode_error
                if len(row) != 2:
                    raise FormatError(where, lineno, None, f"expected 2 columns (question, answers), got {len(row)}")
                question, answers_text = row
                if not question.strip():
                    raise FormatError(where, lineno, "question", "empty question")
                answers = parse_string_list(answers_text, where, lineno, "answers", commas=True)
                if not answers:
                    raise FormatError(where, lineno, "answers", "empty answer list")
            except FormatError as err:
                on_bad(err)
                continue
            queries[qid] = Query(qid, question.strip(), tuple(answers), answers_are_patterns)
    except csv.Error as err:  # an unclosed quote runs to the end of the file: not skippable
        raise FormatError(where, lines.record()[0], None, f"CSV error: {err}") from None
    return queries


def iter_dpr_passages(path: PathLike, *, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Iterator[Document]:
    """Stream psgs_w100.tsv (or any file in its form) as Documents, in file order."""
    on_bad, where = OnBad(skip_bad, report), str(path)
    lines = CsvLines(path)
    reader = csv.reader(lines, delimiter="\t")
    try:
        header = next(reader, None)
        _, decode_error = lines.record()
        if header is None or tuple(header) != PASSAGES_HEADER or decode_error is not None:
            raise FormatError(where, 1, None, f"expected the header line {'<TAB>'.join(PASSAGES_HEADER)!r}")
        for row in reader:
            lineno, decode_error = lines.record()
            if not row and decode_error is None:
                continue  # a blank line
            try:
                if decode_error is not None:
                    raise decode_error
                if len(row) != 3:
                    raise FormatError(where, lineno, None, f"expected 3 columns (id, text, title), got {len(row)}")
                require_id(row[0], where, lineno, "id", "passage")
            except FormatError as err:
                on_bad(err)
                continue
            yield Document(row[0].strip(), row[1], row[2])
    except csv.Error as err:  # an unclosed quote runs to the end of the file: not skippable
        raise FormatError(where, lines.record()[0], None, f"CSV error: {err}") from None


def read_dpr_passages(path: PathLike, *, limit: int | None = None, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Corpus:
    """Load passages into a Corpus (all 21M need tens of GB of RAM: prefer `iter_dpr_passages`, or `limit`)."""
    corpus: Corpus = {}
    on_bad = OnBad(skip_bad, report)
    passages = iter_dpr_passages(path, skip_bad=skip_bad, report=on_bad.report)
    for doc in tqdm(passages, desc=f"reading {path}", unit=" passages", total=limit, mininterval=2.0):
        if doc.id in corpus:
            on_bad(FormatError(path, None, "id", f"duplicate passage id {doc.id!r}"))
            continue
        corpus[doc.id] = doc
        if limit is not None and len(corpus) >= limit:
            break
    return corpus
