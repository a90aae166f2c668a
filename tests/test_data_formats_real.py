"""Every loader on the real files of the offline mirror: counts must equal those verified in each SOURCE.md
(copied here by hand), plus cross-checks against an independent file where one exists."""

from __future__ import annotations

from collections import Counter

import pytest

from taser_lib.datasets.formats.answer_selection import load_trecqa, load_wikiqa
from taser_lib.datasets.formats.glasgow import load_cisi, load_cranfield
from taser_lib.datasets.formats.nfcorpus import load_nfcorpus
from taser_lib.datasets.formats.qa import (entityquestions_relations, load_curatedtrec, load_entityquestions,
                                       load_nq_open, load_webquestions)
from taser_lib.datasets.formats.scifact import load_scifact
from taser_lib.data.formats.squad import load_squad, read_squad
from taser_lib.data.formats.trec import read_trec_qrels, read_trec_topics


def n_qrels(qrels):
    return sum(len(v) for v in qrels.values())


def test_squad(shared_data):
    path = shared_data / "squad-v1.1" / "dev-v1.1.json.zip"
    articles = read_squad(path)
    paragraphs = [p for a in articles for p in a.paragraphs]
    questions = [q for p in paragraphs for q in p.questions]
    assert (len(articles), len(paragraphs), len(questions)) == (48, 2067, 10570)
    assert sum(len(q.answers) for q in questions) == 34726
    dataset = load_squad(path)
    assert (len(dataset.corpus), len(dataset.queries), n_qrels(dataset.qrels)) == (2067, 10570, 10570)
    assert dataset.corpus["0:0"].title == "Super Bowl 50"  # SQuAD's "Super_Bowl_50", with spaces as DPR titles


def test_scifact_equals_beir(shared_data):
    test = load_scifact(shared_data / "scifact-allenai" / "scifact.zip", "test")
    assert (len(test.corpus), len(test.queries), n_qrels(test.qrels)) == (5183, 300, 339)
    # Anserini's copy of BEIR SciFact test is an independent source for the same queries and qrels.
    beir = shared_data / "beir-topics-qrels"
    assert test.qrels == read_trec_qrels(beir / "qrels.beir-v1.0.0-scifact.test.txt")
    topics = read_trec_topics(beir / "topics.beir-v1.0.0-scifact.test.tsv.gz")
    assert {q: t.text for q, t in topics.items()} == {q: t.text for q, t in test.queries.items()}
    train = load_scifact(shared_data / "scifact-allenai" / "scifact.zip", "train")
    assert len(train.queries) == 809
    doc = test.corpus["4983"]  # first corpus row: its abstract's first sentence opens the joined text
    assert doc.text.startswith("Alterations of the architecture of cerebral white matter in the developing human "
                               "brain can affect cortical development and result in functional disabilities. A line")


def test_nfcorpus_mirrors_beir(shared_data):
    test = load_nfcorpus(shared_data / "nfcorpus", "test")
    assert (len(test.corpus), len(test.queries), n_qrels(test.qrels)) == (3162, 323, 12334)
    assert Counter(g for v in test.qrels.values() for g in v.values()) == {2: 576, 1: 11758}
    assert test.qrels == read_trec_qrels(shared_data / "beir-topics-qrels" / "qrels.beir-v1.0.0-nfcorpus.test.txt")
    everything = load_nfcorpus(shared_data / "nfcorpus", "test", judged_only=False, qrel_levels="3-2-1")
    assert len(everything.queries) == 325 and len(everything.qrels) == 325
    # SOURCE.md says 15819 (`wc -l`), but the file's last line has no newline: `grep -c .` counts 15820 records.
    assert n_qrels(everything.qrels) == 15820
    dev = load_nfcorpus(shared_data / "nfcorpus", "dev")
    assert (len(dev.corpus), len(dev.qrels), n_qrels(dev.qrels)) == (3193, 324, 11385)


