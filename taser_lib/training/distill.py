"""Dual-encoder (DE) re-rankers: one-hot training and distillation from a cross-attention teacher
("In defense of dual-encoders", §4-5).

- Student: any retriever (dpr, taser, shared, colbert), tied towers by default (arch ``shared``, as the paper ties
  query and document encoders), scored by its own `compute_similarity`: s(q, d) = similarity_scale * <q, d>
  (Eq. 2; the scale matters for cosine models such as the offline default), or MaxSim for ColBERT (Table 7).
- Supervision per query: one-hot losses get one positive and K-1 negatives sampled from its candidates (the
  paper's DE baseline); distillation losses get the K candidates the teacher scores highest, positives always kept
  (the paper keeps the top 20; Table 6 varies K over 2, 10, 20, 100).
- Losses (objects of `training.rerank_losses`, over the equations of taser_lib.losses): ``one-hot`` softmax CE with label smoothing (Eq. 1, Table 8), ``focal`` (Table 9),
  ``mse`` (logit matching), ``margin-mse`` (Eq. 3, multi-positive form), ``m3se`` (Eq. 4), ``softmax-ce`` and
  ``kl`` against the teacher's softmax with temperature tau (Eq. 1), ``rankdistil-b`` (§4.3).
- Extra negatives (Appendix C.12, Table 12): in-batch (every other candidate of the batch that is not one of the
  query's own, nor labelled relevant to it, nor answer-bearing by DPR's rule when queries have answers) and
  B_uni uniform random corpus passages per batch (same exclusions). The teacher never scored them, so they get a
  stand-in teacher score: for ``softmax-ce`` / ``kl`` one far below every candidate (no teacher probability mass:
  the teacher's distribution is over its own candidates); for the other losses the query's lowest teacher score
  (they are taken to be as irrelevant as its least relevant candidate; M3SE and RankDistil-B only use them in
  their hinge terms, MSE and margin MSE match them to that score). Each query's loss is taken over its own
  candidates plus its extras, and the batch loss is the mean over queries.
- Regularisers of Appendix C.10 (Table 9): embedding-layer dropout, input token dropout, an auxiliary masked-LM loss
  on BERT-masked copies of the batch (`mlm_weight`; the student gets BERT's MLM head, `models.mlm_head`) and the
  focal loss.
- Evaluation: re-ranking MRR@10 / nDCG@10 of dev candidates (checkpoint selection on nDCG@10) and the same on a
  train slice, for the train and dev learning curves of Figure 4.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers.models.bert.modeling_bert import BertEmbeddings

from ..data.answers import AnswerMatcher
from ..data.named import registry
from ..errors import ConfigError
from ..evaluation.reranking import rerank_metrics, rerank_per_query
from ..losses import input_token_dropout, joint_loss, mlm_mask
from ..models import CrossEncoderModel, DenseEncoder, TokenReps, default_device, load_model, load_tokenizer
from .config import ModelConfig, _help
from .cross_encoder import (TeacherScores, check_select_metric, quiet_unless_progress, record_test_split,
                            score_and_cache_teacher)
from .loop import LoopConfig, TrainResult, run_training, seed_everything, unwrap_model
from .rerank_losses import RERANK_LOSSES, RerankLoss, rerank_loss, settings_of
from .reranking import (CANDIDATE_CAPPED, GroupBatches, RerankingDataConfig, RerankingSet, sample_group,
                        teacher_top_group)
from .retriever import build_retriever

logger = logging.getLogger(__name__)

LOSSES = tuple(RERANK_LOSSES)  # the names a config's `training.loss` takes
# The paper's student has tied towers; the offline default is a cosine model, whose scores need a scale (20, as
# sentence-transformers' in-batch loss) for softmax losses to train.
STUDENT = ModelConfig(arch="shared", overrides={"similarity_scale": 20.0})


@dataclass
class DistillTraining:
    """What a DE run needs besides the data, the student model and the loop settings."""

    loss: str = _help("one-hot | focal (no teacher) | mse | margin-mse | m3se | softmax-ce | kl | rankdistil-b",
                      default="softmax-ce")
    group_size: int = _help("K candidates per query: the teacher's top K (positives kept); one-hot losses: a "
                            "positive + K-1 sampled negatives (paper: 20; Table 6: 2, 10, 20, 100)", default=20)
    tau: float = _help("softmax-ce / kl: temperature of teacher and student softmax (Eq. 1)", default=1.0)
    tau_squared: bool = _help("softmax-ce / kl: multiply the loss by tau^2 (Hinton et al.)", default=False)
    label_smoothing: float = _help("one-hot: alpha of Table 8", default=0.0)
    focal_gamma: float = _help("focal: gamma (Lin et al.'s default 2)", default=2.0)
    gamma0: float = _help("rankdistil-b: threshold the negatives are pushed below", default=0.0)
    in_batch_negatives: bool = _help("Table 12: the batch's other candidates as extra negatives", default=False)
    uniform_negatives: int = _help("Table 12: B_uni uniform random corpus passages per batch as extra negatives",
                                   default=0)
    token_dropout: float = _help("Table 9: input token dropout rate (each non-special query/passage token is "
                                 "dropped from attention with this probability while training)", default=0.0)
    embedding_dropout: float | None = _help("Table 9: dropout rate of the embedding layer's output; null = the "
                                            "checkpoint's hidden_dropout_prob", default=None)
    mlm_weight: float = _help("Table 9: weight of the auxiliary masked-LM loss on the batch's queries and passages "
                              "(the student gets BERT's MLM head, tied to its word embeddings); 0 = off",
                              default=0.0)
    mlm_probability: float = _help("Table 9: fraction of tokens masked for that loss (BERT: 0.15, of which 80% "
                                   "[MASK], 10% random, 10% kept)", default=0.15)
    max_query_length: int = _help("tokens per query (paper: 30)", default=32)
    max_passage_length: int = _help("tokens per passage, [CLS] title [SEP] text [SEP] (paper: 200)", default=192)
    train_eval_queries: int | None = _help("training queries re-ranked for the train learning curve; null = all",
                                           default=200)
    eval_batch_size: int = _help("texts per batch when encoding", default=64)

    def __post_init__(self):
        self.objective  # noqa: B018  (an unknown loss name is a ConfigError here, naming the known ones)
        if self.group_size < 2:
            raise ConfigError(f"group_size must be at least 2 (a positive and a negative), got {self.group_size}")
        if self.uniform_negatives < 0:
            raise ConfigError(f"uniform_negatives must be >= 0, got {self.uniform_negatives}")
        if not 0.0 <= self.token_dropout < 1.0:
            raise ConfigError(f"token_dropout must lie in [0, 1), got {self.token_dropout}")
        if self.mlm_weight < 0:
            raise ConfigError(f"mlm_weight must be >= 0, got {self.mlm_weight}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ConfigError(f"mlm_probability must lie in (0, 1), got {self.mlm_probability}")

    @property
    def objective(self) -> RerankLoss:
        """The loss object `loss` names, built with this config's settings for it (tau, label smoothing, ...), which
        it checks. A setting of another loss is an error unless it keeps its default: the config's saved form holds
        every loss's settings, so a run key does not depend on which loss a run uses."""
        own = settings_of(self.loss)
        for setting in LOSS_SETTINGS:
            value = getattr(self, setting)
            if setting not in own and value != _field_default(setting):
                raise ConfigError(f"training.{setting} = {value!r} is not a setting of loss {self.loss!r} "
                                  f"(it takes {', '.join(sorted(own)) or 'none'})")
        return rerank_loss(self.loss, **{setting: getattr(self, setting) for setting in own})

    @property
    def needs_teacher(self) -> bool:
        return self.objective.needs_teacher


