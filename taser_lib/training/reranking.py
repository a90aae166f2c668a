"""Re-ranking sets and the training groups drawn from them.

A re-ranking set is the supervision of "In defense of dual-encoders" §2: for each query q_n a list of K candidate
documents d_n with relevance labels y_n. It comes from
- a first-stage run plus known positives (SQuAD-open: BM25 top candidates, positives = the passages that contain
  the answer span), see `from_first_stage`; or
- a dataset's own candidate lists and graded qrels (WikiQA, TrecQA), see `from_candidate_lists`; or
- MS MARCO passage (the paper's own testbed): training triples aggregated by query, top K by the released T1
  teacher's score; dev-small and TREC DL 2019 re-ranking their BM25 top-1000, see `datasets/msmarco.py`.

Training reads a set as groups of candidates per query (`sample_group` for one-hot training: one positive and
K-1 negatives, as the paper's CA and DE; `teacher_top_group` for distillation: the teacher's top K) served in
resumable, seeded batches (`GroupBatches`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.answers import AnswerMatcher
from ..data.named import registry
from ..data.squad_open import SPLITS as SQUAD_OPEN_SPLITS, SquadOpen, load_squad_open, shared_squad_open
from ..data.types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Run
from ..errors import ConfigError
from ..retrieval.bm25 import BM25Index, document_text
from ..retrieval.negatives import mine_hard_negatives
from ..retrieval.runs import ranked_ids
from .config import _help
from .distributed import get_rank, get_world_size

logger = logging.getLogger(__name__)


@dataclass
class RerankingSet:
    """Queries, each with an ordered candidate list (first-stage order, best first) and a label per candidate
    (graded; > 0 is relevant). `meta` records how the set was built."""

    queries: Queries
    corpus: Corpus
    candidates: Candidates
    labels: dict[str, list[int]]
    name: str = ""
    split: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.candidates) != set(self.labels):
            raise ValueError(f"{self.name}/{self.split}: candidates and labels cover different queries")
        for qid, docs in self.candidates.items():
            if qid not in self.queries:
                raise ValueError(f"{self.name}/{self.split}: candidate list for unknown query {qid!r}")
            if len(docs) != len(self.labels[qid]):
                raise ValueError(f"{self.name}/{self.split}: query {qid!r} has {len(docs)} candidates but "
                                 f"{len(self.labels[qid])} labels")
            if len(set(docs)) != len(docs):
                raise ValueError(f"{self.name}/{self.split}: query {qid!r} lists a candidate twice")
            missing = [d for d in docs if d not in self.corpus]
            if missing:
                raise ValueError(f"{self.name}/{self.split}: query {qid!r} has candidates not in the corpus, "
                                 f"e.g. {missing[:3]}")

    def __len__(self) -> int:
        return len(self.candidates)

    def __repr__(self) -> str:
        n = sum(len(c) for c in self.candidates.values())
        return f"RerankingSet({self.name!r}, split={self.split!r}, queries={len(self)}, candidates={n})"

    def qrels(self) -> Qrels:
        """The relevant candidates as qrels (what ir-measures needs for MRR@10 / nDCG@10). Queries without a
        relevant candidate are left out: no ranking of their candidates can score, so they carry no signal."""
        out = {qid: {d: y for d, y in zip(docs, self.labels[qid]) if y > 0} for qid, docs in self.candidates.items()}
        return {qid: rel for qid, rel in out.items() if rel}

    def positives(self, qid: str) -> list[str]:
        return [d for d, y in zip(self.candidates[qid], self.labels[qid]) if y > 0]

    def subset(self, qids: Sequence[str]) -> RerankingSet:
        """The same set restricted to `qids` (in that order)."""
        unknown = [q for q in qids if q not in self.candidates]
        if unknown:
            raise ValueError(f"queries not in the set: {unknown[:3]}")
        return RerankingSet({q: self.queries[q] for q in qids}, self.corpus,
                            {q: self.candidates[q] for q in qids}, {q: self.labels[q] for q in qids},
                            self.name, self.split, {**self.meta, "subset_of": len(self)})

    def sample(self, n: int | None, seed: int = 0) -> RerankingSet:
        """A seeded random subset of n queries with at least one relevant candidate (all of them when n is None
        or not smaller): the slices that periodic evaluation scores."""
        return self.subset(sample_ids(self.qrels(), n, seed))

    def first_stage_run(self) -> Run:
        """The candidates in their stored order as a run (score = -rank): the first-stage baseline."""
        return {qid: {d: -float(rank) for rank, d in enumerate(docs)} for qid, docs in self.candidates.items()}

    def fingerprint(self) -> str:
        """sha256 over every query text, candidate id, title, text and label: equal sets, equal fingerprints."""
        digest = hashlib.sha256()
        for qid in sorted(self.candidates):
            row = [qid, self.queries[qid].text,
                   [(d, self.corpus[d].title, self.corpus[d].text, y)
                    for d, y in zip(self.candidates[qid], self.labels[qid])]]
            digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()


def sample_ids(ids: Collection[str], n: int | None, seed: int = 0) -> list[str]:
    """A seeded sample of n ids, sorted (all of them when n is None or not smaller)."""
    ids = sorted(ids)
    if n is None or n >= len(ids):
        return ids
    return [ids[i] for i in sorted(np.random.default_rng(seed).choice(len(ids), size=n, replace=False))]


def passage_text(doc: Document) -> str:
    """A candidate as one string (title, then text), the second segment of a cross-encoder's input."""
    return document_text(doc.title, doc.text)


