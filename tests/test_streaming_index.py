"""Bounded-memory indexing (issue 13, section 3): a corpus streamed as (id, title, text) rows through the sharded
encoder to an on-disk index, resumable, with peak memory bounded by the shard size rather than the corpus size.

The 200k-row corpus here is GENERATED (`taser_book.bench.memory.generated_rows`): no real corpus that large is
offline. A stub encoder (seeded random vectors, no model) stands in for the model, so that the memory measured is the
indexing pipeline's own; each measurement runs in a fresh child process.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from taser_book.bench.memory import StubEncoder, generated_rows, shard_bound_bytes, stream_peak_memory
from taser_book.cli import main
from taser_lib.data.formats import iter_corpus_file, load_corpus_file
from taser_lib.data.types import Document
from taser_lib.retrieval.dense import (DenseIndex, ShardedEmbeddings, ids_digest, encode_corpus_to_shards,
                                       encode_stream_to_shards)

ROWS, SHARD, DIM = 200_000, 10_000, 384


def test_streaming_200k_generated_rows_stays_within_the_shard_bound(tmp_path):
    bound = shard_bound_bytes(SHARD, DIM)
    streamed = stream_peak_memory(ROWS, SHARD, DIM, tmp_path / "stream", "stream")
    assert streamed["error"] is None and streamed["rows_encoded"] == ROWS
    assert streamed["encoder_calls"] == ROWS // SHARD
    assert 0 < streamed["peak_growth_bytes"] <= bound, streamed
    # The bound is a real constraint: loading the same corpus first (what streaming replaces) exceeds it, so the
    # probe sees corpus-sized memory when there is some.
    loaded = stream_peak_memory(ROWS, SHARD, DIM, tmp_path / "load", "load")
    assert loaded["peak_growth_bytes"] > bound > streamed["peak_growth_bytes"], (loaded, streamed)
    shards = ShardedEmbeddings(tmp_path / "stream")
    assert len(shards) == ROWS and shards.n_shards == ROWS // SHARD and shards.dim == DIM
    manifest = json.loads((tmp_path / "stream" / "manifest.json").read_text())
    assert manifest["ids_sha256"] == ids_digest([d for d, _, _ in generated_rows(ROWS)])


def test_streaming_resumes_after_a_crash_within_the_bound(tmp_path):
    out = tmp_path / "emb"
    crashed = stream_peak_memory(ROWS, SHARD, DIM, out, "stream", fail_on_call=6)
    assert crashed["error"] and "simulated crash" in crashed["error"]
    assert len(list(out.glob("shard_*.npy"))) == 5 and not list(out.glob(".*"))  # complete shards only
    with pytest.raises(ValueError, match="incomplete"):
        ShardedEmbeddings(out)
    resumed = stream_peak_memory(ROWS, SHARD, DIM, out, "stream")
    assert resumed["error"] is None
    assert resumed["rows_encoded"] == ROWS - 5 * SHARD  # the five written shards were skipped, not re-encoded
    assert resumed["peak_growth_bytes"] <= shard_bound_bytes(SHARD, DIM)
    assert len(ShardedEmbeddings(out)) == ROWS
    again = stream_peak_memory(ROWS, SHARD, DIM, out, "stream")
    assert again["encoder_calls"] == 0


def test_stream_equals_the_in_memory_path_and_searches_from_disk(tmp_path):
    rows = list(generated_rows(53))
    corpus = {d: Document(d, text, title) for d, title, text in rows}
    streamed = encode_stream_to_shards(StubEncoder(16), iter(rows), tmp_path / "s", shard_size=10, progress=False)
    loaded = encode_corpus_to_shards(StubEncoder(16), corpus, tmp_path / "m", shard_size=10, progress=False)
    for (ids_a, emb_a), (ids_b, emb_b) in zip(streamed, loaded):
        assert ids_a == ids_b
        np.testing.assert_array_equal(emb_a, emb_b)
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["ids_sha256"] == ids_digest(list(corpus))
    # Exact search over the shard folder (no in-memory index) equals faiss flat search over all vectors.
    queries = np.random.default_rng(1).standard_normal((7, 16), dtype=np.float32)
    flat = DenseIndex.from_shards(streamed, progress=False)
    for k in (1, 5, 60):
        scores, ids = streamed.search(queries, k)
        f_scores, f_ids = flat.search(queries, k)
        assert ids == f_ids
        np.testing.assert_allclose(scores, f_scores, rtol=1e-5, atol=1e-5)
    assert streamed.search_run(["a"], queries[:1], 3) == flat.search_run(["a"], queries[:1], 3)


def test_stream_refuses_another_corpus_or_layout(tmp_path):
    out = tmp_path / "emb"
    encode_stream_to_shards(StubEncoder(8), generated_rows(30), out, shard_size=10, model_name="m", progress=False)
    with pytest.raises(ValueError, match="ids_sha256"):  # other ids at shard 1
        encode_stream_to_shards(StubEncoder(8), generated_rows(30, start=10), out, shard_size=10, model_name="m",
                                progress=False)
    with pytest.raises(ValueError, match="ids_sha256"):  # a prefix of the corpus: fewer rows than shards written
        encode_stream_to_shards(StubEncoder(8), generated_rows(20), out, shard_size=10, model_name="m",
                                progress=False)
    with pytest.raises(ValueError, match="shard_size"):
        encode_stream_to_shards(StubEncoder(8), generated_rows(30), out, shard_size=5, model_name="m", progress=False)
    with pytest.raises(ValueError, match="model_name"):
        encode_stream_to_shards(StubEncoder(8), generated_rows(30), out, shard_size=10, model_name="x", progress=False)
    with pytest.raises(ValueError, match="empty"):
        encode_stream_to_shards(StubEncoder(8), iter([]), tmp_path / "none", progress=False)
    assert len(encode_stream_to_shards(StubEncoder(8), generated_rows(30), out, shard_size=10, model_name="m",
                                       progress=False)) == 30


@pytest.mark.parametrize("name", ["corpus.jsonl", "corpus.jsonl.gz", "psgs.tsv"])
def test_iter_corpus_file_streams_what_load_corpus_file_loads(name, tmp_path):
    import gzip

    docs = [Document(f"d{i}", f"text {i} with\ttab" if "tsv" not in name else f"text {i}", f"T{i}")
            for i in range(5)]
    path = tmp_path / name
    if "tsv" in name:
        body = "id\ttext\ttitle\n" + "".join(f"{d.id}\t{d.text}\t{d.title}\n" for d in docs)
    else:
        body = "".join(json.dumps({"_id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs)
    path.write_bytes(gzip.compress(body.encode()) if name.endswith(".gz") else body.encode())
    streamed = iter_corpus_file(path)
    assert not isinstance(streamed, (list, dict))
    assert list(streamed) == list(load_corpus_file(path).values()) == docs


def test_cli_encode_streams_and_records_precision(tmp_path, capsys):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "title": "T", "text": f"passage {i}"}) + "\n"
                            for i in range(5)))
    assert main(["encode", str(path), "--out", str(tmp_path / "emb"), "--shard-size", "2", "--precision", "bf16",
                 "--device", "cpu"]) == 0
    assert "at bf16" in capsys.readouterr().out
    manifest = json.loads((tmp_path / "emb" / "manifest.json").read_text())
    assert manifest["precision"] == "bf16" and manifest["n_docs"] == 5 and manifest["model_name"] == "default"
    shards = ShardedEmbeddings(tmp_path / "emb")
    assert shards.n_shards == 3 and shards.encoder_info == {"model_name": "default", "precision": "bf16"}
    # Another precision into the same folder would mix vectors: refused.
    assert main(["encode", str(path), "--out", str(tmp_path / "emb"), "--shard-size", "2", "--precision", "fp32",
                 "--device", "cpu"]) != 0
