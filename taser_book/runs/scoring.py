"""Scores of saved re-rankers on re-ranking sets, cached beside the model, and the query x passage grids of
"In defense of dual-encoders" Proposition 1.

The score analysis of the dual-encoder pages (`analyses.scores`, `analyses.propositions`) needs each model's
score of every candidate, not only the per-query metrics that a run records. This module scores any saved
re-ranker -- the CA teacher (`kind: cross-encoder`) or a bi-encoder student (`kind: distill`: DE, distilled DE,
ColBERT) -- with the same scoring code and settings its trainer evaluates it with, and caches the scores on disk, so
that several notebooks analysing the same run score it once.

    >>> sets = teacher.config.data.load(progress=False)
    >>> test = sets["test"].sample(300, seed=0)
    >>> ca = run_scores(teacher, test)                  # {query id: float32 [len(test.candidates[qid])]}
    >>> de = run_scores(student, test)                  # a distill run: its own compute_similarity
    >>> grid = grid_set(test, n_queries=24, seed=13)    # every sampled query x every pooled candidate
    >>> S, R = grid_matrix(grid, run_scores(teacher, grid))   # [24, D] CA scores and relevance grades

- **Settings.** A run's scores use its config's settings: a CA run `training.max_length` and
  `training.eval_batch_size`, a distill run `training.max_query_length`, `max_passage_length` and
  `eval_batch_size` (what its dev and test evaluations used).
- **Cache.** One folder per (model weights, candidate set, settings) under `<run>/scores/` (scores.npy + index.json,
  the layout of the teacher cache, `cross_encoder.score_and_cache_teacher`), keyed by the sha256 of the model's
  weights, the set's fingerprint and the settings: a retrained run or another slice of the data gets new scores,
  never stale ones. For a CA, the teacher cache that its run wrote (`<run>/teacher_scores`: the selected model's
  scores of every training candidate) is read when it matches, so the training split costs nothing to score.
- **Grid** (Proposition 1, finite form): a seeded sample of a set's queries (those with a positive), each paired
  with every candidate of every sampled query (pooled, first-seen order), as a `RerankingSet` whose candidate lists
  are all the same. A pooled passage keeps its label for the query it was a candidate of; for any other query it is
  labelled by DPR's answer rule when the queries carry answers (SQuAD-open: relevant when it contains a gold answer,
  the rule R@K uses; `answer_rule=False`: irrelevant), else it is irrelevant (unjudged). `meta["answer_labelled"]`
  counts the pairs the rule made relevant.
- **Training stages** (Figure 7): `stage_runs` gives the same recipe at initialisation, after a few steps and at the
  end.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from taser_lib.data.answers import AnswerMatcher
from taser_lib.errors import ConfigError
from taser_lib.io import atomic_dir
from taser_lib.meta import run_metadata
from taser_lib.models import CrossEncoderModel, default_device, load_model, load_tokenizer
from . import changes as _changes
from .cache import CachedRun
from .changes import Change
from taser_lib.training.cross_encoder import CACHE_INDEX, CACHE_SCORES, _cache_key, _read_cache, model_fingerprint, score_reranking_set
from taser_lib.training.distill import score_dual_encoder
from taser_lib.training.reranking import RerankingSet, sample_ids

SCORES_FOLDER = "scores"      # under a run folder: one subfolder per (model, set, settings)
TEACHER_FOLDER = "teacher_scores"
CHECKPOINTS = ("best", "final")
STAGES = ("init", "early", "final")

Scores = dict[str, np.ndarray]


# --- scoring a saved model -------------------------------------------------------------------------------------------

def _key(model, tokenizer, rset: RerankingSet, *, cross_encoder: bool, max_query_length: int,
         max_passage_length: int, max_length: int) -> dict:
    if cross_encoder:  # the teacher cache's own key, so that its folder can be read as one of ours
        return _cache_key(model, tokenizer, rset, max_length)
    return {"model_sha256": model_fingerprint(model), "candidates_sha256": rset.fingerprint(),
            "scoring": {"max_query_length": max_query_length, "max_passage_length": max_passage_length,
                        "tokenizer": type(tokenizer).__name__, "vocab_size": len(tokenizer)}}


def _write(folder: Path, key: dict, rset: RerankingSet, scores: Scores, source: str) -> None:
    qids = list(rset.candidates)
    index = {**key, "model_name_or_path": source, "set": repr(rset), "qids": qids,
             "counts": [len(rset.candidates[q]) for q in qids], "metadata": run_metadata()}
    with atomic_dir(folder) as tmp:
        np.save(tmp / CACHE_SCORES, np.concatenate([scores[q] for q in qids]).astype(np.float32))
        (tmp / CACHE_INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")


def saved_model_scores(path: str | Path, rset: RerankingSet, *, max_query_length: int = 32,
                       max_passage_length: int = 192, max_length: int | None = None, batch_size: int = 64,
                       cache_dir: str | Path | None = None, teacher_cache: str | Path | None = None,
                       progress: bool = False) -> Scores:
    """Every candidate's score under the saved re-ranker at `path` (a cross-encoder folder, a bi-encoder folder or
    a checkpoint name such as "default"): {query id: float32 array aligned with rset.candidates[qid]}.

    A cross-encoder scores `[CLS] q [SEP] d [SEP]` truncated to `max_length` tokens (default: query + passage
    lengths); a bi-encoder its own `compute_similarity` of the query (`max_query_length`) and passage
    (`max_passage_length`) representations. With `cache_dir`, the scores are read from / written to a subfolder
    keyed by the weights' sha256, the set's fingerprint and these settings; `teacher_cache` (a CA's
    `teacher_scores` folder) is read, never written, when it matches the same key."""
    model = load_model(path).to(default_device()).eval()
    tokenizer = load_tokenizer(path)
    cross = isinstance(model, CrossEncoderModel)
    max_length = int(max_length or (max_query_length + max_passage_length))
    key = None
    if cache_dir is not None or teacher_cache is not None:
        key = _key(model, tokenizer, rset, cross_encoder=cross, max_query_length=max_query_length,
                   max_passage_length=max_passage_length, max_length=max_length)
        for folder in ([Path(teacher_cache)] if teacher_cache is not None and cross else []) + \
                      ([_folder(cache_dir, key)] if cache_dir is not None else []):
            cached, _ = _read_cache(folder, key)
            if cached is not None and list(cached) == list(rset.candidates):
                return cached
    if cross:
        scores = score_reranking_set(model, tokenizer, rset, max_length=max_length, batch_size=batch_size,
                                     progress=progress)
    else:
        scores = score_dual_encoder(model, tokenizer, rset, max_query_length=max_query_length,
                                    max_passage_length=max_passage_length, batch_size=batch_size, progress=progress)
    scores = {q: np.asarray(v, dtype=np.float32) for q, v in scores.items()}
    if cache_dir is not None:
        _write(_folder(cache_dir, key), key, rset, scores, str(path))
    return scores


def _folder(cache_dir: str | Path, key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return Path(cache_dir) / digest


def scoring_settings(config: Any) -> dict[str, int]:
    """The lengths and batch size a re-ranking run's own evaluations score with (see the module docstring)."""
    kind = getattr(config, "kind", None)
    t = config.training
    if kind == "cross-encoder":
        return {"max_length": int(t.max_length), "batch_size": int(t.eval_batch_size)}
    if kind == "distill":
        return {"max_query_length": int(t.max_query_length), "max_passage_length": int(t.max_passage_length),
                "batch_size": int(t.eval_batch_size)}
    raise ConfigError(f"run_scores scores re-ranking runs (kind cross-encoder or distill), not kind {kind!r}")


