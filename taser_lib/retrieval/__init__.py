"""Retrieval: BM25 (bm25s), dense (faiss), the Eq. 6 hybrid, TREC run files and hard-negative mining.

    >>> from taser_lib.retrieval import BM25Index, DenseIndex, dense_search, encode_corpus, fuse
    >>> bm25_run = BM25Index.build(corpus).search(queries, k=100)
    >>> ids, emb = encode_corpus(encoder, corpus)
    >>> dense_run = dense_search(encoder, DenseIndex.from_embeddings(emb, ids), queries, k=100)
    >>> hybrid_run = fuse(dense_run, bm25_run, alpha=1.0)
"""

from .bm25 import BM25Index, BM25Params
from .dense import (INDEX_TYPES, DenseIndex, Encoder, ShardedEmbeddings, dense_search, encode_corpus,
                    encode_corpus_to_shards)
from .hybrid import ALPHAS, AlphaChoice, DevSet, choose_alpha, fuse, fuse_query
from .negatives import mine_hard_negatives
from .runs import ranked, ranked_ids, read_run, truncate, write_run

__all__ = [
    "ALPHAS", "AlphaChoice", "BM25Index", "BM25Params", "DenseIndex", "DevSet", "Encoder", "INDEX_TYPES",
    "ShardedEmbeddings", "choose_alpha", "dense_search", "encode_corpus", "encode_corpus_to_shards", "fuse",
    "fuse_query", "mine_hard_negatives", "ranked", "ranked_ids", "read_run", "truncate", "write_run",
]
