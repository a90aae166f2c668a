"""Contrastive training of retrievers: DPR, TASER (any routing), TASER_Shared and ColBERT.

Each training question brings one positive and `hard_negatives` hard negatives; the model's own
`compute_similarity` scores every question in a batch against all passages of the batch (its own positive and hard
negatives, and the other questions' positives and hard negatives: in-batch negatives, DPR Sec. 3.2) and
`losses.contrastive_loss` (L_sim, TASER Eq. 2) and `losses.joint_loss` (L_sim + beta L_ent, Eq. 5, with the routing
entropy the model returns) make the loss. Under torch.distributed the passage representations of all devices are
gathered (with gradients) before the model scores them, so the in-batch negatives span the global batch.

Batches (`RetrieverBatches`) follow DPR: each epoch every training set is shuffled and cut into batches, and the
batches of all sets are shuffled together, so one batch holds questions of one set only (multi-set training). A
question's positive is its first (or, with `shuffle_positives`, a random one); its hard negatives are a random draw
from its hard-negative pool, topped up from its random negatives when the pool is short. Every draw depends only on
(seed, epoch, set, example), so an epoch can be replayed from any batch (resume).

Evaluation (`evaluation.retrieval.RecallEvaluator`) encodes the questions and a corpus with the current model,
retrieves with faiss and scores R@K by DPR's answer matching. Encoding a full corpus at every evaluation is
expensive, so the dev corpus may be a subset: the dev questions' positives and best hard negative plus a fixed seeded
random sample of the corpus (`data.dev_corpus_sample`). R@K on such a subset is higher than on the full corpus; it
tracks training, and the final model is scored on the full corpus by `taser evaluate` (which keeps per-query values
for significance tests). Data whose questions have no answers (a BEIR folder) is scored by its qrels instead:
nDCG@10 and the judged R@K (`evaluation.retrieval.QrelsEvaluator`). A beir source's split may name a share of a
split, as Hugging Face datasets write it: "train[:10%]" (its first tenth of judged queries, in qrels order) as the
dev set and "train[10%:]" as the training set hold out a dev set from a folder without qrels/dev.tsv.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..data.named import registry
from ..data.resolve import resolve_dataset
from ..data.squad_open import shared_squad_open, shared_training_examples
from ..data.training_examples import TrainingExample, qrels_training_examples, read_dpr_retriever_json
from ..data.types import Corpus, Dataset, Document, Qrels
from ..errors import ConfigError, TaserError
from ..evaluation.retrieval import PassageEmbeddings, QrelsEvaluator, RecallEvaluator
from ..models import build_model, load_tokenizer
from ..models.encoding import model_passage_format, tokenize_passages
from ..retrieval.negatives import bm25_hard_negatives
from .config import DataSource, ModelConfig, RetrieverDataConfig, TrainConfig, config_to_dict
from ..losses import contrastive_loss, joint_loss
from .distributed import gathered_similarity, get_rank, get_world_size
from .loop import TrainResult, run_training, seed_everything, unwrap_model

logger = logging.getLogger(__name__)


# --- data ------------------------------------------------------------------------------------------------------

@dataclass
class TrainingSet:
    """One training set: its examples and, when known, the corpus its questions retrieve from."""

    name: str
    examples: list[TrainingExample]
    corpus: Corpus | None = None
    qrels: Qrels | None = None  # a beir source's judgements (graded), which score questions without answers


def _squad_open_root(source: DataSource) -> Path:
    """The prepared folder: `source.path`, or the data directory's, prepared now (as `taser data prepare
    squad-open` would) if it is missing."""
    root = Path(source.path) if source.path else registry.ensure_prepared("squad-open")
    if not (root / "meta.json").is_file():
        raise TaserError(f"SQuAD-open is not prepared in {root}: run `taser data prepare squad-open` "
                         f"(or set data.*.path to a prepared folder)")
    return root


def source_name(source: DataSource) -> str:
    return {"squad-open": f"squad-open:{source.split}", "beir": f"{source.path}:{source.split}"}.get(
        source.format, str(source.path))


_SHARE = re.compile(r"^(?P<split>[A-Za-z0-9_.-]+)(?P<share>\[(?:(?P<start>\d{1,3})%)?:(?:(?P<stop>\d{1,3})%)?\])?$")


def split_share(split: str) -> tuple[str, int, int]:
    """("train", 0, 10) of "train[:10%]", ("train", 10, 100) of "train[10%:]", ("train", 0, 100) of "train"."""
    found = _SHARE.match(split)
    if not found or (found["share"] and found["start"] is None and found["stop"] is None):
        raise ConfigError(f"data source split {split!r}: expected a split name, or a share of one such as "
                          f"'train[:10%]' or 'train[10%:]'")
    start, stop = int(found["start"] or 0), int(found["stop"] or 100)
    if not 0 <= start < stop <= 100:
        raise ConfigError(f"data source split {split!r}: the share must run from 0% to 100%, start before stop")
    return found["split"], start, stop


def load_beir_source(source: DataSource) -> Dataset:
    """The beir source's split, or its share (`split_share`): the judged queries from `start`% to `stop`% of the
    qrels order (rounded down at both ends, so "train[:10%]" and "train[10%:]" part the split), their qrels, the whole
    corpus."""
    split, start, stop = split_share(source.split)
    dataset = _read_beir(str(source.path), split)
    if (start, stop) == (0, 100):
        return dataset
    judged = [q for q in dataset.qrels if q in dataset.queries]
    kept = judged[len(judged) * start // 100:len(judged) * stop // 100]
    if not kept:
        raise ConfigError(f"{source_name(source)}: the share holds none of the split's {len(judged)} judged queries")
    return dataclasses.replace(dataset, queries={q: dataset.queries[q] for q in kept},
                               qrels={q: dataset.qrels[q] for q in kept})


_BEIR_READ: dict[tuple, Dataset] = {}


def _read_beir(path: str, split: str) -> Dataset:
    """`resolve_dataset(path, split)`, read once per process and file version: the training set and a dev share
    of one split then hold one corpus, which an evaluation step encodes once (`PassageEmbeddings`)."""
    folder = Path(path)
    stamp = tuple((f.stat().st_mtime_ns, f.stat().st_size) for f in
                  (folder, folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv")
                  if f.exists())
    key = (str(folder.resolve()) if folder.exists() else path, split, stamp)
    if key not in _BEIR_READ:
        _BEIR_READ.clear()  # one dataset at a time: a corpus can be large
        _BEIR_READ[key] = resolve_dataset(path, split)
    return _BEIR_READ[key]


def _answered(queries) -> bool:
    return all(q.answers for q in queries)


def add_bm25_negatives(examples: list[TrainingExample], corpus: Corpus, n: int, depth: int = 100,
                       progress: bool = True) -> list[TrainingExample]:
    """DPR's hard negatives for the examples that have none: the top-n BM25 passages (within `depth`) that neither
    are a positive nor contain an answer. Examples that already have hard negatives are kept as they are."""
    todo = [e for e in examples if not e.hard_negatives]
    if not todo or n < 1:
        return examples
    queries = {e.query.id: e.query for e in todo}
    if len(queries) != len(todo):
        raise ValueError("training examples with the same question id: cannot assign BM25 negatives")
    mined, _ = bm25_hard_negatives(queries, corpus, {e.query.id: {d.id for d in e.positives} for e in todo}, n,
                                   depth=depth, progress=progress)
    return [dataclasses.replace(e, hard_negatives=[corpus[d] for d in mined[e.query.id]])
            if not e.hard_negatives else e for e in examples]


def load_training_set(source: DataSource, data: RetrieverDataConfig, progress: bool = True) -> TrainingSet:
    """Examples of one data source, each question's hard-negative pool cut to its first `hard_negative_pool`;
    BM25 hard negatives are added to the examples without any when the source has a corpus."""
    qrels = None
    if source.format == "squad-open":
        root = _squad_open_root(source)
        examples, corpus = shared_training_examples(root, source.split), shared_squad_open(root).corpus
    elif source.format == "beir":
        dataset = load_beir_source(source)
        examples, corpus = qrels_training_examples(dataset), dataset.corpus
        qrels = dataset.qrels
    else:
        examples, corpus = read_dpr_retriever_json(source.path), None
    if not examples:
        raise TaserError(f"{source_name(source)} holds no training examples")
    if data.hard_negative_pool is not None:
        examples = [dataclasses.replace(e, hard_negatives=e.hard_negatives[:data.hard_negative_pool])
                    for e in examples]
    if corpus is not None and data.bm25_negatives:
        examples = add_bm25_negatives(examples, corpus, data.bm25_negatives, progress=progress)
    return TrainingSet(source_name(source), examples, corpus, qrels)


# --- batches ---------------------------------------------------------------------------------------------------

class RetrieverCollator:
    """Tokenise a batch of (question, [positive, negative, ...]) into the model's `query` and `passage` inputs.

    Passages go in the model's `passage_format`, tokenised by the function `DenseEncoder` uses at retrieval time
    (`models.encoding.tokenize_passages`): "pair" = DPR's text pair `[CLS] title [SEP] text [SEP]` (titles
    truncated never, texts to fit; when no passage of the batch has a title, the text alone), "concat" = one string
    "title text" (sentence-transformers checkpoints). Padding goes to the longest input of the batch."""

    def __init__(self, tokenizer, max_query_length: int = 32, max_passage_length: int = 160,
                 passage_format: str = "pair"):
        self.tokenizer = tokenizer
        self.max_query_length, self.max_passage_length = max_query_length, max_passage_length
        self.passage_format = passage_format

    def __call__(self, items: Sequence[tuple[str, Sequence[Document]]]) -> dict[str, dict[str, torch.Tensor]]:
        questions = [q for q, _ in items]
        query = self.tokenizer(questions, truncation=True, max_length=self.max_query_length, padding=True,
                               return_tensors="pt")
        passage = tokenize_passages(self.tokenizer, [p for _, group in items for p in group],
                                    self.max_passage_length, self.passage_format, padding=True, return_tensors="pt")
        return {"query": dict(query), "passage": dict(passage)}


class RetrieverBatches:
    """DPR-style batches over one or more training sets (see the module docstring); a `ResumableBatches`.

    `global_batch_size` questions per batch are split over the ranks of a distributed run (each rank gets
    `batch_size` = global / world size). A set's last incomplete batch is dropped each epoch (it would give
    its questions fewer in-batch negatives and the ranks unequal shapes). Examples with fewer than
    `hard_negatives` hard plus random negatives cannot fill their group and are skipped: `skipped[name]` counts
    them (and a warning says so).
    """

    def __init__(self, sets: Sequence[TrainingSet], collator: RetrieverCollator, batch_size: int,
                 hard_negatives: int = 1, seed: int = 42, shuffle_positives: bool = False,
                 rank: int | None = None, world_size: int | None = None):
        if batch_size < 1 or hard_negatives < 0:
            raise ValueError(f"need batch_size >= 1 and hard_negatives >= 0, got {batch_size}, {hard_negatives}")
        self.collator, self.batch_size, self.hard_negatives = collator, batch_size, hard_negatives
        self.seed, self.shuffle_positives = seed, shuffle_positives
        self.rank = get_rank() if rank is None else rank
        self.world_size = get_world_size() if world_size is None else world_size
        self.names = [s.name for s in sets]
        self.sets: list[list[TrainingExample]] = []
        self.skipped: dict[str, int] = {}
        for s in sets:
            usable = [e for e in s.examples if e.positives and
                      len(e.hard_negatives) + len(e.negatives) >= hard_negatives]
            self.skipped[s.name] = len(s.examples) - len(usable)
            if self.skipped[s.name]:
                logger.warning("%s: skipped %d of %d training examples without a positive or without %d "
                               "negatives", s.name, self.skipped[s.name], len(s.examples), hard_negatives)
            self.sets.append(usable)
        global_size = batch_size * self.world_size
        self.per_set = [len(examples) // global_size for examples in self.sets]
        for name, n, examples in zip(self.names, self.per_set, self.sets):
            if n == 0:
                logger.warning("%s: %d usable examples make no full batch of %d questions", name, len(examples),
                               global_size)
        self._plan: list[tuple[int, np.ndarray]] = []
        self.set_epoch(0)

    def __len__(self) -> int:
        return sum(self.per_set)

    def set_epoch(self, epoch: int) -> None:
        rng = np.random.default_rng([self.seed, epoch])
        global_size = self.batch_size * self.world_size
        plan = []
        for s, (examples, n) in enumerate(zip(self.sets, self.per_set)):
            order = rng.permutation(len(examples))
            plan.extend((s, order[b * global_size:(b + 1) * global_size]) for b in range(n))
        self._plan = [plan[i] for i in rng.permutation(len(plan))]
        self.epoch = epoch

    def _group(self, s: int, index: int) -> tuple[str, list[Document]]:
        example = self.sets[s][index]
        rng = np.random.default_rng([self.seed, self.epoch, s, index])
        positive = example.positives[int(rng.integers(len(example.positives)))] if self.shuffle_positives \
            else example.positives[0]
        hard, n = example.hard_negatives, self.hard_negatives
        if len(hard) >= n:
            negatives = [hard[i] for i in rng.choice(len(hard), n, replace=False)]
        else:  # top up from the random negatives (DPR's negative_ctxs)
            extra = rng.choice(len(example.negatives), n - len(hard), replace=False)
            negatives = list(hard) + [example.negatives[i] for i in extra]
        return example.query.text, [positive, *negatives]

    def _local(self, position: int) -> tuple[int, list[int]]:
        """(set, this rank's example indices) of batch `position` of the current epoch."""
        s, indices = self._plan[position]
        return s, [int(i) for i in indices[self.rank * self.batch_size:(self.rank + 1) * self.batch_size]]

    def examples_of(self, position: int) -> tuple[str, list[TrainingExample]]:
        """(set name, this rank's examples) of batch `position` of the current epoch."""
        s, local = self._local(position)
        return self.names[s], [self.sets[s][i] for i in local]

    def iter_from(self, position: int) -> Iterator[dict[str, Any]]:
        for b in range(position, len(self._plan)):
            s, local = self._local(b)
            yield self.collator([self._group(s, i) for i in local])


# --- loss ------------------------------------------------------------------------------------------------------

def retriever_loss(model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
    """L_joint = L_sim + beta * L_ent (TASER Eq. 5, `losses.joint_loss`) with L_sim of Eq. 2
    (`losses.contrastive_loss`) on the model's `compute_similarity` of the local questions against every device's
    passages (`distributed.gathered_similarity`); L_ent is the model's routing entropy (zero without learned
    routing) and beta its config's `entropy_weight`.

    L_ent is the term of the model's `entropy_mode` (`losses.routing_entropy_term`; negative under the default
    `release`, whose loss raises the routing entropy). With learned routing the logs also hold the entropies
    themselves, averaged over the specialized blocks and the question and passage passes: `h_unit` (mean per-unit
    routing entropy) and `h_batch` (entropy of the batch-averaged routing: expert usage)."""
    out = model(query=batch["query"], passage=batch["passage"])
    core = unwrap_model(model)
    scores, targets = gathered_similarity(core, out.q_reps, out.p_reps)
    l_sim = contrastive_loss(scores, targets)
    loss = joint_loss(l_sim, out.entropy, core.entropy_weight)
    logs = {"l_sim": float(l_sim.detach()), "l_ent": float(out.entropy.detach())}
    stats = list(getattr(core, "routing_stats", {}).values())
    if stats:
        logs["h_unit"] = float(sum(s[0] for s in stats) / len(stats))
        logs["h_batch"] = float(sum(s[1] for s in stats) / len(stats))
    return loss, logs


# --- evaluation ------------------------------------------------------------------------------------------------
# R@K itself is `evaluation.retrieval.RecallEvaluator` (with `PassageEmbeddings`); what is built here is which
# questions and which corpus it scores, from the training data config.

def _doc_key(doc: Document) -> str:
    """A passage's id, or (DPR json passages without one) a digest of its title and text."""
    if doc.id:
        return doc.id
    return "sha1:" + hashlib.sha1(f"{doc.title}\n{doc.text}".encode("utf-8")).hexdigest()


def eval_corpus(examples: Sequence[TrainingExample], corpus: Corpus | None, sample: int | None,
                seed: int) -> Corpus:
    """The corpus an evaluation retrieves from: the whole `corpus` when `sample` is None; otherwise the examples'
    positives and first (best) hard negatives plus `sample` passages drawn (seeded) from `corpus`. Without a
    corpus (DPR json), all passages of the examples (positives, hard and random negatives), as DPR's dev files."""
    if corpus is not None and sample is None:
        return corpus
    out: Corpus = {}
    for e in examples:
        docs = (*e.positives, *e.hard_negatives[:1]) if corpus is not None else \
            (*e.positives, *e.hard_negatives, *e.negatives)
        for doc in docs:
            key = _doc_key(doc)
            out[key] = doc if doc.id == key else Document(key, doc.text, doc.title)
    if corpus is not None and sample:
        ids = sorted(corpus)
        for i in np.random.default_rng(seed).choice(len(ids), min(sample, len(ids)), replace=False):
            out[ids[i]] = corpus[ids[i]]
    return out


def _sample(items: list, n: int | None, seed: int) -> list:
    if n is None or n >= len(items):
        return items
    keep = np.sort(np.random.default_rng(seed).choice(len(items), n, replace=False))
    return [items[i] for i in keep]


def _embeddings(corpus: Corpus, shared: dict[int, PassageEmbeddings]) -> PassageEmbeddings:
    if id(corpus) not in shared:
        shared[id(corpus)] = PassageEmbeddings(corpus)
    return shared[id(corpus)]


def dev_evaluator(data: RetrieverDataConfig, tokenizer, seed: int, progress: bool = True,
                  shared: dict[int, PassageEmbeddings] | None = None) -> RecallEvaluator:
    """The dev-set evaluator of `data.dev`: all (or `dev_questions` sampled) dev questions; for SQuAD-open every
    dev question counts, with or without a positive passage. `shared` lets evaluators of one corpus share its
    embeddings."""
    source = data.dev
    if source.format == "beir":
        dataset = load_beir_source(source)
        qids = _sample([q for q in dataset.qrels if q in dataset.queries], data.dev_questions, seed)
        queries = {q: dataset.queries[q] for q in qids}
        examples = [e for e in qrels_training_examples(dataset) if e.query.id in queries]
        corpus = dataset.corpus if data.dev_corpus_sample is None else \
            eval_corpus(examples, dataset.corpus, data.dev_corpus_sample, seed)
        return _evaluator(queries, dataset.qrels, _embeddings(corpus, {} if shared is None else shared), tokenizer,
                          data)
    if source.format == "squad-open":
        root = _squad_open_root(source)
        squad = shared_squad_open(root)
        qids = _sample(list(squad.splits[source.split]), data.dev_questions, seed)
        queries = {q: squad.splits[source.split][q] for q in qids}
        examples = [e for e in shared_training_examples(root, source.split) if e.query.id in queries]
        if data.dev_corpus_sample is not None and data.bm25_negatives:
            examples = add_bm25_negatives(examples, squad.corpus, data.bm25_negatives, progress=progress)
        corpus = eval_corpus(examples, squad.corpus, data.dev_corpus_sample, seed)
    else:
        examples = _sample(read_dpr_retriever_json(source.path), data.dev_questions, seed)
        queries = {e.query.id: e.query for e in examples}
        corpus = eval_corpus(examples, None, None, seed)
    return RecallEvaluator(queries, _embeddings(corpus, {} if shared is None else shared), tokenizer, data.eval_ks,
                           data.max_query_length, data.max_passage_length, data.eval_batch_size)


def train_slice_evaluator(train_set: TrainingSet, data: RetrieverDataConfig, tokenizer, seed: int,
                          shared: dict[int, PassageEmbeddings] | None = None) -> RecallEvaluator:
    """The same R@K on `train_eval_questions` sampled questions of a training set (train learning curve)."""
    examples = _sample(train_set.examples, data.train_eval_questions, seed)
    queries = {e.query.id: e.query for e in examples}
    corpus = eval_corpus(examples, train_set.corpus, data.dev_corpus_sample, seed)
    if train_set.qrels is not None:
        return _evaluator(queries, train_set.qrels, _embeddings(corpus, {} if shared is None else shared), tokenizer,
                          data)
    return RecallEvaluator(queries, _embeddings(corpus, {} if shared is None else shared), tokenizer, data.eval_ks,
                           data.max_query_length, data.max_passage_length, data.eval_batch_size)


def _evaluator(queries, qrels: Qrels, passages: PassageEmbeddings, tokenizer, data: RetrieverDataConfig):
    """Answer recall R@K for questions that all have answers, else nDCG@10 and judged R@K from the qrels."""
    if _answered(queries.values()):
        return RecallEvaluator(queries, passages, tokenizer, data.eval_ks, data.max_query_length,
                               data.max_passage_length, data.eval_batch_size)
    return QrelsEvaluator(queries, qrels, passages, tokenizer, data.eval_ks, data.max_query_length,
                          data.max_passage_length, data.eval_batch_size)


# --- entry point -----------------------------------------------------------------------------------------------

def build_retriever(model: ModelConfig, **overrides: Any) -> torch.nn.Module:
    """A fresh model as a config's model section says (`models.auto.build_model`); `overrides` set further model
    config fields (e.g. mlm_head=True)."""
    return build_model(model.arch, model.name_or_path, **{**model.overrides, **overrides})


def load_training_sets(data: RetrieverDataConfig, progress: bool = True) -> list[TrainingSet]:
    return [load_training_set(source, data, progress) for source in data.train]


def train_retriever(config: TrainConfig, *, train_sets: list[TrainingSet] | None = None,
                    model: torch.nn.Module | None = None, tokenizer=None,
                    fingerprint_extra: dict[str, Any] | None = None, progress: bool = True) -> TrainResult:
    """Train a retriever as `config` says and return the loop's TrainResult (best model in loop.output_dir/best).

    `train_sets`, `model` and `tokenizer` replace what the config would load (hard-negative mining's round 2 passes
    its own); `fingerprint_extra` joins the config in the same-run check on resume.
    """
    for source in [*config.data.train, *([config.data.dev] if config.data.dev is not None else [])]:
        if source.format == "beir":
            split_share(source.split)  # a malformed share fails before any data is read
    seed_everything(config.loop.seed)
    if model is None:
        model = build_retriever(config.model)
    tokenizer = tokenizer or load_tokenizer(config.model.name_or_path)
    sets = train_sets if train_sets is not None else load_training_sets(config.data, progress)
    data = config.data
    collator = RetrieverCollator(tokenizer, data.max_query_length, data.max_passage_length,
                                 model_passage_format(model))  # as DenseEncoder will read passages
    batches = RetrieverBatches(sets, collator, config.loop.batch_size, data.hard_negatives, config.loop.seed,
                               data.shuffle_positives)
    shared: dict[int, PassageEmbeddings] = {}
    evaluate = (dev_evaluator(data, tokenizer, config.loop.seed, progress, shared)
                if data.dev is not None else None)
    train_evaluate = (train_slice_evaluator(sets[0], data, tokenizer, config.loop.seed, shared)
                      if data.train_eval_questions else None)
    fingerprint = {k: v for k, v in config_to_dict(config).items() if k != "loop"}
    fingerprint["skipped_examples"] = batches.skipped
    fingerprint.update(fingerprint_extra or {})
    return run_training(model, retriever_loss, batches, config.loop, evaluate, train_evaluate,
                        tokenizer=tokenizer, fingerprint=fingerprint, progress=progress)