# --- building sets --------------------------------------------------------------------------------------------------

def from_first_stage(queries: Queries, corpus: Corpus, positives: Mapping[str, Collection[str]], run: Run, k: int,
                     *, matcher: AnswerMatcher | None = None, name: str = "", split: str = "") -> RerankingSet:
    """K candidates per query: its positives plus the K - |positives| highest-ranked negatives of `run`.

    - Positives are always in the list. One the first stage ranked keeps its place; one it missed (not in the run)
      is appended after the negatives. This is the usual re-ranking protocol (the second paper's NQ dev sets
      contain the positives by construction), and it makes re-ranking metrics optimistic next to end-to-end
      retrieval: `meta["positives_added"]` counts how many positives the first stage missed.
    - Negatives are ranked passages that are not positives and, when `matcher` is given, do not contain a gold
      answer by DPR's rule (as DPR's hard negatives): an answer-bearing passage outside the gold positives is
      neither a safe positive nor a safe negative, so it is left out (counted in `meta["answer_bearing_skipped"]`).
    - A query whose run holds fewer negatives gets a shorter list (counted in `meta["short_lists"]`).
    """
    if k < 2:
        raise ValueError(f"k must be at least 2 (a positive and a negative), got {k}")
    unknown = set(queries) - set(positives)
    if unknown:
        raise ValueError(f"{len(unknown)} queries have no positives entry, e.g. {sorted(unknown)[:3]}")
    for qid in queries:
        pos = positives[qid]
        if not pos:
            raise ValueError(f"query {qid!r} has no positive passage")
        if len(pos) >= k:
            raise ValueError(f"query {qid!r} has {len(pos)} positives; k={k} leaves no room for a negative")
        missing = [d for d in pos if d not in corpus]
        if missing:
            raise ValueError(f"query {qid!r}: positives not in the corpus: {missing[:3]}")
    negatives = mine_hard_negatives({q: run.get(q, {}) for q in queries}, queries, matcher, n=k - 1,
                                    exclude=positives)
    candidates: Candidates = {}
    labels: dict[str, list[int]] = {}
    added = skipped = short = 0
    for qid in queries:
        pos = set(positives[qid])
        negs = negatives[qid][:k - len(pos)]
        keep = pos | set(negs)
        ranking = ranked_ids(run.get(qid, {}))
        in_run = [d for d in ranking if d in keep]
        missed = sorted(pos - set(in_run))
        is_short = len(negs) < k - len(pos)
        # What the negatives' search passed over (all of a short list's run) and did not keep bears an answer.
        last = len(ranking) if is_short else ranking.index(negs[-1]) + 1
        skipped += sum(1 for d in ranking[:last] if d not in keep)
        added += len(missed)
        short += is_short
        candidates[qid] = in_run + missed
        labels[qid] = [int(d in pos) for d in candidates[qid]]
    meta = {"source": "first_stage", "k": k, "answer_rule": matcher is not None, "positives_added": added,
            "answer_bearing_skipped": skipped, "short_lists": short}
    if short:
        logger.warning("%s/%s: %d of %d queries have fewer than k=%d candidates (the first stage ran out of "
                       "negatives)", name, split, short, len(queries), k)
    return RerankingSet(queries, corpus, candidates, labels, name, split, meta)


