"""tables.out_of_domain: dense runs of seeded models over one dataset (in memory, kept, or streamed from a corpus
file), BM25 without touching the dataset, the passages a streamed question set needs, EntityQuestions' macro/micro."""

from __future__ import annotations

import json

import pytest

from taser_lib.data.types import Dataset, Document, Query
from taser_book.analyses.baselines import first_stage_runs
from taser_book.tables.out_of_domain import attach_passages, bm25_run, dense_runs, entity_questions_rows
from taser_book.tables.seeded import SeededModels
from taser_lib.retrieval.runs import ranked_ids
from taser_lib.datasets.streamed import StreamedCorpus

from training_helpers import make_tiny_bert, one_thread  # noqa: F401 - fixture

TOPICS = ["volcano lava eruption ash", "violin orchestra concert music", "football goal stadium league",
          "bread flour oven baking", "planet orbit telescope star", "river bridge flood water"]


def _corpus() -> dict[str, Document]:
    docs = {}
    for t, words in enumerate(TOPICS):
        for i in range(3):
            docs[f"d{t}{i}"] = Document(f"d{t}{i}", f"{words} passage number {i} about {words.split()[i]}",
                                        title=words.split()[0])
    return docs


def _queries() -> dict[str, Query]:
    return {f"q{t}": Query(f"q{t}", f"what about {words.split()[1]} and {words.split()[2]}?")
            for t, words in enumerate(TOPICS[:4])}


def _dataset(corpus=True) -> Dataset:
    qrels = {f"q{t}": {f"d{t}0": 1} for t in range(4)}
    return Dataset("toy", "test", corpus=_corpus() if corpus else {}, queries=_queries(), qrels=qrels)


@pytest.fixture
def models(tmp_path, one_thread):
    paths = {"a": {1: make_tiny_bert(tmp_path / "a1", seed=1), 2: make_tiny_bert(tmp_path / "a2", seed=2)},
             "b": {None: make_tiny_bert(tmp_path / "b", seed=3)}}
    return SeededModels(paths, max_passage_length=32, max_query_length=16, batch_size=8, device="cpu")


def _rankings(runs):
    return {key: {q: ranked_ids(scores, 5) for q, scores in run.items()} for key, run in runs.items()}


def test_dense_runs_are_the_seeded_models_runs_without_keeping_vectors(models):
    dataset = _dataset()
    ours = dense_runs(models, dataset, k=5)
    theirs = models.runs(dataset, k=5)  # SeededModels' own path, which keeps the corpus vectors
    assert set(ours) == {("a", 1), ("a", 2), ("b", None)}
    assert _rankings(ours) == _rankings(theirs)
    for key in ours:
        for q in dataset.queries:
            assert ours[key][q] == pytest.approx(theirs[key][q], rel=1e-5, abs=1e-6)
    # different seeds are different models: their runs differ
    assert _rankings(ours)[("a", 1)] != _rankings(ours)[("a", 2)]
    # labels restricts the models
    assert set(dense_runs(models, dataset, k=5, labels=["b"])) == {("b", None)}


def test_dense_runs_keep_vectors_only_when_asked(models):
    dataset = _dataset()
    dense_runs(models, dataset, k=5)
    assert not models._embeddings  # nothing kept by default
    dense_runs(models, dataset, k=5, keep_vectors=True)
    assert len(models._embeddings) == 3  # one per (model, seed) for this corpus


