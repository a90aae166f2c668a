"""Dense retrieval from a corpus file that is never loaded (issue 13, section 3, the full profile's dpr-wiki path):
`taser index --retriever dense` streams a single-file corpus into embedding shards and `taser search` scans them;
`analyses.baselines.first_stage_runs(..., corpus=StreamedCorpus(...))` retrieves a question set from a streamed
corpus and reads only the top-k passages back for answer matching.

The 20k-row DPR tsv is GENERATED (random words): no real corpus that large is offline. A hashing bag-of-words
encoder (no model) stands in for the dense encoder so the tests stay fast; its vectors depend on the text, so runs
are meaningful and reproducible. The real slice is SQuAD-open's test split, its corpus written as a DPR tsv.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import zlib

import numpy as np
import pytest

import taser_book.cli.retrieval as cli_retrieval
import taser_lib.data.formats as formats
import taser_lib.data.formats.dpr as dpr_format
import taser_lib.datasets.registry as registry
import taser_lib.retrieval.dense as dense
import taser_lib.datasets.streamed as streamed
from taser_book.cli import main
from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.formats.beir import write_prepared
from taser_lib.data.types import Dataset, Document, Query
from taser_lib.evaluation.answer_recall import answer_recall
from taser_book.analyses.baselines import choose_hybrid_alpha, first_stage_runs, score_runs, score_runs_per_query
from taser_lib.datasets.ready import load_evaluation_set
from taser_lib.retrieval.runs import read_run
from taser_lib.datasets.streamed import StreamedCorpus, corpus_file, lookup_passages, streamed_corpus


class HashEncoder:
    """Bag-of-words vectors: each lowercased word adds a word-specific weight in (0.5, 1.5) to one of `dim` buckets
    (both from its crc32); rows L2-normalised. Deterministic, text-dependent, no model."""

    resolved_precision = "fp32"

    def __init__(self, dim: int = 128):
        self.dim, self.passages_encoded = dim, 0
        self.fingerprint = f"hash-bow-{dim}"

    def _encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = zlib.crc32(word.encode())
                out[i, h % self.dim] += 0.5 + (h >> 16) / 65536
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1)

    def encode_queries(self, texts):
        return self._encode(list(texts))

    def encode_passages(self, passages):
        self.passages_encoded += len(passages)
        return self._encode([f"{title} {text}" for title, text in passages])


WORDS = [f"w{i}" for i in range(3000)]


def generated_corpus(n: int, seed: int = 0) -> dict[str, Document]:
    """n GENERATED passages of 25 random words each (seeded)."""
    rng = np.random.default_rng(seed)
    return {f"p{i}": Document(f"p{i}", " ".join(rng.choice(WORDS, 25)), f"Title {i % 50}") for i in range(n)}


def generated_questions(corpus: dict[str, Document], n: int, seed: int = 1) -> dict[str, Query]:
    """Questions of 6 words from a random passage each; the answer is another word of that passage."""
    rng, ids = np.random.default_rng(seed), list(corpus)
    queries = {}
    for q in range(n):
        words = corpus[ids[rng.integers(len(ids))]].text.split()
        queries[f"q{q}"] = Query(f"q{q}", " ".join(words[:6]), (words[10],))
    return queries


def write_dpr_tsv(corpus: dict[str, Document], path) -> None:
    """psgs_w100.tsv's form: header id, text, title; CSV-quoted as DPR writes it."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(["id", "text", "title"])
        writer.writerows([d.id, d.text, d.title] for d in corpus.values())


def forbid_loading_corpora(monkeypatch) -> None:
    """Every in-memory corpus loader and in-memory encoding path raises."""
    def loaded(*args, **kwargs):
        raise AssertionError("a corpus was loaded into memory")

    for module, name in ((dpr_format, "read_dpr_passages"), (formats, "read_dpr_passages"),
                         (registry, "read_dpr_passages"), (formats, "load_corpus_file"),
                         (streamed, "load_corpus_file"), (dense, "encode_corpus"),
                         (dense, "encode_corpus_to_shards")):
        monkeypatch.setattr(module, name, loaded)


def exact_top_k(encoder, corpus, queries, k):
    """Brute-force inner-product top k over the whole corpus, in memory (the reference)."""
    ids = list(corpus)
    emb = encoder._encode([f"{d.title} {d.text}" for d in corpus.values()])
    scores = encoder.encode_queries([q.text for q in queries.values()]) @ emb.T
    return {qid: [ids[i] for i in np.argsort(-row, kind="stable")[:k]] for qid, row in zip(queries, scores)}


