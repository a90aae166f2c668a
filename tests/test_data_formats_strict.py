"""The cases of issue 14, one by one: bad bytes, damaged archives, structure, BOMs and empty ids give a FormatError
naming file and line (or a skip report), never a bare exception or a silent merge. (tests/test_readers_property.py
tries the same on thousands of mutated real samples.)"""

from __future__ import annotations

import gzip
import json
import zipfile

import pytest

from taser_lib.data.formats._common import SkipReport, parse_string_list
from taser_lib.datasets.formats.answer_selection import load_trecqa, load_wikiqa
from taser_lib.data.formats.beir import read_beir_corpus, read_beir_qrels, read_beir_queries
from taser_lib.data.formats.dpr import read_dpr_qas
from taser_lib.datasets.formats.glasgow import read_glasgow_documents, read_glasgow_queries
from taser_lib.datasets.formats.qa import read_curatedtrec, read_webquestions
from taser_lib.datasets.formats.scifact import load_scifact
from taser_lib.data.formats.squad import read_squad
from taser_lib.data.formats.trec import read_trec_qrels, read_trec_topics
from taser_lib.data.text import read_lines
from taser_lib.data.training_examples import read_dpr_retriever_json
from taser_lib.errors import FormatError
from taser_lib.retrieval.runs import read_run


def error_of(call) -> FormatError:
    with pytest.raises(FormatError) as info:
        call()
    return info.value


def test_invalid_utf8_names_file_line_and_byte_and_is_skippable(tmp_path):
    path = tmp_path / "topics.tsv"
    path.write_bytes(b"1\tfirst\n2\tbad \xff byte\n3\tthird\n")
    err = error_of(lambda: read_trec_topics(path))
    assert (err.path, err.line) == (str(path), 2) and "invalid UTF-8 at byte 7" in str(err)
    report = SkipReport()
    assert list(read_trec_topics(path, skip_bad=True, report=report)) == ["1", "3"]
    assert [e.line for e in report.skipped] == [2]
    run = tmp_path / "run.trec"
    run.write_bytes(b"q1 Q0 d1 1 2.0 t\nq1 Q0 d\xff2 2 1.0 t\n")
    assert error_of(lambda: read_run(run)).line == 2


