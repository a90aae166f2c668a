"""Scores of saved re-rankers on re-ranking sets (cached), the query x passage grid of Proposition 1, and the
training stages of Figure 7 (`taser_book.runs.scoring`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from training_helpers import make_tiny_bert, one_thread  # noqa: F401  (one_thread: a fixture)

from taser_lib.data.types import Document, Query
from taser_lib.errors import ConfigError
from taser_lib.models import build_model, load_model, load_tokenizer
from taser_book.runs import changes, scoring
from taser_lib.training.config import ModelConfig
from taser_lib.training.cross_encoder import score_and_cache_teacher, score_pairs
from taser_lib.training.reranking import RerankingSet, passage_text
from taser_lib.training.retriever import build_retriever
from taser_book.runs.scoring import (early_steps, grid_matrix, grid_set, saved_model_scores, scoring_settings,
                                        stage_checkpoint, stage_changes, stage_runs, stage_scores)

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = ["zebra", "violin", "glacier", "saffron", "harbor", "quartz", "meadow", "lantern", "orbit", "canyon"]


def toy_set() -> RerankingSet:
    """4 questions x 3 candidates; q_i's answer is WORDS[i] and its positive d{3i} contains it. q1's negative d5
    mentions q3's answer; q3 lists d0 (q0's positive) as a negative. q4 has no positive."""
    corpus, queries, candidates, labels = {}, {}, {}, {}
    for i in range(5):
        qid = f"q{i}"
        queries[qid] = Query(qid, f"which {WORDS[i]} is it", (WORDS[i],))
        docs = [f"d{3 * i + j}" for j in range(3)]
        for j, d in enumerate(docs):
            corpus[d] = Document(d, f"{WORDS[i] if j == 0 else WORDS[5 + j]} passage {d}", f"title {i}")
        candidates[qid], labels[qid] = docs, [1, 0, 0]
    corpus["d5"] = Document("d5", f"{WORDS[3]} passage d5", "title 1")
    candidates["q3"][2] = "d0"
    labels["q4"] = [0, 0, 0]
    return RerankingSet(queries, corpus, candidates, labels, "toy", "test")


# --- the grid --------------------------------------------------------------------------------------------------------

def test_grid_pools_candidates_and_labels_them_by_owner_then_answer_rule():
    rset = toy_set()
    grid = grid_set(rset)  # every query with a positive: q0..q3 (q4 has none)
    assert list(grid.candidates) == ["q0", "q1", "q2", "q3"]
    docs = grid.candidates["q0"]
    assert len(docs) == len(set(docs)) == 11  # 12 candidates, d0 listed twice
    assert all(grid.candidates[q] == docs for q in grid.candidates)
    col = {d: j for j, d in enumerate(docs)}
    # own labels are kept: d0 is q3's listed negative although the answer rule would not make it relevant anyway
    assert grid.labels["q3"][col["d0"]] == 0 and grid.labels["q0"][col["d0"]] == 1
    # d5 (q1's negative) contains q3's answer: relevant for q3 by the answer rule, still a negative for q1
    assert grid.labels["q3"][col["d5"]] == 1 and grid.labels["q1"][col["d5"]] == 0
    assert grid.meta["answer_labelled"] == 1 and grid.meta["passages"] == 11
    off = grid_set(rset, answer_rule=False)
    assert off.labels["q3"][col["d5"]] == 0 and off.meta["answer_labelled"] == 0


def test_grid_samples_queries_by_seed():
    rset = toy_set()
    a, b = grid_set(rset, 2, seed=3), grid_set(rset, 2, seed=3)
    assert list(a.candidates) == list(b.candidates) and len(a) == 2
    first = next(iter(a.candidates))
    assert set(a.candidates[first]) == {d for q in a.candidates for d in rset.candidates[q]}
    assert {tuple(grid_set(rset, 2, seed=s).candidates) for s in range(10)} != {tuple(a.candidates)}


def test_grid_matrix_aligns_rows_and_refuses_non_grids():
    grid = grid_set(toy_set())
    docs = grid.candidates["q0"]
    scores = {q: np.arange(len(docs)) + 100 * i for i, q in enumerate(grid.candidates)}
    S, R = grid_matrix(grid, scores)
    assert S.shape == R.shape == (4, len(docs)) and S.dtype == np.float64
    assert S[2, 5] == 205 and R[0, docs.index("d0")] == 1 and R.sum() == 5
    with pytest.raises(ValueError, match="no scores"):
        grid_matrix(grid, {q: v for q, v in scores.items() if q != "q1"})
    with pytest.raises(ValueError, match="scores for"):
        grid_matrix(grid, {**scores, "q2": np.zeros(3)})
    with pytest.raises(ValueError, match="not a grid"):
        grid_matrix(toy_set(), {q: np.zeros(3) for q in toy_set().candidates})


# --- scoring saved models, cached ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    bert = make_tiny_bert(root / "bert", seed=0, dropout=0.0)
    torch.manual_seed(1)
    ca = build_model("cross-encoder", bert)
    ca.save_pretrained(root / "ca")
    load_tokenizer(bert).save_pretrained(root / "ca")
    torch.manual_seed(2)
    de = build_retriever(ModelConfig(arch="shared", name_or_path=str(bert),
                                     overrides={"normalize": True, "similarity_scale": 5.0}))
    de.save_pretrained(root / "de")
    load_tokenizer(bert).save_pretrained(root / "de")
    return {"ca": root / "ca", "de": root / "de"}


def _fail(*args, **kwargs):
    raise AssertionError("scored again instead of reading the cache")


def test_cross_encoder_scores_match_pairs_and_come_back_from_the_cache(tiny_models, tmp_path, monkeypatch):
    rset = toy_set()
    first = saved_model_scores(tiny_models["ca"], rset, max_length=40, cache_dir=tmp_path)
    assert list(first) == list(rset.candidates)
    ca, tok = load_model(tiny_models["ca"]).eval(), load_tokenizer(tiny_models["ca"])
    direct = score_pairs(ca, tok, [rset.queries["q2"].text] * 3,
                         [passage_text(rset.corpus[d]) for d in rset.candidates["q2"]], max_length=40,
                         progress=False)
    np.testing.assert_allclose(first["q2"], direct, rtol=1e-5, atol=1e-6)
    folders = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(folders) == 1 and (folders[0] / "index.json").is_file()
    monkeypatch.setattr(scoring, "score_reranking_set", _fail)
    again = saved_model_scores(tiny_models["ca"], rset, max_length=40, cache_dir=tmp_path)
    assert all(np.array_equal(again[q], first[q]) for q in first)
    # other settings or another set are other cache entries: they are scored, not read
    with pytest.raises(AssertionError, match="scored again"):
        saved_model_scores(tiny_models["ca"], rset, max_length=24, cache_dir=tmp_path)
    with pytest.raises(AssertionError, match="scored again"):
        saved_model_scores(tiny_models["ca"], rset.subset(["q0", "q1"]), max_length=40, cache_dir=tmp_path)


def test_teacher_cache_is_read_when_it_matches_and_never_written(tiny_models, tmp_path, monkeypatch):
    rset = toy_set()
    teacher = score_and_cache_teacher(load_model(tiny_models["ca"]), load_tokenizer(tiny_models["ca"]), rset,
                                      tmp_path / "teacher_scores", max_length=40, progress=False)
    before = (tmp_path / "teacher_scores" / "index.json").read_text()
    monkeypatch.setattr(scoring, "score_reranking_set", _fail)
    read = saved_model_scores(tiny_models["ca"], rset, max_length=40, teacher_cache=tmp_path / "teacher_scores")
    assert all(np.array_equal(read[q], teacher.scores[q]) for q in rset.candidates)
    with pytest.raises(AssertionError, match="scored again"):  # another set: not the teacher's
        saved_model_scores(tiny_models["ca"], rset.subset(["q1"]), max_length=40,
                           teacher_cache=tmp_path / "teacher_scores")
    assert (tmp_path / "teacher_scores" / "index.json").read_text() == before


def test_bi_encoder_scores_are_its_similarities_and_cached(tiny_models, tmp_path, monkeypatch):
    from taser_lib.training.distill import score_dual_encoder
    rset = toy_set()
    got = saved_model_scores(tiny_models["de"], rset, max_query_length=16, max_passage_length=24, cache_dir=tmp_path)
    want = score_dual_encoder(load_model(tiny_models["de"]).eval(), load_tokenizer(tiny_models["de"]), rset,
                              max_query_length=16, max_passage_length=24)
    assert all(np.allclose(got[q], want[q], atol=1e-6) for q in rset.candidates)
    assert all(np.abs(got[q]).max() <= 5.0 + 1e-5 for q in got)  # cosine x similarity_scale 5
    index = json.loads(next(p for p in tmp_path.iterdir() if p.is_dir()).joinpath("index.json").read_text())
    assert index["scoring"]["max_passage_length"] == 24 and index["qids"] == list(rset.candidates)
    monkeypatch.setattr(scoring, "score_dual_encoder", _fail)
    again = saved_model_scores(tiny_models["de"], rset, max_query_length=16, max_passage_length=24,
                               cache_dir=tmp_path)
    assert all(np.array_equal(again[q], got[q]) for q in got)


def test_a_one_vector_student_encodes_each_distinct_passage_once(tiny_models, monkeypatch):
    from taser_lib.models import DenseEncoder
    from taser_lib.training.distill import score_dual_encoder
    rset = toy_set()  # d0 is a candidate of q0 and of q3; here of q1 too
    rset.candidates["q1"][1] = "d0"
    model, tokenizer = load_model(tiny_models["de"]).eval(), load_tokenizer(tiny_models["de"])
    seen, original = [], DenseEncoder.represent_passages

    def counting(self, passages, batch_size=None):
        seen.extend(passages)
        return original(self, passages, batch_size)

    monkeypatch.setattr(DenseEncoder, "represent_passages", counting)
    got = score_dual_encoder(model, tokenizer, rset, max_query_length=16, max_passage_length=24,
                             chunk_passages=3)  # ColBERT's chunks would hold one query each here
    distinct = {d for docs in rset.candidates.values() for d in docs}
    assert len(distinct) < sum(len(docs) for docs in rset.candidates.values())
    assert len(seen) == 1 + len(distinct)  # a one-passage probe (one vector or token vectors?), then each once
    encoder = DenseEncoder(model, tokenizer, max_query_length=16, max_passage_length=24, device="cpu")
    with torch.inference_mode():  # each query against its own candidates, encoded on their own
        for q, docs in rset.candidates.items():
            want = model.compute_similarity(encoder.represent_queries([rset.queries[q].text]),
                                            original(encoder, [rset.corpus[d] for d in docs]))[0]
            assert np.allclose(got[q], want.float().numpy(), atol=1e-5), q


def test_scoring_settings_follow_the_run_kind():
    ca = SimpleNamespace(kind="cross-encoder", training=SimpleNamespace(max_length=224, eval_batch_size=32))
    de = SimpleNamespace(kind="distill", training=SimpleNamespace(max_query_length=32, max_passage_length=192,
                                                                  eval_batch_size=16))
    assert scoring_settings(ca) == {"max_length": 224, "batch_size": 32}
    assert scoring_settings(de) == {"max_query_length": 32, "max_passage_length": 192, "batch_size": 16}
    with pytest.raises(ConfigError, match="retriever"):
        scoring_settings(SimpleNamespace(kind="retriever", training=None))


# --- training stages -------------------------------------------------------------------------------------------------

def _run(kind: str, final_step: int = 500, train_queries=2000, batch_size: int = 4, name: str = "final"):
    config = SimpleNamespace(kind=kind, loop=SimpleNamespace(batch_size=batch_size),
                             data=SimpleNamespace(train_queries=train_queries))
    return SimpleNamespace(config=config, result={"final_step": final_step}, dir=Path(name))


def test_early_steps_are_a_fraction_kept_inside_the_run():
    assert early_steps(500, 0.1) == 50
    assert early_steps(2, 0.5) == 1 and early_steps(1, 0.5) == 1 and early_steps(10, 0.99) == 9
    assert early_steps(300_000, 1 / 30) == 10_000
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="early fraction"):
            early_steps(10, bad)


def test_stage_changes_shrink_only_the_cross_encoders_training_set():
    assert stage_changes(_run("distill"), 50) == [changes.loop(max_steps=50),
                                                  changes.data(test_split=None, dev_queries=8),
                                                  changes.training(train_eval_queries=8)]
    assert stage_changes(_run("distill"), 5, eval_queries=3)[1:] == [changes.data(test_split=None, dev_queries=3),
                                                                    changes.training(train_eval_queries=3)]
    with pytest.raises(ValueError, match="eval_queries"):
        stage_changes(_run("distill"), 5, eval_queries=0)

    def train_queries(run, steps):
        return stage_changes(run, steps)[1].values["train_queries"]
    assert train_queries(_run("cross-encoder"), 50) == 200
    assert train_queries(_run("cross-encoder"), 0) == 4  # one batch to build
    assert train_queries(_run("cross-encoder", train_queries=8), 50) == 8
    assert train_queries(_run("cross-encoder", train_queries=None), 50) == 200


def test_stage_runs_train_init_and_early_with_the_final_runs_recipe(monkeypatch):
    calls = []

    def fake(name, seed, params, *, teacher=None, changes=(), progress=True):
        calls.append((name, seed, teacher, list(changes)))
        return SimpleNamespace(name=f"{name}:{changes[1]}")

    monkeypatch.setattr("taser_book.runs.recipes.reranking_run", fake)
    final, teacher = _run("distill", final_step=40), object()
    on_wikiqa = changes.data(dataset="wikiqa")
    runs = stage_runs("de-one-hot", 14, {"n_train": 160}, final, early_fraction=0.1, teacher=teacher,
                      changes=[on_wikiqa])
    assert list(runs) == ["init", "early", "final"] and runs["final"] is final
    assert [c[3][:2] for c in calls] == [[on_wikiqa, changes.loop(max_steps=0)],
                                         [on_wikiqa, changes.loop(max_steps=4)]]
    assert all(c[:3] == ("de-one-hot", 14, teacher) for c in calls)
    calls.clear()
    shared = SimpleNamespace(name="shared init")
    again = stage_runs("de-softmax-ce", 14, {}, final, early_fraction=0.1, teacher=teacher, init=shared)
    assert again["init"] is shared and len(calls) == 1


def test_stages_show_the_last_model_of_short_runs_and_the_selected_one_at_the_end(monkeypatch):
    assert [stage_checkpoint(s) for s in ("init", "early", "final")] == ["final", "final", "best"]
    with pytest.raises(ValueError, match="stage"):
        stage_checkpoint("middle")
    seen = []
    monkeypatch.setattr(scoring, "run_scores", lambda run, rset, checkpoint, cache: seen.append((run, checkpoint))
                        or {run: checkpoint})
    got = stage_scores({"init": "a", "early": "b", "final": "c"}, toy_set())
    assert got == {"init": {"a": "final"}, "early": {"b": "final"}, "final": {"c": "best"}}
