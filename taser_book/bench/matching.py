"""Benchmark 5: answer matching for R@100, the library's `AnswerMatcher` vs a straightforward per-pair reference.

Every SQuAD-open test question against its top 100 BM25 passages. The library builds a fresh matcher each round, so
its time includes tokenising every passage once; the reference re-tokenises the passage and the answers for every
(question, passage) pair and slides the answer's tokens along the passage's, as DPR's `has_answer` does (the same
reference checks the matcher in tests/test_answers.py). Decisions must be identical. Pure Python: the
device setting does not apply.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import regex

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Corpus, Queries
from taser_lib.retrieval import BM25Index, ranked_ids
from . import inputs
from .core import BenchConfig, interleaved, paired_ratio, rate, row

NAME = "matching"
TITLE = "Answer matching for R@100 vs a per-pair reference"
TARGET_SPEEDUP = 10.0

# DPR's SimpleTokenizer, written out independently of taser_lib.data.answers: the reference that the benchmark
# times and that tests/test_answers.py checks the library's matcher against.
_REF_TOKEN = regex.compile(r"(%s)|(%s)" % (r"[\p{L}\p{N}\p{M}]+", r"[^\p{Z}\p{C}]"),
                           flags=regex.IGNORECASE + regex.UNICODE + regex.MULTILINE)


def _ref_words(text: str) -> list[str]:
    return [m.group().lower() for m in _REF_TOKEN.finditer(text)]


def reference_has_answer(answers: Sequence[str], text: str, patterns: bool = False) -> bool:
    """DPR's has_answer, one pair at a time, re-tokenising everything (the baseline): string answers as token
    sequences, or with `patterns` regular expressions searched in the NFD text (CuratedTREC)."""
    text = unicodedata.normalize("NFD", text)
    if patterns:
        return any(re.compile(unicodedata.normalize("NFD", pattern),
                              flags=re.IGNORECASE + re.UNICODE + re.MULTILINE).search(text) is not None
                   for pattern in answers)
    words = _ref_words(text)
    for answer in answers:
        answer_words = _ref_words(unicodedata.normalize("NFD", answer))
        for i in range(0, len(words) - len(answer_words) + 1):
            if answer_words == words[i:i + len(answer_words)]:
                return True
    return False


def reference_hits(corpus: Corpus, queries: Queries, rankings: Mapping[str, Sequence[str]]) -> dict[str, list[bool]]:
    return {qid: [reference_has_answer(queries[qid].answers, corpus[d].text) for d in ids]
            for qid, ids in rankings.items()}


def run(cfg: BenchConfig) -> dict[str, Any]:
    k, repeats = cfg.pick(100, 10), cfg.pick(3, 1)
    squad = inputs.squad(cfg)
    queries = squad.splits["test"]
    if cfg.quick:
        queries = dict(list(queries.items())[:20])
    bm25 = BM25Index.build(squad.corpus, progress=cfg.progress).search(queries, k=k, progress=cfg.progress)
    rankings = {qid: ranked_ids(bm25[qid], k) for qid in queries}
    pairs = sum(len(ids) for ids in rankings.values())
    fns = {"taser_lib": lambda: AnswerMatcher(squad.corpus).top_k_hits(queries, rankings, k, progress=False),
           "reference": lambda: reference_hits(squad.corpus, queries, rankings)}
    times, out = interleaved(fns, repeats, "cpu", warmup=0)
    decisions = [(a, b) for qid in queries for a, b in zip(out["taser_lib"][qid], out["reference"][qid])]
    agree = sum(a == b for a, b in decisions) / len(decisions)
    speedup = paired_ratio(times["reference"], times["taser_lib"])
    return {
        "rows": [
            row("speed-up over per-pair reference", speedup["median"], "x", target=TARGET_SPEEDUP),
            row("decisions identical to reference", agree, target=1.0),
            row("taser_lib pairs/s", rate(pairs, times["taser_lib"])["median"], "1/s"),
            row("reference pairs/s", rate(pairs, times["reference"])["median"], "1/s"),
        ],
        "measured": {"seconds": times, "pairs_per_second": {n: rate(pairs, t) for n, t in times.items()},
                     "speedup": speedup, "identical_fraction": agree,
                     "pairs_with_answer": sum(a for a, _ in decisions)},
        "sizes": {"questions": len(queries), "k": k, "pairs": pairs, "passages": len(squad.corpus),
                  "repeats": repeats},
        "notes": ["rankings: BM25 top-k of every SQuAD-open test question",
                  "the library's time includes building a fresh AnswerMatcher (each passage tokenised once)"],
    }
