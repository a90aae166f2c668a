"""The cross-attention (CA) teacher of "In defense of dual-encoders": training, re-ranking evaluation and the
on-disk cache of its scores that distillation reads.

Training (the paper's CA baseline, §5 and Appendix B): each query with one positive and K-1 BM25 negatives,
one-hot softmax cross-entropy over the K scores (Eq. 1, label smoothing optional, Table 8). Evaluation re-ranks
each query's candidates and reports MRR@10 and nDCG@10 (`evaluation.reranking`; the test split's per-query values
go to test_per_query.csv beside test_metrics.json); the best checkpoint is chosen on dev nDCG@10 (the paper,
following Hofstätter et al. 2020, early-stops on nDCG@10).

    >>> sets = squad_open_reranking(load_squad_open(folder), k=16, limits={"dev": 200})
    >>> loop = LoopConfig("runs/ca", max_steps=300, select_metric="nDCG@10")
    >>> model, result = train_cross_encoder(sets["train"], sets["dev"], loop)
    >>> teacher = score_and_cache_teacher(model, tokenizer, sets["train"], "runs/ca/teacher_scores")
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from ..progress import tqdm

from ..errors import ConfigError
from ..evaluation.records import per_query_path
from ..evaluation.reranking import RERANK_MEASURES, record_test_metrics, rerank_metrics
from ..io import atomic_dir
from ..losses import softmax_ce
from ..meta import run_metadata
from ..models import CrossEncoderModel, build_model, default_device, load_tokenizer, quiet_loading
from .config import CrossEncoderModelConfig, _help
from .loop import LoopConfig, TrainResult, run_training, seed_everything
from .reranking import (CANDIDATE_CAPPED, GroupBatches, RerankingDataConfig, RerankingSet, passage_text,
                        sample_group)

logger = logging.getLogger(__name__)

CACHE_SCORES, CACHE_INDEX = "scores.npy", "index.json"


# --- scoring -------------------------------------------------------------------------------------------------------

def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def tokenize_pairs(tokenizer, queries: Sequence[str], passages: Sequence[str], max_length: int) -> dict:
    """[CLS] q [SEP] d [SEP] token ids, truncated to max_length (the longer segment, i.e. the passage, first)."""
    return tokenizer(list(queries), list(passages), truncation="longest_first", max_length=max_length)


def score_pairs(model: CrossEncoderModel, tokenizer, queries: Sequence[str], passages: Sequence[str], *,
                max_length: int = 192, batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """s(q, d) for every (query, passage) pair as float32 [n], in input order. Pairs are run longest first in
    batches padded to their own longest input, under inference mode; bf16 autocast on CUDA."""
    if len(queries) != len(passages):
        raise ValueError(f"{len(queries)} queries for {len(passages)} passages")
    enc = tokenize_pairs(tokenizer, queries, passages, max_length)
    ids, types = enc["input_ids"], enc["token_type_ids"]
    order = np.argsort([-len(x) for x in ids], kind="stable")
    out = np.empty(len(ids), dtype=np.float32)
    device = _device(model)
    was_training = model.training
    model.eval()
    with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for start in tqdm(range(0, len(order), batch_size), desc="cross-encoder scoring", unit="batch",
                          disable=not progress):
            idx = order[start:start + batch_size]
            batch = tokenizer.pad({"input_ids": [ids[i] for i in idx], "token_type_ids": [types[i] for i in idx]},
                                  return_tensors="pt")
            out[idx] = model(**{k: v.to(device) for k, v in batch.items()}).float().cpu().numpy()
    model.train(was_training)
    return out


def score_reranking_set(model: CrossEncoderModel, tokenizer, rset: RerankingSet, *, max_length: int = 192,
                        batch_size: int = 64, progress: bool = True) -> dict[str, np.ndarray]:
    """The model's score for every candidate of every query: {qid: float32 [len(candidates[qid])]}."""
    qids = list(rset.candidates)
    queries = [rset.queries[q].text for q in qids for _ in rset.candidates[q]]
    passages = [passage_text(rset.corpus[d]) for q in qids for d in rset.candidates[q]]
    flat = score_pairs(model, tokenizer, queries, passages, max_length=max_length, batch_size=batch_size,
                       progress=progress)
    bounds = np.cumsum([0] + [len(rset.candidates[q]) for q in qids])
    return {q: flat[bounds[i]:bounds[i + 1]] for i, q in enumerate(qids)}