LOSS_SETTINGS = tuple(dict.fromkeys(s for name in RERANK_LOSSES for s in settings_of(name)))  # every loss's, in the config


def _field_default(name: str) -> Any:
    return next(f.default for f in fields(DistillTraining) if f.name == name)


# --- batches -------------------------------------------------------------------------------------------------------

def _pad(tokenizer, encoded: dict) -> dict:
    fields = {k: encoded[k] for k in ("input_ids", "token_type_ids") if k in encoded}
    return dict(tokenizer.pad(fields, return_tensors="pt"))


def groups_for(rset: RerankingSet, training: DistillTraining,
               teacher: dict[str, np.ndarray] | None) -> list[str]:
    """The queries that can form a group (see `sample_group` / `teacher_top_group`); the others are reported."""
    k = training.group_size
    if training.needs_teacher:
        if teacher is None:
            raise ConfigError(f"loss {training.loss!r} needs teacher scores")
        missing = [q for q in rset.candidates if q not in teacher]
        if missing:
            raise ValueError(f"no teacher scores for {len(missing)} training queries, e.g. {missing[:3]}")
        bad = [q for q in rset.candidates if len(teacher[q]) != len(rset.candidates[q])]
        if bad:
            raise ValueError(f"teacher scores do not align with the candidate lists of {len(bad)} queries, "
                             f"e.g. {bad[:3]}")
        ok = [q for q in rset.candidates if teacher_top_group(rset.labels[q], teacher[q], k) is not None]
    else:
        rng = np.random.default_rng(0)
        ok = [q for q in rset.candidates if sample_group(rset.labels[q], k, rng) is not None]
    if len(ok) < len(rset):
        logger.warning("%s/%s: %d of %d queries cannot form a group of %d (a positive, a negative, %d candidates) "
                       "and are left out of training", rset.name, rset.split, len(rset) - len(ok), len(rset), k, k)
    return ok


