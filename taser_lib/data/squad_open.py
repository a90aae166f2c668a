"""SQuAD-open: the offline open-domain QA benchmark built from the SQuAD v1.1 dev set.

Construction (deterministic; every choice is recorded in split.json next to the prepared data):
- Corpus: each paragraph's context is cut into consecutive windows of 100 whitespace-separated words (DPR's
  passage size; the last window of a paragraph is shorter), text = the window's words joined by single spaces,
  title = the article title with underscores as spaces (DPR's passages carry their Wikipedia title). Passage id:
  "squad-open:<article>:<paragraph>:<window>", 0-based positions in dev-v1.1.json. All articles' passages form one
  corpus that every split retrieves from.
- Splits: by article, so no article (hence no paragraph) is in two splits. Titles are sorted, shuffled with
  `random.Random(seed)`, and the first 20% (rounded) go to test, the next 20% to dev, the rest (~60%) to train.
  Why 60/20/20: test needs ~2,000 questions for R@K differences of a few points to exceed their standard error
  (~1 point at 2,000 questions); dev needs enough to choose checkpoints and the hybrid alpha; train gets the rest,
  which is what a CPU fine-tuning budget can use anyway.
- Positives: the passages containing a whole gold answer span (SQuAD's answer_start offsets, after trimming
  whitespace at the span's ends). An answer span that straddles two windows makes neither a positive (neither
  contains the answer, so DPR's has-answer rule would not match it either); its question keeps the positives of
  its other annotations. Questions left without any positive stay in the query sets (R@K scores them by answer
  matching like every question) but not in the training json, as DPR drops training questions without a positive.
- Training json: DPR's retriever-json per split, with HARD_NEGATIVES BM25 hard negatives per question. This module
  does no retrieval: they are mined by the retrieval layer (taser_lib.datasets.ready.prepare, which
  `taser data prepare squad-open` and the notebooks call) and handed to `write_squad_open`; without them
  "hard_negative_ctxs" stay empty.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError
from ..io import atomic_dir, atomic_write_json
from ..meta import run_metadata
from .formats.beir import read_prepared, write_prepared
from .formats.squad import SquadAnswer, SquadArticle, read_squad, squad_queries
from ..io import sha256_file
from .prepared import FILES_KEY, SQUAD_OPEN_BUILDER, check_counts, damaged, file_entry, read_meta
from .training_examples import TrainingExample, read_dpr_retriever_json, write_dpr_retriever_json
from .types import Corpus, Dataset, Document, Qrels, Queries

SPLITS = ("train", "dev", "test")
WORDS_PER_PASSAGE = 100
DEFAULT_SEED = 0
DEV_FRACTION = TEST_FRACTION = 0.2
HARD_NEGATIVES = 10  # BM25 hard negatives per training question, best first (DPR-style training uses the first)
PASSAGE_ID_SCHEME = "squad-open:<article>:<paragraph>:<window> (0-based positions in the SQuAD json)"
_WORD = re.compile(r"\S+")


def passage_id(article: int, paragraph: int, window: int) -> str:
    return f"squad-open:{article}:{paragraph}:{window}"


@dataclass(frozen=True)
class Window:
    start: int  # character offsets of the window's first and last word in the context
    end: int
    text: str


def cut_words(context: str, words: int = WORDS_PER_PASSAGE) -> list[Window]:
    """Consecutive windows of `words` whitespace-separated words (the last may be shorter)."""
    if words < 1:
        raise ValueError(f"words must be >= 1, got {words}")
    spans = [m.span() for m in _WORD.finditer(context)]
    return [Window(chunk[0][0], chunk[-1][1], " ".join(context[s:e] for s, e in chunk))
            for chunk in (spans[i:i + words] for i in range(0, len(spans), words))]


def answer_window(answer: SquadAnswer, windows: list[Window]) -> int | None:
    """The window containing the whole (whitespace-trimmed) answer span, or None when it straddles two."""
    start = answer.start + len(answer.text) - len(answer.text.lstrip())
    end = answer.end - (len(answer.text) - len(answer.text.rstrip()))
    for k, window in enumerate(windows):
        if window.start <= start and end <= window.end:
            return k
    return None


def split_articles(titles: list[str], seed: int = DEFAULT_SEED) -> dict[str, list[str]]:
    """Titles -> {"train", "dev", "test"}: sorted, seeded shuffle, 20% test, 20% dev, the rest train."""
    if len(set(titles)) != len(titles):
        raise ValueError("article titles are not unique; splitting by title would put one article in two splits")
    order = sorted(titles)
    random.Random(seed).shuffle(order)
    n_test, n_dev = round(TEST_FRACTION * len(order)), round(DEV_FRACTION * len(order))
    return {"train": sorted(order[n_test + n_dev:]), "dev": sorted(order[n_test:n_test + n_dev]),
            "test": sorted(order[:n_test])}


@dataclass
class SquadOpen:
    corpus: Corpus
    splits: dict[str, Queries]
    positives: dict[str, list[str]]  # question id -> passage ids containing a whole answer span (may be empty)
    meta: dict[str, Any] = field(default_factory=dict)

    def qrels(self, split: str) -> Qrels:
        """Positives as binary qrels (questions without a positive have no entry)."""
        return {qid: {pid: 1 for pid in self.positives[qid]} for qid in self.splits[split] if self.positives[qid]}

    def dataset(self, split: str) -> Dataset:
        return Dataset("squad-open", split, self.corpus, self.splits[split], self.qrels(split))

    def training_examples(self, split: str) -> list[TrainingExample]:
        """DPR-style examples for the questions with at least one positive; negatives empty (see module doc)."""
        return [TrainingExample(q, [self.corpus[pid] for pid in self.positives[qid]])
                for qid, q in self.splits[split].items() if self.positives[qid]]


def build_squad_open(squad_json_path: str | Path, seed: int = DEFAULT_SEED,
                     words_per_passage: int = WORDS_PER_PASSAGE) -> SquadOpen:
    """Build SQuAD-open from dev-v1.1.json (plain or zipped). Pure data: no retrieval here."""
    path = Path(squad_json_path)
    articles: list[SquadArticle] = read_squad(path)
    assignment = split_articles([a.title for a in articles], seed)
    split_of = {title: split for split, titles in assignment.items() for title in titles}
    all_queries = squad_queries(articles)
    corpus: Corpus = {}
    positives: dict[str, list[str]] = {}
    splits: dict[str, Queries] = {split: {} for split in SPLITS}
    straddling = 0
    for i, article in enumerate(articles):
        for j, paragraph in enumerate(article.paragraphs):
            windows = cut_words(paragraph.context, words_per_passage)
            ids = [passage_id(i, j, k) for k in range(len(windows))]
            for pid, window in zip(ids, windows):
                corpus[pid] = Document(pid, window.text, article.display_title)
            for q in paragraph.questions:
                found = [answer_window(a, windows) for a in q.answers]
                straddling += sum(k is None for k in found)
                positives[q.id] = [ids[k] for k in sorted({k for k in found if k is not None})]
                splits[split_of[article.title]][q.id] = all_queries[q.id]
    counts = {"articles": {s: len(t) for s, t in assignment.items()}, "passages": len(corpus),
              "questions": {s: len(splits[s]) for s in SPLITS},
              "questions_with_positive": {s: sum(bool(positives[q]) for q in splits[s]) for s in SPLITS},
              "answer_spans_straddling_two_passages": straddling}
    meta = {"source": path.name, "source_sha256": sha256_file(path), "seed": seed,
            "words_per_passage": words_per_passage,
            "fractions": {"train": 1 - DEV_FRACTION - TEST_FRACTION, "dev": DEV_FRACTION, "test": TEST_FRACTION},
            "passage_id_scheme": PASSAGE_ID_SCHEME, "articles": assignment, "counts": counts}
    return SquadOpen(corpus, splits, positives, meta)


def write_squad_open(squad_open: SquadOpen, out_dir: str | Path,
                     hard_negatives: dict[str, list[str]] | None = None,
                     negatives_meta: dict[str, Any] | None = None) -> Path:
    """Write the prepared benchmark; the folder is replaced whole (built next to it, then renamed):

    <split>/ (train, dev, test): the prepared layout every dataset has (corpus.jsonl with the whole corpus,
        queries.jsonl with answers, qrels.tsv with the positives, meta.json), so `taser search` reads a split;
    dpr/<split>.json: DPR retriever json of the questions with a positive; "hard_negative_ctxs" come from
        `hard_negatives` (question id -> passage ids, best first; mined by the retrieval layer), else empty;
    split.json: the article split and every construction choice (`meta`); meta.json: counts, versions, time.
    """
    started = time.perf_counter()
    hard_negatives = hard_negatives or {}
    unknown = [pid for pids in hard_negatives.values() for pid in pids if pid not in squad_open.corpus]
    if unknown:
        raise ValueError(f"hard negatives name passages not in the corpus, e.g. {unknown[:3]}")
    files: dict[str, dict[str, Any]] = {}
    with atomic_dir(out_dir) as tmp:
        for split in SPLITS:
            write_prepared(squad_open.dataset(split), tmp / split, meta={"built_by": SQUAD_OPEN_BUILDER})
            examples = squad_open.training_examples(split)
            for example in examples:
                example.hard_negatives = [squad_open.corpus[pid] for pid in hard_negatives.get(example.query.id, [])]
            name = f"dpr/{split}.json"
            written = write_dpr_retriever_json(examples, tmp / name, dataset="squad-open")
            files[name] = file_entry(tmp / name, written)
        atomic_write_json(tmp / "split.json", squad_open.meta)
        files["split.json"] = file_entry(tmp / "split.json")
        atomic_write_json(tmp / "meta.json", run_metadata(
            counts=squad_open.meta["counts"], hard_negatives=negatives_meta or {"method": None, "note": "none mined"},
            write_seconds=round(time.perf_counter() - started, 3), **{FILES_KEY: files}))
    return Path(out_dir)


def load_squad_open(prepared_dir: str | Path) -> SquadOpen:
    """Read a directory written by `write_squad_open` back into the same object."""
    root = Path(prepared_dir)
    if not (root / "meta.json").is_file():
        raise FormatError(root / "meta.json", None, None, "missing: SQuAD-open is not prepared here; "
                          "run `taser data prepare squad-open`")
    read_meta(root)  # a damaged meta.json is an error here, not when training reads dpr/<split>.json
    meta = read_meta(root, name="split.json")
    datasets = {split: read_prepared(root / split) for split in SPLITS}
    corpus = datasets["test"].corpus
    positives: dict[str, list[str]] = {}
    for split, dataset in datasets.items():
        if dataset.corpus != corpus:
            raise FormatError(root / split / "corpus.jsonl", None, None, "differs from test/corpus.jsonl")
        unknown = [qid for qid in dataset.qrels if qid not in dataset.queries]
        if unknown:
            raise FormatError(root / split / "qrels.tsv", None, "query-id", f"unknown questions {unknown[:3]}")
        for qid in dataset.queries:
            positives[qid] = list(dataset.qrels.get(qid, {}))
    return SquadOpen(corpus, {split: d.queries for split, d in datasets.items()}, positives, meta)


def read_training_json(prepared_dir: str | Path, split: str) -> list[TrainingExample]:
    """The DPR retriever json `write_squad_open` wrote for `split` (dpr/<split>.json), its example count checked
    against meta.json's; a missing or damaged file is a FormatError saying to prepare squad-open again."""
    root = Path(prepared_dir)
    meta = read_meta(root)
    name = f"dpr/{split}.json"
    if not (root / name).is_file():
        raise FormatError(root / name, None, None, "missing; run `taser data prepare squad-open` (again)")
    try:
        examples = read_dpr_retriever_json(root / name)
    except FormatError as err:
        raise damaged(err, root, meta) from None
    check_counts(root, meta, {name: len(examples)})
    return examples