# --- training ------------------------------------------------------------------------------------------------------

@dataclass
class CrossEncoderTraining:
    """What a CA run needs besides the data, the starting checkpoint and the loop settings."""

    group_size: int = _help("K: one positive and K-1 negatives per query, softmax CE over the K (paper: 20)",
                            default=8)
    max_length: int = _help("tokens per [CLS] query [SEP] passage [SEP] input", default=192)
    label_smoothing: float = _help("alpha of DE Table 8 (0 = one-hot)", default=0.0)
    train_eval_queries: int | None = _help("training queries re-ranked for the train learning curve; null = all",
                                           default=200)
    eval_batch_size: int = _help("pairs per batch when scoring", default=64)

    def __post_init__(self):
        if self.group_size < 2:
            raise ConfigError(f"group_size must be at least 2 (a positive and a negative), got {self.group_size}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must lie in [0, 1), got {self.label_smoothing}")


def trainable_queries(rset: RerankingSet, k: int) -> list[str]:
    """Queries that can form a one-hot group (a positive and k-1 negatives); the others are reported."""
    rng = np.random.default_rng(0)
    ok = [q for q in rset.candidates if sample_group(rset.labels[q], k, rng) is not None]
    if len(ok) < len(rset):
        logger.warning("%s/%s: %d of %d queries lack a positive or %d negatives and are left out of training",
                       rset.name, rset.split, len(rset) - len(ok), len(rset), k - 1)
    return ok


def cross_encoder_batches(rset: RerankingSet, tokenizer, k: int, max_length: int, batch_size: int,
                          seed: int) -> GroupBatches:
    """Batches of B queries x K (query, candidate) pairs, the positive in column 0:
    input_ids / attention_mask / token_type_ids [B*K, L], targets [B] (zeros)."""

    def make(qids: list[str], rng: np.random.Generator) -> dict:
        queries, passages = [], []
        for q in qids:
            group = sample_group(rset.labels[q], k, rng)
            queries += [rset.queries[q].text] * k
            passages += [passage_text(rset.corpus[rset.candidates[q][i]]) for i in group]
        enc = tokenize_pairs(tokenizer, queries, passages, max_length)
        batch = dict(tokenizer.pad({"input_ids": enc["input_ids"], "token_type_ids": enc["token_type_ids"]},
                                   return_tensors="pt"))
        batch["targets"] = torch.zeros(len(qids), dtype=torch.long)
        return batch

    return GroupBatches(trainable_queries(rset, k), batch_size, make, seed)


def cross_encoder_loss(label_smoothing: float = 0.0):
    """loss_fn for the loop: one-hot softmax CE over each query's K scores (DE Eq. 1, smoothing alpha); logs
    the fraction of queries whose positive scores highest."""

    def loss_fn(model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        targets = batch["targets"]
        scores = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       token_type_ids=batch["token_type_ids"]).view(len(targets), -1)
        loss = softmax_ce(scores, targets, alpha=label_smoothing)
        top1 = float((scores.argmax(1) == targets).float().mean())
        return loss, {"top1": top1}

    return loss_fn


def check_select_metric(loop: LoopConfig) -> None:
    if loop.select_metric not in RERANK_MEASURES:
        raise ConfigError(f"re-ranking runs are selected on one of {RERANK_MEASURES} (the paper: nDCG@10); "
                          f"loop.select_metric is {loop.select_metric!r}")


def reranking_evaluator(rset: RerankingSet, tokenizer, max_length: int, batch_size: int):
    """evaluate(model) -> MRR@10 / nDCG@10 of the CA re-ranking `rset`."""
    return lambda model: rerank_metrics(rset, score_reranking_set(model, tokenizer, rset, max_length=max_length,
                                                                   batch_size=batch_size, progress=False))


