"""Each loader on small hand-made files: a malformed record is a FormatError naming file, line and field; with
skip_bad=True it is skipped and counted in the SkipReport, and the good records still load."""

from __future__ import annotations

import json
import zipfile

import pytest

from taser_lib.data.formats._common import SkipReport, iter_json_array
from taser_lib.datasets.formats.answer_selection import load_trecqa, load_wikiqa
from taser_lib.data.formats.beir import load_beir, read_beir_corpus, read_beir_qrels, read_beir_queries
from taser_lib.data.formats.dpr import iter_dpr_passages, read_dpr_qas
from taser_lib.datasets.formats.glasgow import load_cranfield, read_cisi_qrels, read_glasgow_documents
from taser_lib.datasets.formats.nfcorpus import read_nfcorpus_docs
from taser_lib.datasets.formats.qa import read_curatedtrec, read_entityquestions, read_nq_open, read_webquestions
from taser_lib.datasets.formats.scifact import load_scifact, parse_doc_ids, parse_string_array
from taser_lib.data.formats.squad import read_squad
from taser_lib.data.formats.trec import read_trec_qrels, read_trec_topics
from taser_lib.errors import FormatError


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def expect_error(call, path, line, field):
    with pytest.raises(FormatError) as info:
        call()
    err = info.value
    assert (err.path, err.line, err.field) == (str(path), line, field)
    assert str(path) in str(err)
    return err


def test_trec_topics(tmp_path):
    path = write(tmp_path / "topics.tsv", "1\tfirst query\n2 no tab here\n3\tthird\n")
    expect_error(lambda: read_trec_topics(path), path, 2, "text")
    report = SkipReport()
    topics = read_trec_topics(path, skip_bad=True, report=report)
    assert list(topics) == ["1", "3"] and len(report) == 1 and report.skipped[0].line == 2
    dup = write(tmp_path / "dup.tsv", "1\ta\n1\tb\n")
    expect_error(lambda: read_trec_topics(dup), dup, 2, "query_id")


def test_trec_qrels(tmp_path):
    path = write(tmp_path / "qrels.txt", "q1 0 d1 1\nq1 0 d2 x\nq1 0 d3\nq2 Q0 d1 2\n")
    expect_error(lambda: read_trec_qrels(path), path, 2, "relevance")
    report = SkipReport()
    qrels = read_trec_qrels(path, skip_bad=True, report=report)
    assert qrels == {"q1": {"d1": 1}, "q2": {"d1": 2}}
    assert [(e.line, e.field) for e in report.skipped] == [(2, "relevance"), (3, "relevance")]
    twice = write(tmp_path / "twice.txt", "q1 0 d1 1\nq1 0 d1 0\n")
    expect_error(lambda: read_trec_qrels(twice), twice, 2, "doc_id")


