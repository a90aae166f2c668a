"""MS MARCO passage ranking files (Nguyen et al., 2016), and the teacher scores released for its training triples.

Formats (tab-separated, one record a line; every id a string, as everywhere in this library):
- collection.tsv (in collection.tar.gz): "pid<TAB>passage", 8,841,823 lines in pid order;
- queries.{train,dev,eval}.tsv (in queries.tar.gz), msmarco-test2019-queries.tsv.gz: "qid<TAB>query";
- qrels.train.tsv: "qid<TAB>0<TAB>pid<TAB>1" (read by `trec.read_trec_qrels`, which splits on any whitespace);
- top1000.dev (in top1000.dev.tar.gz), msmarco-passagetest2019-top1000.tsv.gz: "qid<TAB>pid<TAB>query<TAB>passage",
  the BM25 top-1000 of each query. The files carry neither rank nor score, and their line order within a query is
  not documented to be BM25's rank order, so a reader keeps file order and says nothing more about it;
- qidpidtriples.train.full.2.tsv.gz: "qid<TAB>pid_pos<TAB>pid_neg" (397,768,673 lines);
- the teacher scores of Hofstätter et al. (2020, "Cross-architecture knowledge distillation", Zenodo 4068216),
  e.g. bertbase_cat_msmarcopassage_train_scores_ids.tsv (T1, BERT-Base CAT):
  "score_pos<TAB>score_neg<TAB>qid<TAB>pid_pos<TAB>pid_neg" over the ~40M "Train Triples Small" triples.

Every reader streams (the big files never sit in memory whole) and applies the library's bad-record policy: a
malformed line is a FormatError naming file, line and field, or with `skip_bad` is skipped and counted. The
collection's text is kept as distributed: some passages hold mis-encoded characters (UTF-8 read as Latin-1 and
encoded again); ir_datasets repairs them, this reader does not, so passages are the bytes every MS MARCO baseline
(and the released teacher) saw.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from typing import NamedTuple

from ...errors import FormatError
from ...data.types import Document, Queries, Query
from ...data.formats._common import OnBad, PathLike, SkipReport, display_name, iter_lines, require_id, split_columns


class ScoredTriple(NamedTuple):
    """One training triple; `score_pos` / `score_neg` are the teacher's scores (None for unscored triples)."""

    qid: str
    pos: str
    neg: str
    score_pos: float | None = None
    score_neg: float | None = None