def dual_encoder_batches(rset: RerankingSet, encoder: DenseEncoder, training: DistillTraining, batch_size: int,
                         seed: int, teacher: dict[str, np.ndarray] | None = None) -> GroupBatches:
    """Batches for `dual_encoder_loss`: B queries, the N distinct passages they need, and per query
    `own` [B, K] (its candidates' rows among the N passages), `teacher` [B, K] (zeros without a teacher),
    `positives` [B, K] and `extra` [B, N] (which passages are its extra negatives)."""
    k = training.group_size
    corpus_ids = list(rset.corpus)
    matcher = AnswerMatcher(rset.corpus) if all(q.answers for q in rset.queries.values()) else None
    relevant = {q: set(rset.positives(q)) for q in rset.candidates}

    def allowed(qid: str, doc_id: str) -> bool:
        return doc_id not in relevant[qid] and (matcher is None or not matcher.has_answer(rset.queries[qid], doc_id))

    def make(qids: list[str], rng: np.random.Generator) -> dict:
        own_docs, t_rows, pos_rows = [], [], []
        for q in qids:
            group = (teacher_top_group(rset.labels[q], teacher[q], k) if training.needs_teacher
                     else sample_group(rset.labels[q], k, rng))
            own_docs.append([rset.candidates[q][i] for i in group])
            t_rows.append([float(teacher[q][i]) if training.needs_teacher else 0.0 for i in group])
            pos_rows.append([rset.labels[q][i] > 0 for i in group])
        docs = list(dict.fromkeys(d for row in own_docs for d in row))
        pool = set(docs) if training.in_batch_negatives else set()
        if training.uniform_negatives:
            drawn = [corpus_ids[i] for i in rng.choice(len(corpus_ids), size=min(training.uniform_negatives,
                                                                                  len(corpus_ids)), replace=False)]
            pool.update(drawn)
            present = set(docs)
            docs += [d for d in drawn if d not in present]
        row_of = {d: j for j, d in enumerate(docs)}
        extra = torch.zeros(len(qids), len(docs), dtype=torch.bool)
        for i, q in enumerate(qids):
            mine = set(own_docs[i])
            for d in pool:
                if d not in mine and allowed(q, d):
                    extra[i, row_of[d]] = True
        return {
            "query": _pad(encoder.tokenizer, {"input_ids": encoder.tokenize_queries(
                [rset.queries[q].text for q in qids])}),
            "passage": _pad(encoder.tokenizer, encoder.tokenize_passages([rset.corpus[d] for d in docs])),
            "own": torch.tensor([[row_of[d] for d in row] for row in own_docs], dtype=torch.long),
            "teacher": torch.tensor(t_rows, dtype=torch.float32),
            "positives": torch.tensor(pos_rows, dtype=torch.bool),
            "extra": extra,
        }

    return GroupBatches(groups_for(rset, training, teacher), batch_size, make, seed)


# --- the loss ------------------------------------------------------------------------------------------------------