def test_beir_files(tmp_path):
    corpus = write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": "T", "text": "x"}\n{not json}\n'
                                               '{"title": "no id", "text": "y"}\n')
    expect_error(lambda: read_beir_corpus(corpus), corpus, 2, None)
    report = SkipReport()
    assert list(read_beir_corpus(corpus, skip_bad=True, report=report)) == ["d1"]
    assert [(e.line, e.field) for e in report.skipped] == [(2, None), (3, "_id")]
    queries = write(tmp_path / "queries.jsonl", '{"_id": "q1", "text": "a", "answers": "not a list"}\n')
    expect_error(lambda: read_beir_queries(queries), queries, 1, "answers")
    qrels = write(tmp_path / "qrels" / "test.tsv", "qid\tdocid\tscore\nq1\td1\t1\n")
    expect_error(lambda: read_beir_qrels(qrels), qrels, 1, None)  # BEIR's header is query-id corpus-id score
    write(qrels, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n")
    write(queries, '{"_id": "q1", "text": "a"}\n')
    write(corpus, '{"_id": "d1", "title": "T", "text": "x"}\n')
    with pytest.raises(FormatError, match="not in queries.jsonl"):
        load_beir(tmp_path, "test")


def test_glasgow_records(tmp_path):
    path = write(tmp_path / "docs", ".I 1\n.T\ntitle one\n.W\ntext\none\n.I 2\n.Z\nbad tag\n.I 3\n.T\nthree\n")
    expect_error(lambda: read_glasgow_documents(path), path, 8, ".Z")
    report = SkipReport()
    docs = read_glasgow_documents(path, skip_bad=True, report=report)
    assert list(docs) == ["1", "3"] and docs["1"].text == "text one" and docs["1"].title == "title one"
    assert len(report) == 1
    before = write(tmp_path / "before", "stray text\n.I 1\n.W\nx\n")
    expect_error(lambda: read_glasgow_documents(before), before, 1, None)
    dup = write(tmp_path / "dup", ".I 1\n.W\nx\n.I 1\n.W\ny\n")
    expect_error(lambda: read_glasgow_documents(dup), dup, 4, ".I")
    repeated = write(tmp_path / "authors", ".I 7\n.A\nSmith, A.\n.A\nJones, B.\n.W\nbody\n")
    assert read_glasgow_documents(repeated)["7"].text == "body"


def test_cranfield_qrels_and_ids(tmp_path):
    write(tmp_path / "cran.all.1400", ".I 1\n.T\nt\n.W\nw\n.I 2\n.W\nv\n")
    write(tmp_path / "cran.qry", ".I 001\n.W\nfirst\n.I 004\n.W\nsecond\n")
    qrels = write(tmp_path / "cranqrel", "1 1 1\n2 2 4\n2 1 -1\n1 2 5\n")
    expect_error(lambda: load_cranfield(tmp_path), qrels, 4, "code")
    report = SkipReport()
    data = load_cranfield(tmp_path, skip_bad=True, report=report)
    # Queries are numbered by position (004 is query 2); codes 1 -> 4, 4 -> 1, -1 -> 0.
    assert data.queries["2"].meta["original_id"] == "004"
    assert data.qrels == {"1": {"1": 4}, "2": {"2": 1, "1": 0}} and len(report) == 1
    write(qrels, "1 1 1\n3 1 2\n")  # query 3 does not exist
    with pytest.raises(FormatError, match="judged query '3'"):
        load_cranfield(tmp_path)


def test_cisi_qrels(tmp_path):
    path = write(tmp_path / "CISI.REL", "     1     28\t0\t0.000000\n     1\n")
    expect_error(lambda: read_cisi_qrels(path), path, 2, "doc_id")
    assert read_cisi_qrels(path, skip_bad=True) == {"1": {"28": 1}}


def test_scifact_literals():
    assert parse_string_array("['a b.'\n \"it's\" 'c']", "f", 1, "abstract") == ["a b.", "it's", "c"]
    with pytest.raises(FormatError) as info:
        parse_string_array("['a', 'b']", "f", 3, "abstract")  # commas are not numpy's repr
    assert (info.value.line, info.value.field) == (3, "abstract")
    assert parse_doc_ids("[ 5152028 11705328]", "f", 1, "cited_doc_ids") == ["5152028", "11705328"]
    assert parse_doc_ids("[]", "f", 1, "cited_doc_ids") == []
    with pytest.raises(FormatError):
        parse_doc_ids("[12, 13]", "f", 1, "cited_doc_ids")


def test_scifact_zip(tmp_path):
    path = tmp_path / "scifact.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("corpus_train.csv", 'doc_id,title,abstract,structured\n'
                                             '1,T1,"[\'One.\'\n \'Two.\']",False\n'
                                             '2,T2,"not a list",False\n')
        archive.writestr("claims_validation.csv", "id,claim,evidence_doc_id,evidence_label,evidence_sentences,"
                                                  "cited_doc_ids\n7,A claim.,,,[],[1]\n8,Other.,,,[],[1 x]\n")
    expect_error(lambda: load_scifact(path), f"{path}!corpus_train.csv", 4, "abstract")
    report = SkipReport()
    data = load_scifact(path, skip_bad=True, report=report)
    assert data.corpus["1"].text == "One. Two." and data.corpus["1"].title == "T1"
    assert data.qrels == {"7": {"1": 1}}
    assert [(e.line, e.field) for e in report.skipped] == [(4, "abstract"), (3, "cited_doc_ids")]


