"""Re-ranking sets (SQuAD-open BM25 candidates, WikiQA lists), training groups, the cross-encoder teacher and its
score cache ("In defense of dual-encoders", §2 and §5)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from taser_lib.data.answers import AnswerMatcher, has_answer
from taser_lib.datasets.formats.answer_selection import load_wikiqa
from taser_lib.data.squad_open import build_squad_open
from taser_lib.data.types import Document, Query
from taser_lib.evaluation.records import read_per_query
from taser_lib.evaluation.reranking import record_test_metrics, rerank_metrics
from taser_lib.models import CrossEncoderModel, load_tokenizer
from taser_lib.retrieval.bm25 import BM25Index
from taser_lib.training.cross_encoder import (CrossEncoderTraining, cross_encoder_batches, cross_encoder_loss,
                                              score_and_cache_teacher, score_reranking_set)
from taser_lib.training.loop import LoopConfig, run_training
from taser_lib.training.reranking import (GroupBatches, RerankingSet, from_candidate_lists, from_first_stage,
                                          sample_group, squad_open_reranking, teacher_top_group)
from training_helpers import make_tiny_bert

K = 8


@pytest.fixture(scope="module")
def tiny_bert_dir(tmp_path_factory):
    """A random tiny BERT (hidden 32) with the default model's tokenizer files (vocab 30522)."""
    return make_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), seed=0, dropout=0.0)


@pytest.fixture(scope="module")
def squad(shared_data):
    return build_squad_open(shared_data / "squad-v1.1" / "dev-v1.1.json.zip")


@pytest.fixture(scope="module")
def squad_index(squad):
    return BM25Index.build(squad.corpus, progress=False)


@pytest.fixture(scope="module")
def squad_sets(squad, squad_index):
    return squad_open_reranking(squad, K, depth=50, limits={"train": 40, "dev": 40, "test": 40},
                                index=squad_index, progress=False)


# --- SQuAD-open re-ranking sets on the real data ---------------------------------------------------------------------

def test_load_reranking_sets_reads_a_prepared_folder_once_and_as_before(squad, tmp_path):
    """The named loader keeps the prepared SQuAD-open and its BM25 index per process and folder version: its sets are
    those of the direct path (a fresh load and a fresh index), a second call re-reads nothing, the SquadOpen it reads
    is the one the retriever's training reads (`shared_squad_open`), and a rewritten folder is read again."""
    from taser_lib.data.squad_open import _shared_squad_open, load_squad_open, shared_squad_open, write_squad_open
    from taser_lib.training import reranking as R

    root = write_squad_open(squad, tmp_path / "squad-open")
    R._squad_open_with_bm25_cached.cache_clear()
    _shared_squad_open.cache_clear()
    limits = {"train": 30, "dev": 30, "test": 30}

    def fields(sets):
        return {split: (r.queries, r.corpus, r.candidates, r.labels, r.meta) for split, r in sets.items()}

    direct = squad_open_reranking(load_squad_open(root), K, depth=50, limits=limits, progress=False)
    loaded = R.load_reranking_sets("squad-open", k=K, depth=50, limits=limits, path=str(root), progress=False)
    assert fields(loaded) == fields(direct)
    again = R.load_reranking_sets("squad-open", k=K, depth=50, limits=limits, path=str(root), progress=False)
    assert fields(again) == fields(direct) and R._squad_open_with_bm25_cached.cache_info().hits == 1
    assert R._squad_open_with_bm25(root, False)[0] is shared_squad_open(root)
    assert _shared_squad_open.cache_info().misses == 1   # one read of the folder for both
    fewer = squad.__class__(squad.corpus, {**squad.splits, "test": dict(list(squad.splits["test"].items())[:50])},
                            squad.positives, squad.meta)
    write_squad_open(fewer, root)
    reread = R.load_reranking_sets("squad-open", ["test"], k=K, depth=50, path=str(root), progress=False)
    assert set(reread["test"].queries) <= set(fewer.splits["test"]) and R._squad_open_with_bm25_cached.cache_info(
        ).misses == 2