def from_bm25(index: BM25Index, queries: Queries, corpus: Corpus, positives: Mapping[str, Collection[str]], k: int,
              *, depth: int = 100, answer_rule: bool = True, name: str = "", split: str = "",
              progress: bool = True) -> RerankingSet:
    """`from_first_stage` on the BM25 top-`depth` (deeper than k, so skipping answer-bearing passages still
    leaves k - |positives| negatives); negatives by DPR's answer rule when `answer_rule` (needs query answers)."""
    if depth < k:
        raise ValueError(f"depth ({depth}) must be at least k ({k})")
    run = index.search(queries, k=depth, progress=progress)
    matcher = AnswerMatcher(corpus) if answer_rule else None
    out = from_first_stage(queries, corpus, positives, run, k, matcher=matcher, name=name, split=split)
    out.meta.update(first_stage="bm25", depth=depth, bm25_params=vars(index.params))
    return out


def squad_open_reranking(squad_open: SquadOpen, k: int = 20, *, depth: int = 100,
                         splits: Sequence[str] = SQUAD_OPEN_SPLITS, limits: Mapping[str, int | None] | None = None,
                         index: BM25Index | None = None, progress: bool = True) -> dict[str, RerankingSet]:
    """SQuAD-open as re-ranking sets, one per split: BM25 (over the whole corpus, as retrieval would) top
    candidates, the positives being the passages that contain a gold answer span (see `from_first_stage`).
    Questions without a positive (their answer straddles two passages) cannot be labelled and are left out;
    `meta["no_positive_skipped"]` counts them. `limits[split]` keeps a seeded sample of that many questions."""
    index = index or BM25Index.build(squad_open.corpus, progress=progress)
    limits = limits or {}
    out = {}
    for split in splits:
        labelled = [q for q in squad_open.splits[split] if squad_open.positives[q]]
        queries = {q: squad_open.splits[split][q] for q in sample_ids(labelled, limits.get(split))}
        out[split] = from_bm25(index, queries, squad_open.corpus, squad_open.positives, k, depth=depth,
                               name="squad-open", split=split, progress=progress)
        out[split].meta.update(no_positive_skipped=len(squad_open.splits[split]) - len(labelled),
                               sampled=limits.get(split))
    return out


def from_candidate_lists(dataset: Dataset) -> RerankingSet:
    """A dataset that ships candidate lists and qrels (WikiQA, TrecQA): its lists in file order, labels from its
    qrels (a candidate without a judgement is 0, i.e. not relevant, as trec_eval treats it)."""
    if not dataset.candidates:
        raise ValueError(f"{dataset.name}/{dataset.split} has no candidate lists")
    labels = {qid: [int(dataset.qrels.get(qid, {}).get(d, 0)) for d in docs]
              for qid, docs in dataset.candidates.items()}
    unjudged = sum(d not in dataset.qrels.get(qid, {}) for qid, docs in dataset.candidates.items() for d in docs)
    return RerankingSet(dataset.queries, dataset.corpus, dict(dataset.candidates), labels, dataset.name,
                        dataset.split, {"source": "candidate_lists", "unjudged_candidates": unjudged})


RERANKING_DATASETS = ("squad-open", "wikiqa", "trecqa", "msmarco-passage")
CANDIDATE_CAPPED = ("squad-open", "msmarco-passage")  # datasets whose training lists hold `data.candidates` each


