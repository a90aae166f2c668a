"""Training examples for retrievers, and DPR's retriever json that stores them (Karpukhin et al., 2020).

The json is an array of {"question", "answers", "positive_ctxs", "negative_ctxs", "hard_negative_ctxs"}, each
ctx {"title", "text", "passage_id", ...}. DPR's files carry no question id (here: the 0-based position, unless the
record has an "id", which this writer adds); a ctx without "passage_id" (or "psg_id") gets the empty id "", meaning
"unknown", never a made-up one. Reading streams (DPR's NQ train file is gigabytes); writing streams to a temporary
file renamed into place at the end, so a crash never leaves half a file.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..io import atomic_path
from .formats._common import OnBad, PathLike, SkipReport, iter_json_array_positions
from .types import Dataset, Document, Query

CTX_KINDS = ("positive_ctxs", "negative_ctxs", "hard_negative_ctxs")


@dataclass
class TrainingExample:
    """A question with its positive passages, random negatives and hard negatives (DPR's three pools)."""

    query: Query
    positives: list[Document]
    negatives: list[Document] = field(default_factory=list)
    hard_negatives: list[Document] = field(default_factory=list)


def qrels_training_examples(dataset: Dataset) -> list[TrainingExample]:
    """Training pairs of a qrels dataset (a BEIR train split): each judged query with its relevant documents
    (grade > 0, present in the corpus) as positives, in qrels order; queries without one are left out. Negatives
    stay empty (the trainer mines BM25 negatives from the corpus)."""
    examples = []
    for qid, judged in dataset.qrels.items():
        positives = [dataset.corpus[d] for d, grade in judged.items() if grade > 0 and d in dataset.corpus]
        if positives and qid in dataset.queries:
            examples.append(TrainingExample(dataset.queries[qid], positives))
    return examples


def _ctx(ctx: Any, where: str, lineno: int, at: str) -> Document:
    if not isinstance(ctx, dict):
        raise FormatError(where, lineno, at, "expected an object with 'title' and 'text'")
    text, title = ctx.get("text"), ctx.get("title", "")
    if not isinstance(text, str):
        raise FormatError(where, lineno, f"{at}.text", "missing or not a string")
    if not isinstance(title, str):
        raise FormatError(where, lineno, f"{at}.title", "not a string")
    pid = ctx.get("passage_id", ctx.get("psg_id", ""))
    if not isinstance(pid, (str, int)) or isinstance(pid, bool):
        raise FormatError(where, lineno, f"{at}.passage_id", f"expected a string or integer, got {pid!r}")
    if isinstance(pid, str) and pid and not pid.strip():  # "" is "unknown" (module doc); blank is a broken id
        raise FormatError(where, lineno, f"{at}.passage_id", "blank passage id")
    return Document(str(pid), text, title)


def _example(record: Any, position: int, where: str, lineno: int) -> TrainingExample:
    if not isinstance(record, dict):
        raise FormatError(where, lineno, None, "expected a JSON object")
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        raise FormatError(where, lineno, "question", "missing or empty")
    answers = record.get("answers", [])
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise FormatError(where, lineno, "answers", f"expected a list of strings, got {answers!r}")
    pools = {}
    for kind in CTX_KINDS:
        ctxs = record.get(kind, [])
        if not isinstance(ctxs, list):
            raise FormatError(where, lineno, kind, "expected a list")
        pools[kind] = [_ctx(c, where, lineno, f"{kind}[{i}]") for i, c in enumerate(ctxs)]
    qid = record.get("id", position)
    if not isinstance(qid, (str, int)) or isinstance(qid, bool) or not str(qid).strip():
        raise FormatError(where, lineno, "id", f"expected a non-empty string or integer id, got {qid!r}")
    query = Query(str(qid), question.strip(), tuple(answers),
                  meta={"dataset": record["dataset"]} if isinstance(record.get("dataset"), str) else {})
    return TrainingExample(query, pools["positive_ctxs"], pools["negative_ctxs"], pools["hard_negative_ctxs"])


def iter_dpr_retriever_json(path: PathLike, *, skip_bad: bool = False,
                            report: SkipReport | None = None) -> Iterator[TrainingExample]:
    """Stream a retriever json (plain or .gz) as TrainingExamples, in file order."""
    on_bad, where = OnBad(skip_bad, report), str(path)
    for position, lineno, record in iter_json_array_positions(path, on_bad=on_bad):
        try:
            yield _example(record, position, where, lineno)
        except FormatError as err:
            on_bad(err)


def read_dpr_retriever_json(path: PathLike, *, skip_bad: bool = False,
                            report: SkipReport | None = None) -> list[TrainingExample]:
    return list(iter_dpr_retriever_json(path, skip_bad=skip_bad, report=report))


def _ctx_json(doc: Document) -> dict[str, str]:
    return {"title": doc.title, "text": doc.text, "passage_id": doc.id}


def example_to_json(example: TrainingExample, dataset: str | None = None) -> dict[str, Any]:
    """One record of DPR's retriever json (plus "id" so that question ids survive a round trip)."""
    record: dict[str, Any] = {"id": example.query.id}
    if dataset:
        record["dataset"] = dataset
    record.update({"question": example.query.text, "answers": list(example.query.answers),
                   "positive_ctxs": [_ctx_json(d) for d in example.positives],
                   "negative_ctxs": [_ctx_json(d) for d in example.negatives],
                   "hard_negative_ctxs": [_ctx_json(d) for d in example.hard_negatives]})
    return record


def write_dpr_retriever_json(examples: Iterable[TrainingExample], path: PathLike, *,
                             dataset: str | None = None) -> int:
    """Stream `examples` into `path` (gzip if it ends in .gz), atomically; returns how many were written."""
    path, count = Path(path), 0
    with atomic_path(path) as tmp:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(tmp, "wt", encoding="utf-8") as out:
            out.write("[")
            for example in examples:
                out.write(",\n" if count else "\n")
                out.write(json.dumps(example_to_json(example, dataset), ensure_ascii=False))
                count += 1
            out.write("\n]\n")
    return count
