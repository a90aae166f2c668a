"""Benchmark: does bfloat16 encoding change retrieval? SQuAD-open test R@K of the default model, fp32 vs bf16.

The whole SQuAD-open corpus and every test question are encoded twice with the packaged model, once per precision
(`DenseEncoder(precision=...)`), searched exactly (faiss flat, top 100) and scored by DPR's answer matching. The
targets (issue 13): R@1/5/20/100 within 0.2 points of fp32, and a minimum passage cosine to the fp32 vectors of at
least 0.999. bf16 is run explicitly, so the comparison is made even where `auto` would pick fp32 (on a CPU without
native bf16 it is then slow, but the numbers still answer the question).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from taser_lib.data.answers import AnswerMatcher
from taser_lib.evaluation.answer_recall import answer_hits, hits_at_k, top_k_accuracy
from taser_lib.retrieval.dense import DenseIndex
from . import inputs
from .core import BenchConfig, row
from .encoding import MIN_COSINE, cosines

NAME = "precision"
TITLE = "bf16 vs fp32 encoding: SQuAD-open test R@K"
KS = (1, 5, 20, 100)
MAX_DELTA_POINTS = 0.2


def _subset(cfg: BenchConfig):
    """(corpus, test questions): all of them, or in quick mode 20 questions over their positives plus the first
    100 passages."""
    squad = inputs.squad(cfg)
    queries = squad.splits["test"]
    if not cfg.quick:
        return squad.corpus, queries
    qids = list(queries)[:20]
    keep = list(squad.corpus)[:100] + [pid for q in qids for pid in squad.positives[q]]
    return {pid: squad.corpus[pid] for pid in dict.fromkeys(keep)}, {q: queries[q] for q in qids}


def evaluate(cfg: BenchConfig, precision: str, corpus, queries, matcher: AnswerMatcher) -> dict[str, Any]:
    encoder = inputs.encoder(cfg, batch_size=cfg.pick(64, 16), precision=precision, model=cfg.model)
    encoder.show_progress = False
    ids = list(corpus)
    start = time.perf_counter()
    passages = encoder.encode_passages([(corpus[d].title, corpus[d].text) for d in ids])
    seconds = time.perf_counter() - start
    qids = list(queries)
    questions = encoder.encode_queries([queries[q].text for q in qids])
    run = DenseIndex.from_embeddings(passages, ids).search_run(qids, questions, max(KS))
    hits = answer_hits(matcher, queries, run, max(KS), progress=False)
    return {"recall": top_k_accuracy(hits, KS), "per_query": {f"R@{k}": hits_at_k(hits, k) for k in KS},
            "passages": passages, "questions": questions, "encode_seconds": seconds,
            "resolved": encoder.resolved_precision}


def run(cfg: BenchConfig) -> dict[str, Any]:
    corpus, queries = _subset(cfg)
    matcher = AnswerMatcher(corpus)
    result = {p: evaluate(cfg, p, corpus, queries, matcher) for p in ("fp32", "bf16")}
    fp32, bf16 = result["fp32"], result["bf16"]
    delta = {f"R@{k}": 100 * (bf16["recall"][f"R@{k}"] - fp32["recall"][f"R@{k}"]) for k in KS}
    changed = {name: sum(fp32["per_query"][name][q] != bf16["per_query"][name][q] for q in queries)
               for name in delta}
    cos_p = cosines(fp32["passages"], bf16["passages"])
    cos_q = cosines(fp32["questions"], bf16["questions"])
    one_query = 100 / len(queries)
    return {
        "rows": [
            *[row(f"|R@{k} bf16 - fp32|", abs(delta[f"R@{k}"]), "points", target=MAX_DELTA_POINTS, op="<=")
              for k in KS],
            row("min cosine(bf16, fp32) passages", float(cos_p.min()), target=MIN_COSINE, op=">="),
            row("min cosine(bf16, fp32) questions", float(cos_q.min())),
            *[row(f"R@{k} fp32", 100 * fp32["recall"][f"R@{k}"], "%") for k in KS],
            *[row(f"R@{k} bf16", 100 * bf16["recall"][f"R@{k}"], "%") for k in KS],
            row("corpus encoding speed-up, bf16 over fp32", fp32["encode_seconds"] / bf16["encode_seconds"], "x"),
        ],
        "measured": {
            "recall": {p: r["recall"] for p, r in result.items()},
            "delta_points": delta,
            "questions_changed": changed,
            "cosine_passages": {"min": float(cos_p.min()), "mean": float(cos_p.mean())},
            "cosine_questions": {"min": float(cos_q.min()), "mean": float(cos_q.mean())},
            "encode_seconds": {p: r["encode_seconds"] for p, r in result.items()},
            "resolved": {p: r["resolved"] for p, r in result.items()},
        },
        "sizes": {"passages": len(corpus), "questions": len(queries), "max_passage_length": 256,
                  "max_query_length": 64},
        "notes": [f"one question is {one_query:.3f} points of R@K here; questions whose hit at K changed between "
                  "precisions: " + ", ".join(f"{k} {v}" for k, v in changed.items()),
                  "the corpus encoding speed-up is one pass each, not interleaved rounds (the encoding benchmark "
                  "times the precisions properly)"],
    }
