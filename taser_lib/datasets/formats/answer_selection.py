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
from ...data.types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query
from ...data.formats._common import OnBad, PathLike, SkipReport, read_lines, require_id

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
    """WikiQA (filtered: questions with at least one correct answer). test: 243 questions, 2,351 candidates.

    The four files are line-aligned: line n of each is one candidate. A line that does not decode in any of them
    costs that candidate (an error, or with skip_bad one skipped record), never the alignment of the others."""
    if split not in WIKIQA_SPLITS:
        raise ValueError(f"WikiQA split must be one of {WIKIQA_SPLITS}, got {split!r}")
    folder, on_bad, out = Path(root) / split, OnBad(skip_bad, report), _Builder()
    names = ("a.toks", "b.toks", "sim.txt", "id.txt")
    columns = [list(read_lines(folder / name)) for name in names]
    sizes = [len(c) for c in columns]
    if len(set(sizes)) != 1:
        short = min(range(len(names)), key=lambda i: sizes[i])
        listed = ", ".join(f"{n}: {size}" for n, size in zip(names, sizes))
        raise FormatError(folder / names[short], sizes[short] + 1, None,
                          f"line-aligned files differ in length ({listed}): line {sizes[short] + 1} is missing")
    for row in zip(*columns):
        lineno = row[0].number
        question, sentence, label, qid = (line.text for line in row)
        try:
            for line in row:
                if line.error is not None:
                    raise line.error
            if label not in ("0", "1"):
                raise FormatError(folder / "sim.txt", lineno, "label", f"expected 0 or 1, got {label!r}")
            qid = require_id(qid, str(folder / "id.txt"), lineno, "id", "question").strip()
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


_PAIRS_OPEN = re.compile(r"^<QApairs id='([^']*)'>$")
_BLOCK_TAG = re.compile(r"^<(/?)(question|positive|negative)>$")
_ANY_TAG = re.compile(r"^</?[A-Za-z][^<>]*>$")  # any line that looks like a tag must be one of the known tags


class _Pair:
    """One <QApairs> being read: its blocks as (kind, first line of its content, content lines)."""

    def __init__(self, qid: str, line: int):
        self.qid, self.line = qid, line
        self.blocks: list[tuple[str, int, list[str]]] = []
        self.open: tuple[str, int] | None = None  # the block being read: (kind, line of its tag)
        self.bad = False


def _finish_pair(pair: _Pair, path: Path, out: _Builder) -> None:
    qid = pair.qid
    if not qid.strip():
        raise FormatError(path, pair.line, "id", "QApairs without an id")
    if qid in out.queries:
        raise FormatError(path, pair.line, "id", f"duplicate question id {qid!r}")
    kinds = [kind for kind, _, _ in pair.blocks]
    if not kinds or kinds[0] != "question":
        raise FormatError(path, pair.line, "question", f"question {qid!r}: no <question> block first")
    if kinds.count("question") > 1:
        raise FormatError(path, pair.line, "question", f"question {qid!r}: more than one <question>")
    tokens = [(kind, line, " ".join(lines[0].split("\t")).strip()) for kind, line, lines in pair.blocks]
    for kind, line, text in tokens:
        if not text:
            raise FormatError(path, line, kind, f"question {qid!r}: a <{kind}> block has no tokens")
    question = tokens[0][2]
    out.queries[qid] = Query(qid, question)
    out.candidates[qid], out.qrels[qid] = [], {}
    for kind, _, text in tokens[1:]:
        out.add(qid, question, text, int(kind == "positive"))


def load_trecqa(root: PathLike, split: str = "test", *, skip_bad: bool = False,
                report: SkipReport | None = None) -> Dataset:
    """TrecQA (raw splits, as released). test: 100 questions, 284 positive + 1,233 negative candidates.

    The tags are parsed as structure, one per line: <QApairs id='..'> ... </QApairs> around a <question> block and
    <positive>/<negative> blocks, each closed by its own end tag before the next opens. An unclosed, repeated,
    mismatched or stray tag is a FormatError naming its line (with skip_bad, the whole question is skipped and
    reported once): a block never silently swallows the next one.
    """
    if split not in TRECQA_FILES:
        raise ValueError(f"TrecQA split must be one of {sorted(TRECQA_FILES)}, got {split!r}")
    path, on_bad, out = Path(root) / TRECQA_FILES[split], OnBad(skip_bad, report), _Builder()
    pair: _Pair | None = None
    stray = False  # an error outside any question was reported: quiet until the next <QApairs>

    def fail(err: FormatError) -> None:
        """Report `err` once for the question being read (and drop it), or once per stretch outside questions."""
        nonlocal stray
        if pair is not None:
            if not pair.bad:
                on_bad(err)
            pair.bad = True
        elif not stray:
            on_bad(err)
            stray = True

    for lineno, text, decode_error in read_lines(path):
        stripped = text.strip()
        opening, block = _PAIRS_OPEN.match(stripped), _BLOCK_TAG.match(stripped)
        try:
            if opening:
                if pair is not None:
                    previous, pair = pair, None
                    if not previous.bad:
                        on_bad(FormatError(path, previous.line, "QApairs", f"<QApairs id='{previous.qid}'> is not "
                                           f"closed before the next one at line {lineno}"))
                pair, stray = _Pair(opening.group(1), lineno), False
            elif stripped == "</QApairs>":
                if pair is None:
                    raise FormatError(path, lineno, "QApairs", "</QApairs> without an open <QApairs>")
                if pair.open is not None and not pair.bad:
                    kind, line = pair.open
                    raise FormatError(path, line, kind, f"<{kind}> is not closed before </QApairs> at line {lineno}")
                done, pair = pair, None
                if not done.bad:
                    try:
                        _finish_pair(done, path, out)
                    except FormatError as err:
                        on_bad(err)
            elif block:
                closing, kind = block.group(1) == "/", block.group(2)
                if pair is None:
                    raise FormatError(path, lineno, kind, f"<{'/' if closing else ''}{kind}> outside <QApairs>")
                if closing:
                    if pair.open is None or pair.open[0] != kind:
                        raise FormatError(path, lineno, kind, f"</{kind}> without an open <{kind}>")
                    if not pair.blocks[-1][2]:
                        raise FormatError(path, lineno, kind, f"empty <{kind}> block")
                    pair.open = None
                else:
                    if pair.open is not None:
                        open_kind, line = pair.open
                        raise FormatError(path, lineno, kind, f"<{kind}> inside <{open_kind}> (line {line}): "
                                          f"a missing </{open_kind}> or a repeated tag")
                    pair.open = (kind, lineno)
                    pair.blocks.append((kind, lineno + 1, []))
            elif _ANY_TAG.match(stripped):
                raise FormatError(path, lineno, None, f"unknown tag {stripped[:40]!r}")
            elif pair is not None and pair.open is not None:
                pair.blocks[-1][2].append(text)
            elif stripped:
                raise FormatError(path, lineno, "block" if pair else "QApairs", f"unexpected text {stripped[:40]!r}")
            if decode_error is not None:
                raise decode_error
        except FormatError as err:
            fail(err)
    if pair is not None and not pair.bad:
        on_bad(FormatError(path, pair.line, "QApairs", f"<QApairs id='{pair.qid}'> is not closed (file truncated?)"))
    return out.dataset("trecqa", split)