def test_cli_streams_a_20k_row_dpr_tsv_without_loading_it(tmp_path, monkeypatch, capsys):
    corpus = generated_corpus(20_000)
    tsv = tmp_path / "psgs_w100.tsv.gz"
    write_dpr_tsv(corpus, tsv)
    queries = generated_questions(corpus, 30)
    qa = write_prepared(Dataset("gen-qa", "test", queries=queries), tmp_path / "qa")  # a question set: no passages
    encoder = HashEncoder()
    monkeypatch.setattr(cli_retrieval, "_encoder", lambda args: encoder)
    forbid_loading_corpora(monkeypatch)
    idx = tmp_path / "idx"
    assert main(["index", str(tsv), "--retriever", "dense", "--out", str(idx), "--shard-size", "3000"]) == 0
    assert "streamed from" in capsys.readouterr().out
    meta = json.loads((idx / "taser_index.json").read_text())
    assert meta["streamed"] and meta["search"] == "shards" and meta["n_docs"] == 20_000
    assert len(list((idx / "embeddings").glob("shard_*.npy"))) == 7 and not (idx / "faiss").exists()
    assert encoder.passages_encoded == 20_000
    # Resumable: indexing again reads the file to check the shards and encodes nothing.
    assert main(["index", str(tsv), "--retriever", "dense", "--out", str(idx), "--shard-size", "3000"]) == 0
    assert encoder.passages_encoded == 20_000

    run_path = tmp_path / "dense.trec"
    assert main(["search", str(qa), "--retriever", "dense", "--dense-index", str(idx), "--out", str(run_path),
                 "-k", "10"]) == 0
    run = read_run(run_path)
    expected = exact_top_k(encoder, corpus, queries, 10)
    assert {q: sorted(s, key=s.get, reverse=True) for q, s in run.items()} == expected

    # Evaluating the question set's run reads only its passages back from the file (answer matching).
    capsys.readouterr()
    assert main(["evaluate", str(run_path), str(qa), "--corpus", str(tsv), "--ks", "1", "10"]) == 0
    scores = json.loads((tmp_path / "dense.trec.eval.json").read_text())["answer_recall"]
    reference = answer_recall(AnswerMatcher(corpus), queries, run, [1, 10])
    assert scores == pytest.approx(reference) and scores["R@1"] > 0.5  # each question is words of its passage


def test_streamed_cli_index_equals_the_in_memory_path(tmp_path, monkeypatch):
    corpus = generated_corpus(300, seed=5)
    queries = generated_questions(corpus, 12, seed=6)
    folder = write_prepared(Dataset("gen", "test", corpus, queries), tmp_path / "gen")
    encoder = HashEncoder(64)
    monkeypatch.setattr(cli_retrieval, "_encoder", lambda args: encoder)
    in_memory = tmp_path / "memory.trec"
    assert main(["search", str(folder), "--retriever", "dense", "--out", str(in_memory), "-k", "20"]) == 0
    assert main(["index", str(folder), "--retriever", "dense", "--out", str(tmp_path / "idx"),
                 "--shard-size", "64"]) == 0
    assert json.loads((tmp_path / "idx" / "taser_index.json").read_text())["search"] == "shards"
    from_shards = tmp_path / "shards.trec"
    assert main(["search", str(folder), "--retriever", "dense", "--dense-index", str(tmp_path / "idx"),
                 "--out", str(from_shards), "-k", "20"]) == 0
    a, b = read_run(in_memory), read_run(from_shards)
    assert {q: list(s) for q, s in a.items()} == {q: list(s) for q, s in b.items()}
    for q in a:
        np.testing.assert_allclose(list(a[q].values()), list(b[q].values()), rtol=1e-5, atol=1e-5)
    # hnsw / ivfpq build faiss from the streamed shards; search then loads it.
    assert main(["index", str(folder), "--retriever", "dense", "--out", str(tmp_path / "hnsw"),
                 "--shard-size", "64", "--index-type", "hnsw"]) == 0
    assert json.loads((tmp_path / "hnsw" / "taser_index.json").read_text())["search"] == "faiss"
    assert main(["search", str(folder), "--retriever", "dense", "--dense-index", str(tmp_path / "hnsw"),
                 "--out", str(tmp_path / "hnsw.trec"), "-k", "5"]) == 0
    # The shard index of another corpus (other document ids) is refused.
    other = write_prepared(Dataset("gen2", "test", generated_corpus(250), queries), tmp_path / "other")
    assert main(["search", str(other), "--retriever", "dense", "--dense-index", str(tmp_path / "idx"),
                 "--out", str(tmp_path / "x.trec")]) == 2