def _float(value: str, where: str, lineno: int, field_name: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise FormatError(where, lineno, field_name, f"not a number: {value!r}") from None
    if not math.isfinite(number):
        raise FormatError(where, lineno, field_name, f"not a finite number: {value!r}")
    return number


def iter_collection(path: PathLike, member: str | None = "collection.tsv", *, wanted: Collection[str] | None = None,
                    skip_bad: bool = False, report: SkipReport | None = None) -> Iterator[Document]:
    """The passages of collection.tsv ("pid<TAB>passage"), streamed; with `wanted`, only those passages, and the
    reading stops once all of them were seen (the file is in pid order, so a sample's passages cost a partial
    read). `member`: the tsv inside a tar archive (None: `path` is the tsv itself). A passage id seen twice among
    the wanted ones is a FormatError (which text holds would be a guess)."""
    on_bad, where = OnBad(skip_bad, report), display_name(path, member)
    names = ("pid", "passage")
    remaining = None if wanted is None else set(wanted)
    seen: set[str] = set()
    if remaining is not None and not remaining:
        return
    for lineno, line in iter_lines(path, member, on_bad=on_bad):
        try:
            pid, text = split_columns(line, "\t", names, where, lineno)
            require_id(pid, where, lineno, "pid", "passage")
            if remaining is not None and pid not in remaining and pid not in seen:
                continue
            if pid in seen:
                raise FormatError(where, lineno, "pid", f"passage {pid!r} appears twice")
        except FormatError as err:
            on_bad(err)
            continue
        seen.add(pid)
        yield Document(pid, text)
        if remaining is not None:
            remaining.discard(pid)
            if not remaining:
                return


def read_queries(path: PathLike, member: str | None = None, *, wanted: Collection[str] | None = None,
                 skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    """Queries from "qid<TAB>query" lines (queries.train.tsv inside queries.tar.gz, or a plain/.gz file); with
    `wanted`, only those. An empty id or text, a missing tab, or an id seen twice is a FormatError."""
    on_bad, where, out = OnBad(skip_bad, report), display_name(path, member), {}
    for lineno, line in iter_lines(path, member, on_bad=on_bad):
        if not line.strip():
            continue
        try:
            qid, text = split_columns(line, "\t", ("qid", "query"), where, lineno)
            require_id(qid, where, lineno, "qid", "query")
            if not text.strip():
                raise FormatError(where, lineno, "query", f"query {qid!r} has no text")
            if qid in out:
                raise FormatError(where, lineno, "qid", f"duplicate query id {qid!r}")
        except FormatError as err:
            on_bad(err)
            continue
        if wanted is None or qid in wanted:
            out[qid] = Query(qid, text.strip())
    return out


def iter_top1000(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                 report: SkipReport | None = None) -> Iterator[tuple[int, str, str]]:
    """(line, qid, pid) of a BM25 top-1000 file ("qid<TAB>pid<TAB>query<TAB>passage"), in file order. The query and
    passage columns must be present but are not kept (queries come from the topics, passages from the
    collection)."""
    on_bad, where = OnBad(skip_bad, report), display_name(path, member)
    names = ("qid", "pid", "query", "passage")
    for lineno, line in iter_lines(path, member, on_bad=on_bad):
        try:
            qid, pid, _, _ = split_columns(line, "\t", names, where, lineno)
            require_id(qid, where, lineno, "qid", "query")
            require_id(pid, where, lineno, "pid", "passage")
        except FormatError as err:
            on_bad(err)
            continue
        yield lineno, qid, pid


def iter_id_triples(path: PathLike, *, skip_bad: bool = False,
                    report: SkipReport | None = None) -> Iterator[ScoredTriple]:
    """qidpidtriples.train.full.2.tsv.gz: "qid<TAB>pid_pos<TAB>pid_neg" as unscored `ScoredTriple`s."""
    on_bad, where = OnBad(skip_bad, report), str(path)
    names = ("qid", "pid_pos", "pid_neg")
    for lineno, line in iter_lines(path, on_bad=on_bad):
        try:
            qid, pos, neg = split_columns(line, "\t", names, where, lineno)
            for value, name in ((qid, "qid"), (pos, "pid_pos"), (neg, "pid_neg")):
                require_id(value, where, lineno, name, "query" if name == "qid" else "passage")
        except FormatError as err:
            on_bad(err)
            continue
        yield ScoredTriple(qid, pos, neg)


def iter_scored_triples(path: PathLike, *, skip_bad: bool = False,
                        report: SkipReport | None = None) -> Iterator[ScoredTriple]:
    """Released teacher scores ("score_pos<TAB>score_neg<TAB>qid<TAB>pid_pos<TAB>pid_neg", Hofstätter et al.'s
    files) as `ScoredTriple`s. A score that is not a finite number is a FormatError naming its column."""
    on_bad, where = OnBad(skip_bad, report), str(path)
    names = ("score_pos", "score_neg", "qid", "pid_pos", "pid_neg")
    for lineno, line in iter_lines(path, on_bad=on_bad):
        try:
            s_pos, s_neg, qid, pos, neg = split_columns(line, "\t", names, where, lineno)
            score_pos = _float(s_pos, where, lineno, "score_pos")
            score_neg = _float(s_neg, where, lineno, "score_neg")
            for value, name in ((qid, "qid"), (pos, "pid_pos"), (neg, "pid_neg")):
                require_id(value, where, lineno, name, "query" if name == "qid" else "passage")
        except FormatError as err:
            on_bad(err)
            continue
        yield ScoredTriple(qid, pos, neg, score_pos, score_neg)