def test_a_question_set_without_passages_streams_from_a_corpus_file(models, tmp_path):
    in_memory = _dataset()
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d.id, "title": d.title, "text": d.text}) + "\n"
                            for d in in_memory.corpus.values()))
    corpus = StreamedCorpus(path, index_dir=tmp_path / "index", progress=False)
    questions = _dataset(corpus=False)
    with pytest.raises(ValueError, match="no passages"):
        dense_runs(models, questions, k=5)
    streamed = dense_runs(models, questions, k=5, corpus=corpus)
    loaded = dense_runs(models, in_memory, k=5)
    assert set(streamed) == set(loaded)
    for key in loaded:  # the same top 5 scores (the shards' exact search may order near-ties differently)
        for q in questions.queries:
            assert sorted(streamed[key][q].values()) == pytest.approx(sorted(loaded[key][q].values()), abs=1e-5)
            common = set(streamed[key][q]) & set(loaded[key][q])
            assert len(common) >= 3
            assert all(streamed[key][q][d] == pytest.approx(loaded[key][q][d], abs=1e-5) for d in common)
    assert questions.corpus == {}  # dense retrieval never loaded the corpus into the dataset
    sparse = bm25_run(questions, k=5, corpus=corpus)
    assert _rankings({"x": sparse}) == _rankings({"x": bm25_run(in_memory, k=5)})
    # the passages answer matching needs: exactly those some run retrieved
    wanted = {d for run in [*streamed.values(), sparse] for scores in run.values() for d in scores}
    assert attach_passages(questions, [*streamed.values(), sparse], corpus) == len(wanted)
    assert set(questions.corpus) == wanted and questions.corpus["d00"] == in_memory.corpus["d00"]
    assert attach_passages(in_memory, [sparse], corpus) == 0  # a set with passages is left as it is
    assert len(in_memory.corpus) == 18


def test_bm25_run_is_first_stage_bm25_and_leaves_the_dataset_alone():
    dataset = _dataset()
    assert bm25_run(dataset, k=5) == first_stage_runs(dataset, k=5)["bm25"]
    with pytest.raises(ValueError, match="no passages"):
        bm25_run(_dataset(corpus=False))


def test_entity_questions_macro_and_micro_by_hand():
    corpus = {"d1": Document("d1", "Paris is in France"), "d2": Document("d2", "Berlin is in Germany"),
              "d3": Document("d3", "Rome is in Italy"), "d4": Document("d4", "nothing here")}
    queries = {"q1": Query("q1", "capital of France?", ("Paris",), meta={"relation": "P1"}),
               "q2": Query("q2", "capital of Germany?", ("Berlin",), meta={"relation": "P1"}),
               "q3": Query("q3", "capital of Italy?", ("Rome",), meta={"relation": "P2"})}
    dataset = Dataset("entityquestions", "test", corpus=corpus, queries=queries)
    runs = {("m", 7): {"q1": {"d1": 3.0, "d4": 1.0},     # answer at rank 1
                       "q2": {"d4": 3.0, "d2": 1.0}},    # answer at rank 2; q3 missing: a miss
            ("bm25", None): {"q1": {"d4": 2.0, "d3": 1.0}, "q2": {"d2": 5.0}, "q3": {"d3": 1.0}}}
    rows = entity_questions_rows(dataset, runs, ks=(1, 2))
    got = {(r["model"], r["seed"], r["metric"]): r["value"] for r in rows}
    # m: micro R@1 = 1/3, R@2 = 2/3; P1 R@1 = 1/2, R@2 = 1; P2 = 0 -> macro R@1 = 1/4, R@2 = 1/2
    assert got[("m", 7, "micro R@1")] == pytest.approx(100 / 3)
    assert got[("m", 7, "micro R@2")] == pytest.approx(200 / 3)
    assert got[("m", 7, "macro R@1")] == pytest.approx(25.0)
    assert got[("m", 7, "macro R@2")] == pytest.approx(50.0)
    # bm25: q1 misses, q2 and q3 hit at 1 -> micro 2/3; P1 1/2, P2 1 -> macro 3/4
    assert got[("bm25", None, "micro R@1")] == pytest.approx(200 / 3)
    assert got[("bm25", None, "macro R@1")] == pytest.approx(75.0)
    assert {r["dataset"] for r in rows} == {"entityquestions"} and len(rows) == 2 * 4
    with pytest.raises(ValueError, match="relation"):
        entity_questions_rows(Dataset("x", "test", corpus=corpus, queries={"q": Query("q", "?", ("Paris",))}),
                              {("m", 1): {"q": {"d1": 1.0}}})