def test_squad_open_labels_follow_the_answer_spans(squad, squad_sets):
    for split, rset in squad_sets.items():
        assert len(rset) == 40 and set(rset.queries) <= set(squad.splits[split])
        for qid, docs in rset.candidates.items():
            query, labels = rset.queries[qid], rset.labels[qid]
            assert len(docs) == K  # no short list among these questions (checked against meta below)
            assert sorted(rset.positives(qid)) == sorted(squad.positives[qid])
            for doc_id, label in zip(docs, labels):
                text = rset.corpus[doc_id].text
                if label:  # a positive holds a whole gold answer span, verbatim up to whitespace
                    assert any(" ".join(a.split()) in text for a in query.answers), (qid, doc_id)
                else:  # a negative holds no gold answer, even by DPR's looser token match
                    assert not has_answer(query.answers, text), (qid, doc_id)
        assert rset.meta["short_lists"] == 0 and rset.meta["k"] == K
    splits = [set(r.queries) for r in squad_sets.values()]
    assert not (splits[0] & splits[1] or splits[0] & splits[2] or splits[1] & splits[2])


def test_squad_open_candidates_keep_bm25_order(squad_sets, squad_index):
    rset = squad_sets["dev"]
    run = squad_index.search(rset.queries, k=50, progress=False)
    for qid, docs in rset.candidates.items():
        retrieved = [d for d in docs if d in run[qid]]
        scores = [run[qid][d] for d in retrieved]
        assert scores == sorted(scores, reverse=True)
        assert docs[:len(retrieved)] == retrieved  # positives BM25 missed come last


def test_from_first_stage_hand_example():
    corpus = {f"d{i}": Document(f"d{i}", text) for i, text in enumerate(
        ["", "Paris is the capital", "the capital of France is Paris", "Lyon", "Lille", "Nice", "Brest"])}
    queries = {"q": Query("q", "capital of France?", ("Paris",))}
    run = {"q": {"d3": 5.0, "d1": 4.0, "d4": 3.0, "d5": 2.0, "d6": 1.0}}  # d2, the positive, was missed
    rset = from_first_stage(queries, corpus, {"q": ["d2"]}, run, 3, matcher=AnswerMatcher(corpus))
    assert rset.candidates == {"q": ["d3", "d4", "d2"]} and rset.labels == {"q": [0, 0, 1]}
    assert (rset.meta["positives_added"], rset.meta["answer_bearing_skipped"], rset.meta["short_lists"]) == (1, 1, 0)
    # without the answer rule d1 is an ordinary negative; with k=7 the run runs out of negatives
    rset = from_first_stage(queries, corpus, {"q": ["d2"]}, run, 7)
    assert rset.candidates["q"] == ["d3", "d1", "d4", "d5", "d6", "d2"] and rset.meta["short_lists"] == 1
    assert rset.qrels() == {"q": {"d2": 1}}
    with pytest.raises(ValueError, match="no room for a negative"):
        from_first_stage(queries, corpus, {"q": ["d1", "d2"]}, run, 2)


def test_wikiqa_candidate_lists(shared_data):
    folder = shared_data / "wikiqa-castorini" / "dev"
    rset = from_candidate_lists(load_wikiqa(shared_data / "wikiqa-castorini", "dev"))
    ids = (folder / "id.txt").read_text().split()
    sims = [int(x) for x in (folder / "sim.txt").read_text().split()]
    assert len(rset) == 126 and sum(len(c) for c in rset.candidates.values()) == 1130  # SOURCE.md counts
    by_query: dict[str, list[int]] = {}
    for qid, label in zip(ids, sims):
        by_query.setdefault(qid, []).append(label)
    assert rset.labels == by_query
    assert len(rset.qrels()) == 126  # the filtered WikiQA: every question has a correct answer


def test_reranking_set_rejects_inconsistent_input():
    corpus = {"a": Document("a", "x"), "b": Document("b", "y")}
    queries = {"q": Query("q", "?")}
    with pytest.raises(ValueError, match="2 candidates but 1 labels"):
        RerankingSet(queries, corpus, {"q": ["a", "b"]}, {"q": [1]})
    with pytest.raises(ValueError, match="not in the corpus"):
        RerankingSet(queries, corpus, {"q": ["a", "c"]}, {"q": [1, 0]})
    with pytest.raises(ValueError, match="twice"):
        RerankingSet(queries, corpus, {"q": ["a", "a"]}, {"q": [1, 0]})


