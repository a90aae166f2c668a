"""Dense retrieval with faiss: inner-product search over passage embeddings from any encoder.

`IndexFlatIP` (exact) by default; HNSW and IVF-PQ as approximate options. faiss-gpu is used when it sees a GPU
(HNSW has no GPU version and stays on the CPU). A corpus too large for memory is encoded to float32 `.npy` shards
on disk (`encode_corpus_to_shards`, resumable) and indexed shard by shard from memory maps (`DenseIndex.from_shards`).

A corpus too large to load at all (DPR's 21M Wikipedia passages) is streamed: `encode_stream_to_shards` reads
(id, title, text) rows from any iterator (e.g. `taser_lib.data.formats.iter_corpus_file`), holds one shard of them
at a time, and writes the same resumable shard folder. Peak memory is bounded by the shard size, not the corpus
(tests/test_streaming_index.py measures it). `ShardedEmbeddings.search` searches the folder exactly, shard by shard
from memory maps, without building an in-memory index.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from ..progress import tqdm

from ..data.types import Corpus, Queries, Run
from ..errors import ConfigError
from ..io import atomic_dir, atomic_path, atomic_write_json
from ..meta import run_metadata

try:
    import faiss
except ImportError:  # only building or searching an index needs faiss; training and re-ranking run without it
    faiss = None


def _require_faiss() -> None:
    if faiss is None:
        raise ConfigError("dense indexing needs faiss: pip install faiss-cpu (CPU) or conda install faiss-gpu")


class Encoder(Protocol):
    """What retrieval needs from a bi-encoder (e.g. `taser_lib.models.load_encoder(...)`)."""

    def encode_queries(self, texts: list[str]) -> np.ndarray: ...

    def encode_passages(self, passages: list[tuple[str, str]]) -> np.ndarray: ...


# Index types and their parameters (defaults). HNSW: graph degree M, build / search beam widths. IVF-PQ: nlist
# inverted lists, PQ with m sub-quantizers of nbits each (m must divide the dimension), nprobe lists searched,
# at most train_size vectors to train on.
INDEX_TYPES: dict[str, dict[str, int]] = {
    "flat": {},
    "hnsw": {"M": 32, "ef_construction": 200, "ef_search": 128},
    "ivfpq": {"nlist": 1024, "m": 64, "nbits": 8, "nprobe": 32, "train_size": 262_144},
}


def resolve_params(index_type: str, params: dict[str, Any] | None = None) -> dict[str, int]:
    """The index type's defaults updated by `params`; unknown types or parameter names are a ConfigError."""
    if index_type not in INDEX_TYPES:
        raise ConfigError(f"unknown index type {index_type!r}; expected one of {sorted(INDEX_TYPES)}")
    unknown = set(params or {}) - set(INDEX_TYPES[index_type])
    if unknown:
        raise ConfigError(f"unknown {index_type} parameters {sorted(unknown)}; "
                          f"expected some of {sorted(INDEX_TYPES[index_type])}")
    return {**INDEX_TYPES[index_type], **(params or {})}


def _check_embeddings(emb: np.ndarray, n: int, what: str, dim: int | None = None) -> np.ndarray:
    if not isinstance(emb, np.ndarray) or emb.dtype != np.float32 or emb.ndim != 2 or emb.shape[0] != n:
        raise ValueError(f"{what}: expected a float32 array of shape [{n}, d], got "
                         f"{getattr(emb, 'dtype', type(emb))} {getattr(emb, 'shape', '')}")
    if dim is not None and emb.shape[1] != dim:
        raise ValueError(f"{what}: dimension {emb.shape[1]} differs from the index's {dim}")
    return np.ascontiguousarray(emb)


