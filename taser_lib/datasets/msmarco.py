"""The MS MARCO passage re-ranking testbed of "In defense of dual-encoders" (§5), `data.dataset: msmarco-passage`.

Splits (the re-ranking configs' generic names -> what they hold):
- train: "the triplet data aggregated by query, retaining the top-K passages with highest teacher model score". The
  triplets are the ~40M "Train Triples Small" in id form as scored by Hofstätter et al.'s T1 teacher (BERT-Base
  CAT; registry entry `msmarco-passage-t1`), so the same file gives the triplets and the teacher the paper
  distils from. Per query: its triplets' positives and negatives, the K = `data.candidates` of highest T1 score
  kept (the positives always, up to K-1 of them), best first. Labels: 1 for a triplet positive or a passage judged
  relevant in qrels.train (`meta["negatives_judged_relevant"]` counts negatives that are), else 0. Consequence
  worth knowing: when K is smaller than a query's triplets, T1 chose which candidates stay, whatever teacher (or
  none) later trains on them; the paper keeps 20 for every model.
- dev: MS MARCO dev-small (6,980 queries) re-ranking its BM25 top-1000 (top1000.dev), binary qrels.
- test: TREC DL 2019 (the 43 judged queries) re-ranking its BM25 top-1000, graded qrels (0-3; > 0 relevant for
  MRR, the grades for nDCG).
Candidate lists keep file order: the top-1000 files carry no rank or score, so `RerankingSet.first_stage_run` is
not BM25's ranking on this testbed (`meta["file_order"]`).

`limits[split]` keeps a seeded sample of that many queries with a relevant candidate (as `RerankingSet.sample`).
The 8.8M-passage collection is streamed once for all requested splits and only the passages their candidates need
are kept; each split's corpus holds its own candidates' passages only, so a student's uniform random negatives
(Table 12) are drawn from its training candidates, not from the whole collection.

Released teacher scores (`released_teacher_scores`): the T1 scores of a training set's candidates, aligned with
its lists, for `teacher.released: msmarco-passage-t1` of a `kind: distill` config (training/distill.py).
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from . import registry
from .formats.msmarco import ScoredTriple, iter_collection, iter_scored_triples, read_queries
from ..data.formats.trec import read_trec_qrels
from ..data.types import Corpus, Dataset
from ..errors import TaserError
from ..training.reranking import RerankingSet, sample_ids

logger = logging.getLogger(__name__)

NAME = "msmarco-passage"
SPLITS = {"train": "train", "dev": "dev-small", "test": "dl19"}  # the configs' split -> the registry's
RELEASED_TEACHERS = ("msmarco-passage-t1",)  # registry entries of released teacher scores (scored triples)


def _fetched(name: str, split: str, data_dir: str | Path | None) -> dict[str, Path]:
    """{file name: path} of registry entry `name`'s files for `split`, verified, from the data directory or the
    mirror; never the network (`taser data fetch <name>` downloads)."""
    return {p.name: p for p in registry.fetch(name, [split], data_dir=data_dir, progress=False)}


def _by_score(item: tuple) -> tuple:
    """Sort key: highest teacher score first (None as 0), then passage id."""
    return -(item[-1] or 0.0), item[0]


class Group:
    """One query's triplet passages while aggregating: positives with their score, and the negatives of highest
    score (at most 2k kept between prunings, so memory stays bounded by the query count times k)."""

    __slots__ = ("positives", "negatives")

    def __init__(self):
        self.positives: dict[str, float | None] = {}
        self.negatives: dict[str, float | None] = {}

    def add(self, triple: ScoredTriple, k: int) -> None:
        self.positives.setdefault(triple.pos, triple.score_pos)
        self.negatives.setdefault(triple.neg, triple.score_neg)
        if len(self.negatives) > 2 * k:
            keep = heapq.nsmallest(k, self.negatives.items(), key=_by_score)
            self.negatives = dict(keep)


def aggregate_triples(triples: Iterable[ScoredTriple], k: int) -> dict[str, list[tuple[str, bool, float | None]]]:
    """Triples grouped by query: {qid: [(pid, is_positive, teacher score), ...]}, the k of highest teacher score
    (ties: passage id), best first, always keeping the positives (up to k-1, highest score first) and at least one
    negative. Unscored triples (score None) count as 0 and keep the order of their ids. A passage that is a
    positive and a negative of the same query stays a positive. Queries without a negative are left out."""
    if k < 2:
        raise ValueError(f"k must be at least 2 (a positive and a negative), got {k}")
    groups: dict[str, Group] = {}
    for triple in triples:
        groups.setdefault(triple.qid, Group()).add(triple, k)
    out = {}
    for qid, group in groups.items():
        pos = sorted(group.positives.items(), key=_by_score)[:k - 1]
        neg = sorted(((d, s) for d, s in group.negatives.items() if d not in group.positives), key=_by_score)
        neg = neg[:k - len(pos)]
        if pos and neg:
            out[qid] = sorted([(d, True, s) for d, s in pos] + [(d, False, s) for d, s in neg], key=_by_score)
    return out


def _train_lists(k: int, limit: int | None, data_dir, seed: int = 0):
    """(queries, candidates, labels, meta) of the training split, before the passages are read."""
    scores_path = _fetched("msmarco-passage-t1", "train", data_dir)[registry.T1_SCORES]
    groups = aggregate_triples(iter_scored_triples(scores_path), k)
    qids = sample_ids(groups, limit, seed)
    files = _fetched(NAME, "train", data_dir)
    qrels = read_trec_qrels(files[registry.MSMARCO_PASSAGE["train-qrels"][0]])
    file, member = registry.MSMARCO_PASSAGE["train-queries"]
    queries = read_queries(files[file], member, wanted=set(qids))
    missing = [q for q in qids if q not in queries]
    if missing:
        raise TaserError(f"{files[file]}!{member}: no text for {len(missing)} training queries of "
                         f"{scores_path.name}, e.g. {missing[:3]}")
    candidates, labels, relabelled = {}, {}, 0
    for q in qids:
        candidates[q] = [d for d, _, _ in groups[q]]
        labels[q] = [int(p or qrels.get(q, {}).get(d, 0) > 0) for d, p, _ in groups[q]]
        relabelled += sum(not p and qrels.get(q, {}).get(d, 0) > 0 for d, p, _ in groups[q])
    meta = {"source": "triples", "triples": scores_path.name, "k": k, "queries_in_triples": len(groups),
            "negatives_judged_relevant": relabelled, "sampled": limit}
    return queries, candidates, labels, meta


def _ranked_lists(split: str, limit: int | None, data_dir, seed: int = 0):
    """(queries, candidates, labels, meta) of dev-small or dl19: the top-1000 lists of the judged queries."""
    folder = next(iter(_fetched(NAME, split, data_dir).values())).parent
    dataset: Dataset = registry.get(NAME).loader(folder, split)
    labels = {q: [int(dataset.qrels.get(q, {}).get(d, 0)) for d in docs] for q, docs in dataset.candidates.items()}
    relevant = [q for q, ys in labels.items() if any(y > 0 for y in ys)]
    qids = sample_ids(relevant, limit, seed) if limit is not None else sorted(dataset.candidates)
    meta = {"source": "candidate_lists", "lists": registry.MSMARCO_PASSAGE[split][0], "file_order": True,
            "judged_queries": len(dataset.queries), "queries_without_candidates":
                len(set(dataset.queries) - set(dataset.candidates)),
            "queries_without_relevant_candidate": len(dataset.candidates) - len(relevant), "sampled": limit}
    return ({q: dataset.queries[q] for q in qids}, {q: dataset.candidates[q] for q in qids},
            {q: labels[q] for q in qids}, meta)


def msmarco_reranking(splits: Sequence[str] = ("train", "dev", "test"), k: int = 20, *,
                      limits: Mapping[str, int | None] | None = None, data_dir: str | Path | None = None,
                      progress: bool = True) -> dict[str, RerankingSet]:
    """The testbed's re-ranking sets (module docstring), {split: set}; `k` = training candidates per query."""
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise TaserError(f"{NAME} has splits {list(SPLITS)} (train: triples + T1, dev: dev-small, test: TREC DL "
                         f"2019), not {unknown}")
    limits = limits or {}
    built = {s: (_train_lists(k, limits.get(s), data_dir) if s == "train" else
                 _ranked_lists(SPLITS[s], limits.get(s), data_dir)) for s in splits}
    wanted = {d for _, candidates, _, _ in built.values() for docs in candidates.values() for d in docs}
    file, member = registry.MSMARCO_PASSAGE["collection"]
    collection = _fetched(NAME, SPLITS[splits[0]], data_dir)[file]
    logger.info("reading %d passages from %s", len(wanted), collection)
    passages = {doc.id: doc for doc in iter_collection(collection, member, wanted=wanted)}
    missing = wanted - set(passages)
    if missing:
        raise TaserError(f"{collection}: {len(missing)} candidate passages are not in the collection, e.g. "
                         f"{sorted(missing)[:3]}")
    out = {}
    for split, (queries, candidates, labels, meta) in built.items():
        corpus: Corpus = {d: passages[d] for docs in candidates.values() for d in docs}
        out[split] = RerankingSet(queries, corpus, candidates, labels, NAME, split,
                                  {**meta, "registry_split": SPLITS[split]})
    return out


