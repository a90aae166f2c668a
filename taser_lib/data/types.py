"""The one canonical in-memory form every loader produces.

A retrieval dataset is a corpus (id -> Document), queries (id -> Query, with answers or answer patterns for
open-domain QA), graded qrels (query id -> doc id -> grade, the dict shape ir-measures and pytrec_eval take),
and, for re-ranking sets, candidate lists (query id -> ordered doc ids). Ids are strings everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Candidates = dict[str, list[str]]


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    title: str = ""


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    # Gold answer strings (DPR rule: a passage "has the answer" if it contains one, after normalisation), or
    # regular expressions when `answers_are_patterns` (CuratedTREC).
    answers: tuple[str, ...] = ()
    answers_are_patterns: bool = False
    # Free-form extras a loader keeps (EntityQuestions relation, SQuAD article title, ...).
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


Corpus = dict[str, Document]
Queries = dict[str, Query]


@dataclass
class Dataset:
    """One split of one named dataset in canonical form. Any part may be empty (e.g. NQ-open has no corpus)."""

    name: str
    split: str
    corpus: Corpus = field(default_factory=dict)
    queries: Queries = field(default_factory=dict)
    qrels: Qrels = field(default_factory=dict)
    candidates: Candidates = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"Dataset({self.name!r}, split={self.split!r}, docs={len(self.corpus)}, "
                f"queries={len(self.queries)}, qrels={sum(len(v) for v in self.qrels.values())}, "
                f"candidate_lists={len(self.candidates)})")