def query_loss(s: torch.Tensor, t: torch.Tensor, positives: torch.Tensor, training: DistillTraining) -> torch.Tensor:
    """The configured loss of one query's scores (shape [1, K']): one-hot losses take column 0 as the positive."""
    return training.objective(s, t, positives)


def extra_teacher_score(t: torch.Tensor, training: DistillTraining) -> torch.Tensor:
    """The stand-in teacher score of an extra negative (see the module docstring)."""
    return training.objective.extra_teacher_score(t)


def set_embedding_dropout(model: torch.nn.Module, rate: float) -> None:
    """Table 9's embedding-layer dropout: the dropout after every BERT embedding layer of `model` (both towers of a
    DPR model) gets probability `rate`."""
    if not 0.0 <= rate < 1.0:
        raise ConfigError(f"embedding dropout must lie in [0, 1), got {rate}")
    for module in model.modules():
        if isinstance(module, BertEmbeddings):
            module.dropout.p = rate


def _token_dropout(batch: dict, rate: float, special_ids: Sequence[int]) -> dict:
    ids, mask = input_token_dropout(batch["input_ids"], batch["attention_mask"], rate, special_ids=special_ids)
    return {**batch, "input_ids": ids, "attention_mask": mask}


def _masked(batch: dict, training: DistillTraining, tokenizer, vocab_size: int) -> dict:
    ids, labels = mlm_mask(batch["input_ids"], batch["attention_mask"], tokenizer.mask_token_id, vocab_size,
                           tokenizer.all_special_ids, training.mlm_probability)
    return {**batch, "input_ids": ids, "labels": labels}