def test_bom_is_stripped_once_and_crlf_accepted(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_bytes(b"\xef\xbb\xbfq1 0 d1 1\r\nq1 0 d2 0\r\n")
    assert read_trec_qrels(qrels) == {"q1": {"d1": 1, "d2": 0}}  # one query, not "\ufeffq1" and "q1"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'\xef\xbb\xbf{"_id": "d1", "text": "x"}\r\n')
    assert list(read_beir_corpus(corpus)) == ["d1"]
    assert [line.text for line in read_lines(corpus)] == ['{"_id": "d1", "text": "x"}']
    twice = tmp_path / "twice.txt"
    twice.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbfa\n")
    assert [line.text for line in read_lines(twice)] == ["\ufeffa"]  # only one BOM is a BOM



def test_a_carriage_return_inside_a_line_is_a_located_error_or_a_reported_skip(tmp_path):
    """Issue 24: one bare \\r in an otherwise LF file once changed a record silently (csv and str.splitlines cut
    the line there); now the line is bad, like one that does not decode, in every reader."""
    topics = tmp_path / "topics.tsv"
    topics.write_bytes(b"1\tfirst\n2\tbroken\rline\n3\tthird\n")
    err = error_of(lambda: read_trec_topics(topics))
    assert (err.path, err.line) == (str(topics), 2) and "carriage return (\\r) at byte 9" in str(err)
    report = SkipReport()
    assert list(read_trec_topics(topics, skip_bad=True, report=report)) == ["1", "3"]
    assert [e.line for e in report.skipped] == [2]
    trec = tmp_path / "curated.tsv"
    trec.write_bytes(b"who wrote it\tShakes\rpeare\n")
    assert error_of(lambda: read_curatedtrec(trec)).line == 1
    mac = tmp_path / "mac.txt"  # old Mac line ends: the whole file is one line, and the error says why
    mac.write_bytes(b"q1 0 d1 1\rq1 0 d2 0\r")
    assert "CR-only" in str(error_of(lambda: read_trec_qrels(mac)))
    crlf = tmp_path / "crlf.txt"  # a CRLF line end stays harmless
    crlf.write_bytes(b"q1 0 d1 1\r\n")
    assert read_trec_qrels(crlf) == {"q1": {"d1": 1}}

def test_damaged_gzip_and_zip_are_format_errors(tmp_path):
    good = gzip.compress(b"".join(b"%d\tquery number %d\n" % (i, i) for i in range(2000)))
    for name, data in [("truncated.tsv.gz", good[: len(good) // 2]), ("notgz.tsv.gz", b"plain text\n"),
                       ("empty.tsv.gz", b""), ("flipped.tsv.gz", good[:40] + bytes([good[40] ^ 0xFF]) + good[41:])]:
        path = tmp_path / name
        path.write_bytes(data)
        err = error_of(lambda: read_trec_topics(path))
        assert err.path == str(path), name
    archive = tmp_path / "beir.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("x/corpus.jsonl", '{"_id": "d1", "text": "some text"}\n' * 3)
    data = bytearray(archive.read_bytes())
    data[data.index(b"some text") + 2] ^= 1  # stored data changed: the CRC-32 no longer matches
    archive.write_bytes(bytes(data))
    err = error_of(lambda: read_beir_corpus(archive, "x/corpus.jsonl"))
    assert err.path == f"{archive}!x/corpus.jsonl" and "BadZipFile" in str(err)
    (tmp_path / "junk.zip").write_bytes(b"not a zip")
    assert error_of(lambda: load_scifact(tmp_path / "junk.zip")).path.startswith(str(tmp_path / "junk.zip"))
    with pytest.raises(FileNotFoundError):  # a missing file is not a malformed one
        read_trec_topics(tmp_path / "missing.tsv")


def test_scifact_list_fields_are_parsed_not_evaluated(tmp_path):
    assert parse_string_list("['a\\nb' \"it's\"\n 'tab\\there' '\\u200b\\x41']", "f", 1, "abstract",
                             commas=False) == ["a\nb", "it's", "tab\there", "\u200bA"]
    for bad in ("['a'\n'b", "['a\nb']", "['a\x00' __import__('os')]", "['\\q']", "['a', 'b']"):
        with pytest.raises(FormatError):
            parse_string_list(bad, "f", 1, "abstract", commas=False)
    path = tmp_path / "scifact.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("corpus_train.csv", 'doc_id,title,abstract,structured\n1,T,"[\'line\nbreak\' \'x\x00\']",False\n')
        z.writestr("claims_validation.csv", "id,claim,cited_doc_ids\n")
    err = error_of(lambda: load_scifact(path))
    assert (err.line, err.field) == (2, "abstract")


def test_dpr_qas_answers_are_parsed_not_evaluated(tmp_path):
    path = tmp_path / "qas.csv"
    path.write_text("q1\t['a', \"b's\"]\nq2\t[__import__('os')]\nq3\t['x',]\n", encoding="utf-8")
    report = SkipReport()
    assert [q.answers for q in read_dpr_qas(path, skip_bad=True, report=report).values()] == [("a", "b's")]
    assert [(e.line, e.field) for e in report.skipped] == [(2, "answers"), (3, "answers")]


TRECQA_PAIR = ("<QApairs id='{id}'>\n<question>\nWho\t?\n</question>\n<positive>\nHe\tdid\n</positive>\n"
               "<negative>\nNo\n</negative>\n</QApairs>\n")


def test_trecqa_unclosed_or_repeated_tags_are_errors(tmp_path):
    good = TRECQA_PAIR.format(id=1)
    (tmp_path / "TEST.xml").write_text(good + TRECQA_PAIR.format(id=2), encoding="utf-8")
    assert len(load_trecqa(tmp_path, "test").corpus) == 4
    cases = {"unclosed block": (good.replace("</positive>\n", ""), 7, "negative"),
             "repeated tag": (good.replace("<negative>\n", "<negative>\n<negative>\n"), 9, "negative"),
             "unclosed pair": (good.replace("</QApairs>\n", ""), 1, "QApairs"),
             "stray end tag": (good.replace("</negative>\n", "</positive>\n"), 10, "positive"),
             "unknown tag": (good.replace("<negative>", "<Negative>"), 8, None)}
    for name, (text, line, field) in cases.items():
        (tmp_path / "TEST.xml").write_text(text + TRECQA_PAIR.format(id=2), encoding="utf-8")
        err = error_of(lambda: load_trecqa(tmp_path, "test"))
        assert (err.line, err.field) == (line, field), name
        report = SkipReport()
        data = load_trecqa(tmp_path, "test", skip_bad=True, report=report)
        assert list(data.queries) == ["2"] and len(report) == 1, name  # question 1 dropped whole, reported once


def test_glasgow_tags_are_matched_exactly(tmp_path):
    docs = tmp_path / "docs"
    docs.write_text(".I 1\n.T\ntitle\n.w\nlower-cased tag\n.I 2\n.T\nt\n.W\nw\n", encoding="utf-8")
    err = error_of(lambda: read_glasgow_documents(docs))
    assert (err.line, err.field) == (4, ".w")
    report = SkipReport()
    assert list(read_glasgow_documents(docs, skip_bad=True, report=report)) == ["2"] and len(report) == 1
    merged = tmp_path / "merged"  # a lost `.I` line: two records' fields in one
    merged.write_text(".I 1\n.T\na\n.W\nx\n.T\nb\n.W\ny\n", encoding="utf-8")
    assert error_of(lambda: read_glasgow_documents(merged)).field == ".T"
    queries = tmp_path / "queries"
    queries.write_text(".I 1\n.W\nfirst\n.W\nsecond\n", encoding="utf-8")
    assert error_of(lambda: read_glasgow_queries(queries)).line == 4


@pytest.mark.parametrize("reader, text, line, field", [
    (read_beir_corpus, '{"_id": "", "text": "x"}\n', 1, "_id"),
    (read_beir_queries, '{"_id": "  ", "text": "x"}\n', 1, "_id"),
    (read_beir_qrels, "query-id\tcorpus-id\tscore\n\td1\t1\n", 2, "query-id"),
    (read_beir_qrels, "query-id\tcorpus-id\tscore\nq1\t \t1\n", 2, "corpus-id"),
    (read_trec_topics, " \ttext\n", 1, "query_id"),
    (read_curatedtrec, " \tfactoid\tWho?\tx\n", 1, "id"),
    (read_webquestions, '[{"qId": " ", "qText": "q", "answers": ["a"]}]', 1, "qId"),
    (read_dpr_retriever_json, '[{"id": "", "question": "q", "positive_ctxs": []}]', 1, "id"),
])
def test_empty_ids_are_errors(tmp_path, reader, text, line, field):
    path = tmp_path / "f"
    path.write_text(text, encoding="utf-8")
    err = error_of(lambda: reader(path))
    assert (err.path, err.line, err.field) == (str(path), line, field)


def test_empty_ids_elsewhere(tmp_path):
    split = tmp_path / "test"
    split.mkdir()
    for name, text in {"a.toks": "q\n", "b.toks": "s\n", "sim.txt": "1\n", "id.txt": " \n"}.items():
        (split / name).write_text(text, encoding="utf-8")
    assert error_of(lambda: load_wikiqa(tmp_path, "test")).field == "id"
    (tmp_path / "TEST.xml").write_text(TRECQA_PAIR.format(id=" "), encoding="utf-8")
    assert error_of(lambda: load_trecqa(tmp_path, "test")).field == "id"
    docs = tmp_path / "docs"
    docs.write_text(".I  \n.W\nx\n", encoding="utf-8")
    assert error_of(lambda: read_glasgow_documents(docs)).field == ".I"
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "abc", "qas": [
        {"id": " ", "question": "q?", "answers": [{"text": "b", "answer_start": 1}]}]}]}]}), encoding="utf-8")
    assert error_of(lambda: read_squad(squad)).field.endswith(".id")


def test_a_key_repeated_in_one_json_object_is_an_error(tmp_path):
    path = tmp_path / "wq.json"
    path.write_text('[\n{"qId": "a", "qText": "q?", "qText": "r?", "answers": ["x"]},\n'
                    '{"qId": "b", "qText": "s?", "answers": ["y"]}\n]\n', encoding="utf-8")
    err = error_of(lambda: read_webquestions(path))
    assert (err.line, err.field) == (2, "qText")
    report = SkipReport()
    assert list(read_webquestions(path, skip_bad=True, report=report)) == ["b"] and len(report) == 1
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "_id": "d2", "text": "x"}\n', encoding="utf-8")
    assert error_of(lambda: read_beir_corpus(corpus)).field == "_id"