# --- one read per process -------------------------------------------------------------------------------------------
# A page trains a dozen runs on the same prepared folder in one process. Each run read the folder again (about a
# second for SQuAD-open's three splits, another for a split's training json), so these two keep what they read per
# process and version of the file they read: a folder or file rewritten since is read again.

def shared_squad_open(prepared_dir: str | Path) -> SquadOpen:
    """`load_squad_open(prepared_dir)`, read once per process and version of the folder (its meta.json's
    modification time): every caller gets the same object, so training, dev evaluation and re-ranking share one
    corpus (and hence its embeddings). Callers only read it; `load_squad_open` gives a copy of one's own."""
    root = Path(prepared_dir)
    if not (root / "meta.json").is_file():
        return load_squad_open(root)  # raises the error that says what is missing
    return _shared_squad_open(root.resolve(), (root / "meta.json").stat().st_mtime_ns)


@functools.lru_cache(maxsize=2)
def _shared_squad_open(root: Path, stamp: int) -> SquadOpen:
    return load_squad_open(root)


def shared_training_examples(prepared_dir: str | Path, split: str) -> list[TrainingExample]:
    """`read_training_json(prepared_dir, split)`, parsed once per process and version of the file (its modification
    time and size); each call gets examples and lists of its own, so a caller may change them."""
    root = Path(prepared_dir)
    path = root / "dpr" / f"{split}.json"
    stamp = (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
    return [dataclasses.replace(e, positives=list(e.positives), negatives=list(e.negatives),
                                hard_negatives=list(e.hard_negatives))
            for e in _shared_training_examples(root.resolve(), split, stamp)]


@functools.lru_cache(maxsize=4)
def _shared_training_examples(root: Path, split: str, stamp: tuple[int, int] | None) -> tuple[TrainingExample, ...]:
    return tuple(read_training_json(root, split))