def test_rerank_metrics_hand_example():
    corpus = {d: Document(d, d) for d in "abcd"}
    queries = {"q1": Query("q1", "?"), "q2": Query("q2", "?")}
    rset = RerankingSet(queries, corpus, {"q1": ["a", "b"], "q2": ["c", "d"]}, {"q1": [0, 1], "q2": [1, 0]})
    scores = {"q1": np.array([2.0, 1.0]), "q2": np.array([3.0, -1.0])}  # q1's positive 2nd, q2's 1st
    metrics = rerank_metrics(rset, scores)
    assert metrics["MRR@10"] == pytest.approx((1 / 2 + 1) / 2)
    assert metrics["nDCG@10"] == pytest.approx((1 / np.log2(3) + 1) / 2)


# --- training groups and batches -------------------------------------------------------------------------------------

def test_groups_hand_examples():
    rng = np.random.default_rng(0)
    group = sample_group([0, 1, 0, 0, 1], 3, rng)
    assert group[0] in (1, 4) and len(set(group[1:])) == 2 and set(group[1:]) <= {0, 2, 3}
    assert sample_group([0, 0, 0], 2, rng) is None and sample_group([1, 0], 3, rng) is None
    # the teacher's top 3 of five, but the positive (index 4) stays although the teacher scores it lowest
    assert teacher_top_group([0, 0, 0, 0, 1], [5.0, 1.0, 4.0, 3.0, 0.0], 3) == [0, 2, 4]
    assert teacher_top_group([1, 0, 0], [0.5, 2.0, 1.0], 3) == [1, 2, 0]
    assert teacher_top_group([1, 1], [0.5, 2.0], 2) is None  # no negative


def test_group_batches_resume_exactly():
    make = lambda qids, rng: {"qids": qids, "draw": int(rng.integers(1 << 30))}  # noqa: E731
    batches = GroupBatches([f"q{i}" for i in range(10)], 3, make, seed=7)
    assert len(batches) == 4
    batches.set_epoch(1)
    full = list(batches.iter_from(0))
    assert sorted(q for b in full for q in b["qids"]) == sorted(f"q{i}" for i in range(10))
    assert list(batches.iter_from(2)) == full[2:]
    batches.set_epoch(2)
    assert list(batches.iter_from(0)) != full


def test_group_batches_share_each_global_batch_among_ranks():
    make = lambda qids, rng: qids  # noqa: E731
    shares = []
    for rank in range(3):  # as three processes of one torch.distributed run would see it
        batches = GroupBatches([f"q{i}" for i in range(10)], 2, make, seed=1)
        batches.rank, batches.world = rank, 3
        shares.append(list(batches.iter_from(0)))
    assert [len(s) for s in shares] == [2, 2, 2]  # ceil(10 / (2 * 3)) global batches, on every rank
    assert all(batch for s in shares for batch in s)  # padding leaves no rank with an empty batch
    seen = [q for s in shares for batch in s for q in batch]
    assert set(seen) == {f"q{i}" for i in range(10)} and len(seen) == 12  # 2 queries repeated as padding


# --- the cross-encoder teacher ---------------------------------------------------------------------------------------

def _tiny_repeated_set(squad_sets, n_queries=4, k=4) -> RerankingSet:
    """The first n training questions, each with its positive and its first k-1 negatives."""
    rset = squad_sets["train"]
    qids = list(rset.candidates)[:n_queries]
    candidates, labels = {}, {}
    for q in qids:
        pos = rset.positives(q)[:1]
        neg = [d for d, y in zip(rset.candidates[q], rset.labels[q]) if not y][:k - 1]
        candidates[q], labels[q] = pos + neg, [1] + [0] * (k - 1)
    return RerankingSet({q: rset.queries[q] for q in qids}, rset.corpus, candidates, labels, "tiny", "train")


def test_cross_encoder_learns_a_repeated_real_batch(tiny_bert_dir, squad_sets, tmp_path):
    tiny = _tiny_repeated_set(squad_sets)
    tokenizer = load_tokenizer(tiny_bert_dir)
    torch.manual_seed(0)
    model = CrossEncoderModel.from_bert(tiny_bert_dir)

    def positives_on_top() -> bool:
        scores = score_reranking_set(model, tokenizer, tiny, max_length=64, progress=False)
        return all(s[0] > s[1:].max() for s in scores.values())  # the positive is listed first

    assert not positives_on_top()  # otherwise the test below could not fail
    batches = cross_encoder_batches(tiny, tokenizer, 4, 64, batch_size=4, seed=0)
    loop = LoopConfig(str(tmp_path / "ca"), max_steps=30, learning_rate=2e-3, warmup_ratio=0.0, checkpoint_every=1000,
                      select_metric="nDCG@10")
    run_training(model, cross_encoder_loss(), batches, loop, progress=False)
    assert positives_on_top()