def test_cranfield(shared_data):
    data = load_cranfield(shared_data / "cranfield")
    assert (len(data.corpus), len(data.queries), n_qrels(data.qrels)) == (1400, 225, 1837)
    assert len(data.qrels) == 225
    # The query-id quirk: the n-th query of cran.qry is query n of cranqrel; the file's .I runs 001 ... 365.
    assert data.queries["1"].meta["original_id"] == "001"
    assert data.queries["3"].meta["original_id"] == "004"
    assert data.queries["225"].meta["original_id"] == "365"
    assert data.queries["3"].text == "what problems of heat conduction in composite slabs have been solved so far ."
    # cranqrel's first line is "1 184 2": Cleverdon code 2 -> grade 3; code -1 ("no interest") -> 0, one per query.
    assert data.qrels["1"]["184"] == 3
    grades = Counter(g for v in data.qrels.values() for g in v.values())
    assert grades[0] == 225 and set(grades) == {0, 1, 2, 3, 4}
    assert data.corpus["1"].title == "experimental investigation of the aerodynamics of a wing in a slipstream ."


def test_cisi(shared_data):
    data = load_cisi(shared_data / "cisi")
    assert (len(data.corpus), len(data.queries), n_qrels(data.qrels), len(data.qrels)) == (1460, 112, 3114, 76)
    assert data.corpus["1"].title == "18 Editions of the Dewey Decimal Classifications"
    assert data.queries["3"].text == "What is information science? Give definitions where possible."
    assert set(g for v in data.qrels.values() for g in v.values()) == {1}


@pytest.mark.parametrize("split, pairs, questions", [("train", 8672, 873), ("dev", 1130, 126), ("test", 2351, 243)])
def test_wikiqa(shared_data, split, pairs, questions):
    data = load_wikiqa(shared_data / "wikiqa-castorini", split)
    assert (len(data.corpus), len(data.queries), n_qrels(data.qrels)) == (pairs, questions, pairs)
    assert sum(len(c) for c in data.candidates.values()) == pairs
    assert all(any(v.values()) for v in data.qrels.values())  # filtered WikiQA: every question has an answer


@pytest.mark.parametrize("split, questions, positive, negative",
                         [("train", 94, 348, 4370), ("dev", 82, 222, 926), ("test", 100, 284, 1233)])
def test_trecqa(shared_data, split, questions, positive, negative):
    data = load_trecqa(shared_data / "trecqa", split)
    grades = Counter(g for v in data.qrels.values() for g in v.values())
    assert len(data.queries) == questions and grades == {1: positive, 0: negative}
    if split == "test":  # TEST.xml opens with question 32.1 and its first (positive) candidate
        assert data.queries["32.1"].text == "What do practitioners of Wicca worship ?"
        assert data.corpus["32.1-0"].text.startswith("An estimated 50,000 Americans practice Wicca ,")
        assert data.qrels["32.1"]["32.1-0"] == 1


def test_question_sets(shared_data):
    nq = shared_data / "nq-open"
    assert [len(load_nq_open(nq, s).queries) for s in ("test", "efficientqa-dev", "efficientqa-test")] == \
        [3610, 1800, 1769]
    first = load_nq_open(nq, "test").queries["0"]
    assert first.text == "when was the last time anyone was on the moon"
    assert first.answers == ("14 December 1972 UTC", "December 1972")
    wq = shared_data / "webquestions"
    assert [len(load_webquestions(wq, s).queries) for s in ("trainmodel", "val", "devtest", "train", "test")] == \
        [2834, 755, 189, 3778, 2032]
    ct = shared_data / "curatedtrec"
    sizes = [len(load_curatedtrec(ct, s).queries) for s in ("train", "test", "full", "large2470-train",
                                                            "large2470-test")]
    assert sizes == [430, 430, 867, 1704, 766]
    test = load_curatedtrec(ct, "test").queries
    assert all(q.answers_are_patterns and len(q.answers) == 1 for q in test.values())
    assert test["2388"].answers == ("After the Fall|Finishing the Play",)


