"""faiss dense retrieval: exact flat search, HNSW / IVF-PQ agreement, sharded resumable encoding."""

from __future__ import annotations

import hashlib
import json

import faiss
import numpy as np
import pytest

from taser_lib.data.types import Document, Query
from taser_lib.errors import ConfigError
from taser_lib.retrieval.dense import (DenseIndex, ShardedEmbeddings, dense_search, encode_corpus,
                                       encode_corpus_to_shards)


@pytest.fixture(autouse=True, scope="module")
def _one_faiss_thread():
    # On a small shared machine OpenMP threads oversubscribe the cores: one thread is faster here.
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Vectors around 50 random centres (real embeddings are clustered; uniform noise is PQ's worst case)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, dim)).astype(np.float32)
    return (centres[rng.integers(0, 50, n)] + 0.3 * rng.standard_normal((n, dim))).astype(np.float32)


@pytest.fixture(scope="module")
def vectors():
    docs, queries = _clustered(3000, 32, 0), _clustered(50, 32, 1)
    return docs, [f"d{i}" for i in range(len(docs))], queries


def _overlap(a: list[list[str]], b: list[list[str]]) -> float:
    return float(np.mean([len(set(x) & set(y)) / len(y) for x, y in zip(a, b)]))


def test_flat_is_exact_inner_product(vectors):
    docs, ids, queries = vectors
    scores, found = DenseIndex.from_embeddings(docs, ids).search(queries, 10)
    brute = queries @ docs.T
    expected = np.argsort(-brute, axis=1)[:, :10]
    assert found == [[ids[j] for j in row] for row in expected]
    np.testing.assert_allclose(scores, np.take_along_axis(brute, expected, axis=1), rtol=1e-5)


def test_hnsw_and_ivfpq_agree_with_flat(vectors):
    docs, ids, queries = vectors
    _, exact = DenseIndex.from_embeddings(docs, ids).search(queries, 10)
    _, hnsw = DenseIndex.from_embeddings(docs, ids, "hnsw").search(queries, 10)
    _, ivfpq = DenseIndex.from_embeddings(docs, ids, "ivfpq", {"nlist": 16, "m": 16, "nbits": 5, "nprobe": 16,
                                                                 "train_size": 3000}).search(queries, 10)
    # HNSW with the default M=32, ef_search=128 on 3000 points is near-exact; PQ codes (16 x 5 bits for 32
    # floats) are lossy, but chance overlap would be 10/3000.
    assert _overlap(hnsw, exact) > 0.95
    assert _overlap(ivfpq, exact) > 0.35


def test_bad_configs_and_inputs(vectors):
    docs, ids, _ = vectors
    with pytest.raises(ConfigError, match="unknown index type"):
        DenseIndex(32, "lsh")
    with pytest.raises(ConfigError, match="unknown hnsw parameters"):
        DenseIndex(32, "hnsw", {"nlist": 4})
    with pytest.raises(ConfigError, match="must divide"):
        DenseIndex(30, "ivfpq", {"m": 8})
    index = DenseIndex(32)
    with pytest.raises(ValueError, match="empty"):
        index.search(docs[:2], 5)
    with pytest.raises(ValueError, match="float32"):
        index.add(docs.astype(np.float64), ids)
    with pytest.raises(ValueError, match="dimension"):
        index.add(docs[:, :16].copy(), ids)
    with pytest.raises(ValueError, match=r"shape \[2, d\]"):
        index.add(docs[:3], ids[:2])


def test_save_load_round_trip(vectors, tmp_path):
    docs, ids, queries = vectors
    index = DenseIndex.from_embeddings(docs, ids, "hnsw", {"ef_search": 50})
    index.save(tmp_path / "idx")
    loaded = DenseIndex.load(tmp_path / "idx")
    assert loaded.params == index.params and loaded.doc_ids == ids
    assert loaded.search(queries, 5)[1] == index.search(queries, 5)[1]


class FakeEncoder:
    """Deterministic: each text's vector is seeded by its sha256, so any batching gives the same embeddings."""

    dim = 8

    def __init__(self, fail_on_call: int | None = None):
        self.calls, self.encoded, self.fail_on_call = 0, 0, fail_on_call

    def _vec(self, text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)

    def encode_queries(self, texts):
        return np.stack([self._vec("query: " + t) for t in texts])

    def encode_passages(self, passages):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("simulated crash")
        self.encoded += len(passages)
        return np.stack([self._vec(f"{title} | {text}") for title, text in passages])


@pytest.fixture
def corpus():
    return {f"p{i}": Document(f"p{i}", f"text number {i}", title=f"T{i % 3}") for i in range(50)}


def test_sharded_equals_unsharded_and_indexes_the_same(corpus, tmp_path):
    ids, emb = encode_corpus(FakeEncoder(), corpus)
    shards = encode_corpus_to_shards(FakeEncoder(), corpus, tmp_path / "emb", shard_size=7, progress=False)
    assert shards.n_shards == 8 and len(shards) == 50 and shards.dim == 8
    parts = list(shards)
    assert all(isinstance(e, np.memmap) for _, e in parts)  # read back memory-mapped
    assert [d for part_ids, _ in parts for d in part_ids] == ids
    np.testing.assert_array_equal(np.concatenate([np.asarray(e) for _, e in parts]), emb)
    queries = {f"q{i}": Query(f"q{i}", f"question {i}") for i in range(5)}
    from_memory = dense_search(FakeEncoder(), DenseIndex.from_embeddings(emb, ids), queries, k=10)
    from_shards = dense_search(FakeEncoder(), DenseIndex.from_shards(shards, progress=False), queries, k=10)
    assert from_shards == from_memory
    assert all(len(v) == 10 for v in from_memory.values())


def test_sharded_encoding_resumes_after_a_crash(corpus, tmp_path):
    out = tmp_path / "emb"
    with pytest.raises(RuntimeError, match="simulated crash"):
        encode_corpus_to_shards(FakeEncoder(fail_on_call=4), corpus, out, shard_size=7, progress=False)
    assert sorted(p.name for p in out.glob("*.npy")) == [f"shard_{i:05d}.npy" for i in range(3)]
    assert not list(out.glob(".*"))  # no temporary files left behind
    with pytest.raises(ValueError, match="missing"):
        ShardedEmbeddings(out)
    resumed = FakeEncoder()
    shards = encode_corpus_to_shards(resumed, corpus, out, shard_size=7, progress=False)
    assert resumed.calls == 5 and resumed.encoded == 50 - 21  # only shards 3..7 were encoded again
    np.testing.assert_array_equal(np.concatenate([np.asarray(e) for _, e in shards]),
                                  encode_corpus(FakeEncoder(), corpus)[1])
    again = FakeEncoder()
    encode_corpus_to_shards(again, corpus, out, shard_size=7, progress=False)
    assert again.calls == 0  # everything complete: nothing re-encoded


def test_sharded_refuses_a_different_corpus_or_layout(corpus, tmp_path):
    out = tmp_path / "emb"
    encode_corpus_to_shards(FakeEncoder(), corpus, out, shard_size=7, model_name="m1", progress=False)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shard_size"] == 7 and manifest["model_name"] == "m1" and "versions" in manifest
    with pytest.raises(ValueError, match="shard_size"):
        encode_corpus_to_shards(FakeEncoder(), corpus, out, shard_size=8, model_name="m1", progress=False)
    with pytest.raises(ValueError, match="model_name"):
        encode_corpus_to_shards(FakeEncoder(), corpus, out, shard_size=7, model_name="m2", progress=False)
    smaller = dict(list(corpus.items())[:40])
    with pytest.raises(ValueError, match="ids_sha256"):
        encode_corpus_to_shards(FakeEncoder(), smaller, out, shard_size=7, model_name="m1", progress=False)


def test_ivfpq_from_shards_trains_on_a_sample(tmp_path):
    docs = _clustered(600, 16, 2)
    corpus = {f"d{i}": Document(f"d{i}", str(i)) for i in range(600)}

    class Table(FakeEncoder):
        def encode_passages(self, passages):
            return docs[[int(text) for _, text in passages]]

    shards = encode_corpus_to_shards(Table(), corpus, tmp_path / "emb", shard_size=250, progress=False)
    index = DenseIndex.from_shards(shards, "ivfpq", {"nlist": 8, "m": 4, "nbits": 4, "nprobe": 8,
                                                     "train_size": 400}, progress=False)
    assert len(index) == 600 and index.index.ntotal == 600
    _, exact = DenseIndex.from_embeddings(docs, list(corpus)).search(docs[:20], 5)
    _, approx = index.search(docs[:20], 5)
    assert _overlap(approx, exact) > 0.3  # chance: 5/600
