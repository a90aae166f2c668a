"""Answer recall R@K of a bi-encoder under training: encode fixed questions and a fixed corpus with the current
weights, retrieve with faiss, score by DPR's answer matching (`evaluation.answer_recall`).

    >>> passages = PassageEmbeddings(corpus)             # shared by evaluators of one corpus
    >>> evaluator = RecallEvaluator(queries, passages, tokenizer, ks=(1, 5, 20, 100))
    >>> evaluator(model)                                 # {"R@1": ..., "R@5": ..., "R@20": ..., "R@100": ...}
    >>> aggregates, per_query = evaluator.evaluate(model)  # and {"R@20": {query id: 0.0 or 1.0}, ...}

Queries without answers (a BEIR folder's) are scored by their qrels instead: `QrelsEvaluator` gives nDCG@10 and
the judged recall R@K (ir-measures' measures, as `taser evaluate` reports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..data.answers import AnswerMatcher
from ..data.types import Corpus, Qrels, Queries
from ..retrieval.dense import DenseIndex
from .answer_recall import KS, Hits, answer_hits, hits_at_k, top_k_accuracy
from .metrics import evaluate as qrels_measures
from .metrics import per_query as qrels_per_query
from .records import PerQuery

if TYPE_CHECKING:  # torch and the models load only when a model is evaluated (`taser evaluate` needs neither)
    import torch

    from ..models import DenseEncoder


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def weights_checksum(model: torch.nn.Module) -> float:
    """A cheap fingerprint of the current weights (changes with every optimiser step)."""
    import torch

    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))


class PassageEmbeddings:
    """Passage embeddings of one corpus, recomputed only when the weights changed: the train-slice and dev
    evaluators of one evaluation step share the corpus (SQuAD-open's splits retrieve from one collection) and so
    encode it once."""

    def __init__(self, corpus: Corpus):
        self.corpus, self.doc_ids = corpus, list(corpus)
        self._key: tuple[int, float] | None = None
        self._index: DenseIndex | None = None

    def index(self, encoder: DenseEncoder) -> DenseIndex:
        key = (id(encoder.model), weights_checksum(encoder.model))
        if key != self._key:
            emb = encoder.encode_passages([(self.corpus[d].title, self.corpus[d].text) for d in self.doc_ids])
            self._index, self._key = DenseIndex.from_embeddings(emb, self.doc_ids), key
        return self._index


class RecallEvaluator:
    """R@K (DPR's answer matching) of the current model on fixed questions against a fixed corpus."""

    def __init__(self, queries: Queries, passages: PassageEmbeddings, tokenizer, ks: Sequence[int] = KS,
                 max_query_length: int = 32, max_passage_length: int = 160, batch_size: int = 64):
        if not queries or not passages.corpus:
            raise ValueError("evaluation needs questions and a corpus")
        self.queries, self.passages, self.tokenizer, self.ks = queries, passages, tokenizer, tuple(ks)
        self.lengths = (max_query_length, max_passage_length)
        self.batch_size = batch_size
        self.matcher = AnswerMatcher(passages.corpus)  # caches each passage's matching key across evaluations
        self.qids = list(queries)

    def hits(self, model: torch.nn.Module) -> Hits:
        """Has-answer flags of every question's top max(ks) passages under the model's current weights."""
        from ..models import DenseEncoder

        encoder = DenseEncoder(model, self.tokenizer, max_query_length=self.lengths[0],
                               max_passage_length=self.lengths[1], batch_size=self.batch_size,
                               device=model_device(model), show_progress=False)
        index = self.passages.index(encoder)
        questions = encoder.encode_queries([self.queries[q].text for q in self.qids])
        run = index.search_run(self.qids, questions, max(self.ks))
        return answer_hits(self.matcher, self.queries, run, max(self.ks), progress=False)

    def __call__(self, model: torch.nn.Module) -> dict[str, float]:
        return top_k_accuracy(self.hits(model), self.ks)

    def evaluate(self, model: torch.nn.Module) -> tuple[dict[str, float], PerQuery]:
        """(R@K aggregates, {"R@K": {question id: 1.0 or 0.0}}): each aggregate is its per-query mean."""
        hits = self.hits(model)
        return top_k_accuracy(hits, self.ks), {f"R@{k}": hits_at_k(hits, k) for k in self.ks}


class QrelsEvaluator:
    """nDCG@10 and R@K (ir-measures over graded qrels) of the current model on fixed judged queries against a fixed
    corpus: the dev-set score of data whose queries have no answers."""

    def __init__(self, queries: Queries, qrels: Qrels, passages: PassageEmbeddings, tokenizer,
                 ks: Sequence[int] = KS, max_query_length: int = 32, max_passage_length: int = 160,
                 batch_size: int = 64, measures: Sequence[str] = ("nDCG@10",)):
        self.qids = [q for q in queries if q in qrels]
        if not self.qids or not passages.corpus:
            raise ValueError("evaluation needs judged queries and a corpus")
        self.queries, self.passages, self.tokenizer = queries, passages, tokenizer
        self.qrels = {q: dict(qrels[q]) for q in self.qids}
        self.measures = tuple(dict.fromkeys([*measures, *(f"R@{k}" for k in ks)]))
        self.depth = max([int(m.rsplit("@", 1)[1]) for m in self.measures if "@" in m] or [100])
        self.lengths, self.batch_size = (max_query_length, max_passage_length), batch_size

    def run(self, model: torch.nn.Module):
        """The run (`Run`: {query id: {doc id: score}}) of the model's current weights, `depth` deep."""
        from ..models import DenseEncoder

        encoder = DenseEncoder(model, self.tokenizer, max_query_length=self.lengths[0],
                               max_passage_length=self.lengths[1], batch_size=self.batch_size,
                               device=model_device(model), show_progress=False)
        index = self.passages.index(encoder)
        questions = encoder.encode_queries([self.queries[q].text for q in self.qids])
        return index.search_run(self.qids, questions, min(self.depth, len(self.passages.doc_ids)))

    def __call__(self, model: torch.nn.Module) -> dict[str, float]:
        return qrels_measures(self.run(model), self.qrels, self.measures)

    def evaluate(self, model: torch.nn.Module) -> tuple[dict[str, float], PerQuery]:
        """(aggregates, {measure: {query id: value}})."""
        run = self.run(model)
        return qrels_measures(run, self.qrels, self.measures), qrels_per_query(run, self.qrels, self.measures)
