"""Retrieval from a corpus too large to load (DPR's 21M Wikipedia passages, the full profile's `qa_corpus`): the
corpus is read from its one file (`corpus_file`) row by row and never held whole for dense retrieval.

- `StreamedCorpus(spec).dense(encoder)`: the corpus streamed through the encoder into an on-disk shard folder
  (`dense.encode_stream_to_shards`: resumable, memory bounded by the shard size), one folder per encoder (its
  weights, passage length and format, precision), searched exactly shard by shard from memory maps
  (`ShardedEmbeddings.search`).
- `StreamedCorpus.passages(ids)` / `lookup_passages(path, ids)`: the texts of just the given passages (a run's top
  k, what answer matching reads), collected in one more streaming pass: memory is the passages kept.
- `StreamedCorpus.bm25()`: BM25 as it is, built from the corpus loaded once (bm25s tokenizes every text at once);
  the loaded corpus is dropped as soon as the index is built.

    >>> wiki = StreamedCorpus("dpr-wiki")
    >>> runs = first_stage_runs(nq_test, encoder, corpus=wiki)   # analyses.baselines: nq_test has no corpus
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from .fetch import resolve_data_dir
from ..data.formats import iter_corpus_file, load_corpus_file
from ..data.prepared import read_meta
from .registry import fetch, get, prepared_dir
from ..data.resolve import parse_dataset_spec
from ..data.types import Corpus
from ..errors import ConfigError, TaserError
from ..retrieval.bm25 import BM25Index, BM25Params
from .ready import ensure_prepared
from ..retrieval.dense import Encoder, ShardedEmbeddings, encode_stream_to_shards

PathLike = str | os.PathLike
_CORPUS_NAME = re.compile(r".*\.(jsonl|tsv)(\.gz)?$")


def is_corpus_file(path: PathLike) -> bool:
    """A file `iter_corpus_file` streams: a BEIR corpus.jsonl or a DPR passages .tsv, either optionally .gz."""
    path = Path(path)
    return path.is_file() and bool(_CORPUS_NAME.match(path.name))


def _nonempty(path: Path) -> Path | None:
    return path if path.is_file() and path.stat().st_size > 0 else None


def corpus_file(spec: PathLike, split: str | None = None, *, data_dir: PathLike | None = None,
                mirror: PathLike | None = None) -> Path | None:
    """The one file that holds the corpus of `spec`, found without reading it, or None when there is no such file
    (a BEIR zip, a registered dataset its loader builds from several files, a question set without passages).

    `spec` is a corpus file itself (psgs_w100.tsv[.gz], corpus.jsonl[.gz]), a prepared split folder or a BEIR
    folder (their corpus.jsonl), a folder of prepared splits (the split's), or a registered NAME[:SPLIT]: its
    prepared copy's corpus.jsonl when there is one (a derived dataset is prepared first), else the fetched file of
    an entry whose only file is a corpus file (dpr-wiki's psgs_w100.tsv.gz)."""
    if is_corpus_file(spec):
        return Path(spec)
    parsed = parse_dataset_spec(spec, split)
    if parsed.kind in ("prepared", "beir"):
        return _nonempty(parsed.path / "corpus.jsonl")
    if parsed.kind == "prepared-root":
        default = read_meta(parsed.path).get("default_split") if (parsed.path / "meta.json").is_file() else None
        return _nonempty(parsed.path / (parsed.split or default or "test") / "corpus.jsonl")
    if parsed.kind != "registry":
        return None
    entry = get(parsed.target)
    split = parsed.split or entry.default_split
    if entry.derived_from:
        ensure_prepared(entry.name, data_dir=data_dir, mirror=mirror)
    prepared = prepared_dir(entry.name, data_dir) / split
    if (prepared / "meta.json").is_file():
        return _nonempty(prepared / "corpus.jsonl")
    if len(entry.files) == 1 and _CORPUS_NAME.match(entry.files[0].path):
        return fetch(entry.name, [split], data_dir=data_dir, mirror=mirror, progress=False)[0]
    return None


def lookup_passages(path: PathLike, ids: Iterable[str]) -> Corpus:
    """The documents of the corpus file `path` whose ids are in `ids`, in one streaming pass (it stops once all are
    found): memory is the documents kept. Ids the file lacks are simply absent from the result."""
    wanted, found = set(ids), {}
    if not wanted:
        return found
    for doc in iter_corpus_file(path):
        if doc.id in wanted and doc.id not in found:
            found[doc.id] = doc
            if len(found) == len(wanted):
                break
    return found


def encoder_fingerprint(encoder: Encoder) -> str:
    """What makes two encoders' passage vectors the same: the model's weights (a sample of every parameter tensor),
    passage length and format, precision. An encoder without a torch model must say it itself (`fingerprint`)."""
    own = getattr(encoder, "fingerprint", None)
    if isinstance(own, str) and own:
        return own
    model = getattr(encoder, "model", None)
    if model is None or not hasattr(model, "parameters"):
        raise ConfigError(f"cannot tell which on-disk embeddings a {type(encoder).__name__} made: give it a "
                          f"`fingerprint` string, or pass the shard folder yourself")
    digest = hashlib.sha256(json.dumps([type(model).__name__, getattr(encoder, "max_passage_length", None),
                                        getattr(encoder, "passage_format", None),
                                        getattr(encoder, "resolved_precision", None)]).encode())
    for name, param in model.named_parameters():
        digest.update(name.encode())
        digest.update(param.detach().reshape(-1)[:4096].float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


class StreamedCorpus:
    """A corpus served from its file without loading it for dense retrieval (module docstring).

    `spec`: what `corpus_file` accepts. `index_dir` holds one shard folder per encoder (default: <data dir>/indexes/
    <name>). Shard folders are resumable, and reused by later runs after one streaming pass that checks they hold
    this corpus's ids; within a process each encoder's folder is checked once.
    """

    def __init__(self, spec: PathLike, index_dir: PathLike | None = None, *, shard_size: int = 100_000,
                 data_dir: PathLike | None = None, mirror: PathLike | None = None, progress: bool = True):
        path = corpus_file(spec, data_dir=data_dir, mirror=mirror)
        if path is None:
            raise TaserError(f"{spec}: its corpus is not one file that can be streamed (a corpus.jsonl or a DPR "
                             f"passages .tsv, optionally .gz)")
        self.spec, self.path, self.shard_size, self.progress = os.fspath(spec), path, shard_size, progress
        slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(self.spec).name if is_corpus_file(spec) else self.spec)
        self.index_dir = Path(index_dir) if index_dir else resolve_data_dir(data_dir) / "indexes" / slug
        self._dense: dict[str, ShardedEmbeddings] = {}
        self._bm25: dict[BM25Params, BM25Index] = {}

    def __repr__(self) -> str:
        return f"StreamedCorpus({self.spec!r}, file={str(self.path)!r})"

    @property
    def n_docs(self) -> int | None:
        """The corpus size, known once a dense index has been built or checked (None before)."""
        return next((len(shards) for shards in self._dense.values()), None)

    def dense(self, encoder: Encoder, folder: PathLike | None = None, model_name: str = "") -> ShardedEmbeddings:
        """The corpus's embedding shards for `encoder` (encoded now where missing), under `folder` (default:
        index_dir/dense-<encoder_fingerprint>)."""
        key = encoder_fingerprint(encoder) if folder is None else os.fspath(folder)
        if key not in self._dense:
            out = Path(folder) if folder is not None else self.index_dir / f"dense-{key}"
            self._dense[key] = encode_stream_to_shards(encoder, iter_corpus_file(self.path), out,
                                                       shard_size=self.shard_size, model_name=model_name or key,
                                                       progress=self.progress)
        return self._dense[key]

    def bm25(self, params: BM25Params = BM25Params()) -> BM25Index:
        """A BM25 index of the corpus, built once per process from the corpus loaded whole (BM25 is not streamed)."""
        if params not in self._bm25:
            self._bm25[params] = BM25Index.build(load_corpus_file(self.path), params, progress=self.progress)
        return self._bm25[params]

    def passages(self, ids: Iterable[str]) -> Corpus:
        """Just these passages (`lookup_passages`): one streaming pass over the file."""
        return lookup_passages(self.path, ids)


def streamed_corpus(spec: PathLike, stream: bool | None = None, **kwargs) -> StreamedCorpus | None:
    """`StreamedCorpus(spec, **kwargs)` when `stream` is True, or when it is None (auto) and the corpus of `spec` is
    one file; None otherwise (the caller loads the corpus). A notebook's `stream_corpus` parameter."""
    if stream is False:
        return None
    if stream is None and corpus_file(spec, data_dir=kwargs.get("data_dir"), mirror=kwargs.get("mirror")) is None:
        return None
    return StreamedCorpus(spec, **kwargs)