def dual_encoder_loss(training: DistillTraining, tokenizer):
    """loss_fn for the loop: the mean over queries of `query_loss` on each query's own candidates plus its extra
    negatives; logs the fraction of queries whose top-scored own candidate is relevant (`top1`). Table 9's
    regularisers: with `training.token_dropout` the inputs lose tokens first; with `training.mlm_weight` w the loss
    gains w * the masked-LM loss of BERT-masked copies of the batch's queries and passages (`mlm` in the log).
    Both draw from torch's RNG, which checkpoints keep."""
    special_ids = tokenizer.all_special_ids

    objective = training.objective

    def loss_fn(model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        query, passage = batch["query"], batch["passage"]
        masked = {}
        if training.mlm_weight > 0 and model.training:
            vocab_size = unwrap_model(model).config.vocab_size  # random replacements must be embeddable ids
            masked = {"masked_query": _masked(query, training, tokenizer, vocab_size),
                      "masked_passage": _masked(passage, training, tokenizer, vocab_size)}
        if training.token_dropout > 0 and model.training:
            query = _token_dropout(query, training.token_dropout, special_ids)
            passage = _token_dropout(passage, training.token_dropout, special_ids)
        out = model(query=query, passage=passage, **masked)
        core = unwrap_model(model)
        sim = core.compute_similarity(out.q_reps, out.p_reps)  # [B, N], the student's own scoring
        losses, top1 = [], 0.0
        for i in range(sim.shape[0]):
            own, extra = batch["own"][i], batch["extra"][i].nonzero().flatten()
            s = sim[i, torch.cat([own, extra])][None]
            t = batch["teacher"][i]
            t = torch.cat([t, objective.extra_teacher_score(t).expand(len(extra))])[None]
            pos = torch.cat([batch["positives"][i], torch.zeros(len(extra), dtype=torch.bool, device=s.device)])
            losses.append(objective(s, t, pos[None]))
            top1 += float(batch["positives"][i][sim[i, own].argmax()])
        loss = joint_loss(torch.stack(losses).mean(), out.entropy, core.entropy_weight)  # + beta L_ent (Eq. 5)
        logged = {"top1": top1 / sim.shape[0]}
        if out.mlm_loss is not None:
            loss = loss + training.mlm_weight * out.mlm_loss
            logged["mlm"] = float(out.mlm_loss.detach())
        return loss, logged

    return loss_fn


# --- evaluation ----------------------------------------------------------------------------------------------------

def score_dual_encoder(model, tokenizer, rset: RerankingSet, *, max_query_length: int = 32,
                       max_passage_length: int = 192, batch_size: int = 64, progress: bool = False,
                       chunk_passages: int = 2048) -> dict[str, np.ndarray]:
    """The student's score of every candidate by its own `compute_similarity`: {qid: float32
    [len(candidates[qid])]}. A one-vector model encodes each distinct passage of the set once (candidate lists
    overlap: SQuAD-open's 2,180 test questions x 8 candidates hold 3,526 passages). A token-vector model (ColBERT)
    takes the queries in chunks whose candidates number about `chunk_passages` (bounded memory), each distinct
    passage of a chunk encoded once."""
    encoder = DenseEncoder(model, tokenizer, max_query_length=max_query_length,
                           max_passage_length=max_passage_length, batch_size=batch_size,
                           device=next(model.parameters()).device, show_progress=progress)
    qids, out = list(rset.candidates), {}
    docs = list(dict.fromkeys(d for q in qids for d in rset.candidates[q]))
    if docs and not isinstance(encoder.represent_passages([rset.corpus[docs[0]]]), TokenReps):
        row_of = {d: j for j, d in enumerate(docs)}
        p_reps = encoder.represent_passages([rset.corpus[d] for d in docs])
        q_reps = encoder.represent_queries([rset.queries[q].text for q in qids])
        with torch.inference_mode():
            for i, q in enumerate(qids):
                rows = torch.tensor([row_of[d] for d in rset.candidates[q]])
                out[q] = model.compute_similarity(q_reps[i:i + 1], p_reps[rows])[0].float().numpy()
        return out
    start = 0
    while start < len(qids):
        end, n = start, 0
        while end < len(qids) and (end == start or n + len(rset.candidates[qids[end]]) <= chunk_passages):
            n += len(rset.candidates[qids[end]])
            end += 1
        chunk = qids[start:end]
        docs = list(dict.fromkeys(d for q in chunk for d in rset.candidates[q]))
        row_of = {d: j for j, d in enumerate(docs)}
        q_reps = encoder.represent_queries([rset.queries[q].text for q in chunk])
        p_reps = encoder.represent_passages([rset.corpus[d] for d in docs])
        with torch.inference_mode():
            for i, q in enumerate(chunk):
                rows = torch.tensor([row_of[d] for d in rset.candidates[q]])
                out[q] = model.compute_similarity(q_reps[i:i + 1], p_reps[rows])[0].float().numpy()
        start = end
    return out


def dual_encoder_evaluator(rset: RerankingSet, tokenizer, training: DistillTraining):
    """evaluate(model) -> MRR@10 / nDCG@10 of the bi-encoder re-ranking `rset`."""
    return lambda model: rerank_metrics(rset, score_dual_encoder(
        model, tokenizer, rset, max_query_length=training.max_query_length,
        max_passage_length=training.max_passage_length, batch_size=training.eval_batch_size))


# --- training ------------------------------------------------------------------------------------------------------

def train_distill(train_set: RerankingSet, dev_set: RerankingSet, loop: LoopConfig,
                  training: DistillTraining = DistillTraining(), student: ModelConfig = STUDENT,
                  teacher_scores: dict[str, np.ndarray] | None = None, *, teacher_id: str = "",
                  progress: bool = True):
    """Train a DE re-ranker with `training.loss` (teacher scores from `score_and_cache_teacher` unless the loss is
    one-hot); returns the model with the best dev `loop.select_metric` (nDCG@10 for re-ranking) and the loop's
    result. `teacher_id` (e.g. the teacher cache's model hash) joins the run fingerprint."""
    check_select_metric(loop)
    tokenizer = load_tokenizer(student.name_or_path)
    seed_everything(loop.seed)  # a fresh projection (or MLM head) is initialised by the run's seed, not by chance
    model = build_retriever(student, mlm_head=training.mlm_weight > 0)
    if training.embedding_dropout is not None:
        set_embedding_dropout(model, training.embedding_dropout)
    encoder = DenseEncoder(model, tokenizer, max_query_length=training.max_query_length,
                           max_passage_length=training.max_passage_length, device="cpu", show_progress=False)
    batches = dual_encoder_batches(train_set, encoder, training, loop.batch_size, loop.seed,
                                   teacher_scores if training.needs_teacher else None)
    train_slice = train_set.sample(training.train_eval_queries, loop.seed)
    fingerprint = {"kind": "distill", "training": asdict(training), "student": asdict(student),
                   "teacher": teacher_id if training.needs_teacher else None,
                   "train_set": train_set.fingerprint(), "dev_set": dev_set.fingerprint()}
    result = run_training(model, dual_encoder_loss(training, tokenizer), batches, loop,
                          evaluate=dual_encoder_evaluator(dev_set, tokenizer, training),
                          train_evaluate=dual_encoder_evaluator(train_slice, tokenizer, training),
                          tokenizer=tokenizer, fingerprint=fingerprint, progress=progress)
    return load_model(result.paths.get("best", result.paths["final"])), result


def train_de_one_hot(train_set: RerankingSet, dev_set: RerankingSet, loop: LoopConfig,
                     training: DistillTraining = DistillTraining(loss="one-hot"),
                     student: ModelConfig = STUDENT, *, progress: bool = True):
    """The DE baseline without a teacher: `train_distill` with the one-hot softmax CE (label smoothing as
    configured), on one positive and K-1 sampled negatives per query."""
    if training.needs_teacher:
        training = replace(training, loss="one-hot")
    return train_distill(train_set, dev_set, loop, training, student, None, progress=progress)


def evaluate_dual_encoder(model, tokenizer, rset: RerankingSet, training: DistillTraining = DistillTraining(),
                          measures: Sequence[str] = ("MRR@10", "nDCG@10")) -> dict[str, float]:
    """Re-ranking metrics of a bi-encoder (e.g. the untrained zero-shot default) on a whole set."""
    return rerank_metrics(rset, score_dual_encoder(model, tokenizer, rset, max_query_length=training.max_query_length,
                                                   max_passage_length=training.max_passage_length,
                                                   batch_size=training.eval_batch_size), measures)


def rerank_saved_model(path: str | Path, rset: RerankingSet, *, max_query_length: int = 32,
                       max_passage_length: int = 192, batch_size: int = 64,
                       measures: Sequence[str] = ("MRR@10", "nDCG@10")) -> dict[str, dict[str, float]]:
    """Per-query re-ranking values ({measure: {query id: value}}) of a saved bi-encoder (any arch, or a plain
    checkpoint name such as "default") on `rset`: what `test_per_query.csv` holds for a distilled student, for
    models trained otherwise (the retriever trainer's DPR and TASER, the zero-shot default)."""
    model = load_model(path).to(default_device()).eval()
    scores = score_dual_encoder(model, load_tokenizer(path), rset, max_query_length=max_query_length,
                                max_passage_length=max_passage_length, batch_size=batch_size)
    return rerank_per_query(rset, scores, measures)


# --- `taser train --config FILE` with `kind: distill` ----------------------------------------------------------

@dataclass
class TeacherConfig:
    """Where the teacher scores come from: a trained cross-encoder (`model`, scored and cached), or released scores
    (`released`). The paper distils MS MARCO students from Hofstätter et al.'s T1 annotations "for ease of
    comparison" (its own CA re-ranks about as well): `released: msmarco-passage-t1` reads those scores for the
    training candidates of `data.dataset: msmarco-passage` instead of scoring them with `model` (which is then not
    loaded). The profiles' notebooks keep their own CA as the teacher of every testbed, so that CA and students
    are compared on one footing; a config sets `released` to reproduce the paper's exact teacher."""

    model: str | None = _help("the trained cross-encoder folder (`kind: cross-encoder` writes <output_dir>/best); "
                              "needed by every loss but one-hot and focal", default="runs/cross-encoder/best")
    released: str | None = _help("released teacher scores to distil from instead of `model`: msmarco-passage-t1 "
                                 "(T1, BERT-Base CAT, Hofstätter et al. 2020; needs data.dataset: msmarco-passage); "
                                 "null = score with `model`", default=None)
    cache: str | None = _help("teacher score cache folder, reused when it matches the teacher's weights and the "
                              "candidates; null = 'teacher_scores' beside the teacher folder (where `kind: "
                              "cross-encoder` writes it)", default=None)
    max_length: int = _help("tokens per [CLS] query [SEP] passage [SEP] input when scoring", default=192)
    batch_size: int = _help("pairs per batch when scoring", default=64)


@dataclass
class DistillRunConfig:
    """A dual-encoder re-ranker run (`kind: distill`): one-hot or distilled from a cross-encoder's cached scores;
    selected on dev nDCG@10, then re-ranks the test split."""

    kind: str = _help("this config's kind", default="distill")
    model: ModelConfig = field(default_factory=lambda: replace(STUDENT))
    data: RerankingDataConfig = field(default_factory=RerankingDataConfig)
    training: DistillTraining = field(default_factory=DistillTraining)
    teacher: TeacherConfig = field(default_factory=TeacherConfig)
    loop: LoopConfig = field(default_factory=lambda: LoopConfig(output_dir="runs/distill", select_metric="nDCG@10"))

    def __post_init__(self):
        if self.training.needs_teacher and not (self.teacher.model or self.teacher.released):
            raise ConfigError(f"loss {self.training.loss!r} distils from a teacher: set teacher.model (or "
                              f"teacher.released)")
        if self.teacher.released is not None:
            if self.teacher.released not in registry.msmarco.RELEASED_TEACHERS:
                raise ConfigError(f"teacher.released must be one of "
                                  f"{registry.msmarco.RELEASED_TEACHERS} (or null), got "
                                  f"{self.teacher.released!r}")
            if self.data.dataset != registry.msmarco.NAME:
                raise ConfigError(f"teacher.released={self.teacher.released} scores the "
                                  f"{registry.msmarco.NAME} training triples; data.dataset is {self.data.dataset!r}")
        if self.data.dataset in CANDIDATE_CAPPED and self.training.group_size > self.data.candidates:
            raise ConfigError(f"training.group_size ({self.training.group_size}) exceeds data.candidates "
                              f"({self.data.candidates}): no query would have enough candidates")


def load_teacher_scores(teacher: TeacherConfig, rset: RerankingSet, progress: bool = True) -> TeacherScores:
    """The teacher's scores of `rset`'s candidates: released ones (`teacher.released`, read from their file; their
    index's "model_sha256" is "released:<name>:md5:<registered md5>", what the run fingerprint records), or the
    cross-encoder's, from its cache or freshly scored (`score_and_cache_teacher`)."""
    if teacher.released:
        scores, path = registry.msmarco.released_teacher_scores(teacher.released, rset)
        (spec,) = registry.get(teacher.released).files
        return TeacherScores(scores, True, path, {"model_sha256": f"released:{teacher.released}:md5:{spec.md5}",
                                                  "released": teacher.released})
    model = load_model(teacher.model)
    if not isinstance(model, CrossEncoderModel):
        raise ConfigError(f"teacher.model {teacher.model} is a {type(model).__name__}, not a cross-encoder")
    cache = Path(teacher.cache) if teacher.cache else Path(teacher.model).resolve().parent / "teacher_scores"
    return score_and_cache_teacher(model.to(default_device()), load_tokenizer(teacher.model), rset, cache,
                                   max_length=teacher.max_length, batch_size=teacher.batch_size, progress=progress)


@quiet_unless_progress
def run_distill(config: DistillRunConfig, progress: bool = True) -> TrainResult:
    sets = config.data.load(progress=progress)
    train, dev = sets[config.data.train_split], sets[config.data.dev_split]
    teacher = load_teacher_scores(config.teacher, train, progress) if config.training.needs_teacher else None
    model, result = train_distill(train, dev, config.loop, config.training, config.model,
                                  teacher.scores if teacher else None,
                                  teacher_id=teacher.index["model_sha256"] if teacher else "", progress=progress)
    if teacher:
        result.paths["teacher_scores"] = str(teacher.path)
    if config.data.test_split:
        test = sets[config.data.test_split]
        model.to(default_device())
        scores = score_dual_encoder(model, load_tokenizer(config.model.name_or_path), test,
                                    max_query_length=config.training.max_query_length,
                                    max_passage_length=config.training.max_passage_length,
                                    batch_size=config.training.eval_batch_size)
        record_test_split(result, config.loop.output_dir, test, scores,
                          model=f"dual-encoder ({config.training.loss})")
    return result