def load_reranking_sets(dataset: str, splits: Sequence[str] = ("train", "dev", "test"), *, k: int = 20,
                        depth: int = 100, limits: Mapping[str, int | None] | None = None, path: str | None = None,
                        data_dir: str | None = None, progress: bool = True) -> dict[str, RerankingSet]:
    """Re-ranking sets of a named dataset, one per split of its own: squad-open (BM25 candidates, see
    `squad_open_reranking`; `path` = its prepared folder, default the data directory's), wikiqa / trecqa
    (their candidate lists; `k` and `depth` do not apply) or msmarco-passage (splits train / dev / test, see
    `datasets.msmarco`; `k` = training candidates per query, `depth` and `path` do not apply).
    `limits[split]`: a seeded sample of that many queries with a relevant candidate (None: all queries)."""
    limits = limits or {}
    if dataset == "msmarco-passage":  # its module builds on this one, in the registry (taser_lib.datasets.msmarco)
        return registry.msmarco.msmarco_reranking(splits, k, limits=limits, data_dir=data_dir, progress=progress)
    if dataset == "squad-open":
        squad, index = _squad_open_with_bm25(Path(path or registry.prepared_dir("squad-open", data_dir)), progress)
        return squad_open_reranking(squad, k, depth=depth, splits=splits, limits=limits, index=index,
                                    progress=progress)
    if dataset in ("wikiqa", "trecqa"):
        sets = {split: from_candidate_lists(registry.load_dataset(dataset, split, data_dir=data_dir))
                for split in splits}
        return {split: rset if limits.get(split) is None else rset.sample(limits[split])
                for split, rset in sets.items()}
    raise ValueError(f"unknown re-ranking dataset {dataset!r}; expected one of {RERANKING_DATASETS}")


def _squad_open_with_bm25(root: Path, progress: bool) -> tuple[SquadOpen, BM25Index]:
    """The prepared SQuAD-open (`shared_squad_open`, the object training and dev evaluation read too) and BM25 over
    its corpus, built once per process and version of the folder (a page loads its re-ranking sets once per run, a
    dozen times, and each load built the index again); both are only read by `squad_open_reranking`."""
    if not (root / "meta.json").is_file():
        load_squad_open(root)  # raises the error that says what is missing
    return _squad_open_with_bm25_cached(root.resolve(), (root / "meta.json").stat().st_mtime_ns, progress)


@functools.lru_cache(maxsize=2)
def _squad_open_with_bm25_cached(root: Path, stamp: int, progress: bool) -> tuple[SquadOpen, BM25Index]:
    squad = shared_squad_open(root)
    return squad, BM25Index.build(squad.corpus, progress=progress)


# --- training groups ------------------------------------------------------------------------------------------------

def sample_group(labels: Sequence[int], k: int, rng: np.random.Generator) -> list[int] | None:
    """Indices of one positive (uniform among the relevant) then k-1 negatives (uniform, without replacement):
    the one-hot training input of the paper's CA and DE models (a positive with BM25 negatives). None when the
    list has no positive or fewer than k-1 negatives."""
    pos = [i for i, y in enumerate(labels) if y > 0]
    neg = [i for i, y in enumerate(labels) if y <= 0]
    if not pos or len(neg) < k - 1:
        return None
    return [pos[rng.integers(len(pos))]] + [neg[i] for i in rng.choice(len(neg), size=k - 1, replace=False)]


def teacher_top_group(labels: Sequence[int], teacher: Sequence[float], k: int) -> list[int] | None:
    """Indices of the k candidates the teacher scores highest, best first (the paper keeps the top 20 per query),
    always keeping the positives (up to k-1 of them, highest teacher score first) so that the label-based losses
    (margin MSE, M3SE, RankDistil-B) see at least one positive and one negative. None when that is impossible."""
    if len(labels) != len(teacher):
        raise ValueError(f"{len(labels)} labels but {len(teacher)} teacher scores")
    order = sorted(range(len(labels)), key=lambda i: (-teacher[i], i))
    pos = [i for i in order if labels[i] > 0][:k - 1]
    neg = [i for i in order if labels[i] <= 0][:k - len(pos)]
    if not pos or not neg or len(pos) + len(neg) < k:
        return None
    return sorted(pos + neg, key=order.index)


