"""Trained models evaluated out of domain (TASER Table 2 and Table A4): the dense runs of every (model, seed) over
one dataset, the passages a streamed question set needs for answer matching, and EntityQuestions' macro / micro R@K.

    >>> models = SeededModels({"dpr": {13: path, 14: path}, "zero-shot": {None: "default"}}, max_passage_length=192)
    >>> runs = dense_runs(models, scifact, k=100, query_length=64)     # {(model, seed): Run}; no vectors kept
    >>> runs[("bm25", None)] = bm25_run(scifact)
    >>> runs = dense_runs(models, eq_test, corpus=StreamedCorpus("dpr-wiki"))   # a question set without passages
    >>> attach_passages(eq_test, [*runs.values(), bm25_run], StreamedCorpus("dpr-wiki"))
    >>> rows = entity_questions_rows(eq_test, runs)      # model, seed, dataset, split, metric ("macro R@20"), value

Why not `SeededModels.runs`: it keeps every model's corpus vectors for the object's life, which is right for
SQuAD-open (dev and test share one corpus) and wrong out of domain, where every dataset has a corpus of its own and,
at `full`, BEIR's DBpedia, FEVER and HotpotQA hold 4.6 to 5.4M passages (about 16 GB of float32 vectors per model at
768 dimensions, nine models). `dense_runs` encodes a corpus, searches it and lets the vectors go before the next
model; the encoders themselves stay loaded in the `SeededModels` (a few hundred MB each). A question set without
passages of its own (EntityQuestions at `full`) retrieves from a `StreamedCorpus` instead (DPR's Wikipedia: on-disk
shards per encoder, resumable, and shared with every other notebook that streams the same corpus with the same model).

EntityQuestions (TASER Table 2 following Sciavolino et al. 2021; Table A4 following Chen et al. 2022): macro R@K is
the mean over its 24 relations (`Query.meta["relation"]`) of each relation's R@K, micro R@K the mean over all
questions, both by DPR's answer matching, in percent. A question the run lacks counts as a miss in both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from taser_lib.data.answers import AnswerMatcher
from taser_lib.data.types import Dataset, Run
from taser_lib.retrieval.bm25 import BM25Index
from taser_lib.datasets.streamed import StreamedCorpus
from taser_lib.evaluation.answer_recall import answer_hits, macro_micro_accuracy
from .seeded import Key, SeededModels

EQ_KS: tuple[int, ...] = (20, 100)  # TASER Table 2 (macro R@20) and Table A4 (micro R@20, R@100)


def dense_runs(models: SeededModels, dataset: Dataset, k: int = 100, query_length: int | None = None,
               corpus: StreamedCorpus | None = None, labels: Sequence[str] | None = None,
               keep_vectors: bool = False) -> dict[Key, Run]:
    """Top-k dense runs of every (model, seed) of `models` (or of `labels` only) over `dataset`, its queries cut at
    `query_length` tokens (None: each encoder's own). A dataset without passages retrieves from `corpus` (its
    on-disk shards per encoder); one with passages encodes them here, one model at a time, and lets the vectors go
    (module docstring), unless `keep_vectors`: then they stay in `models` (`SeededModels.index`) for the next
    dataset with the same passages (SQuAD-open's dev and test)."""
    return models.runs(dataset, k=k, query_length=query_length, labels=labels, corpus=corpus,
                       keep_vectors=keep_vectors)


def bm25_run(dataset: Dataset, k: int = 100, corpus: StreamedCorpus | None = None) -> Run:
    """BM25's top k for every query of `dataset`, from its own passages, or from `corpus` (its index, built once per
    process) when it has none. Unlike `baselines.first_stage_runs` it leaves `dataset.corpus` as it is, so that the
    dense runs can still stream (`attach_passages` gives the set its passages once every run is made)."""
    if dataset.corpus:
        index = BM25Index.build(dataset.corpus, progress=False)
    elif corpus is not None:
        index = corpus.bm25()
    else:
        raise ValueError(f"{dataset.name}: the dataset has no passages; pass corpus= (a StreamedCorpus)")
    return index.search(dataset.queries, k=k, progress=False)


def attach_passages(dataset: Dataset, runs: Iterable[Run], corpus: StreamedCorpus) -> int:
    """Give a question set without passages the passages its runs retrieved (one streaming pass over `corpus`),
    which is all that answer matching reads; returns how many. A dataset with passages is left as it is (0)."""
    if dataset.corpus:
        return 0
    wanted = {doc for run in runs for scores in run.values() for doc in scores}
    dataset.corpus = corpus.passages(wanted)
    return len(dataset.corpus)


def entity_questions_rows(dataset: Dataset, runs: Mapping[Key, Run], ks: Sequence[int] = EQ_KS,
                          group_key: str = "relation", label: str | None = None) -> list[dict]:
    """Long rows (model, seed, dataset, split, metric, value) of macro and micro R@K (percent) for every run of
    `runs` ({(model, seed): Run}; seed None for a model without seeds, BM25): metric `macro R@20`, `micro R@20`,
    ... (`evaluation.macro_micro_accuracy`). Every query of `dataset` needs `meta[group_key]`."""
    matcher = AnswerMatcher(dataset.corpus)
    name = label or dataset.name
    rows = []
    for (model, seed), run in runs.items():
        found = answer_hits(matcher, dataset.queries, run, max(ks), progress=False)
        hits = {qid: found.get(qid, []) for qid in dataset.queries}  # a query the run lacks is a miss
        values = macro_micro_accuracy(hits, dataset.queries, ks, group_key=group_key)
        for kind in ("macro", "micro"):
            for k in ks:
                metric = f"{kind} R@{k}"
                rows.append({"model": model, "seed": seed, "dataset": name, "split": dataset.split,
                             "metric": metric, "value": 100 * values[metric]})
    return rows