def test_nfcorpus_docs(tmp_path):
    path = write(tmp_path / "test.docs", "MED-1\tsome text\nMED-2 missing tab\n")
    expect_error(lambda: read_nfcorpus_docs(path), path, 2, "text")
    assert list(read_nfcorpus_docs(path, skip_bad=True)) == ["MED-1"]


def test_wikiqa(tmp_path):
    split = tmp_path / "test"
    write(split / "a.toks", "q one ?\nq one ?\nq two ?\n")
    write(split / "b.toks", "s1\ns2\ns3\n")
    write(split / "id.txt", "1\n1\n2\n")
    write(split / "sim.txt", "1\n0\n2\n")
    expect_error(lambda: load_wikiqa(tmp_path, "test"), split / "sim.txt", 3, "label")
    data = load_wikiqa(tmp_path, "test", skip_bad=True)
    assert data.candidates == {"1": ["1-0", "1-1"]} and data.qrels == {"1": {"1-0": 1, "1-1": 0}}
    write(split / "sim.txt", "1\n0\n")
    with pytest.raises(FormatError, match="differ in length"):
        load_wikiqa(tmp_path, "test")


def test_trecqa(tmp_path):
    good = "<QApairs id='1'>\n<question>\nWho\t?\nWP\t.\n</question>\n<positive>\nHe\tdid\nPRP\tVBD\n</positive>\n" \
           "<negative>\nNo\nDT\n</negative>\n</QApairs>\n"
    bad = "<QApairs id='2'>\n<positive>\nX\nNN\n</positive>\n</QApairs>\n"
    path = write(tmp_path / "TEST.xml", good + bad)
    expect_error(lambda: load_trecqa(tmp_path, "test"), path, 15, "question")
    data = load_trecqa(tmp_path, "test", skip_bad=True)
    assert data.queries["1"].text == "Who ?" and data.corpus["1-0"].text == "He did"
    assert data.qrels == {"1": {"1-0": 1, "1-1": 0}}
    write(path, good + "garbage between blocks\n")
    expect_error(lambda: load_trecqa(tmp_path, "test"), path, 15, "QApairs")


def test_nq_open(tmp_path):
    path = write(tmp_path / "nq.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": "r", "answer": []}\n'
                                        '{"question": "s"\n')
    expect_error(lambda: read_nq_open(path), path, 2, "answer")
    report = SkipReport()
    assert list(read_nq_open(path, skip_bad=True, report=report)) == ["0"]
    assert [(e.line, e.field) for e in report.skipped] == [(2, "answer"), (3, None)]


def test_webquestions(tmp_path):
    path = write(tmp_path / "wq.json", '[\n {"qId": "a", "qText": "q?", "answers": ["x"]},\n'
                                       ' {"qId": "b", "answers": ["y"]}\n]\n')
    expect_error(lambda: read_webquestions(path), path, 3, "qText")
    assert list(read_webquestions(path, skip_bad=True)) == ["a"]


def test_curatedtrec(tmp_path):
    path = write(tmp_path / "c.tsv", "1\tfactoid\tWho?\tSmith|Jones\n2\tfactoid\tWhat?\t(unclosed\n")
    expect_error(lambda: read_curatedtrec(path), path, 2, "answer_pattern")
    queries = read_curatedtrec(path, skip_bad=True)
    assert queries["1"].answers == ("Smith|Jones",) and queries["1"].answers_are_patterns


def test_entityquestions(tmp_path):
    path = write(tmp_path / "test" / "P17.test.json", '[\n  {"question": "Q?", "answers": ["A"]},\n'
                                                      '  {"question": "R?", "answers": "B"}\n]')
    expect_error(lambda: read_entityquestions(tmp_path, "test"), path, 3, "answers")
    queries = read_entityquestions(tmp_path, "test", skip_bad=True)
    assert list(queries) == ["P17-0"] and queries["P17-0"].meta == {"relation": "P17"}
    with pytest.raises(ValueError, match="unknown relation"):
        read_entityquestions(tmp_path, "test", ["P999"])


def test_dpr_qas(tmp_path):
    path = write(tmp_path / "qas.csv",
                 "who is it?\t['Ann', 'Anne']\n\"a \"\"quoted\"\" q\"\t['x']\nwhat?\tnot a list\n")
    expect_error(lambda: read_dpr_qas(path), path, 3, "answers")
    queries = read_dpr_qas(path, skip_bad=True)
    assert queries["0"].answers == ("Ann", "Anne") and queries["1"].text == 'a "quoted" q'


