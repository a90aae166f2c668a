"""Open-domain QA question sets (questions + gold answers, no corpus of their own):

- NQ-open (Lee et al., 2019): JSON lines {"question", "answer": [..]}; ids are the 0-based record positions;
- WebQuestions (Berant et al., 2013), brmson's organised release: a JSON array of {"qId", "qText", "answers"};
- CuratedTREC (Baudis & Sedivy, 2015), brmson's files: TSV "id, type, question, answer regex". The answer is a
  regular expression (any match in a passage counts), so `answers_are_patterns=True`; each must compile with `re`;
- EntityQuestions (Sciavolino et al., 2021): one JSON array per Wikidata relation and split
  (<split>/<relation>.<split>.json); ids "<relation>-<position>", `meta["relation"]` for macro-averaged R@K.
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import FormatError
from ...data.types import Dataset, Queries, Query
from ...data.formats._common import (OnBad, PathLike, SkipReport, StrictJson, iter_json_array,
                                    iter_json_array_positions, iter_lines, read_lines, require_id, split_columns)


def _answers(value, where: str, lineno: int, field_name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a.strip() for a in value):
        raise FormatError(where, lineno, field_name, f"expected a non-empty list of non-empty strings, got {value!r}")
    return tuple(value)


def _text(value, where: str, lineno: int, field_name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise FormatError(where, lineno, field_name, f"expected a non-empty string, got {value!r}")
    return value.strip()


def read_nq_open(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    """NQ-open jsonl. NQ-open.dev.jsonl is the 3,610-question set DPR and ORQA report as the NQ *test* set."""
    on_bad, queries, where, strict = OnBad(skip_bad, report), {}, str(path), StrictJson()
    position = 0
    for lineno, line, error in read_lines(path):
        if not line.strip() and error is None:
            continue
        qid, position = str(position), position + 1  # a skipped record keeps its position: ids do not shift
        try:
            if error is not None:
                raise error
            record = strict.loads(line, where, lineno)
            if not isinstance(record, dict):
                raise FormatError(where, lineno, None, "expected a JSON object")
            query = Query(qid, _text(record.get("question"), where, lineno, "question"),
                          _answers(record.get("answer"), where, lineno, "answer"))
        except FormatError as err:
            on_bad(err)
            continue
        queries[qid] = query
    return queries


def read_webquestions(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    on_bad, queries, where = OnBad(skip_bad, report), {}, str(path)
    for lineno, record in iter_json_array(path, on_bad=on_bad):
        try:
            if not isinstance(record, dict):
                raise FormatError(where, lineno, None, "expected a JSON object")
            qid = _text(record.get("qId"), where, lineno, "qId")  # an empty or blank id is an error
            if qid in queries:
                raise FormatError(where, lineno, "qId", f"duplicate question id {qid!r}")
            query = Query(qid, _text(record.get("qText"), where, lineno, "qText"),
                          _answers(record.get("answers"), where, lineno, "answers"))
        except FormatError as err:
            on_bad(err)
            continue
        queries[qid] = query
    return queries


def read_curatedtrec(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    on_bad, queries, where = OnBad(skip_bad, report), {}, str(path)
    names = ("id", "type", "question", "answer_pattern")
    for lineno, line in iter_lines(path, on_bad=on_bad):
        if not line.strip():
            continue
        try:
            qid, _, question, pattern = split_columns(line, "\t", names, where, lineno)
            qid = require_id(qid, where, lineno, "id", "question").strip()
            if qid in queries:
                raise FormatError(where, lineno, "id", f"duplicate question id {qid!r}")
            question = _text(question, where, lineno, "question")
            if not pattern.strip():
                raise FormatError(where, lineno, "answer_pattern", "empty answer pattern")
            try:
                re.compile(pattern)
            except (re.error, RecursionError, OverflowError) as err:
                raise FormatError(where, lineno, "answer_pattern", f"invalid regular expression: {err}") from None
        except FormatError as err:
            on_bad(err)
            continue
        queries[qid] = Query(qid, question, (pattern,), answers_are_patterns=True)
    return queries


ENTITYQUESTIONS_SPLITS = ("train", "dev", "test")


def entityquestions_relations(root: PathLike, split: str = "test") -> list[str]:
    """The relations (P17, P19, ...) that have a file for `split`, sorted by their number."""
    files = sorted(Path(root, split).glob(f"P*.{split}.json"))
    return sorted((f.name.split(".")[0] for f in files), key=lambda r: int(r[1:]))


def read_entityquestions(root: PathLike, split: str = "test", relations: list[str] | None = None, *,
                         skip_bad: bool = False, report: SkipReport | None = None) -> Queries:
    """All (or the given) relations of one split, in relation order; test: 24 relations, 22,075 questions."""
    if split not in ENTITYQUESTIONS_SPLITS:
        raise ValueError(f"EntityQuestions split must be one of {ENTITYQUESTIONS_SPLITS}, got {split!r}")
    available = entityquestions_relations(root, split)
    if not available:
        raise FormatError(Path(root, split), None, None, f"no P*.{split}.json relation files")
    unknown = sorted(set(relations or ()) - set(available))
    if unknown:
        raise ValueError(f"unknown relation(s) {unknown}; {split} has {available}")
    on_bad, queries = OnBad(skip_bad, report), {}
    for relation in relations or available:
        path = Path(root, split, f"{relation}.{split}.json")
        for position, lineno, record in iter_json_array_positions(path, on_bad=on_bad):
            qid = f"{relation}-{position}"
            try:
                if not isinstance(record, dict):
                    raise FormatError(path, lineno, None, "expected a JSON object")
                query = Query(qid, _text(record.get("question"), str(path), lineno, "question"),
                              _answers(record.get("answers"), str(path), lineno, "answers"),
                              meta={"relation": relation})
            except FormatError as err:
                on_bad(err)
                continue
            queries[qid] = query
    return queries


# ---- registry adapters: one split of each set as a Dataset (no corpus: DPR's Wikipedia is the corpus) -----------

NQ_OPEN_FILES = {"test": "NQ-open.dev.jsonl", "efficientqa-dev": "NQ-open.efficientqa.dev.1.1.jsonl",
                 "efficientqa-test": "NQ-open.efficientqa.test.1.1.jsonl"}
WEBQUESTIONS_FILES = {"train": ("trainmodel.json", "val.json", "devtest.json"), "trainmodel": ("trainmodel.json",),
                      "val": ("val.json",), "devtest": ("devtest.json",), "test": ("test.json",)}
CURATEDTREC_FILES = {"train": "curated-train.tsv", "test": "curated-test.tsv", "full": "curated-full.tsv",
                     "large2470-train": "large2470-train.tsv", "large2470-test": "large2470-test.tsv"}


def _pick(files: dict, split: str, name: str):
    if split not in files:
        raise ValueError(f"{name} split must be one of {sorted(files)}, got {split!r}")
    return files[split]


def load_nq_open(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                 report: SkipReport | None = None) -> Dataset:
    """split "test" = NQ-open.dev.jsonl (NQ's original dev set, the papers' NQ test set)."""
    path = Path(root) / _pick(NQ_OPEN_FILES, split, "NQ-open")
    return Dataset("nq-open", split, queries=read_nq_open(path, skip_bad=skip_bad, report=report))


def load_webquestions(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Dataset:
    """split "train" = the original 3,778 (trainmodel + val + devtest), "test" = the original 2,032."""
    queries: Queries = {}
    for name in _pick(WEBQUESTIONS_FILES, split, "WebQuestions"):
        part = read_webquestions(Path(root) / name, skip_bad=skip_bad, report=report)
        clash = set(part) & set(queries)
        if clash:
            raise FormatError(Path(root) / name, None, "qId", f"ids also in an earlier file: {sorted(clash)[:3]}")
        queries.update(part)
    return Dataset("webquestions", split, queries=queries)


def load_curatedtrec(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                     report: SkipReport | None = None) -> Dataset:
    path = Path(root) / _pick(CURATEDTREC_FILES, split, "CuratedTREC")
    return Dataset("curatedtrec", split, queries=read_curatedtrec(path, skip_bad=skip_bad, report=report))


def load_entityquestions(root: PathLike, split: str = "test", *, relations: list[str] | None = None,
                         skip_bad: bool = False, report: SkipReport | None = None) -> Dataset:
    return Dataset("entityquestions", split,
                   queries=read_entityquestions(root, split, relations, skip_bad=skip_bad, report=report))
