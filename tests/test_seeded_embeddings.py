"""taser_book.tables.seeded: corpus embeddings kept on disk come back bit for bit, and only for the same model,
passages and library code."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from taser_book.tables import seeded
from taser_book.tables.seeded import SeededModels, corpus_embeddings
from taser_lib.data.types import Dataset, Document, Query

from training_helpers import make_tiny_bert, one_thread  # noqa: F401 - fixture

OPTIONS = dict(max_passage_length=32, max_query_length=16, batch_size=8, device="cpu", precision="fp32")


def _dataset(extra: str = "") -> Dataset:
    corpus = {f"d{i}": Document(f"d{i}", f"passage {i} about rivers and bridges {extra}", title="t") for i in range(7)}
    queries = {"q0": Query("q0", "which river"), "q1": Query("q1", "a bridge")}
    return Dataset("toy", "test", corpus, queries, {"q0": {"d1": 1}, "q1": {"d2": 1}})


def _counting(monkeypatch) -> list[int]:
    calls = []
    real = seeded.encode_corpus

    def counted(encoder, corpus):
        calls.append(len(corpus))
        return real(encoder, corpus)

    monkeypatch.setattr(seeded, "encode_corpus", counted)
    return calls


def test_kept_embeddings_are_read_back_bit_for_bit(tmp_path, monkeypatch, one_thread):
    calls = _counting(monkeypatch)
    paths = {"a": {1: make_tiny_bert(tmp_path / "a1", seed=1), 2: make_tiny_bert(tmp_path / "a2", seed=2)}}
    folder = tmp_path / "embeddings"
    first = SeededModels(paths, embeddings_dir=folder, **OPTIONS)
    runs = first.runs(_dataset(), k=5)
    assert calls == [7, 7] and len(list(folder.glob("*.npy"))) == 2
    # a new object (a later page, a rerun) reads them back: no encoding, the same runs to the last bit
    again = SeededModels(paths, embeddings_dir=folder, **OPTIONS)
    assert again.runs(_dataset(), k=5) == runs and calls == [7, 7]
    ids, kept = corpus_embeddings(again.encoder("a", 1), _dataset().corpus, folder)
    _, fresh = seeded.encode_corpus(again.encoder("a", 1), _dataset().corpus)
    assert ids == list(_dataset().corpus) and kept.dtype == fresh.dtype and np.array_equal(kept, fresh)
    # other passages (the same ids, other texts), another passage length or other library code: encoded again
    again.runs(_dataset(extra="changed"), k=5)
    assert len(calls) == 5
    longer = SeededModels(paths, embeddings_dir=folder, **{**OPTIONS, "max_passage_length": 24})
    longer.runs(_dataset(), k=5, labels=["a"])
    assert len(calls) == 7
    monkeypatch.setattr(seeded, "_LIBRARY_SOURCE", "another revision of taser_lib")
    SeededModels(paths, embeddings_dir=folder, **OPTIONS).runs(_dataset(), k=5)
    assert len(calls) == 9


def test_without_a_folder_nothing_is_written(tmp_path, monkeypatch, one_thread):
    monkeypatch.delenv(seeded.ENV_EMBEDDINGS_DIR, raising=False)
    monkeypatch.chdir(tmp_path)
    models = SeededModels({"a": {None: make_tiny_bert(tmp_path / "a", seed=1)}}, **OPTIONS)
    models.runs(_dataset(), k=5)
    assert models.embeddings_dir is None and not list(tmp_path.rglob("*.npy"))
    monkeypatch.setenv(seeded.ENV_EMBEDDINGS_DIR, str(tmp_path / "kept"))
    assert SeededModels({}, **OPTIONS).embeddings_dir == str(tmp_path / "kept")


def test_the_runner_keeps_embeddings_beside_the_run_cache(tmp_path, monkeypatch):
    import os

    from taser_book.runner import _embeddings_kept

    monkeypatch.delenv(seeded.ENV_EMBEDDINGS_DIR, raising=False)
    monkeypatch.delenv("TASER_RUNS_DIR", raising=False)
    with _embeddings_kept(tmp_path):  # outside a taser repository the run cache is the user's, and so are embeddings
        assert os.environ[seeded.ENV_EMBEDDINGS_DIR] == str(Path.home() / ".cache" / "taser" / "runs" / "embeddings")
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "taser_lib").mkdir()  # a taser repository: its run cache is <repository>/runs/cache
    with _embeddings_kept(tmp_path):
        assert os.environ[seeded.ENV_EMBEDDINGS_DIR] == str(tmp_path.resolve() / "runs" / "cache" / "embeddings")
    assert seeded.ENV_EMBEDDINGS_DIR not in os.environ
    monkeypatch.setenv("TASER_RUNS_DIR", str(tmp_path / "elsewhere"))
    with _embeddings_kept(tmp_path):
        assert os.environ[seeded.ENV_EMBEDDINGS_DIR] == str(tmp_path.resolve() / "elsewhere" / "embeddings")
    monkeypatch.setenv(seeded.ENV_EMBEDDINGS_DIR, str(tmp_path / "chosen"))
    with _embeddings_kept(tmp_path):
        assert os.environ[seeded.ENV_EMBEDDINGS_DIR] == str(tmp_path / "chosen")
    assert os.environ[seeded.ENV_EMBEDDINGS_DIR] == str(tmp_path / "chosen")
