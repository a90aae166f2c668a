"""The Glasgow IR group's classic test collections (Cranfield, CISI): `.I id` records with `.T` title, `.A` authors,
`.B` bibliography, `.W` text, `.X` cross-references (and `.K`, `.C`, `.N` in some collections).

Rules, all documented in the collections' own files or SOURCE.md:
- in documents `.A`, `.B` and `.W` may repeat within a record (CISI lists one `.A` per author; Cranfield doc 240
  repeats `.A`/`.B` inside its abstract and docs 576 and 578 repeat `.W`, errors of the original file); repeats are
  joined in order, nothing is dropped. Any other repeat (or any repeat in a query file) is an error: it is what two
  records run together by a lost `.I` line look like;
- tags are "." and one upper-case letter at the start of a line; a line like `.w` is an error, not text;
- field text is whitespace-normalised (the files hard-wrap lines at ~70 characters);
- Cranfield's queries are numbered by position: cran.qry's `.I` ids (001 ... 365) are not contiguous, while
  cranqrel numbers the n-th query n (cranqrel.readme; SOURCE.md). Query ids here are the cranqrel numbers, the
  file's `.I` kept in `Query.meta["original_id"]`;
- cranqrel grades are Cleverdon's codes (1 = complete answer ... 4 = minimum interest; -1, one per query, "no
  interest"); qrels want larger = more relevant, so code c becomes grade 5 - c and -1 becomes 0 (judged, not relevant);
- CISI.REL lists relevant pairs only ("qid docid 0 0.000000"): grade 1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import FormatError
from ...data.types import Corpus, Dataset, Document, Qrels, Queries, Query
from ...data.formats._common import OnBad, PathLike, SkipReport, iter_lines, parse_int, read_lines, split_columns

_TAG = re.compile(r"^\.([A-Z])(?:\s+(.*))?$")
_TAG_LIKE = re.compile(r"^\.[A-Za-z]")  # any line like this must be a well-formed tag
# Fields that may repeat within a record, as the real files do (module doc); any other field repeated is an error.
REPEATABLE_IN_DOCUMENTS = frozenset("ABW")
KNOWN_FIELDS = frozenset("ITABWXKCN")
_CRANFIELD_GRADES = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}
# Names for the fields kept in Query.meta.
FIELD_NAMES = {"T": "title", "A": "authors", "B": "bibliography", "X": "cross_references", "K": "keywords",
               "C": "categories", "N": "note"}


@dataclass
class GlasgowRecord:
    id: str
    line: int  # where its `.I` line is (1-based)
    fields: dict[str, str] = field(default_factory=dict)

    def text(self, tag: str) -> str:
        return " ".join(self.fields.get(tag, "").split())


def iter_glasgow_records(path: PathLike, *, repeatable: frozenset[str] = frozenset(), skip_bad: bool = False,
                         report: SkipReport | None = None) -> Iterator[GlasgowRecord]:
    """Yield the `.I` records of one collection file in file order (a bad record is skipped whole if skip_bad).

    Tags are matched as the format writes them: a line that starts with "." and a letter is a tag line, and must be
    "." + one upper-case letter, alone or followed by whitespace (`.w` or `.Wx` is an error, not text). A field not
    in `repeatable` may appear once per record: a second `.T` means two records ran together (a lost `.I` line).
    """
    on_bad, seen = OnBad(skip_bad, report), set()
    record: GlasgowRecord | None = None
    current: str | None = None  # the field that text lines extend
    bad = False  # inside a record already reported: skip to the next `.I`
    for lineno, line, decode_error in read_lines(path):
        line = line.rstrip()
        tag = _TAG.match(line)
        try:
            if tag is None and _TAG_LIKE.match(line):
                if line.startswith(".I"):  # a broken `.I` still ends the record before it: that one is fine
                    if record is not None and not bad:
                        yield record
                    record, current, bad = None, None, False
                raise FormatError(path, lineno, line.split()[0][:8], "malformed field tag: tags are '.' and one "
                                  "upper-case letter at the start of a line (.I, .T, .A, .B, .W, .X, ...)")
            if tag and tag.group(1) == "I":
                if record is not None and not bad:
                    yield record
                record, current, bad = None, None, False
                doc_id = (tag.group(2) or "").strip()
                if not doc_id:
                    raise FormatError(path, lineno, ".I", "record without an id")
                if doc_id in seen:
                    raise FormatError(path, lineno, ".I", f"duplicate id {doc_id!r}")
                seen.add(doc_id)
                record = GlasgowRecord(doc_id, lineno)
            elif bad:
                continue
            elif tag:
                if tag.group(1) not in KNOWN_FIELDS:
                    raise FormatError(path, lineno, f".{tag.group(1)}", "unknown field tag")
                if record is None:
                    raise FormatError(path, lineno, f".{tag.group(1)}", "field before the first .I record")
                current = tag.group(1)
                rest = tag.group(2) or ""
                previous = record.fields.get(current)
                if previous is not None and current not in repeatable:
                    raise FormatError(path, lineno, f".{current}", f"record {record.id!r} (line {record.line}) has "
                                      f"this field twice (a lost .I line?)")
                record.fields[current] = rest if previous is None else f"{previous}\n{rest}"
            elif line:
                if record is None or current is None:
                    raise FormatError(path, lineno, None, "text outside any field (expected a .I or field line)")
                record.fields[current] = f"{record.fields[current]}\n{line}"
            if decode_error is not None:
                raise decode_error
        except FormatError as err:
            if not bad:
                on_bad(err)
            bad = True
    if record is not None and not bad:
        yield record


def read_glasgow_documents(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    """Documents: id = `.I`, title = `.T`, text = `.W` (empty if the record has none, as Cranfield 471 and 995)."""
    return {r.id: Document(r.id, r.text("W"), r.text("T"))
            for r in iter_glasgow_records(path, repeatable=REPEATABLE_IN_DOCUMENTS, skip_bad=skip_bad,
                                          report=report)}


def read_glasgow_queries(path: PathLike, *, by_position: bool = False, skip_bad: bool = False,
                         report: SkipReport | None = None) -> Queries:
    """Queries: text = `.W`; other fields (CISI's `.T`, `.A`, `.B`) go to meta. `by_position` numbers them 1..n
    (Cranfield's quirk), keeping the file's id in meta["original_id"]."""
    on_bad, queries = OnBad(skip_bad, report), {}
    for position, r in enumerate(iter_glasgow_records(path, skip_bad=skip_bad, report=report), 1):
        text = r.text("W")
        if not text:
            on_bad(FormatError(path, r.line, ".W", f"query {r.id!r} has no text"))
            continue
        qid = str(position) if by_position else r.id
        meta = {FIELD_NAMES[tag]: r.text(tag) for tag in sorted(r.fields) if tag != "W"}
        if by_position:
            meta["original_id"] = r.id
        queries[qid] = Query(qid, text, meta=meta)
    return queries


def _read_pairs(path: PathLike, names: tuple[str, ...], grade_of, on_bad: OnBad) -> Qrels:
    qrels: Qrels = {}
    for lineno, line in iter_lines(path, on_bad=on_bad):
        if not line.strip():
            continue
        try:
            cols = split_columns(line, None, names, str(path), lineno)
            qid, doc_id = str(parse_int(cols[0], str(path), lineno, names[0])), cols[1]
            grade = grade_of(cols, lineno)
            if doc_id in qrels.get(qid, {}):
                raise FormatError(path, lineno, names[1], f"({qid}, {doc_id}) judged twice")
        except FormatError as err:
            on_bad(err)
            continue
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


def read_cranfield_qrels(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Qrels:
    """cranqrel: "query_number doc_id code" lines; code c in 1..4 -> grade 5 - c, -1 -> 0 (see module doc)."""
    def grade_of(cols, lineno):
        code = parse_int(cols[2], str(path), lineno, "code")
        if code not in _CRANFIELD_GRADES:
            raise FormatError(path, lineno, "code", f"expected one of -1, 1, 2, 3, 4, got {code}")
        return _CRANFIELD_GRADES[code]
    return _read_pairs(path, ("query_number", "doc_id", "code"), grade_of, OnBad(skip_bad, report))


def read_cisi_qrels(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Qrels:
    """CISI.REL: "qid docid 0 0.000000" lines, every pair relevant (grade 1)."""
    return _read_pairs(path, ("query_id", "doc_id", "zero", "score"), lambda cols, lineno: 1,
                       OnBad(skip_bad, report))


def _check_ids(qrels: Qrels, queries: Queries, corpus: Corpus, qrels_path: Path, on_bad: OnBad) -> Qrels:
    """Every judgment must name a known query and document; a dangling id is an error (or skipped and counted)."""
    kept: Qrels = {}
    for qid, judged in qrels.items():
        for doc_id, grade in judged.items():
            if qid not in queries:
                on_bad(FormatError(qrels_path, None, "query_id", f"judged query {qid!r} is not in the queries"))
            elif doc_id not in corpus:
                on_bad(FormatError(qrels_path, None, "doc_id", f"judged document {doc_id!r} is not in the corpus"))
            else:
                kept.setdefault(qid, {})[doc_id] = grade
    return kept


def load_cranfield(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                   report: SkipReport | None = None) -> Dataset:
    """Cranfield 1400: 1,400 documents, 225 queries, 1,837 graded judgments (the collection has one split)."""
    root, on_bad = Path(root), OnBad(skip_bad, report)
    kw = dict(skip_bad=skip_bad, report=on_bad.report)
    corpus = read_glasgow_documents(root / "cran.all.1400", **kw)
    queries = read_glasgow_queries(root / "cran.qry", by_position=True, **kw)
    qrels = _check_ids(read_cranfield_qrels(root / "cranqrel", **kw), queries, corpus, root / "cranqrel", on_bad)
    return Dataset("cranfield", split, corpus, queries, qrels)


def load_cisi(root: PathLike, split: str = "test", *, skip_bad: bool = False,
              report: SkipReport | None = None) -> Dataset:
    """CISI: 1,460 documents, 112 queries (76 of them judged), 3,114 relevant pairs."""
    root, on_bad = Path(root), OnBad(skip_bad, report)
    kw = dict(skip_bad=skip_bad, report=on_bad.report)
    corpus = read_glasgow_documents(root / "CISI.ALL", **kw)
    queries = read_glasgow_queries(root / "CISI.QRY", **kw)
    qrels = _check_ids(read_cisi_qrels(root / "CISI.REL", **kw), queries, corpus, root / "CISI.REL", on_bad)
    return Dataset("cisi", split, corpus, queries, qrels)