class GroupBatches:
    """Batches of query ids, reshuffled every epoch, served from any batch position (the `ResumableBatches` of
    the training loop): the order of epoch e is a permutation seeded by (seed, e), and batch i is built by
    `make_batch(qids, rng)` with an rng seeded by (seed, e, i, rank), so a resumed run sees exactly the same
    batches. Under torch.distributed a global batch holds `batch_size` queries per rank and each rank builds its
    own share (the permutation is padded with its first queries to a multiple of the world size, as PyTorch's
    DistributedSampler does, so that every rank gets the same number of non-empty batches); in-batch negatives
    then come from the rank's own share."""

    def __init__(self, qids: Sequence[str], batch_size: int, make_batch: Callable[[list[str], np.random.Generator],
                                                                                  dict], seed: int = 0):
        if not qids:
            raise ValueError("no training queries")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.qids, self.batch_size, self.make_batch, self.seed = list(qids), batch_size, make_batch, seed
        self.rank, self.world = get_rank(), get_world_size()
        self.epoch = 0

    def __len__(self) -> int:
        return -(-len(self.qids) // (self.batch_size * self.world))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def iter_from(self, position: int = 0) -> Iterator[dict]:
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.qids))
        order = np.concatenate([order, order[:-len(order) % self.world]])  # pad to a multiple of the world size
        step = self.batch_size * self.world
        for i in range(position, len(self)):
            block = order[i * step:(i + 1) * step]
            share = block[self.rank * len(block) // self.world:(self.rank + 1) * len(block) // self.world]
            yield self.make_batch([self.qids[j] for j in share],
                                  np.random.default_rng([self.seed, self.epoch, i, self.rank]))

    def __iter__(self) -> Iterator[dict]:
        return self.iter_from(0)


@dataclass
class RerankingDataConfig:
    """The `data` section of the cross-encoder and distill training configs."""

    dataset: str = _help("squad-open (BM25 candidates + positives) | wikiqa | trecqa (their own candidate lists) | "
                         "msmarco-passage (train: triples by query, top candidates by T1 score; dev: dev-small, "
                         "test: TREC DL 2019, each re-ranking its BM25 top-1000)", default="squad-open")
    path: str | None = _help("squad-open: the prepared folder (null = the data directory's, from "
                             "`taser data prepare squad-open`); wikiqa/trecqa read the data directory", default=None)
    candidates: int = _help("squad-open: candidates per query (its positives + the top BM25 passages without an "
                            "answer); msmarco-passage: training candidates per query (the top by T1 score, "
                            "positives kept; the paper: 20)", default=20)
    bm25_depth: int = _help("squad-open: BM25 depth searched for those negatives", default=100)
    train_split: str = _help("split trained on", default="train")
    dev_split: str = _help("split for evaluation during training and checkpoint selection", default="dev")
    test_split: str | None = _help("split re-ranked by the selected model at the end (test_metrics.json); "
                                   "null = none", default="test")
    train_queries: int | None = _help("train on a seeded sample of this many queries (CPU budgets; the teacher "
                                      "then scores only their candidates); null = all", default=None)
    dev_queries: int | None = _help("dev queries (seeded sample) re-ranked at every evaluation; null = all",
                                    default=200)
    test_queries: int | None = _help("test queries (seeded sample) re-ranked at the end; null = all",
                                     default=None)

    def __post_init__(self):
        if self.dataset not in RERANKING_DATASETS:
            raise ConfigError(f"data.dataset must be one of {RERANKING_DATASETS}, got {self.dataset!r}")
        if self.candidates < 2 or self.bm25_depth < self.candidates:
            raise ConfigError(f"need 2 <= data.candidates <= data.bm25_depth, got {self.candidates} and "
                              f"{self.bm25_depth}")

    def load(self, progress: bool = True) -> dict[str, RerankingSet]:
        """{split: set} for the train, dev and test splits, each sampled to its limit."""
        limits = {self.train_split: self.train_queries, self.dev_split: self.dev_queries}
        if self.test_split:
            limits[self.test_split] = self.test_queries
        if len(limits) < 2 + bool(self.test_split):
            raise ConfigError("data.train_split, dev_split and test_split must differ")
        return load_reranking_sets(self.dataset, list(limits), k=self.candidates, depth=self.bm25_depth,
                                   limits=limits, path=self.path, progress=progress)
