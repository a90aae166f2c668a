"""Opt-in benchmark: does training in bf16 change what the model learns? 100-step SQuAD-open runs, fp32 vs bf16.

    taser bench --only bf16_training_quality        # ~20 min on 2 CPU cores: 3 seeds x {fp32, bf16}
    taser bench --only bf16_training_quality --quick  # seconds: 2 steps, 1 seed, 20 test questions

Each run is the library's retriever trainer (`training.retriever.train_retriever`) on SQuAD-open train as
configs/squad_open_taser.yaml sets it (TASER Det-R from the packaged model, mean pooling, cosine x 20, one BM25 hard
negative, batch 16), for 100 optimizer steps at `loop.precision` fp32 or bf16 (autocast forward, fp32 master
weights), with the same seed for both precisions. The final model is then scored on the SQuAD-open test split
(all questions, the whole corpus) encoded at fp32, so only the training precision differs. Target (issue 13): for
every K, |mean R@K bf16 - mean R@K fp32| within seed noise: at most twice the standard error of the difference of
the means over seeds (sqrt(s_fp32^2 / n + s_bf16^2 / n), sample standard deviations). With one seed there is no
noise estimate and the rows carry no target. Not part of the default suite: it trains 2 x seeds models.
"""

from __future__ import annotations

import math
import tempfile
import time
from typing import Any

import numpy as np

from taser_lib.evaluation.retrieval import PassageEmbeddings, RecallEvaluator
from taser_lib.models import load_tokenizer
from taser_lib.training.config import DataSource, ModelConfig, RetrieverDataConfig, TrainConfig
from taser_lib.training.loop import LoopConfig
from taser_lib.training.retriever import TrainingSet, add_bm25_negatives, train_retriever
from . import inputs
from .core import BenchConfig, row
from .precision import _subset

NAME = "bf16_training_quality"
TITLE = "100-step SQuAD-open training: bf16 vs fp32 test R@K over seeds"
KS = (1, 5, 20, 100)
PRECISIONS = ("fp32", "bf16")
NOISE_MULTIPLE = 2.0
OVERRIDES = {"pooling": "mean", "normalize": True, "similarity_scale": 20.0}


def model_config(cfg: BenchConfig) -> ModelConfig:
    """TASER from the packaged default (the tiny random BERT in a quick run: `BenchConfig.model`)."""
    return ModelConfig(arch="taser", name_or_path=cfg.model, overrides=OVERRIDES)


def _train_set(cfg: BenchConfig, n: int | None) -> TrainingSet:
    squad = inputs.squad(cfg)
    examples = squad.training_examples("train")
    if n is not None:
        examples = [examples[i] for i in np.sort(np.random.default_rng(cfg.seed).choice(len(examples), n, False))]
    return TrainingSet("squad-open:train", add_bm25_negatives(examples, squad.corpus, 1, progress=False),
                       squad.corpus)


def train_and_score(cfg: BenchConfig, precision: str, seed: int, steps: int, batch_size: int, train: TrainingSet,
                    evaluator: RecallEvaluator, work: str) -> dict[str, Any]:
    data = RetrieverDataConfig(train=[DataSource("squad-open", "train")], dev=None, train_eval_questions=0)
    loop = LoopConfig(output_dir=f"{work}/{precision}-{seed}", seed=seed, max_steps=steps, batch_size=batch_size,
                      precision=precision, checkpoint_every=max(steps, 1), eval_every=max(steps, 1),
                      log_every=max(steps, 1))
    config = TrainConfig(model=model_config(cfg), data=data, loop=loop)
    from taser_lib.training.retriever import build_retriever

    model = build_retriever(config.model)
    start = time.perf_counter()
    train_retriever(config, train_sets=[train], model=model, progress=cfg.progress)
    seconds = time.perf_counter() - start
    model.eval()
    return {"recall": evaluator(model), "train_seconds": seconds,
            "resolved": loop.resolved_precision(cfg.device)}


def _std(values: list[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def run(cfg: BenchConfig) -> dict[str, Any]:
    seeds = [cfg.seed + i for i in range(cfg.pick(3, 1))]
    steps, batch_size = cfg.pick(100, 2), cfg.pick(16, 4)
    train = _train_set(cfg, cfg.pick(None, 16))
    corpus, queries = _subset(cfg)
    tokenizer = load_tokenizer("default")
    evaluator = RecallEvaluator(queries, PassageEmbeddings(corpus), tokenizer, KS, max_query_length=32,
                                max_passage_length=160)
    runs: dict[str, dict[int, dict[str, Any]]] = {p: {} for p in PRECISIONS}
    with tempfile.TemporaryDirectory(prefix="taser-bf16-quality-") as work:
        for seed in seeds:
            for precision in PRECISIONS:
                runs[precision][seed] = train_and_score(cfg, precision, seed, steps, batch_size, train, evaluator,
                                                        work)
    recall = {p: {f"R@{k}": [100 * runs[p][s]["recall"][f"R@{k}"] for s in seeds] for k in KS} for p in PRECISIONS}
    rows, verdict = [], {}
    for k in KS:
        name = f"R@{k}"
        a, b = recall["fp32"][name], recall["bf16"][name]
        delta = float(np.mean(b) - np.mean(a))
        noise = math.sqrt(_std(a) ** 2 / len(a) + _std(b) ** 2 / len(b)) if len(seeds) > 1 else math.nan
        verdict[name] = {"delta_points": delta, "standard_error": noise, "fp32": a, "bf16": b}
        if len(seeds) > 1:
            rows.append(row(f"|R@{k} bf16 - fp32| / seed noise (s.e.)", abs(delta) / max(noise, 1e-9), "",
                            target=NOISE_MULTIPLE, op="<="))
        rows.append(row(f"R@{k} bf16 - fp32 (mean over seeds)", delta, "points"))
    train_seconds = {p: [runs[p][s]["train_seconds"] for s in seeds] for p in PRECISIONS}
    rows.append(row("training time, fp32 / bf16", float(np.sum(train_seconds["fp32"]) /
                                                        np.sum(train_seconds["bf16"])), "x"))
    return {
        "rows": rows,
        "measured": {"recall_points": recall, "comparison": verdict, "train_seconds": train_seconds,
                     "resolved": {p: runs[p][seeds[0]]["resolved"] for p in PRECISIONS}},
        "sizes": {"seeds": seeds, "steps": steps, "batch_size": batch_size, "train_questions": len(train.examples),
                  "test_questions": len(queries), "test_passages": len(corpus), "arch": "taser", "model": cfg.model},
        "notes": ["seed noise: the standard error of the difference of the mean R@K over seeds, "
                  "sqrt(s_fp32^2/n + s_bf16^2/n); a row's target is |delta| <= 2 standard errors",
                  "test R@K is scored at fp32 encoding for both, so only the training precision differs",
                  *([] if len(seeds) > 1 else ["one seed: no noise estimate, no target"])],
    }