def test_corpus_file_finds_the_one_file_without_reading_it(tmp_path, shared_data):
    corpus = generated_corpus(5)
    folder = write_prepared(Dataset("gen", "test", corpus, generated_questions(corpus, 2)), tmp_path / "gen")
    assert corpus_file(folder) == folder / "corpus.jsonl"
    tsv = tmp_path / "p.tsv"
    write_dpr_tsv(corpus, tsv)
    assert corpus_file(tsv) == tsv
    assert lookup_passages(tsv, ["p3", "p1", "nope"]) == {"p3": corpus["p3"], "p1": corpus["p1"]}
    # dpr-wiki is located as its one fetched file (online only: here a local copy with its recorded hash).
    data = tmp_path / "data"
    (data / "dpr").mkdir(parents=True)
    write_dpr_tsv(corpus, data / "dpr" / "psgs_w100.tsv.gz")
    from taser_lib.datasets.fetch import UNVERIFIED_SUFFIX, sha256_file

    local = data / "dpr" / "psgs_w100.tsv.gz"
    local.with_name(local.name + UNVERIFIED_SUFFIX).write_text(sha256_file(local) + "  UNVERIFIED\n")
    assert corpus_file("dpr-wiki", data_dir=data) == data / "dpr" / "psgs_w100.tsv.gz"
    assert corpus_file("nq-open:test", data_dir=data, mirror=shared_data) is None  # questions only
    # The notebooks' stream_corpus: None streams a corpus that is one file and loads any other; False never streams.
    assert streamed_corpus("dpr-wiki", None, data_dir=data).path == local
    assert streamed_corpus("dpr-wiki", False, data_dir=data) is None
    assert streamed_corpus("cranfield", None, data_dir=data, mirror=shared_data) is None  # built from several files
    # BM25 indexes a corpus file too (loading it, as BM25 does).
    assert main(["index", str(tsv), "--retriever", "bm25", "--out", str(tmp_path / "bm25")]) == 0


def test_first_stage_runs_from_a_streamed_corpus_score_like_the_in_memory_path(tmp_path, shared_data, monkeypatch):
    kw = dict(data_dir=tmp_path / "data", mirror=shared_data)
    registry.prepare("squad-open", **kw, negatives=registry.no_negatives)
    dataset = load_evaluation_set("squad-open", "test", n_queries=40, n_docs=400, seed=13, **kw)
    tsv = tmp_path / "squad-open-test.tsv"
    write_dpr_tsv(dataset.corpus, tsv)
    questions = Dataset(dataset.name, dataset.split, queries=dataset.queries, qrels=dataset.qrels)
    wiki = StreamedCorpus(tsv, tmp_path / "indexes", shard_size=64, progress=False)
    encoder = HashEncoder()
    in_memory = first_stage_runs(dataset, encoder, k=20)
    forbid_loading_corpora(monkeypatch)
    wiki.dense(encoder)  # what first_stage_runs uses for dense retrieval (BM25 loads the corpus: not streamed)
    monkeypatch.undo()
    runs = first_stage_runs(questions, encoder, k=20, corpus=wiki)
    assert wiki.n_docs == len(dataset.corpus) and len(list((tmp_path / "indexes").glob("dense-*/shard_*.npy"))) == 7
    for model in ("bm25", "dense"):
        assert {q: list(s) for q, s in runs[model].items()} == {q: list(s) for q, s in in_memory[model].items()}
    # Only the retrieved passages were read back, and they score the runs as the whole corpus does.
    retrieved = {d for run in runs.values() for scores in run.values() for d in scores}
    assert set(questions.corpus) == retrieved and len(retrieved) < len(dataset.corpus)
    assert score_runs(questions, runs) == score_runs(dataset, in_memory)
    assert score_runs_per_query(questions, runs) == score_runs_per_query(dataset, in_memory)
    assert choose_hybrid_alpha([(questions, runs)]) == choose_hybrid_alpha([(dataset, in_memory)])
    assert any(row["value"] > 0 for row in score_runs(questions, runs))