def run_scores(run: CachedRun, rset: RerankingSet, *, checkpoint: str = "best", cache: bool = True,
               progress: bool = False) -> Scores:
    """`saved_model_scores` of a finished re-ranking run's selected model (`checkpoint="best"`, what its test
    metrics score) or its last one ("final"), with the run's own scoring settings, cached under `<run>/scores/`
    (and, for a CA, reading its teacher cache when it covers `rset`)."""
    if checkpoint not in CHECKPOINTS:
        raise ValueError(f"checkpoint must be one of {CHECKPOINTS}, got {checkpoint!r}")
    path = run.model_path if checkpoint == "best" else Path(run.result["paths"]["final"])
    teacher = run.dir / TEACHER_FOLDER
    return saved_model_scores(path, rset, **scoring_settings(run.config),
                              cache_dir=run.dir / SCORES_FOLDER if cache else None,
                              teacher_cache=teacher if cache and teacher.is_dir() else None, progress=progress)


# --- the query x passage grid (Proposition 1) -----------------------------------------------------------------------

def grid_set(rset: RerankingSet, n_queries: int | None = None, seed: int = 0, *,
             answer_rule: bool | None = None) -> RerankingSet:
    """A seeded sample of `n_queries` queries of `rset` that have a positive (all when None), each with every
    candidate of every sampled query as its candidates (see the module docstring for the labels).
    `answer_rule`: None = when every query carries answers."""
    qids = sample_ids(rset.qrels(), n_queries, seed)
    if not qids:
        raise ValueError(f"{rset!r} has no query with a positive to build a grid from")
    docs = list(dict.fromkeys(d for q in qids for d in rset.candidates[q]))
    if answer_rule is None:
        answer_rule = all(rset.queries[q].answers for q in qids)
    matcher = AnswerMatcher(rset.corpus) if answer_rule else None
    labels, by_rule = {}, 0
    for q in qids:
        own = dict(zip(rset.candidates[q], rset.labels[q]))
        row = []
        for d in docs:
            if d in own:
                row.append(int(own[d]))
            else:
                hit = matcher is not None and matcher.has_answer(rset.queries[q], d)
                by_rule += hit
                row.append(int(hit))
        labels[q] = row
    meta = {"source": "grid", "grid_of": repr(rset), "seed": seed, "queries": len(qids), "passages": len(docs),
            "answer_rule": bool(answer_rule), "answer_labelled": by_rule}
    return RerankingSet({q: rset.queries[q] for q in qids}, rset.corpus, {q: list(docs) for q in qids}, labels,
                        rset.name, rset.split, meta)


