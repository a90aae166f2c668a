"""DPR's question and passage files (Karpukhin et al., 2020; github.com/facebookresearch/DPR):

- qas csv (`nq-test.qa.csv`, ...): tab-separated "question<TAB>answers", answers a Python list literal
  (read with `ast.literal_eval`, never eval); ids are the 0-based row positions. CuratedTREC's answers are regular
  expressions: pass `answers_are_patterns=True`.
- `psgs_w100.tsv` (21M Wikipedia passages of 100 words): a header "id<TAB>text<TAB>title", then one passage per
  row, CSV-quoted as DPR writes it. Plain or .gz.
The retriever json (training examples) lives in `taser_lib.data.training_examples`.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Iterator

from tqdm import tqdm

from ...errors import FormatError
from ..types import Corpus, Document, Queries, Query
from ._common import OnBad, PathLike, SkipReport, open_text

PASSAGES_HEADER = ("id", "text", "title")


def read_dpr_qas(path: PathLike, *, answers_are_patterns: bool = False, skip_bad: bool = False,
                 report: SkipReport | None = None) -> Queries:
    on_bad, queries, where = OnBad(skip_bad, report), {}, str(path)
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter="\t")
        start, position = 1, 0
        for row in reader:
            lineno, start = start, reader.line_num + 1
            if not row:
                continue
            qid, position = str(position), position + 1
            try:
                if len(row) != 2:
                    raise FormatError(where, lineno, None, f"expected 2 columns (question, answers), got {len(row)}")
                question, answers_text = row
                if not question.strip():
                    raise FormatError(where, lineno, "question", "empty question")
                try:
                    answers = ast.literal_eval(answers_text)
                except (ValueError, SyntaxError):
                    raise FormatError(where, lineno, "answers", f"not a Python list literal: {answers_text[:60]!r}") \
                        from None
                if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
                    raise FormatError(where, lineno, "answers",
                                      f"expected a non-empty list of strings, got {answers!r}")
            except FormatError as err:
                on_bad(err)
                continue
            queries[qid] = Query(qid, question.strip(), tuple(answers), answers_are_patterns)
    return queries


def iter_dpr_passages(path: PathLike, *, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Iterator[Document]:
    """Stream psgs_w100.tsv (or any file in its form) as Documents, in file order."""
    on_bad, where = OnBad(skip_bad, report), str(path)
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter="\t")
        header = next(reader, None)
        if header is None or tuple(header) != PASSAGES_HEADER:
            raise FormatError(where, 1, None, f"expected the header line {'<TAB>'.join(PASSAGES_HEADER)!r}")
        start = reader.line_num + 1
        for row in reader:
            lineno, start = start, reader.line_num + 1
            try:
                if len(row) != 3:
                    raise FormatError(where, lineno, None, f"expected 3 columns (id, text, title), got {len(row)}")
                if not row[0].strip():
                    raise FormatError(where, lineno, "id", "empty passage id")
            except FormatError as err:
                on_bad(err)
                continue
            yield Document(row[0].strip(), row[1], row[2])


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