def released_teacher_scores(name: str, rset: RerankingSet, data_dir: str | Path | None = None
                            ) -> tuple[dict[str, np.ndarray], Path]:
    """The released teacher's scores of `rset`'s candidates ({qid: float32 aligned with its list}) and the file
    they came from. A candidate the file never scored for its query is an error (the set must come from the same
    triples: `data.dataset: msmarco-passage`, train split)."""
    if name not in RELEASED_TEACHERS:
        raise TaserError(f"unknown released teacher {name!r}; known: {', '.join(RELEASED_TEACHERS)}")
    (path,) = _fetched(name, "train", data_dir).values()
    wanted = {q: set(docs) for q, docs in rset.candidates.items()}
    found: dict[str, dict[str, float]] = {q: {} for q in wanted}
    for triple in iter_scored_triples(path):
        docs = wanted.get(triple.qid)
        if docs is None:
            continue
        for doc, score in ((triple.pos, triple.score_pos), (triple.neg, triple.score_neg)):
            if doc in docs:
                found[triple.qid].setdefault(doc, score)
    missing = [(q, d) for q, docs in rset.candidates.items() for d in docs if d not in found[q]]
    if missing:
        raise TaserError(f"{path}: no {name} score for {len(missing)} candidates of {rset.name}/{rset.split}, e.g. "
                         f"{missing[:3]}; released scores cover only the training triples they were released for")
    return {q: np.asarray([found[q][d] for d in docs], dtype=np.float32) for q, docs in rset.candidates.items()}, path

