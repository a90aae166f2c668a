"""Hard-negative mining with iterative training (TASER Appendix B, after Xiong et al. 2020 and Qu et al. 2021).

Round 1 trains on the data's negatives P1 (DPR's: the top BM25 passages without an answer). The round-1 model then
retrieves the top `depth` (paper: 100) passages for every training question; the highest-ranked ones that are not a
positive and contain no answer (DPR's rule) form P2. Round 2 trains on P1 and P2 together in single-set training,
on P2 alone in multi-set training ("for efficiency", App. B). Round 2 starts from the pretrained checkpoint again
(`mining.round2_init: pretrained`, as DPR's hard-negative retraining) or from the round-1 model (`round1`).

Layout: output_dir/round1/ (a full training run), output_dir/mined/ (corpus embeddings of the round-1 model and
the mined negatives, one json per training set), output_dir/round2/ (the final run). Every stage resumes: a
finished round returns at once, embeddings are written in resumable shards, mined negatives are kept.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from ..data.answers import AnswerMatcher
from ..data.formats.dpr import read_dpr_passages
from ..data.types import Corpus
from ..errors import ConfigError
from ..io import atomic_write_json
from ..meta import run_metadata
from ..models import DenseEncoder, load_model, load_tokenizer
from ..retrieval.dense import DenseIndex, dense_search, encode_corpus_to_shards
from ..retrieval.negatives import mine_hard_negatives
from .config import TrainConfig
from .loop import TrainResult
from .retriever import TrainingSet, load_training_sets, train_retriever


def _round_config(config: TrainConfig, name: str) -> TrainConfig:
    loop = dataclasses.replace(config.loop, output_dir=str(Path(config.loop.output_dir) / name))
    return dataclasses.replace(config, loop=loop, mining=dataclasses.replace(config.mining, enabled=False))


def _mining_corpus(train_set: TrainingSet, config: TrainConfig) -> Corpus:
    if train_set.corpus is not None:
        return train_set.corpus
    if not config.mining.corpus:
        raise ConfigError(f"mining negatives for {train_set.name} needs the passage collection: set mining.corpus "
                          f"(e.g. DPR's psgs_w100.tsv.gz)")
    return read_dpr_passages(config.mining.corpus)


def mine_negatives(model_dir: str | Path, train_set: TrainingSet, corpus: Corpus, config: TrainConfig,
                   work_dir: Path, progress: bool = True) -> dict[str, list[str]]:
    """P2 of one training set: per question, up to `negatives_per_question` passages of the model's top `depth`
    that are not positives and hold no answer. Cached in work_dir/negatives.json (with what produced it)."""
    mining, data = config.mining, config.data
    out = work_dir / "negatives.json"
    model_tag = f"{Path(model_dir).resolve()}@{json.loads((Path(model_dir) / 'best.json').read_text())['step']}" \
        if (Path(model_dir) / "best.json").is_file() else str(Path(model_dir).resolve())
    key = {"model": model_tag, "set": train_set.name, "depth": mining.depth,
           "negatives_per_question": mining.negatives_per_question, "questions": len(train_set.examples)}
    if out.is_file():
        saved = json.loads(out.read_text(encoding="utf-8"))
        if saved["key"] == key:
            return saved["negatives"]
    encoder = DenseEncoder(load_model(model_dir), load_tokenizer(model_dir), max_query_length=data.max_query_length,
                           max_passage_length=data.max_passage_length, batch_size=mining.encode_batch_size,
                           show_progress=progress)
    shards = encode_corpus_to_shards(encoder, corpus, work_dir / "embeddings", model_name=model_tag,
                                     progress=progress)
    index = DenseIndex.from_shards(shards, progress=progress)
    queries = {e.query.id: e.query for e in train_set.examples}
    if len(queries) != len(train_set.examples):
        raise ValueError(f"{train_set.name}: several training examples share a question id")
    run = dense_search(encoder, index, queries, k=mining.depth)
    negatives = mine_hard_negatives(run, queries, AnswerMatcher(corpus), n=mining.negatives_per_question,
                                    exclude={e.query.id: {d.id for d in e.positives} for e in train_set.examples},
                                    depth=mining.depth)
    atomic_write_json(out, {"key": key, "negatives": negatives,
                            "questions_without_mined_negative": sum(not v for v in negatives.values()),
                            "metadata": run_metadata()})
    return negatives


def with_mined_negatives(train_set: TrainingSet, mined: dict[str, list[str]], corpus: Corpus,
                         keep_round1: bool) -> TrainingSet:
    """The set with hard negatives P1 u P2 (keep_round1, single-set) or P2 alone (multi-set)."""
    examples = []
    for e in train_set.examples:
        p2 = [corpus[d] for d in mined[e.query.id]]
        if keep_round1:
            p1_ids = {d.id for d in e.hard_negatives}
            negatives = [*e.hard_negatives, *(d for d in p2 if d.id not in p1_ids)]
        else:
            negatives = p2
        examples.append(dataclasses.replace(e, hard_negatives=negatives))
    return TrainingSet(train_set.name, examples, train_set.corpus)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()


def train_with_mined_negatives(config: TrainConfig, *, progress: bool = True) -> TrainResult:
    """Both rounds of TASER App. B in one call (resumable); returns round 2's TrainResult."""
    out = Path(config.loop.output_dir)
    sets = load_training_sets(config.data, progress)
    round1 = train_retriever(_round_config(config, "round1"), train_sets=sets, progress=progress)
    model_dir = round1.paths.get("best") or round1.paths["final"]
    single_set = len(sets) == 1
    mined_sets, digests = [], {}
    for i, train_set in enumerate(sets):
        corpus = _mining_corpus(train_set, config)
        mined = mine_negatives(model_dir, train_set, corpus, config, out / "mined" / f"set{i}", progress)
        digests[train_set.name] = _digest(mined)
        mined_sets.append(with_mined_negatives(train_set, mined, corpus, keep_round1=single_set))
    model = tokenizer = None
    if config.mining.round2_init == "round1":
        model, tokenizer = load_model(model_dir), load_tokenizer(model_dir)
    return train_retriever(_round_config(config, "round2"), train_sets=mined_sets, model=model, tokenizer=tokenizer,
                           fingerprint_extra={"mined_negatives_sha256": digests, "round1_model": model_dir},
                           progress=progress)


def run_retriever(config: TrainConfig, progress: bool = True) -> TrainResult:
    """`kind: retriever`: one training run, or both mining rounds when mining.enabled."""
    if config.mining.enabled:
        return train_with_mined_negatives(config, progress=progress)
    return train_retriever(config, progress=progress)

