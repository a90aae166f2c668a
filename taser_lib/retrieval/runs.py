"""Runs (query id -> doc id -> score) as TREC run files, `qid Q0 docid rank score tag`, and their ranking order."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from ..data.text import iter_lines
from ..data.types import Run
from ..errors import FormatError
from ..io import atomic_path


def ranked(scores: Mapping[str, float], k: int | None = None) -> list[tuple[str, float]]:
    """(doc id, score) best first; ties broken by doc id so every ranking here is deterministic.

    (trec_eval breaks ties by doc id *descending*; ties are rare with real-valued scores, and this order is the one
    answer recall, hard-negative mining and written run files all share.)
    """
    order = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return order if k is None else order[:k]


def ranked_ids(scores: Mapping[str, float], k: int | None = None) -> list[str]:
    return [doc_id for doc_id, _ in ranked(scores, k)]


def truncate(run: Run, k: int) -> Run:
    """Each query's top k."""
    return {qid: dict(ranked(scores, k)) for qid, scores in run.items()}


def write_run(path: str | os.PathLike, run: Run, tag: str = "taser", k: int | None = None) -> None:
    """Write a TREC run file atomically, each query's documents best first with ranks 1, 2, ..."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag {tag!r} must be a non-empty word without whitespace")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for qid, scores in run.items():
            for rank, (doc_id, score) in enumerate(ranked(scores, k), start=1):
                for name, value in (("query id", qid), ("doc id", doc_id)):
                    if not value or any(c.isspace() for c in value):
                        raise ValueError(f"{name} {value!r} cannot be written to a TREC run (empty or has whitespace)")
                if not math.isfinite(score):
                    raise ValueError(f"score {score!r} of ({qid!r}, {doc_id!r}) is not finite")
                f.write(f"{qid} Q0 {doc_id} {rank} {score!r} {tag}\n")


def read_run(path: str | os.PathLike) -> Run:
    """Read a TREC run file (plain or .gz; strict UTF-8, CRLF and a BOM accepted: `taser_lib.data.text`).
    Malformed lines and duplicate (query, doc) pairs raise FormatError naming the file, line and field."""
    run: Run = {}
    for line_no, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise FormatError(path, line_no, None, f"expected 6 fields 'qid Q0 docid rank score tag', "
                                                   f"got {len(fields)}")
        qid, _, doc_id, rank, score, _ = fields
        try:
            int(rank)
        except ValueError:
            raise FormatError(path, line_no, "rank", f"{rank!r} is not an integer") from None
        try:
            value = float(score)
        except ValueError:
            raise FormatError(path, line_no, "score", f"{score!r} is not a number") from None
        if not math.isfinite(value):
            raise FormatError(path, line_no, "score", f"{score!r} is not finite")
        scores = run.setdefault(qid, {})
        if doc_id in scores:
            raise FormatError(path, line_no, "docid", f"{doc_id!r} appears twice for query {qid!r}")
        scores[doc_id] = value
    return run