def test_entityquestions(shared_data):
    root = shared_data / "entityquestions"
    assert len(entityquestions_relations(root, "test")) == 24
    test = load_entityquestions(root, "test")
    assert len(test.queries) == 22075
    assert len({q.meta["relation"] for q in test.queries.values()}) == 24
    assert test.queries["P17-0"].text == "Which country is Darreh Sib located in?"
    assert test.queries["P17-0"].answers == ("Iran",)
    assert len(load_entityquestions(root, "dev").queries) == 22068
    assert len(load_entityquestions(root, "test", relations=["P17", "P19"]).queries) < 22075


def test_entityquestions_train(shared_data):
    assert len(load_entityquestions(shared_data / "entityquestions", "train").queries) == 176560


# SOURCE.md: topics / qrels lines / positive qrels / queries with qrels (cqadupstack: all positive, all judged).
BEIR_COUNTS = {
    "arguana": (1406, 1406, 1406, 1406), "bioasq": (500, 2359, 2359, 500), "climate-fever": (1535, 4681, 4681, 1535),
    "cqadupstack-android": (699, 1696), "cqadupstack-english": (1570, 3765), "cqadupstack-gaming": (1595, 2263),
    "cqadupstack-gis": (885, 1114), "cqadupstack-mathematica": (804, 1358), "cqadupstack-physics": (1039, 1933),
    "cqadupstack-programmers": (876, 1675), "cqadupstack-stats": (652, 913), "cqadupstack-tex": (2906, 5154),
    "cqadupstack-unix": (1072, 1693), "cqadupstack-webmasters": (506, 1395), "cqadupstack-wordpress": (541, 744),
    "dbpedia-entity": (400, 43515, 15286, 400), "fever": (6666, 7937, 7937, 6666), "fiqa": (648, 1706, 1706, 648),
    "hotpotqa": (7405, 14810, 14810, 7405), "nfcorpus": (323, 12334, 12334, 323), "nq": (3452, 4201, 4201, 3452),
    "quora": (10000, 15675, 15675, 10000), "scidocs": (1000, 29928, 4928, 1000), "scifact": (300, 339, 339, 300),
    "signal1m": (97, 1899, 1899, 97), "trec-covid": (50, 66334, 24673, 50), "trec-news": (57, 15655, 3041, 57),
    "webis-touche2020": (49, 932, 932, 49)}


@pytest.mark.parametrize("name", sorted(BEIR_COUNTS))
def test_beir_topics_qrels(shared_data, name):
    root = shared_data / "beir-topics-qrels"
    topics = read_trec_topics(root / f"topics.beir-v1.0.0-{name}.test.tsv.gz")
    qrels = read_trec_qrels(root / f"qrels.beir-v1.0.0-{name}.test.txt")
    counts = BEIR_COUNTS[name]
    if len(counts) == 2:  # cqadupstack: every judgment positive, every topic judged
        counts = (counts[0], counts[1], counts[1], counts[0])
    positive = sum(g > 0 for v in qrels.values() for g in v.values())
    assert (len(topics), n_qrels(qrels), positive, len(qrels)) == counts
    assert set(qrels) <= set(topics)


@pytest.mark.parametrize("topics, qrels, n_topics, n_judged, judged_queries, grades", [
    ("topics.msmarco-passage.dev-subset.txt", "qrels.msmarco-passage.dev-subset.txt", 6980, 7437, 6980, {1: 7437}),
    ("topics.dl19-passage.txt", "qrels.dl19-passage.txt", 43, 9260, 43, {0: 5158, 1: 1601, 2: 1804, 3: 697}),
    ("topics.dl20.txt", "qrels.dl20-passage.txt", 200, 11386, 54, {0: 7780, 1: 1940, 2: 1020, 3: 646})])
def test_msmarco_topics_qrels(shared_data, topics, qrels, n_topics, n_judged, judged_queries, grades):
    root = shared_data / "msmarco-passage-topics-qrels"
    t, q = read_trec_topics(root / topics), read_trec_qrels(root / qrels)
    assert (len(t), n_qrels(q), len(q)) == (n_topics, n_judged, judged_queries)
    assert Counter(g for v in q.values() for g in v.values()) == grades
    assert all(not text.text.endswith("\r") for text in t.values())  # topics.dl20.txt has CRLF line ends
