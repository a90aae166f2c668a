"""BM25 (bm25s): scores equal the Lucene BM25 formula by hand, and retrieval on Cranfield is far above random."""

from __future__ import annotations

import math
import random
import re

import pytest

from taser_lib.data.types import Document, Query
from taser_lib.evaluation.metrics import evaluate
from taser_lib.retrieval.bm25 import BM25Index, BM25Params


def test_scores_equal_lucene_bm25_by_hand():
    # Words chosen so that the analyzer (lowercase, stopwords, Snowball stemmer) leaves them as they are.
    docs = {"d1": "apple banana", "d2": "apple apple cherry", "d3": "cherry date date date"}
    corpus = {k: Document(k, v) for k, v in docs.items()}
    k1, b = 1.2, 0.6
    index = BM25Index.build(corpus, BM25Params(k1=k1, b=b), progress=False)
    run = index.search({"q": Query("q", "Apple cherry")}, k=3, progress=False)["q"]

    n, avgdl = 3, (2 + 3 + 4) / 3

    def term(tf, df, dl):
        # Lucene >= 8 (Anserini/Pyserini's BM25): idf = ln(1 + (N - df + .5) / (df + .5)), times
        # tf / (tf + k1 (1 - b + b dl / avgdl)); Lucene 8 dropped the constant (k1 + 1) numerator factor.
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))

    expected = {"d1": term(1, 2, 2), "d2": term(2, 2, 3) + term(1, 2, 3), "d3": term(1, 2, 4)}
    assert run.keys() == expected.keys()
    for doc_id, score in expected.items():
        assert run[doc_id] == pytest.approx(score, rel=1e-5)


def test_title_indexed_stopword_query_empty_k_capped_and_save_load(tmp_path):
    corpus = {"d1": Document("d1", "a text on rivers", title="Danube"), "d2": Document("d2", "lakes and seas")}
    index = BM25Index.build(corpus, progress=False)
    queries = {"q1": Query("q1", "danube"), "q2": Query("q2", "the and of"), "q3": Query("q3", "zebra")}
    run = index.search(queries, k=10, progress=False)  # k above the corpus size is capped, not an error
    assert list(run["q1"]) == ["d1"]  # found through the title; d2 shares no term and is not returned
    assert run["q2"] == {} and run["q3"] == {}  # only stopwords / unknown words: nothing matches
    index.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.params == BM25Params() and loaded.doc_ids == ["d1", "d2"]
    assert loaded.search(queries, k=10, progress=False) == run
    with pytest.raises(FileNotFoundError):
        BM25Index.load(tmp_path)


def _glasgow(path):
    """Minimal reader of `.I`/`.T`/`.W` records: {id: {field: text}}."""
    records, current, field = {}, None, None
    for line in path.read_text().splitlines():
        m = re.match(r"^\.([A-Z])\s*(.*)$", line)
        if m and m.group(1) == "I":
            current = records.setdefault(m.group(2).strip(), {})
        elif m:
            field = m.group(1)
            current[field] = ""
        else:
            current[field] += " " + line.strip()
    return records


def test_cranfield_ndcg_far_above_random(shared_data):
    root = shared_data / "cranfield"
    docs = _glasgow(root / "cran.all.1400")
    corpus = {i: Document(i, r.get("W", "").strip(), r.get("T", "").strip()) for i, r in docs.items()}
    # cran.qry's .I ids are not contiguous: cranqrel numbers the n-th query n (SOURCE.md).
    queries = {str(n): Query(str(n), r["W"].strip()) for n, r in enumerate(_glasgow(root / "cran.qry").values(), 1)}
    assert len(corpus) == 1400 and len(queries) == 225  # SOURCE.md counts
    qrels: dict[str, dict[str, int]] = {}
    for line in (root / "cranqrel").read_text().splitlines():
        qid, doc_id, code = line.split()
        if int(code) > 0:  # Cleverdon codes 1 (complete answer) .. 4 (minimum interest); -1 "no interest"
            qrels.setdefault(qid, {})[doc_id] = 5 - int(code)
    run = BM25Index.build(corpus, progress=False).search(queries, k=100, progress=False)
    bm25 = evaluate(run, qrels, ["nDCG@10"])["nDCG@10"]
    shuffled = random.Random(0)
    ids = list(corpus)
    random_run = {q: {d: float(100 - i) for i, d in enumerate(shuffled.sample(ids, 100))} for q in queries}
    chance = evaluate(random_run, qrels, ["nDCG@10"])["nDCG@10"]
    # ~8 relevant documents among 1400 put chance near 0.01; a working BM25 ranks a relevant document in the top
    # 10 for most Cranfield queries (their words are the abstracts' words), which alone gives nDCG@10 > 0.2.
    assert chance < 0.03
    assert bm25 > 0.2 and bm25 > 10 * chance