def test_dpr_passages(tmp_path):
    path = write(tmp_path / "psgs.tsv", 'id\ttext\ttitle\n1\t"He said ""hi"""\tAaron\n2\tonly two\n')
    expect_error(lambda: list(iter_dpr_passages(path)), path, 3, None)
    docs = list(iter_dpr_passages(path, skip_bad=True))
    assert [(d.id, d.text, d.title) for d in docs] == [("1", 'He said "hi"', "Aaron")]
    headless = write(tmp_path / "nohead.tsv", "1\ttext\ttitle\n")
    expect_error(lambda: list(iter_dpr_passages(headless)), headless, 1, None)


def test_squad_span_check(tmp_path):
    doc = {"version": "1.1", "data": [{"title": "T_1", "paragraphs": [{"context": "Paris is in France.", "qas": [
        {"id": "a", "question": "Where?", "answers": [{"text": "France", "answer_start": 12}]},
        {"id": "b", "question": "What?", "answers": [{"text": "France", "answer_start": 3}]}]}]}]}
    path = write(tmp_path / "squad.json", json.dumps(doc))
    expect_error(lambda: read_squad(path), path, None, "data[0].paragraphs[0].qas[1].answers[0].answer_start")
    articles = read_squad(path, skip_bad=True)
    assert [q.id for q in articles[0].paragraphs[0].questions] == ["a"]
    assert articles[0].display_title == "T 1"


def test_json_array_stream(tmp_path):
    items = [{"i": i, "pad": "x" * i} for i in range(30)] + [123, "s", None]
    path = write(tmp_path / "a.json", json.dumps(items, indent=1))
    for chunk in (1, 5, 64, 1 << 20):  # elements straddling read chunks must parse the same
        assert [e for _, e in iter_json_array(path, chunk_chars=chunk)] == items
    lines = path.read_text().split("\n")
    assert all(lines[line - 1].strip().startswith("{") for line, _ in list(iter_json_array(path))[:30])
    for text, line in (("[1, 2", 1), ("[1,\n 2\n 3]", 3), ("{}", 1), ("[1] trailing", 1)):
        broken = write(tmp_path / "b.json", text)
        with pytest.raises(FormatError) as info:
            list(iter_json_array(broken, chunk_chars=2))
        assert info.value.line == line


def test_beir_zip(tmp_path):
    path = tmp_path / "toy.zip"
    files = {"corpus.jsonl": '{"_id": "d1", "title": "T", "text": "x"}\n{"_id": "d2", "text": "y"}\n',
             "queries.jsonl": '{"_id": "q1", "text": "a"}\n{"_id": "q2", "text": "b"}\n',
             "qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td2\t1\n"}
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(f"toy/{name}", text)
    data = load_beir(path, "test")
    assert data.corpus["d2"].title == "" and list(data.queries) == ["q1"] and data.qrels == {"q1": {"d2": 1}}
    with pytest.raises(FormatError, match="toy/qrels/dev.tsv"):
        load_beir(path, "dev")
    with zipfile.ZipFile(path, "a") as archive:  # a second dataset in the same zip (as cqadupstack's forums)
        for name, text in files.items():
            archive.writestr(f"toy/other/{name}", text)
    with pytest.raises(FormatError, match="pass subset"):
        load_beir(path, "test")
    assert load_beir(path, "test", subset="other").qrels == {"q1": {"d2": 1}}


def test_load_corpus_file(tmp_path):
    from taser_lib.data.formats import load_corpus_file

    jsonl = write(tmp_path / "corpus.jsonl", '{"_id": "d1", "title": "T", "text": "x"}\n')
    tsv = write(tmp_path / "psgs.tsv", "id\ttext\ttitle\nd1\tx\tT\n")
    assert load_corpus_file(jsonl) == load_corpus_file(tsv) == load_corpus_file(tmp_path)
    with pytest.raises(FormatError, match="unknown corpus format"):
        load_corpus_file(write(tmp_path / "c.txt", "x"))