def _new_cpu_index(dim: int, index_type: str, params: dict[str, int]) -> faiss.Index:
    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, params["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = params["ef_construction"]
        return index
    if dim % params["m"]:
        raise ConfigError(f"IVF-PQ: m={params['m']} sub-quantizers must divide the dimension {dim}")
    return faiss.index_factory(dim, f"IVF{params['nlist']},PQ{params['m']}x{params['nbits']}",
                               faiss.METRIC_INNER_PRODUCT)


# faiss-gpu keeps IVF-PQ's lookup table of one query (m x 2^nbits distances) in a CUDA block's shared memory, of which
# it assumes 48 KiB: float32 tables fit m * 2^nbits <= 12288, so the default m=64, nbits=8 (64 KiB) needs float16
# tables (faiss raises "Consider useFloat16LookupTables" otherwise).
_GPU_SHARED_MEMORY_BYTES = 48 * 1024


def _gpu_cloner_options(index_type: str, params: dict[str, int]):
    """faiss's GpuMultipleClonerOptions for moving this index to the GPUs (None: faiss's defaults)."""
    if index_type != "ivfpq" or params["m"] * 2 ** params["nbits"] * 4 <= _GPU_SHARED_MEMORY_BYTES:
        return None
    options = faiss.GpuMultipleClonerOptions()
    options.useFloat16 = True  # for IVF-PQ: float16 lookup tables
    return options


def _set_search_params(index: faiss.Index, index_type: str, params: dict[str, int]) -> None:
    if index_type == "hnsw":
        index.hnsw.efSearch = params["ef_search"]
    elif index_type == "ivfpq":
        faiss.extract_index_ivf(index).nprobe = params["nprobe"]


class DenseIndex:
    """A faiss inner-product index and the doc id of each row.

    >>> index = DenseIndex.from_embeddings(emb, ids)  # or DenseIndex.from_shards(encode_corpus_to_shards(...))
    >>> run = dense_search(encoder, index, queries, k=100)
    """

    def __init__(self, dim: int, index_type: str = "flat", params: dict[str, Any] | None = None,
                 use_gpu: bool | None = None):
        _require_faiss()
        self.dim, self.index_type = dim, index_type
        self.params = resolve_params(index_type, params)
        self.doc_ids: list[str] = []
        self._place(_new_cpu_index(dim, index_type, self.params), use_gpu)

    def _place(self, cpu: faiss.Index, use_gpu: bool | None) -> None:
        """Set search parameters and move to the GPUs when asked, or by default when faiss-gpu sees one."""
        _set_search_params(cpu, self.index_type, self.params)
        gpus = faiss.get_num_gpus()
        if use_gpu and (gpus == 0 or self.index_type == "hnsw"):
            raise ConfigError("use_gpu=True needs faiss-gpu with a visible GPU and a flat or ivfpq index")
        self.on_gpu = bool(gpus > 0 and self.index_type != "hnsw") if use_gpu is None else use_gpu
        self.index = (faiss.index_cpu_to_all_gpus(cpu, co=_gpu_cloner_options(self.index_type, self.params))
                      if self.on_gpu else cpu)

    @property
    def is_trained(self) -> bool:
        return bool(self.index.is_trained)

    def train(self, sample: np.ndarray) -> None:
        """IVF-PQ only: learn the coarse quantizer and PQ codebooks from sample vectors."""
        sample = _check_embeddings(sample, len(sample), "training sample", self.dim)
        if len(sample) < self.params.get("nlist", 0):
            raise ValueError(f"IVF-PQ needs at least nlist={self.params['nlist']} training vectors, got {len(sample)}")
        self.index.train(sample)

    def add(self, embeddings: np.ndarray, doc_ids: Sequence[str]) -> None:
        if not self.is_trained:
            raise ValueError(f"the {self.index_type} index must be trained before vectors are added")
        self.index.add(_check_embeddings(embeddings, len(doc_ids), "passage embeddings", self.dim))
        self.doc_ids.extend(doc_ids)

    def __len__(self) -> int:
        return len(self.doc_ids)

    def search(self, query_embeddings: np.ndarray, k: int) -> tuple[np.ndarray, list[list[str]]]:
        """Scores [n, k'] and doc ids of each query's top k' = min(k, len(index)) rows, best first."""
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        if not self.doc_ids:
            raise ValueError("the index is empty")
        queries = _check_embeddings(query_embeddings, len(query_embeddings), "query embeddings", self.dim)
        scores, rows = self.index.search(queries, min(k, len(self.doc_ids)))
        # faiss pads "fewer than k found" (possible with IVF / HNSW) at the end with row -1.
        ids = [[self.doc_ids[r] for r in row if r >= 0] for row in rows.tolist()]
        return scores, ids

    def search_run(self, query_ids: Sequence[str], query_embeddings: np.ndarray, k: int) -> Run:
        scores, ids = self.search(query_embeddings, k)
        return {qid: {d: float(s) for d, s in zip(row_ids, row_scores.tolist())}
                for qid, row_ids, row_scores in zip(query_ids, ids, scores)}

    @classmethod
    def from_embeddings(cls, embeddings: np.ndarray, doc_ids: Sequence[str], index_type: str = "flat",
                        params: dict[str, Any] | None = None, use_gpu: bool | None = None,
                        seed: int = 0) -> "DenseIndex":
        index = cls(embeddings.shape[1], index_type, params, use_gpu)
        if not index.is_trained:
            index.train(_training_sample([embeddings], len(embeddings), index.params["train_size"], seed))
        index.add(embeddings, doc_ids)
        return index

    @classmethod
    def from_shards(cls, shards: "ShardedEmbeddings", index_type: str = "flat",
                    params: dict[str, Any] | None = None, use_gpu: bool | None = None,
                    progress: bool = True, seed: int = 0) -> "DenseIndex":
        """Index shard by shard from memory maps (an IVF-PQ index first trains on a seeded random sample)."""
        index = cls(shards.dim, index_type, params, use_gpu)
        if not index.is_trained:
            index.train(_training_sample((emb for _, emb in shards), len(shards), index.params["train_size"], seed))
        for ids, emb in tqdm(shards, total=shards.n_shards, desc="indexing shards", disable=not progress):
            index.add(np.asarray(emb), ids)
        index.encoder_info = shards.encoder_info
        return index

    def save(self, path: str | os.PathLike, info: dict[str, Any] | None = None) -> None:
        """Folder with index.faiss, doc_ids.json and meta.json, replaced whole (atomically). meta.json also holds
        `info` (e.g. the encoder's model and precision) and, for an index built from shards, theirs."""
        cpu = faiss.index_gpu_to_cpu(self.index) if self.on_gpu else self.index
        with atomic_dir(path) as tmp:
            faiss.write_index(cpu, str(tmp / "index.faiss"))
            atomic_write_json(tmp / "doc_ids.json", self.doc_ids)
            atomic_write_json(tmp / "meta.json", {"dim": self.dim, "index_type": self.index_type,
                                                  "params": self.params, "n_docs": len(self.doc_ids),
                                                  **getattr(self, "encoder_info", {}), **(info or {}),
                                                  **run_metadata()})

    @classmethod
    def load(cls, path: str | os.PathLike, use_gpu: bool | None = None) -> "DenseIndex":
        path = Path(path)
        meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        index = cls(meta["dim"], meta["index_type"], meta["params"], use_gpu=False)
        cpu = faiss.read_index(str(path / "index.faiss"))
        index.doc_ids = json.loads((path / "doc_ids.json").read_text(encoding="utf-8"))
        if cpu.ntotal != len(index.doc_ids) or cpu.d != index.dim:
            raise ValueError(f"{path}: index.faiss holds {cpu.ntotal} vectors of dimension {cpu.d}, "
                             f"but doc_ids.json lists {len(index.doc_ids)} and meta.json says dimension {index.dim}")
        index._place(cpu, use_gpu)
        return index


def _training_sample(arrays: Iterable[np.ndarray], n: int, size: int, seed: int) -> np.ndarray:
    """At most `size` rows drawn uniformly without replacement (seeded) from arrays holding `n` rows in all;
    from memory maps only the chosen rows are read."""
    chosen = np.sort(np.random.default_rng(seed).choice(n, size=min(size, n), replace=False))
    parts, start = [], 0
    for arr in arrays:
        local = chosen[(chosen >= start) & (chosen < start + len(arr))] - start
        parts.append(np.asarray(arr[local], dtype=np.float32))
        start += len(arr)
    return np.concatenate(parts)


def _passages(corpus: Corpus, ids: Sequence[str]) -> list[tuple[str, str]]:
    return [(corpus[d].title, corpus[d].text) for d in ids]


def encode_corpus(encoder: Encoder, corpus: Corpus) -> tuple[list[str], np.ndarray]:
    """(doc ids, float32 embeddings [n, d]) of the whole corpus, in memory."""
    ids = list(corpus)
    return ids, _check_embeddings(encoder.encode_passages(_passages(corpus, ids)), len(ids), "encode_passages")


def dense_search(encoder: Encoder, index: DenseIndex, queries: Queries, k: int = 100) -> Run:
    """Encode the queries and return each one's top k passages by inner product."""
    ids = list(queries)
    emb = _check_embeddings(encoder.encode_queries([queries[q].text for q in ids]), len(ids), "encode_queries")
    return index.search_run(ids, emb, k)


def ids_digest(ids: Sequence[str]) -> str:
    """The sha256 of the ids in order, one per line: what a shard folder records to tell its corpus from another."""
    return hashlib.sha256("\n".join(ids).encode("utf-8")).hexdigest()


class _StreamDigest:
    """`ids_digest` of ids fed in pieces."""

    def __init__(self):
        self._hash, self._first = hashlib.sha256(), True

    def update(self, ids: Sequence[str]) -> None:
        for doc_id in ids:
            self._hash.update((doc_id if self._first else "\n" + doc_id).encode("utf-8"))
            self._first = False

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


class ShardedEmbeddings:
    """A folder of embedding shards written by `encode_corpus_to_shards` / `encode_stream_to_shards`, read back as
    memory maps.

    Iterating yields (doc ids, float32 memmap [n_i, d]) per shard, in corpus order. `encoder_info` is what the
    manifest says about the encoder (model name, precision).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        manifest = json.loads((self.path / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("n_docs") is None:
            done = sorted(self.path.glob("shard_*.npy"))
            raise ValueError(f"{self.path}: the streamed encoding is incomplete ({len(done)} shards written, the "
                             f"rest missing; rerun encode_stream_to_shards with the same corpus to finish)")
        self.n_docs, self.shard_size = manifest["n_docs"], manifest["shard_size"]
        self.encoder_info = {k: manifest.get(k) for k in ("model_name", "precision")}
        self.n_shards = -(-self.n_docs // self.shard_size)
        missing = [i for i in range(self.n_shards) if not _shard_paths(self.path, i)[1].is_file()]
        if missing:
            raise ValueError(f"{self.path}: shards {missing[:5]} of {self.n_shards} are missing "
                             f"(encoding was interrupted; rerun encode_corpus_to_shards to finish)")
        self.dim = int(np.load(_shard_paths(self.path, 0)[1], mmap_mode="r").shape[1])

    def shard(self, i: int) -> tuple[list[str], np.ndarray]:
        ids_path, emb_path = _shard_paths(self.path, i)
        return json.loads(ids_path.read_text(encoding="utf-8")), np.load(emb_path, mmap_mode="r")

    def __iter__(self) -> Iterator[tuple[list[str], np.ndarray]]:
        return (self.shard(i) for i in range(self.n_shards))

    def __len__(self) -> int:
        return self.n_docs

    def search(self, query_embeddings: np.ndarray, k: int, query_chunk: int = 256
               ) -> tuple[np.ndarray, list[list[str]]]:
        """Exact inner-product top k over all shards, read shard by shard from the memory maps: no index is built in
        memory, and the score matrix held at once is `query_chunk` x one shard. The same (scores, ids) as a flat
        `DenseIndex` of all shards, up to the order of tied scores."""
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        queries = _check_embeddings(query_embeddings, len(query_embeddings), "query embeddings", self.dim)
        best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
        best_ids = np.empty((len(queries), 0), dtype=object)
        for shard_ids, emb in self:
            ids = np.asarray(shard_ids, dtype=object)
            kk = min(k, len(ids))
            scores_parts, ids_parts = [], []
            for start in range(0, len(queries), query_chunk):
                scores = queries[start:start + query_chunk] @ np.asarray(emb).T
                top = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
                scores_parts.append(np.take_along_axis(scores, top, axis=1))
                ids_parts.append(ids[top])
            cand_scores = np.concatenate([best_scores, np.concatenate(scores_parts)], axis=1)
            cand_ids = np.concatenate([best_ids, np.concatenate(ids_parts)], axis=1)
            order = np.argsort(-cand_scores, axis=1, kind="stable")[:, :k]
            best_scores = np.take_along_axis(cand_scores, order, axis=1)
            best_ids = np.take_along_axis(cand_ids, order, axis=1)
        return best_scores, best_ids.tolist()

    def search_run(self, query_ids: Sequence[str], query_embeddings: np.ndarray, k: int) -> Run:
        scores, ids = self.search(query_embeddings, k)
        return {qid: {d: float(s) for d, s in zip(row_ids, row_scores.tolist())}
                for qid, row_ids, row_scores in zip(query_ids, ids, scores)}


def _shard_paths(folder: Path, i: int) -> tuple[Path, Path]:
    return folder / f"shard_{i:05d}.ids.json", folder / f"shard_{i:05d}.npy"


def _encoder_precision(encoder: Encoder) -> str | None:
    """The encoder's resolved precision ("fp32" / "bf16"), None for an encoder that does not say."""
    return getattr(encoder, "resolved_precision", None)


_LAYOUT_KEYS = ("shard_size", "model_name", "precision")


def _check_manifest(out: Path, expected: dict[str, Any]) -> dict[str, Any] | None:
    """The folder's manifest (None when there is none); a ValueError naming the keys that differ from `expected`.
    The layout keys (shard size, model name, precision) must match; the corpus keys (n_docs, ids_sha256) only where
    both sides know them (a streamed folder learns them at its end)."""
    path = out / "manifest.json"
    if not path.is_file():
        return None
    old = json.loads(path.read_text(encoding="utf-8"))
    differing = sorted(k for k, v in expected.items()
                       if (old.get(k) != v if k in _LAYOUT_KEYS else None not in (v, old.get(k)) and old[k] != v))
    if differing:
        raise ValueError(f"{out} holds shards with different {differing}; use another folder")
    return old


def encode_corpus_to_shards(encoder: Encoder, corpus: Corpus, out_dir: str | os.PathLike,
                            shard_size: int = 100_000, model_name: str = "", progress: bool = True
                            ) -> ShardedEmbeddings:
    """Encode the corpus into float32 .npy shards of `shard_size` passages under `out_dir`.

    Resumable: each shard's ids and then its embeddings are written atomically, so a shard whose .npy exists is
    complete and is skipped on a rerun. The manifest records corpus ids, shard size, `model_name` and the encoder's
    precision; rerunning into the folder with a different corpus, shard size, model name or precision is an error
    rather than a silent mix. (A corpus too large to load: `encode_stream_to_shards`.)
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be positive, got {shard_size}")
    if not corpus:
        raise ValueError("cannot encode an empty corpus")
    out = Path(out_dir)
    ids = list(corpus)
    _check_manifest(out, {"n_docs": len(ids), "shard_size": shard_size, "ids_sha256": ids_digest(ids),
                          "model_name": model_name, "precision": _encoder_precision(encoder)})
    rows = ((d, corpus[d].title, corpus[d].text) for d in ids)
    return encode_stream_to_shards(encoder, rows, out, shard_size, model_name, progress, total=len(ids))


def _rows(rows: Iterable) -> Iterator[tuple[str, str, str]]:
    for row in rows:
        yield row if isinstance(row, tuple) else (row.id, row.title, row.text)


def encode_stream_to_shards(encoder: Encoder, rows: Iterable, out_dir: str | os.PathLike,
                            shard_size: int = 100_000, model_name: str = "", progress: bool = True,
                            total: int | None = None) -> ShardedEmbeddings:
    """Encode a stream of (id, title, text) rows (or Documents) into the shard folder of `encode_corpus_to_shards`,
    holding one shard of rows at a time: peak memory is bounded by `shard_size`, not by the corpus.

    Resumable: a shard whose .npy exists is skipped after checking that it holds the same ids as the stream's rows
    at its place (rows are still read, to find the next shard). The manifest gets the corpus size and ids digest at
    the end; until then `ShardedEmbeddings` refuses the folder as incomplete. A stream that differs from what the
    folder holds (other ids, other size), or a different shard size, model name or precision, is a ValueError.
    `total` (the row count, when known) only sizes the progress bar.
    """
    if shard_size < 1:
        raise ValueError(f"shard_size must be positive, got {shard_size}")
    out = Path(out_dir)
    precision = _encoder_precision(encoder)
    layout = {"shard_size": shard_size, "model_name": model_name, "precision": precision}
    old = _check_manifest(out, layout)
    if old is None:
        atomic_write_json(out / "manifest.json", {"n_docs": None, **layout, **run_metadata()})
    digest, n_docs, i = _StreamDigest(), 0, 0
    stream = _rows(rows)
    bar = tqdm(total=total, desc="encoding shards", unit="passage", disable=not progress)
    while True:
        chunk = list(itertools.islice(stream, shard_size))
        if not chunk:
            break
        shard_ids = [r[0] for r in chunk]
        ids_path, emb_path = _shard_paths(out, i)
        if emb_path.is_file():
            stored = json.loads(ids_path.read_text(encoding="utf-8"))
            if stored != shard_ids:
                raise ValueError(f"{out}: shard {i} holds other document ids than the corpus has at rows "
                                 f"{i * shard_size}..{i * shard_size + len(chunk) - 1} (ids_sha256 differs); "
                                 f"use another folder")
        else:
            emb = _check_embeddings(encoder.encode_passages([(title, text) for _, title, text in chunk]),
                                    len(chunk), f"encode_passages (shard {i})")
            atomic_write_json(ids_path, shard_ids)
            with atomic_path(emb_path) as tmp, open(tmp, "wb") as f:
                np.save(f, emb)
            del emb
        digest.update(shard_ids)
        n_docs += len(chunk)
        i += 1
        bar.update(len(chunk))
        del chunk, shard_ids
    bar.close()
    if n_docs == 0:
        raise ValueError("cannot encode an empty corpus")
    if _shard_paths(out, i)[1].is_file():
        raise ValueError(f"{out}: holds more shards than the corpus fills ({i}); the corpus differs "
                         f"(ids_sha256); use another folder")
    final = {"n_docs": n_docs, **layout, "ids_sha256": digest.hexdigest()}
    _check_manifest(out, final)
    atomic_write_json(out / "manifest.json", {**final, **run_metadata()})
    return ShardedEmbeddings(out)
