"""BM25 over a Corpus with bm25s: one analyzer for every dataset, parameters recorded with the index."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import Stemmer
from bm25s.tokenization import Tokenizer

from ..data.types import Corpus, Queries, Run
from ..io import atomic_dir, atomic_write_json
from ..meta import run_metadata

_META = "taser_bm25.json"


@dataclass(frozen=True)
class BM25Params:
    """BM25 (Lucene variant) and its analyzer. k1 = 0.9, b = 0.4 are Anserini's defaults, the BM25 that DPR's and
    Ma et al.'s (2021) hybrids and the BEIR BM25 baselines used; the analyzer (lowercase, words of 2+ characters,
    English stopwords, Snowball English stemmer) is the same for every dataset."""

    k1: float = 0.9
    b: float = 0.4
    method: str = "lucene"
    stopwords: str = "en"
    stemmer: str = "english"


def _tokenizer(params: BM25Params) -> Tokenizer:
    return Tokenizer(lower=True, stopwords=params.stopwords, stemmer=Stemmer.Stemmer(params.stemmer).stemWord)


def document_text(title: str, text: str) -> str:
    """What BM25 indexes for a passage: title and text (as Pyserini indexes DPR's Wikipedia and BEIR)."""
    return f"{title} {text}" if title else text


class BM25Index:
    """A bm25s index plus the doc ids it was built from and its parameters.

    >>> index = BM25Index.build(corpus); run = index.search(queries, k=100); index.save("idx/bm25")
    """

    def __init__(self, retriever: bm25s.BM25, doc_ids: list[str], params: BM25Params):
        self.retriever, self.doc_ids, self.params = retriever, doc_ids, params

    @classmethod
    def build(cls, corpus: Corpus, params: BM25Params = BM25Params(), progress: bool = True) -> "BM25Index":
        if not corpus:
            raise ValueError("cannot index an empty corpus")
        doc_ids = list(corpus)
        texts = [document_text(d.title, d.text) for d in corpus.values()]
        tokens = _tokenizer(params).tokenize(texts, return_as="tuple", show_progress=progress)
        retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        retriever.index(tokens, show_progress=progress)
        return cls(retriever, doc_ids, params)

    def search_texts(self, query_ids: list[str], texts: list[str], k: int = 100,
                     progress: bool = True) -> Run:
        """Top-k documents per query text with their BM25 scores. As in Lucene, only documents sharing a term with
        the query are returned: a query with no indexed term gets an empty ranking."""
        if len(query_ids) != len(texts):
            raise ValueError(f"{len(query_ids)} query ids for {len(texts)} texts")
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        tokenizer = _tokenizer(self.params)
        vocab = self.retriever.vocab_dict
        tokens = [[t for t in q if t and t in vocab]
                  for q in tokenizer.tokenize(texts, return_as="string", show_progress=False)]
        run: Run = {qid: {} for qid in query_ids}
        searchable = [i for i, q in enumerate(tokens) if q]
        if searchable:
            top = min(k, len(self.doc_ids))
            # numpy top-k, never bm25s' jax one: initialising jax on a GPU preallocates 75% of its memory in
            # every process, which starves the torch models trained beside the index.
            docs, scores = self.retriever.retrieve([tokens[i] for i in searchable], k=top,
                                                   show_progress=progress, n_threads=0,
                                                   backend_selection="numpy")
            for i, row_docs, row_scores in zip(searchable, docs, scores):
                run[query_ids[i]] = {self.doc_ids[d]: float(s)
                                     for d, s in zip(row_docs.tolist(), row_scores.tolist()) if s > 0}
        return run

    def search(self, queries: Queries, k: int = 100, progress: bool = True) -> Run:
        return self.search_texts(list(queries), [q.text for q in queries.values()], k=k, progress=progress)

    def save(self, path: str | os.PathLike) -> None:
        """Save into folder `path`, replacing it whole (atomically)."""
        with atomic_dir(path) as tmp:
            self.retriever.save(str(tmp), show_progress=False)
            atomic_write_json(tmp / "doc_ids.json", self.doc_ids)
            atomic_write_json(tmp / _META, {"params": asdict(self.params), "n_docs": len(self.doc_ids),
                                            "bm25s_version": bm25s.__version__, **run_metadata()})

    @classmethod
    def load(cls, path: str | os.PathLike, mmap: bool = False) -> "BM25Index":
        path = Path(path)
        if not (path / _META).is_file():
            raise FileNotFoundError(f"{path} is not a BM25 index saved by taser (no {_META})")
        meta = json.loads((path / _META).read_text(encoding="utf-8"))
        doc_ids = json.loads((path / "doc_ids.json").read_text(encoding="utf-8"))
        retriever = bm25s.BM25.load(str(path), mmap=mmap, show_progress=False)
        if len(doc_ids) != meta["n_docs"] or retriever.scores["num_docs"] != len(doc_ids):
            raise ValueError(f"{path}: index holds {retriever.scores['num_docs']} documents, doc_ids.json "
                             f"{len(doc_ids)}, metadata {meta['n_docs']}")
        return cls(retriever, doc_ids, BM25Params(**meta["params"]))

