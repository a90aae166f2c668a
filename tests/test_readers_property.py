"""Property tests (hypothesis) for every reader: mutated copies of real samples are read correctly or rejected.

Each format's sample is a small slice of a real file of the offline mirror (../shared/data), or, where the mirror
has no file of that format (BEIR jsonl/tsv, DPR qas/passages/retriever json, TREC runs), real records from the
mirror written in that format by this library's writers or DPR's own conventions. The slice is written to a temp
folder (plain, .gz, or as a zip member: as the format is shipped), one file is mutated, and the reader runs twice,
strict and with `skip_bad=True`.

Mutations: a BOM, CRLF line ends (harmless); a line deleted, duplicated or two lines swapped; the file truncated at
any byte; invalid UTF-8 inserted; a NUL, a line break or a bare carriage return inserted; a JSON/CSV syntax character deleted; a field or
column renamed; a damaged .gz or .zip (a flipped byte or a truncated archive).

The property, with R0 the records read from the unmutated sample and n the records the mutated file holds (counted
by a format-specific oracle that does not use the reader):
- the reader raises only `FormatError` (never another exception); the error names the mutated file and, for a
  mutation of text in a line-based format, a line;
- after a harmless mutation it returns exactly R0 (and, with skip_bad, reports nothing);
- a carriage return inside a line is an error, or (skip_bad) a reported skip, never a record read with it;
- after any other mutation, what it returns differs from R0 in at most `BUDGET[kind]` records (the records the
  mutation itself touched: one for a deleted line, two for a swap, ...), and returned + reported >= n: a record
  present in the file is either returned or in the skip report, never silently lost (strict mode reports nothing,
  so there every record of the file must come back). A damaged archive must give an error or exactly R0.
Records are compared as multisets of their canonical form (ids included, except for formats whose ids are the
record's position, where a deleted line legitimately renumbers the rest).

Runs 200 derandomized examples per format (set TASER_PROPERTY_EXAMPLES to change); the per-format counts of
mutations tried and of outcomes are printed at the end of the module (pytest -s) and written as JSON to
$TASER_PROPERTY_REPORT when that is set.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taser_lib.data.formats._common import SkipReport
from taser_lib.datasets.formats.answer_selection import load_trecqa, load_wikiqa
from taser_lib.data.formats.beir import (read_beir_corpus, read_beir_qrels, read_beir_queries, read_candidates,
                                         write_candidates_tsv, write_corpus_jsonl, write_qrels_tsv,
                                         write_queries_jsonl)
from taser_lib.data.formats.dpr import iter_dpr_passages, read_dpr_qas
from taser_lib.datasets.formats.glasgow import (read_cisi_qrels, read_cranfield_qrels, read_glasgow_documents,
                                            read_glasgow_queries)
from taser_lib.datasets.formats.nfcorpus import read_nfcorpus_docs
from taser_lib.datasets.formats.qa import read_curatedtrec, read_entityquestions, read_nq_open, read_webquestions
from taser_lib.datasets.formats.scifact import load_scifact, read_scifact_claims, read_scifact_corpus
from taser_lib.data.formats.squad import read_squad
from taser_lib.data.formats.trec import read_trec_qrels, read_trec_topics
from taser_lib.data.training_examples import TrainingExample, read_dpr_retriever_json, write_dpr_retriever_json
from taser_lib.data.types import Document, Query
from taser_lib.errors import FormatError
from taser_lib.retrieval.runs import read_run

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TASER_DATA_MIRROR", REPO.parent / "shared" / "data")).resolve()
EXAMPLES = int(os.environ.get("TASER_PROPERTY_EXAMPLES", "200"))

HARMLESS = ("bom", "crlf")
TEXT_KINDS = ("delete_line", "duplicate_line", "swap_lines", "truncate", "invalid_utf8", "nul", "line_break",
              "carriage_return")
# How many records a mutation may legitimately change (it touched them): see the module doc.
BUDGET = {"bom": 0, "crlf": 0, "delete_line": 1, "duplicate_line": 1, "swap_lines": 2, "truncate": 1,
          "invalid_utf8": 1, "nul": 1, "line_break": 2, "carriage_return": 1, "broken_syntax": 1, "rename_field": 1,
          "damage_archive": 0}

TRIED: Counter = Counter()  # (format, mutation kind) -> examples
OUTCOMES: Counter = Counter()  # (format, outcome) -> examples


# ---- the samples: small slices of real files ---------------------------------------------------------------------

def head_lines(path: Path, n: int) -> bytes:
    with open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


def gz_head_lines(path: Path, n: int) -> bytes:
    with gzip.open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


def zip_member(path: Path, member: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        return archive.read(member)


def glasgow_records(path: Path, n: int) -> bytes:
    """The first n `.I` records of a Glasgow file, bytes as they are (Cranfield's CRLF kept)."""
    data = path.read_bytes()
    starts = [m.start() for m in re.finditer(rb"^\.I ", data, re.M)]
    return data[: starts[n]]


def json_array_head(path: Path, n: int, indent: int | None) -> bytes:
    items = json.loads(path.read_text(encoding="utf-8"))[:n]
    if indent is None:  # WebQuestions' own layout: one element per line
        return ("[\n" + ",\n".join(" " + json.dumps(x, ensure_ascii=False) for x in items) + "\n]\n").encode()
    return json.dumps(items, indent=indent, ensure_ascii=False).encode()


def written(write: Callable[[Path], None]) -> bytes:
    """Bytes of a file written by one of the library's writers."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f"
        write(path)
        return path.read_bytes()


def text_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


@dataclass
class Spec:
    """One reader under test: its files, which one is mutated, how to read, and the oracle."""

    name: str
    files: dict[str, bytes]  # relative name -> uncompressed bytes
    target: str  # the file (of `files`) that mutations change
    read: Callable[[Path, bool, SkipReport], Counter]  # (folder, skip_bad, report) -> canonical records
    count: Callable[[str], int]  # records in the (mutated, decoded) target text
    container: str = "plain"  # plain | gz | zip: how the target is stored
    zip_name: str = "archive.zip"
    has_lines: bool = True  # errors name a line (else, as SQuAD's one-line json, a line or a field path)
    has_skip: bool = True
    syntax: bytes = b""  # characters whose deletion breaks the syntax
    fields: tuple[bytes, ...] = ()  # field or column names that may be renamed
    same_folder_errors: bool = False  # errors may name another file of the folder (line-aligned files)
    r0: Counter = field(default_factory=Counter)

    def target_path(self, root: Path) -> Path:
        if self.container == "zip":
            return root / self.zip_name
        return root / (self.target + (".gz" if self.container == "gz" else ""))


def records(items) -> Counter:
    return Counter(items)


def build_specs() -> dict[str, Spec]:
    specs: list[Spec] = []
    beir = DATA / "beir-topics-qrels"

    specs.append(Spec(
        "trec-topics", {"topics.tsv": gz_head_lines(beir / "topics.beir-v1.0.0-scifact.test.tsv.gz", 12)},
        "topics.tsv", lambda d, s, r: records(
            (q.id, q.text) for q in read_trec_topics(d / "topics.tsv.gz", skip_bad=s, report=r).values()),
        lambda t: len(text_lines(t)), container="gz"))
    specs.append(Spec(
        "trec-qrels", {"qrels.txt": head_lines(DATA / "msmarco-passage-topics-qrels" / "qrels.dl19-passage.txt", 15)},
        "qrels.txt", lambda d, s, r: records(
            (q, doc, g) for q, j in read_trec_qrels(d / "qrels.txt", skip_bad=s, report=r).items()
            for doc, g in j.items()), lambda t: len(text_lines(t))))
    specs.append(Spec(
        "nfcorpus-docs", {"test.docs": head_lines(DATA / "nfcorpus" / "test.docs", 6)},
        "test.docs", lambda d, s, r: records(
            (k, v.text) for k, v in read_nfcorpus_docs(d / "test.docs", skip_bad=s, report=r).items()),
        lambda t: len(text_lines(t))))

    scifact = load_scifact(DATA / "scifact-allenai" / "scifact.zip", "test")
    docs = dict(list(scifact.corpus.items())[:6])
    claims = dict(list(scifact.queries.items())[:8])
    specs.append(Spec(
        "beir-corpus", {"toy/corpus.jsonl": written(lambda p: write_corpus_jsonl(docs, p))},
        "toy/corpus.jsonl", lambda d, s, r: records(
            (k, v.title, v.text) for k, v in read_beir_corpus(d / "archive.zip", "toy/corpus.jsonl", skip_bad=s,
                                                              report=r).items()),
        lambda t: len(text_lines(t)), container="zip", syntax=b'{}:,"', fields=(b'"_id"', b'"text"', b'"title"')))
    nq = [json.loads(line) for line in head_lines(DATA / "nq-open" / "NQ-open.dev.jsonl", 10).splitlines()]
    queries = {**claims, **{f"nq{i}": Query(f"nq{i}", r["question"], tuple(r["answer"]))
                            for i, r in enumerate(nq[:4])}}
    specs.append(Spec(
        "beir-queries", {"queries.jsonl": written(lambda p: write_queries_jsonl(queries, p))},
        "queries.jsonl", lambda d, s, r: records(
            (k, v.text, v.answers) for k, v in read_beir_queries(d / "queries.jsonl", skip_bad=s, report=r).items()),
        lambda t: len(text_lines(t)), syntax=b'{}[]:,"', fields=(b'"_id"', b'"text"', b'"answers"')))
    qrels = dict(list(scifact.qrels.items())[:12])
    specs.append(Spec(
        "beir-qrels", {"test.tsv": written(lambda p: write_qrels_tsv(qrels, p))},
        "test.tsv", lambda d, s, r: records(
            (q, doc, g) for q, j in read_beir_qrels(d / "test.tsv", skip_bad=s, report=r).items()
            for doc, g in j.items()), lambda t: len(text_lines(t)) - 1, fields=(b"query-id", b"corpus-id")))
    trecqa = load_trecqa(DATA / "trecqa", "test")
    cands = dict(list(trecqa.candidates.items())[:3])
    specs.append(Spec(
        "candidates", {"candidates.tsv": written(lambda p: write_candidates_tsv(cands, p))},
        "candidates.tsv", lambda d, s, r: records(  # a record is one query's ranked list
            (q, tuple(ids)) for q, ids in read_candidates(d / "candidates.tsv", skip_bad=s, report=r).items()),
        lambda t: len({line.split("\t")[0] for line in text_lines(t)[1:]}), fields=(b"query-id", b"rank")))

    specs.append(Spec(
        "glasgow-docs", {"cran.all.1400": glasgow_records(DATA / "cranfield" / "cran.all.1400", 5)},
        "cran.all.1400", lambda d, s, r: records(
            (k, v.title, v.text) for k, v in read_glasgow_documents(d / "cran.all.1400", skip_bad=s,
                                                                    report=r).items()),
        lambda t: len(re.findall(r"^\.I\b", t, re.M)), fields=(b".T", b".W")))
    specs.append(Spec(
        "glasgow-queries", {"CISI.QRY": glasgow_records(DATA / "cisi" / "CISI.QRY", 6)},
        "CISI.QRY", lambda d, s, r: records(
            (k, v.text, json.dumps(v.meta, sort_keys=True))
            for k, v in read_glasgow_queries(d / "CISI.QRY", skip_bad=s, report=r).items()),
        lambda t: len(re.findall(r"^\.I\b", t, re.M)), fields=(b".W", b".I")))
    specs.append(Spec(
        "cranfield-qrels", {"cranqrel": head_lines(DATA / "cranfield" / "cranqrel", 15)},
        "cranqrel", lambda d, s, r: records(
            (q, doc, g) for q, j in read_cranfield_qrels(d / "cranqrel", skip_bad=s, report=r).items()
            for doc, g in j.items()), lambda t: len(text_lines(t))))
    specs.append(Spec(
        "cisi-qrels", {"CISI.REL": head_lines(DATA / "cisi" / "CISI.REL", 15)},
        "CISI.REL", lambda d, s, r: records(
            (q, doc, g) for q, j in read_cisi_qrels(d / "CISI.REL", skip_bad=s, report=r).items()
            for doc, g in j.items()), lambda t: len(text_lines(t))))

    sci_zip = DATA / "scifact-allenai" / "scifact.zip"
    corpus_csv = zip_member(sci_zip, "corpus_train.csv").decode()
    rows = list(csv.reader(io.StringIO(corpus_csv)))[:6]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    specs.append(Spec(
        "scifact-corpus", {"corpus_train.csv": out.getvalue().encode()},
        "corpus_train.csv", lambda d, s, r: records(
            (k, v.title, v.text) for k, v in read_scifact_corpus(d / "scifact.zip", skip_bad=s, report=r).items()),
        lambda t: _csv_records(t), container="zip", zip_name="scifact.zip", syntax=b"\"'[],",
        fields=(b"doc_id", b"abstract")))

    def read_claims(d, s, r):
        qs, qr = read_scifact_claims(d / "scifact.zip", "test", skip_bad=s, report=r)
        return records((k, v.text, tuple(qr.get(k, {}))) for k, v in qs.items())
    specs.append(Spec(
        "scifact-claims", {"claims_validation.csv": b"".join(
            zip_member(sci_zip, "claims_validation.csv").splitlines(keepends=True)[:15])},
        "claims_validation.csv", read_claims, lambda t: _csv_records(t, distinct_first=True), container="zip",
        zip_name="scifact.zip", syntax=b'"[],', fields=(b"claim", b"cited_doc_ids")))

    wikiqa = {f"test/{n}": head_lines(DATA / "wikiqa-castorini" / "test" / n, 12)
              for n in ("a.toks", "b.toks", "sim.txt", "id.txt")}
    for name in wikiqa:
        specs.append(Spec(
            f"wikiqa-{name.split('/')[1]}", wikiqa, name, lambda d, s, r: records(
                (q, ds.queries[q].text, ds.corpus[doc].text, g) for ds in [load_wikiqa(d, "test", skip_bad=s,
                                                                                       report=r)]
                for q, j in ds.qrels.items() for doc, g in j.items()),
            lambda t: len(t.split("\n")) - t.endswith("\n"), same_folder_errors=True))

    test_xml = (DATA / "trecqa" / "TEST.xml").read_bytes()
    cut = [m.start() for m in re.finditer(rb"^<QApairs ", test_xml, re.M)][4]

    def read_trecqa(d, s, r):
        ds = load_trecqa(d, "test", skip_bad=s, report=r)
        return records((q, ds.queries[q].text, tuple((ds.corpus[doc].text, ds.qrels[q][doc]) for doc in ids))
                       for q, ids in ds.candidates.items())
    specs.append(Spec(
        "trecqa", {"TEST.xml": test_xml[:cut]}, "TEST.xml", read_trecqa,
        lambda t: len(re.findall(r"^<QApairs", t, re.M)), syntax=b"<>/", fields=(b"negative", b"positive")))

    specs.append(Spec(
        "nq-open", {"nq.jsonl": head_lines(DATA / "nq-open" / "NQ-open.dev.jsonl", 12)}, "nq.jsonl",
        lambda d, s, r: records((q.text, q.answers) for q in read_nq_open(d / "nq.jsonl", skip_bad=s,
                                                                           report=r).values()),
        lambda t: len(text_lines(t)), syntax=b'{}[]:,"', fields=(b'"question"', b'"answer"')))
    specs.append(Spec(
        "webquestions", {"test.json": json_array_head(DATA / "webquestions" / "test.json", 8, None)}, "test.json",
        lambda d, s, r: records((k, q.text, q.answers) for k, q in read_webquestions(
            d / "test.json", skip_bad=s, report=r).items()),
        lambda t: _objects(t), syntax=b'{}[]:,"', fields=(b'"qId"', b'"qText"', b'"answers"')))
    specs.append(Spec(
        "curatedtrec", {"curated-test.tsv": head_lines(DATA / "curatedtrec" / "curated-test.tsv", 12)},
        "curated-test.tsv", lambda d, s, r: records(
            (k, q.text, q.answers) for k, q in read_curatedtrec(d / "curated-test.tsv", skip_bad=s,
                                                                report=r).items()),
        lambda t: len(text_lines(t))))
    specs.append(Spec(
        "entityquestions", {"test/P17.test.json": json_array_head(DATA / "entityquestions" / "test" /
                                                                  "P17.test.json", 6, 4)},
        "test/P17.test.json", lambda d, s, r: records(
            (q.text, q.answers) for q in read_entityquestions(d, "test", skip_bad=s, report=r).values()),
        lambda t: _objects(t), syntax=b'{}[]:,"', fields=(b'"question"', b'"answers"')))

    qas = "".join(f"{r['question']}\t{r['answer']!r}\n" for r in nq)  # DPR writes Python's repr of the list
    specs.append(Spec(
        "dpr-qas", {"nq-test.qa.csv": qas.encode()}, "nq-test.qa.csv",
        lambda d, s, r: records((q.text, q.answers) for q in read_dpr_qas(d / "nq-test.qa.csv", skip_bad=s,
                                                                           report=r).values()),
        lambda t: len(text_lines(t)), syntax=b"[],'\""))
    squad = json.loads(zip_member(DATA / "squad-v1.1" / "dev-v1.1.json.zip", "dev-v1.1.json"))
    article = squad["data"][0]
    paragraphs = article["paragraphs"][:3]
    out = io.StringIO()
    writer = csv.writer(out, delimiter="\t", lineterminator="\n")
    writer.writerow(["id", "text", "title"])
    writer.writerows([str(i + 1), p["context"], article["title"].replace("_", " ")] for i, p in enumerate(paragraphs))
    specs.append(Spec(
        "dpr-passages", {"psgs_w100.tsv": out.getvalue().encode()}, "psgs_w100.tsv",
        lambda d, s, r: records((p.id, p.text, p.title) for p in iter_dpr_passages(
            d / "psgs_w100.tsv.gz", skip_bad=s, report=r)),
        lambda t: _csv_records(t, delimiter="\t"), container="gz", syntax=b'"', fields=(b"title",)))
    examples = [TrainingExample(Query(str(i), r["question"], tuple(r["answer"])),
                                [Document(str(i + 1), p["context"][:300], article["title"])])
                for i, (r, p) in enumerate(zip(nq, paragraphs))]
    specs.append(Spec(
        "dpr-retriever-json", {"train.json": written(lambda p: write_dpr_retriever_json(examples, p))},
        "train.json", lambda d, s, r: records(
            (e.query.id, e.query.text, e.query.answers, tuple((c.id, c.text) for c in e.positives))
            for e in read_dpr_retriever_json(d / "train.json", skip_bad=s, report=r)),
        lambda t: _objects(t), syntax=b'{}[]:,"', fields=(b'"question"', b'"positive_ctxs"')))
    small = {"version": squad["version"], "data": [{"title": article["title"], "paragraphs": [
        {"context": p["context"], "qas": p["qas"][:3]} for p in paragraphs]}]}

    def read_small_squad(d, s, r):
        return records((q.id, q.question, tuple((a.text, a.start) for a in q.answers))
                       for a in read_squad(d / "dev.json.zip", skip_bad=s, report=r)
                       for p in a.paragraphs for q in p.questions)
    specs.append(Spec(
        "squad", {"dev-v1.1.json": json.dumps(small).encode()}, "dev-v1.1.json", read_small_squad,
        lambda t: t.count('"question"'), container="zip", zip_name="dev.json.zip", syntax=b'{}[]:,"',
        fields=(b'"id"', b'"answer_start"'), has_lines=False))

    qrel_lines = head_lines(DATA / "msmarco-passage-topics-qrels" / "qrels.dl19-passage.txt", 12).decode().split()
    run = "".join(f"{q} Q0 {doc} {i + 1} {10.0 - i / 4!r} bm25\n"
                  for i, (q, doc) in enumerate(zip(qrel_lines[0::4], qrel_lines[2::4])))
    specs.append(Spec(
        "trec-run", {"run.trec": run.encode()}, "run.trec",
        lambda d, s, r: records((q, doc, v) for q, scores in read_run(d / "run.trec").items()
                                for doc, v in scores.items()),
        lambda t: len(text_lines(t)), has_skip=False))
    return {spec.name: spec for spec in specs}


def _objects(text: str) -> int:
    """Oracle: elements of a JSON array; when the text no longer parses, one per line that starts with "{" (the
    writers put each element on its own line; a line break inserted before an inner "{" keeps the JSON valid, so a
    valid array is counted by parsing it)."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list):
        return len(value)
    return sum(line.strip().startswith("{") for line in text.split("\n"))


def _csv_records(text: str, delimiter: str = ",", distinct_first: bool = False) -> int:
    """Oracle: records of a CSV text with a header (claims: distinct ids, as claims repeat per evidence row)."""
    try:
        rows = [row for row in csv.reader(io.StringIO(text), delimiter=delimiter) if row][1:]
    except csv.Error:
        return 0
    return len({row[0] for row in rows}) if distinct_first else len(rows)


# ---- mutations ----------------------------------------------------------------------------------------------------

def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


@st.composite
def mutations(draw, spec: Spec):
    """(kind, function that maps the target's bytes (uncompressed, or the archive's for damage_archive) to bytes)."""
    kinds = list(HARMLESS + TEXT_KINDS)
    if spec.syntax:
        kinds.append("broken_syntax")
    if spec.fields:
        kinds.append("rename_field")
    if spec.container != "plain":
        kinds.append("damage_archive")
    kind = draw(st.sampled_from(kinds))
    data = spec.files[spec.target]
    n_lines, size = len(lines_of(data)), len(data)
    if kind == "bom":
        return kind, lambda b: b"\xef\xbb\xbf" + b
    if kind == "crlf":
        return kind, lambda b: re.sub(rb"\r?\n", b"\r\n", b)
    if kind in ("delete_line", "duplicate_line"):
        i = draw(st.integers(0, n_lines - 1))

        def edit(b, i=i, dup=kind == "duplicate_line"):
            lines = lines_of(b)
            return b"".join(lines[:i + 1] + lines[i:] if dup else lines[:i] + lines[i + 1:])
        return kind, edit
    if kind == "swap_lines":
        i, j = draw(st.integers(0, n_lines - 1)), draw(st.integers(0, n_lines - 1))

        def swap(b, i=i, j=j):
            lines = lines_of(b)
            lines[i], lines[j] = lines[j], lines[i]
            return b"".join(lines)
        return kind, swap
    if kind == "truncate":
        k = draw(st.integers(1, size - 1))
        return kind, lambda b, k=k: b[:k]
    if kind == "carriage_return":  # inside a line: never just before its "\n", which would make a CRLF line end
        k = draw(st.sampled_from([i for i in range(size + 1) if data[i:i + 1] != b"\n"]))
        return kind, lambda b, k=k: b[:k] + b"\r" + b[k:]
    if kind in ("invalid_utf8", "nul", "line_break"):
        k = draw(st.integers(0, size))
        junk = {"nul": b"\x00", "line_break": b"\n"}.get(kind) or draw(
            st.sampled_from([b"\xff", b"\xc3", b"\xe2\x82", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80"]))
        return kind, lambda b, k=k, junk=junk: b[:k] + junk + b[k:]
    if kind == "broken_syntax":
        spots = [i for i, c in enumerate(data) if c in spec.syntax]
        k = draw(st.sampled_from(spots))
        return kind, lambda b, k=k: b[:k] + b[k + 1:]
    if kind == "rename_field":
        name = draw(st.sampled_from(spec.fields))
        spots = [m.start() for m in re.finditer(re.escape(name), data)]
        k = draw(st.sampled_from(spots))
        new = draw(st.sampled_from([name[:-2] + name[-1:], name.upper(), name[:1] + b"x" + name[1:]]))
        return kind, lambda b, k=k, name=name, new=new: b[:k] + new + b[k + len(name):]
    assert kind == "damage_archive"
    how = draw(st.sampled_from(["flip", "truncate"]))
    frac = draw(st.floats(0, 1, allow_nan=False))
    bit = draw(st.integers(0, 7))

    def damage(b, how=how, frac=frac, bit=bit):
        k = min(int(frac * len(b)), len(b) - 1)
        return b[:k] if how == "truncate" else b[:k] + bytes([b[k] ^ (1 << bit)]) + b[k + 1:]
    return kind, damage


def write_sample(spec: Spec, root: Path, target_bytes: bytes) -> None:
    if root.exists():
        shutil.rmtree(root)
    files = {**spec.files, spec.target: target_bytes}
    if spec.container == "zip":
        root.mkdir(parents=True)
        with zipfile.ZipFile(root / spec.zip_name, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                archive.writestr(info, data, zipfile.ZIP_DEFLATED)
        return
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if spec.container == "gz" and name == spec.target:
            path = path.with_name(path.name + ".gz")
            data = gzip.compress(data, mtime=0)
        path.write_bytes(data)


def decoded(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return re.sub(r"\r\n", "\n", text[1:] if text.startswith("\ufeff") else text)


# ---- the property -------------------------------------------------------------------------------------------------

SPECS: dict[str, Spec] = {}
WORK = Path(tempfile.mkdtemp(prefix="taser-property-"))


def spec_for(name: str) -> Spec:
    if not SPECS:
        SPECS.update(build_specs())
        for spec in SPECS.values():
            root = WORK / "r0"
            write_sample(spec, root, spec.files[spec.target])
            report = SkipReport()
            spec.r0 = spec.read(root, False, report)
            assert spec.r0 and not report.skipped, f"{spec.name}: the unmutated sample must read cleanly"
    return SPECS[name]


def check_error(spec: Spec, err: FormatError, root: Path, kind: str) -> None:
    target = str(spec.target_path(root))
    named = str(root) if spec.same_folder_errors else target
    assert err.path.startswith(named), f"{spec.name}/{kind}: error names {err.path}, not {named}: {err}"
    assert target in str(err) or spec.same_folder_errors
    if spec.has_lines and kind != "damage_archive":
        assert err.line is not None, f"{spec.name}/{kind}: error without a line: {err}"
    elif kind != "damage_archive":  # SQuAD's file is one line: errors name the record by its JSON path instead
        assert err.line is not None or err.field, f"{spec.name}/{kind}: error names neither line nor field: {err}"


def read(spec: Spec, root: Path, skip: bool, kind: str):
    """(records, report) or (None, error); any exception other than FormatError fails the test."""
    report = SkipReport()
    try:
        return spec.read(root, skip, report), report
    except FormatError as err:
        check_error(spec, err, root, kind)
        return None, err


@pytest.fixture(scope="module", autouse=True)
def _summary():
    yield
    if not TRIED:
        return
    lines = ["", "mutations tried per format (kind: examples) and outcomes:"]
    for name in sorted({f for f, _ in TRIED}):
        kinds = {k: n for (f, k), n in sorted(TRIED.items()) if f == name}
        outcomes = {o: n for (f, o), n in sorted(OUTCOMES.items()) if f == name}
        lines.append(f"  {name}: {sum(kinds.values())} tried {kinds}; outcomes {outcomes}")
    print("\n".join(lines))
    if os.environ.get("TASER_PROPERTY_REPORT"):
        Path(os.environ["TASER_PROPERTY_REPORT"]).write_text(json.dumps(
            {"tried": {f"{f}/{k}": n for (f, k), n in TRIED.items()},
             "outcomes": {f"{f}/{o}": n for (f, o), n in OUTCOMES.items()}}, indent=1, sort_keys=True))
    shutil.rmtree(WORK, ignore_errors=True)


FORMATS = ["trec-topics", "trec-qrels", "nfcorpus-docs", "beir-corpus", "beir-queries", "beir-qrels", "candidates",
           "glasgow-docs", "glasgow-queries", "cranfield-qrels", "cisi-qrels", "scifact-corpus", "scifact-claims",
           "wikiqa-a.toks", "wikiqa-b.toks", "wikiqa-sim.txt", "wikiqa-id.txt", "trecqa", "nq-open", "webquestions",
           "curatedtrec", "entityquestions", "dpr-qas", "dpr-passages", "dpr-retriever-json", "squad", "trec-run"]


@pytest.mark.parametrize("name", FORMATS)
@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_mutated_real_sample(name, data):
    spec = spec_for(name)
    kind, mutate = data.draw(mutations(spec), label="mutation")
    TRIED[name, kind] += 1
    root = WORK / name
    if kind == "damage_archive":
        write_sample(spec, root, spec.files[spec.target])
        archive = spec.target_path(root)
        archive.write_bytes(mutate(archive.read_bytes()))
        text = None
    else:
        mutated = mutate(spec.files[spec.target])
        write_sample(spec, root, mutated)
        text = decoded(mutated)
    budget = BUDGET[kind]
    for skip in ((False, True) if spec.has_skip else (False,)):
        got, extra = read(spec, root, skip, kind)
        if got is None:
            OUTCOMES[name, "skip: error" if skip else "error"] += 1
            continue
        if kind in HARMLESS or kind == "damage_archive":
            assert got == spec.r0, f"{name}/{kind}: records differ after a harmless mutation"
            assert not extra.skipped, f"{name}/{kind}: skipped {extra}"
            OUTCOMES[name, "skip: same" if skip else "same"] += 1
            continue
        if kind == "carriage_return":  # csv and str.splitlines would cut the line there: never read silently
            assert extra.skipped, f"{name}: a carriage return inside a line was read without an error or a report"
        new = sum((got - spec.r0).values())
        assert new <= budget, f"{name}/{kind}: {new} records changed or new (budget {budget}): {got - spec.r0}"
        for err in extra.skipped:
            check_error(spec, err, root, kind)
        n = spec.count(text)
        assert sum(got.values()) + len(extra.skipped) >= n, \
            f"{name}/{kind}: the file holds {n} records, {sum(got.values())} returned, {len(extra)} reported"
        outcome = "same" if got == spec.r0 else "subset" if not got - spec.r0 else "changed"
        OUTCOMES[name, f"skip: {outcome}{' + reported' if extra.skipped else ''}" if skip else outcome] += 1