def train_cross_encoder(train_set: RerankingSet, dev_set: RerankingSet, loop: LoopConfig,
                        training: CrossEncoderTraining = CrossEncoderTraining(),
                        start_from: str | CrossEncoderModelConfig = "default", *,
                        progress: bool = True) -> tuple[CrossEncoderModel, TrainResult]:
    """Train the CA teacher from the BERT body of checkpoint `start_from` (a name or path, or a model section with
    overrides; the scoring head starts fresh). Every evaluation re-ranks all of `dev_set` (sample it first for CPU
    budgets). Returns the model with the best dev `loop.select_metric` (nDCG@10, as the paper, or MRR@10) and the
    loop's result."""
    check_select_metric(loop)
    if not isinstance(start_from, CrossEncoderModelConfig):
        start_from = CrossEncoderModelConfig(name_or_path=str(start_from))
    tokenizer = load_tokenizer(start_from.name_or_path)
    seed_everything(loop.seed)  # the fresh score head's initialisation follows the run's seed
    model = build_model("cross-encoder", start_from.name_or_path, **start_from.overrides)
    batches = cross_encoder_batches(train_set, tokenizer, training.group_size, training.max_length,
                                    loop.batch_size, loop.seed)
    train_slice = train_set.sample(training.train_eval_queries, loop.seed)
    fingerprint = {"kind": "cross-encoder", "start_from": asdict(start_from), "training": asdict(training),
                   "train_set": train_set.fingerprint(), "dev_set": dev_set.fingerprint()}
    result = run_training(model, cross_encoder_loss(training.label_smoothing), batches, loop,
                          evaluate=reranking_evaluator(dev_set, tokenizer, training.max_length,
                                                       training.eval_batch_size),
                          train_evaluate=reranking_evaluator(train_slice, tokenizer, training.max_length,
                                                             training.eval_batch_size),
                          tokenizer=tokenizer, fingerprint=fingerprint, progress=progress)
    best = CrossEncoderModel.from_pretrained(result.paths.get("best", result.paths["final"]))
    return best, result


# --- the teacher score cache ---------------------------------------------------------------------------------------

def model_fingerprint(model: torch.nn.Module) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, bytes): equal weights, equal fingerprint."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


@dataclass
class TeacherScores:
    """Teacher scores aligned with a set's candidate lists, and whether they came from the cache."""

    scores: dict[str, np.ndarray]
    reused: bool
    path: Path
    index: dict


def _cache_key(model: torch.nn.Module, tokenizer, rset: RerankingSet, max_length: int) -> dict:
    return {"model_sha256": model_fingerprint(model),
            "candidates_sha256": rset.fingerprint(),
            "scoring": {"max_length": max_length, "tokenizer": type(tokenizer).__name__,
                        "vocab_size": len(tokenizer)}}


def _read_cache(path: Path, key: dict) -> tuple[dict[str, np.ndarray] | None, str]:
    """(scores, "") when the cache at `path` matches `key`, else (None, why not)."""
    index_file, scores_file = path / CACHE_INDEX, path / CACHE_SCORES
    if not index_file.is_file() or not scores_file.is_file():
        return None, f"no cache at {path}"
    index = json.loads(index_file.read_text(encoding="utf-8"))
    stale = [f"{k} was {index.get(k)!r}, now {v!r}" for k, v in key.items() if index.get(k) != v]
    if stale:
        return None, f"the cache at {path} does not match: " + "; ".join(stale)
    flat = np.load(scores_file)
    bounds = np.cumsum([0] + index["counts"])
    if flat.shape != (bounds[-1],):
        return None, f"the cache at {path} is damaged: {flat.shape[0]} scores, index promises {bounds[-1]}"
    return {q: flat[bounds[i]:bounds[i + 1]] for i, q in enumerate(index["qids"])}, ""