def grid_matrix(grid: RerankingSet, scores: Mapping[str, Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(S, R): the scores [queries, passages] (float64) and relevance grades (int) of a `grid_set`, rows in its
    query order, columns in its passage order. Raises ValueError when the set is not a grid or scores are
    missing or misaligned."""
    qids = list(grid.candidates)
    if not qids:
        raise ValueError("the grid has no queries")
    docs = grid.candidates[qids[0]]
    if any(grid.candidates[q] != docs for q in qids):
        raise ValueError(f"{grid!r} is not a grid: its queries have different candidate lists")
    missing = [q for q in qids if q not in scores]
    if missing:
        raise ValueError(f"no scores for {len(missing)} grid queries, e.g. {missing[:3]}")
    rows = [np.asarray(scores[q], dtype=np.float64).reshape(-1) for q in qids]
    bad = [q for q, r in zip(qids, rows) if len(r) != len(docs)]
    if bad:
        raise ValueError(f"query {bad[0]!r}: {len(rows[qids.index(bad[0])])} scores for {len(docs)} passages")
    return np.stack(rows), np.array([grid.labels[q] for q in qids], dtype=np.int64)


# --- training stages (Figure 7) -------------------------------------------------------------------------------------

def early_steps(final_steps: int, fraction: float) -> int:
    """Steps of the `early` stage: round(fraction x the final run's steps), at least 1 and, when the final run
    has more than one step, fewer than it has."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the early fraction must lie in (0, 1), got {fraction}")
    steps = round(fraction * final_steps)
    if final_steps > 1:
        steps = min(steps, final_steps - 1)
    return max(1, steps)


STAGE_EVAL_QUERIES = 8  # dev and training questions a stage run evaluates (its selection is not used)


def stage_changes(run: CachedRun, steps: int, eval_queries: int = STAGE_EVAL_QUERIES) -> list[Change]:
    """The changes turning the recipe of finished run `run` into a `steps`-step run (see `stage_runs`)."""
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if eval_queries < 1:
        raise ValueError(f"eval_queries must be >= 1, got {eval_queries}")
    data = {"test_split": None, "dev_queries": eval_queries}
    if run.config.kind == "cross-encoder":
        seen = max(1, steps) * int(run.config.loop.batch_size)
        limit = run.config.data.train_queries
        data["train_queries"] = seen if limit is None else min(seen, int(limit))
    return [_changes.loop(max_steps=steps), _changes.data(**data),
            _changes.training(train_eval_queries=eval_queries)]


def stage_runs(name: str, seed: int, params: Mapping[str, Any], final: CachedRun, *, early_fraction: float,
               teacher: CachedRun | None = None, changes: Sequence[Change] = (), init: CachedRun | None = None,
               progress: bool = False) -> dict[str, CachedRun]:
    """{"init", "early", "final"}: re-ranking entry `name` (`recipes.reranking_run`, same seed, params, teacher
    and changes as `final`, its finished run) at initialisation, early in training and at the end (Figure 7).

    - `init`: a run of 0 steps, the model as its trainer builds it (a student: its starting checkpoint, with the
      student's architecture and similarity scale; a CA: the starting BERT body with a fresh scoring head). Pass
      `init=` to reuse one (every student of one starting checkpoint has the same step-0 model).
    - `early`: a run of `early_steps(final steps, early_fraction)` steps. It is its own run of the same recipe, so
      its learning-rate warm-up and decay span those steps: a short run, not a checkpoint of the final run (the
      loop keeps only its last checkpoints).
    - Both skip the test re-ranking (`data.test_split=null`; the pages score their own sample) and evaluate only
      `STAGE_EVAL_QUERIES` dev and training questions (their checkpoint selection is not used: a stage shows the
      model after its last step, `stage_checkpoint`). A CA stage run also trains on only the questions its steps see (`data.train_queries` = steps x batch size, at least one
      batch): a CA run scores every training candidate for its teacher cache at the end, which for the full
      training set costs more than the short run itself. A student keeps the training set (a distilled
      student's teacher cache must match it)."""
    from .recipes import reranking_run

    steps = early_steps(int(final.result["final_step"]), early_fraction)
    runs = {}
    for stage, n in (("init", 0), ("early", steps)):
        if stage == "init" and init is not None:
            runs[stage] = init
            continue
        runs[stage] = reranking_run(name, seed, params, teacher=teacher,
                                    changes=[*changes, *stage_changes(final, n)], progress=progress)
    runs["final"] = final
    return runs


def stage_checkpoint(stage: str) -> str:
    """The model a stage shows: the last one of an `init` or `early` run (the model after its steps, whatever its
    dev score; its selected model may be step 0's), the selected one of the finished run (`final`: the model its
    test metrics and the other figures use, as the paper's early-stopped final models)."""
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    return "best" if stage == "final" else "final"


def stage_scores(runs: Mapping[str, CachedRun], rset: RerankingSet, *, cache: bool = True) -> dict[str, Scores]:
    """{stage: `run_scores` of that stage's run on `rset`, with the stage's checkpoint (`stage_checkpoint`)}."""
    return {stage: run_scores(run, rset, checkpoint=stage_checkpoint(stage), cache=cache)
            for stage, run in runs.items()}