def test_test_metrics_keep_every_query_of_the_real_test_set(tiny_bert_dir, squad_sets, tmp_path):
    """What `kind: cross-encoder` writes at the end: aggregates, and per-query values whose means are them."""
    rset = squad_sets["test"]
    model = CrossEncoderModel.from_bert(tiny_bert_dir).eval()
    scores = score_reranking_set(model, load_tokenizer(tiny_bert_dir), rset, max_length=48, progress=False)
    metrics = record_test_metrics(tmp_path / "test_metrics.json", rset, scores, model="cross-encoder")
    assert metrics == rerank_metrics(rset, scores)
    values = read_per_query(tmp_path)  # the run folder's test_per_query.csv
    assert set(values) == {"MRR@10", "nDCG@10"}
    for name, by_query in values.items():
        assert set(by_query) == set(rset.qrels()) and len(by_query) == len(rset)  # every query has a positive
        assert np.mean(list(by_query.values())) == pytest.approx(metrics[name], abs=1e-12)


def test_cross_encoder_batches_put_the_positive_first(tiny_bert_dir, squad_sets):
    rset = squad_sets["train"]
    tokenizer = load_tokenizer(tiny_bert_dir)
    batches = cross_encoder_batches(rset, tokenizer, 3, 64, batch_size=5, seed=0)
    batch = next(batches.iter_from(0))
    assert batch["input_ids"].shape[0] == 15 and batch["targets"].tolist() == [0] * 5
    model = CrossEncoderModel.from_bert(tiny_bert_dir)
    loss, logs = cross_encoder_loss(label_smoothing=0.1)(model, batch)
    assert loss.ndim == 0 and torch.isfinite(loss) and 0.0 <= logs["top1"] <= 1.0
    with pytest.raises(ValueError, match="group_size"):
        CrossEncoderTraining(group_size=1)


def test_teacher_cache_reused_only_when_it_matches(tiny_bert_dir, squad_sets, tmp_path, caplog):
    rset = _tiny_repeated_set(squad_sets, n_queries=3, k=3)
    tokenizer = load_tokenizer(tiny_bert_dir)
    model = CrossEncoderModel.from_bert(tiny_bert_dir).eval()
    path = tmp_path / "teacher"
    first = score_and_cache_teacher(model, tokenizer, rset, path, max_length=64, progress=False)
    assert not first.reused and first.index["qids"] == list(rset.candidates)
    direct = score_reranking_set(model, tokenizer, rset, max_length=64, progress=False)
    again = score_and_cache_teacher(model, tokenizer, rset, path, max_length=64, progress=False)
    assert again.reused
    for q in rset.candidates:
        np.testing.assert_allclose(again.scores[q], direct[q], rtol=1e-6)

    with caplog.at_level(logging.WARNING, logger="taser_lib.training.cross_encoder"):
        with torch.no_grad():
            model.score.bias += 1.0  # another teacher
        changed = score_and_cache_teacher(model, tokenizer, rset, path, max_length=64, progress=False)
        assert not changed.reused and "model_sha256" in caplog.text
        for q in rset.candidates:
            np.testing.assert_allclose(changed.scores[q], direct[q] + 1.0, rtol=1e-5)
        caplog.clear()
        smaller = rset.subset(list(rset.candidates)[:2])  # other candidates
        assert not score_and_cache_teacher(model, tokenizer, smaller, path, max_length=64, progress=False).reused
        assert "candidates_sha256" in caplog.text
        caplog.clear()
        assert not score_and_cache_teacher(model, tokenizer, smaller, path, max_length=32, progress=False).reused
        assert "scoring" in caplog.text
        np.save(path / "scores.npy", np.zeros(1, dtype=np.float32))  # damaged
        assert not score_and_cache_teacher(model, tokenizer, smaller, path, max_length=32, progress=False).reused
        assert "damaged" in caplog.text
    assert score_and_cache_teacher(model, tokenizer, smaller, path, max_length=32, progress=False).reused