def score_and_cache_teacher(model: CrossEncoderModel, tokenizer, rset: RerankingSet, path: str | Path, *,
                            max_length: int = 192, batch_size: int = 64, progress: bool = True) -> TeacherScores:
    """Teacher scores for every candidate of `rset`, cached in folder `path` (scores.npy, float32, candidates of
    each query in list order, queries in index order; index.json: query ids, counts, the model's weight hash and
    name, the candidate set's fingerprint, the scoring settings, run metadata).

    A cache whose model hash, candidate fingerprint and scoring settings all match is reused; otherwise the
    scores are recomputed (the log says which field differed) and the folder is replaced atomically.
    """
    path = Path(path)
    key = _cache_key(model, tokenizer, rset, max_length)
    cached, why = _read_cache(path, key)
    if cached is not None:
        logger.info("reusing teacher scores from %s (model %s, candidates %s)", path, key["model_sha256"][:12],
                    key["candidates_sha256"][:12])
        return TeacherScores(cached, True, path, json.loads((path / CACHE_INDEX).read_text(encoding="utf-8")))
    (logger.warning if (path / CACHE_INDEX).is_file() else logger.info)(
        "computing teacher scores for %s/%s: %s", rset.name, rset.split, why)
    scores = score_reranking_set(model, tokenizer, rset, max_length=max_length, batch_size=batch_size,
                                 progress=progress)
    qids = list(rset.candidates)
    index = {**key, "model_name_or_path": getattr(model.config, "_name_or_path", ""), "set": repr(rset),
             "qids": qids, "counts": [len(rset.candidates[q]) for q in qids], "metadata": run_metadata()}
    with atomic_dir(path) as tmp:
        np.save(tmp / CACHE_SCORES, np.concatenate([scores[q] for q in qids]).astype(np.float32))
        (tmp / CACHE_INDEX).write_text(json.dumps(index, indent=1) + "\n", encoding="utf-8")
    return TeacherScores(scores, False, path, index)


# --- `taser train --config FILE` with `kind: cross-encoder` -----------------------------------------------------

@dataclass
class CrossEncoderRunConfig:
    """A CA teacher run (`kind: cross-encoder`): train on the train split, select on dev nDCG@10, cache the
    selected model's scores of every training candidate for distillation, re-rank the test split."""

    kind: str = _help("this config's kind", default="cross-encoder")
    model: CrossEncoderModelConfig = field(default_factory=CrossEncoderModelConfig)
    data: RerankingDataConfig = field(default_factory=RerankingDataConfig)
    training: CrossEncoderTraining = field(default_factory=CrossEncoderTraining)
    teacher_cache: str | None = _help("folder caching the selected model's scores of the training candidates "
                                      "(read by `kind: distill`); null = <output_dir>/teacher_scores", default=None)
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(output_dir="runs/cross-encoder",
                                                                select_metric="nDCG@10"))

    def __post_init__(self):
        if self.data.dataset in CANDIDATE_CAPPED and self.training.group_size > self.data.candidates:
            raise ConfigError(f"training.group_size ({self.training.group_size}) exceeds data.candidates "
                              f"({self.data.candidates}): no query would have enough candidates")


def quiet_unless_progress(run):
    """A run kind's entry point `run(config, progress=True)`, silenced with `progress=False` (the run cache passes
    it on): no progress bar, of ours or of transformers."""
    @functools.wraps(run)
    def wrapped(config, progress: bool = True) -> TrainResult:
        with (contextlib.nullcontext() if progress else quiet_loading()):
            return run(config, progress)
    return wrapped


def record_test_split(result: TrainResult, output_dir: str | Path, test: RerankingSet, scores, model: str) -> None:
    """The test split's re-ranking metrics written beside the run (test_metrics.json, test_per_query.csv) and
    named in `result.paths`."""
    path = Path(output_dir) / "test_metrics.json"
    record_test_metrics(path, test, scores, model=model, best_step=result.best_step)
    result.paths["test_metrics"] = str(path)
    result.paths["test_per_query"] = str(per_query_path(path))


@quiet_unless_progress
def run_cross_encoder(config: CrossEncoderRunConfig, progress: bool = True) -> TrainResult:
    sets = config.data.load(progress=progress)
    train, dev = sets[config.data.train_split], sets[config.data.dev_split]
    model, result = train_cross_encoder(train, dev, config.loop, config.training, config.model, progress=progress)
    tokenizer = load_tokenizer(config.model.name_or_path)
    model.to(default_device())
    cache = Path(config.teacher_cache or Path(config.loop.output_dir) / "teacher_scores")
    score_and_cache_teacher(model, tokenizer, train, cache, max_length=config.training.max_length,
                            batch_size=config.training.eval_batch_size, progress=progress)
    result.paths["teacher_scores"] = str(cache)
    if config.data.test_split:
        test = sets[config.data.test_split]
        scores = score_reranking_set(model, tokenizer, test, max_length=config.training.max_length,
                                     batch_size=config.training.eval_batch_size, progress=progress)
        record_test_split(result, config.loop.output_dir, test, scores, model="cross-encoder")
    return result

