"""Answer-sentence selection sets as re-ranking data: each question has an ordered candidate list with 0/1 labels.

Canonical form: candidate sentences become documents with id "<query id>-<position>" (position 0-based in the
question's list, so a sentence repeated under two questions is two documents); `candidates[qid]` keeps the file's
order; qrels hold every candidate's label (0 = judged not an answer), the shape MRR@10 needs.

- WikiQA (Yang et al., 2015), castorini's preprocessed form: per split, line-aligned a.toks (question), b.toks
  (candidate), sim.txt (label), id.txt (question id, numbered per split).
- TrecQA (Wang et al., 2007; Yao et al., 2013 release): pseudo-XML; <QApairs id='..'> holds a <question> and
  <positive>/<negative> blocks whose first line is the tab-separated tokens (further lines: POS, dependencies, NER,
  and for positives the answer tokens and position).
"""

from __future__ import annotations

import re
from pathlib import Path

from ...errors import FormatError
from ..types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, open_text

WIKIQA_SPLITS = ("train", "dev", "test")
TRECQA_FILES = {"train": "TRAIN.xml", "dev": "DEV.xml", "test": "TEST.xml"}


class _Builder:
    """Collects questions and their candidates in the canonical form."""

    def __init__(self):
        self.corpus: Corpus = {}
        self.queries: Queries = {}
        self.qrels: Qrels = {}
        self.candidates: Candidates = {}

    def add(self, qid: str, question: str, sentence: str, label: int) -> None:
        if qid not in self.queries:
            self.queries[qid] = Query(qid, question)
            self.candidates[qid], self.qrels[qid] = [], {}
        doc_id = f"{qid}-{len(self.candidates[qid])}"
        self.corpus[doc_id] = Document(doc_id, sentence)
        self.candidates[qid].append(doc_id)
        self.qrels[qid][doc_id] = label

    def dataset(self, name: str, split: str) -> Dataset:
        return Dataset(name, split, self.corpus, self.queries, self.qrels, self.candidates)


def load_wikiqa(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                report: SkipReport | None = None) -> Dataset:
    """WikiQA (filtered: questions with at least one correct answer). test: 243 questions, 2,351 candidates."""
    if split not in WIKIQA_SPLITS:
        raise ValueError(f"WikiQA split must be one of {WIKIQA_SPLITS}, got {split!r}")
    folder, on_bad, out = Path(root) / split, OnBad(skip_bad, report), _Builder()
    names = ("a.toks", "b.toks", "sim.txt", "id.txt")
    columns = []
    for name in names:
        with open_text(folder / name) as handle:
            columns.append(handle.read().split("\n"))
    for column in columns:  # a final newline leaves one empty trailing item
        if column and column[-1] == "":
            column.pop()
    if len({len(c) for c in columns}) != 1:
        sizes = ", ".join(f"{n}: {len(c)}" for n, c in zip(names, columns))
        raise FormatError(folder, None, None, f"line-aligned files differ in length ({sizes})")
    for lineno, (question, sentence, label, qid) in enumerate(zip(*columns), 1):
        try:
            if label not in ("0", "1"):
                raise FormatError(folder / "sim.txt", lineno, "label", f"expected 0 or 1, got {label!r}")
            if not qid.strip():
                raise FormatError(folder / "id.txt", lineno, "id", "empty question id")
            qid = qid.strip()
            if qid in out.queries and out.queries[qid].text != question.strip():
                raise FormatError(folder / "a.toks", lineno, "question",
                                  f"question {qid!r} has a different text than on its first line")
            if not sentence.strip():
                raise FormatError(folder / "b.toks", lineno, "candidate", "empty candidate sentence")
        except FormatError as err:
            on_bad(err)
            continue
        out.add(qid, question.strip(), sentence.strip(), int(label))
    return out.dataset("wikiqa", split)


_TRECQA_PAIRS = re.compile(r"<QApairs id='([^']*)'>\n(.*?)</QApairs>", re.S)
_TRECQA_BLOCK = re.compile(r"<(question|positive|negative)>\n(.*?)</\1>", re.S)


def _check_nothing_between(text: str, matches: list[re.Match], path: Path, first_line: int, what: str) -> None:
    """Text outside the recognised blocks is malformed: name its line rather than ignore it."""
    pos = 0
    for match in [*matches, None]:
        gap = text[pos: match.start() if match else len(text)]
        if gap.strip():
            offset = pos + len(gap) - len(gap.lstrip())
            raise FormatError(path, first_line + text.count("\n", 0, offset), what,
                              f"unexpected text {gap.strip()[:40]!r}")
        pos = match.end() if match else pos


def load_trecqa(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                report: SkipReport | None = None) -> Dataset:
    """TrecQA (raw splits, as released). test: 100 questions, 284 positive + 1,233 negative candidates."""
    if split not in TRECQA_FILES:
        raise ValueError(f"TrecQA split must be one of {sorted(TRECQA_FILES)}, got {split!r}")
    path, on_bad, out = Path(root) / TRECQA_FILES[split], OnBad(skip_bad, report), _Builder()
    with open_text(path) as handle:
        text = handle.read()
    pairs = list(_TRECQA_PAIRS.finditer(text))
    _check_nothing_between(text, pairs, path, 1, "QApairs")
    for match in pairs:
        lineno = text.count("\n", 0, match.start()) + 1
        qid, body = match.group(1).strip(), match.group(2)
        try:
            if not qid:
                raise FormatError(path, lineno, "id", "QApairs without an id")
            if qid in out.queries:
                raise FormatError(path, lineno, "id", f"duplicate question id {qid!r}")
            found = list(_TRECQA_BLOCK.finditer(body))
            _check_nothing_between(body, found, path, lineno + 1, "block")
            blocks = [(b.group(1), b.group(2).split("\n", 1)[0]) for b in found]
            if not blocks or blocks[0][0] != "question":
                raise FormatError(path, lineno, "question", f"question {qid!r}: no <question> block first")
            if any(kind == "question" for kind, _ in blocks[1:]):
                raise FormatError(path, lineno, "question", f"question {qid!r}: more than one <question>")
            question = " ".join(blocks[0][1].split("\t")).strip()
            if not question:
                raise FormatError(path, lineno, "question", f"question {qid!r} has no tokens")
        except FormatError as err:
            on_bad(err)
            continue
        out.queries[qid] = Query(qid, question)
        out.candidates[qid], out.qrels[qid] = [], {}
        for kind, tokens in blocks[1:]:
            out.add(qid, question, " ".join(tokens.split("\t")).strip(), int(kind == "positive"))
    return out.dataset("trecqa", split)
