"""R@K of a bi-encoder under training (`evaluation.retrieval`): answers scored, the corpus encoded once per
weights, per-query values that average to the aggregates."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from training_helpers import make_tiny_bert
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_lib.data.types import Document, Query
from taser_lib.evaluation.retrieval import PassageEmbeddings, RecallEvaluator
from taser_lib.models import DenseEncoder, TaserModel, load_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

CORPUS = {"a": Document("a", "the capital of france is paris", "France"),
          "b": Document("b", "bananas are yellow", "Banana"), "c": Document("c", "cats purr", "Cat")}
QUERIES = {"q1": Query("q1", "capital of france", ("Paris",)), "q2": Query("q2", "striped horse", ("zebra",)),
           "q3": Query("q3", "what colour are bananas", ("yellow",))}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"))


def test_recall_evaluator_scores_answers_and_encodes_a_shared_corpus_once(tiny_bert, monkeypatch):
    queries = {q: QUERIES[q] for q in ("q1", "q2")}
    passages = PassageEmbeddings(CORPUS)
    evaluator = RecallEvaluator(queries, passages, load_tokenizer(tiny_bert), ks=(1, 3))
    other = RecallEvaluator({"q1": queries["q1"]}, passages, load_tokenizer(tiny_bert), ks=(3,))
    calls = []
    real = DenseEncoder.encode_passages
    monkeypatch.setattr(DenseEncoder, "encode_passages", lambda self, p, **k: calls.append(1) or real(self, p))
    model = TaserModel.from_bert(tiny_bert)
    metrics = evaluator(model)
    assert metrics["R@3"] == 0.5  # all 3 passages retrieved: q1's answer is there, q2's nowhere
    assert 0.0 <= metrics["R@1"] <= 0.5
    assert other(model) == {"R@3": 1.0}
    assert len(calls) == 1  # the second evaluator reused the embeddings of the unchanged model
    with torch.no_grad():
        next(model.parameters()).add_(0.1)
    evaluator(model)
    assert len(calls) == 2


def test_per_query_values_average_to_the_aggregates(tiny_bert):
    evaluator = RecallEvaluator(QUERIES, PassageEmbeddings(CORPUS), load_tokenizer(tiny_bert), ks=(1, 2, 3))
    model = TaserModel.from_bert(tiny_bert)
    aggregates, per_query = evaluator.evaluate(model)
    assert aggregates == evaluator(model)
    assert set(per_query) == {"R@1", "R@2", "R@3"}
    for name, values in per_query.items():
        assert set(values) == set(QUERIES) and set(values.values()) <= {0.0, 1.0}
        assert np.mean(list(values.values())) == pytest.approx(aggregates[name])
    assert per_query["R@3"] == {"q1": 1.0, "q2": 0.0, "q3": 1.0}  # the whole corpus: only q2's answer is absent
    for q in QUERIES:  # R@K cannot fall as K grows
        assert per_query["R@1"][q] <= per_query["R@2"][q] <= per_query["R@3"][q]
