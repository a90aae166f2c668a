"""`taser train` from a BEIR dataset: a `beir` data source trains from its split's qrels (queries and relevant
documents) with BM25 negatives from its corpus; the source may be a BEIR folder or zip, a prepared folder or a
registered name, as every command's dataset argument."""

from __future__ import annotations

import json
import zipfile

import pytest
from training_helpers import make_tiny_bert, tiny_config, write_yaml
from training_helpers import one_thread  # noqa: F401  (fixture)

from taser_book.cli import main
from taser_lib.datasets import registry
from taser_lib.data.formats.beir import write_corpus_jsonl, write_qrels_tsv, write_queries_jsonl
from taser_lib.datasets.slicing import slice_dataset
from taser_lib.errors import ConfigError
from taser_lib.training import retriever as R
from taser_lib.training.config import DataSource, RetrieverDataConfig

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def scifact_train_zip(shared_data, tmp_path_factory):
    """A BEIR zip of SciFact's real train claims over a 400-document slice holding every document they cite."""
    tmp = tmp_path_factory.mktemp("beir-train")
    full = registry.load_dataset("scifact", "train", data_dir=tmp / "data", mirror=shared_data)
    train = slice_dataset(full, n_queries=40, n_docs=400, seed=2)
    folder = tmp / "scifact-train"
    write_corpus_jsonl(train.corpus, folder / "corpus.jsonl")
    write_queries_jsonl(train.queries, folder / "queries.jsonl")
    write_qrels_tsv(train.qrels, folder / "qrels" / "train.tsv")
    path = tmp / "scifact-train.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"scifact-train/{file.relative_to(folder)}")
    return path, train


def test_beir_source_gives_qrels_pairs_with_bm25_negatives(scifact_train_zip):
    path, train = scifact_train_zip
    source = DataSource("beir", "train", str(path))
    data = RetrieverDataConfig(train=[source], dev=None, bm25_negatives=2, train_eval_questions=0)
    loaded = R.load_training_set(source, data, progress=False)
    assert loaded.name == f"{path}:train" and loaded.corpus == train.corpus
    judged = {q: [d for d, g in docs.items() if g > 0] for q, docs in train.qrels.items()}
    assert {e.query.id: [d.id for d in e.positives] for e in loaded.examples} == {q: d for q, d in judged.items() if d}
    for e in loaded.examples:
        negatives = [d.id for d in e.hard_negatives]
        assert len(negatives) == 2 and not set(negatives) & set(judged[e.query.id])
        assert set(negatives) <= set(train.corpus)


def test_beir_source_errors():
    with pytest.raises(ConfigError, match="beir data source needs a path"):
        DataSource("beir", "train")
    with pytest.raises(ConfigError, match="must be one of"):
        DataSource("trec", "train", "x")


def test_beir_queries_without_answers_are_scored_by_their_qrels(scifact_train_zip):
    """SciFact's claims have no answers: the train slice and the dev set score nDCG@10 and judged R@K (ir-measures),
    and a share of the split ("train[:25%]") holds out a dev set."""
    from taser_lib.evaluation.metrics import evaluate
    from taser_lib.evaluation.retrieval import QrelsEvaluator
    from taser_lib.models import build_model, load_tokenizer

    path, train = scifact_train_zip
    dev, rest = DataSource("beir", "train[:25%]", str(path)), DataSource("beir", "train[25%:]", str(path))
    data = RetrieverDataConfig(train=[rest], dev=dev, eval_ks=[5, 20], train_eval_questions=8)
    judged = [q for q in train.qrels if q in train.queries]
    loaded = R.load_training_set(rest, data, progress=False)
    held = list(R.load_beir_source(dev).qrels)
    assert held == judged[:len(judged) // 4] and not set(held) & {e.query.id for e in loaded.examples}
    assert {e.query.id for e in loaded.examples} <= set(judged[len(judged) // 4:])
    tokenizer = load_tokenizer("tiny")
    shared = {}
    evaluator = R.dev_evaluator(data, tokenizer, seed=0, progress=False, shared=shared)
    sliced = R.train_slice_evaluator(loaded, data, tokenizer, seed=0, shared=shared)
    assert isinstance(evaluator, QrelsEvaluator) and isinstance(sliced, QrelsEvaluator)
    assert evaluator.passages is sliced.passages  # one corpus, encoded once per evaluation
    model = build_model("dpr", "tiny")
    scores = evaluator(model)
    assert set(scores) == {"nDCG@10", "R@5", "R@20"} and all(0 <= v <= 1 for v in scores.values())
    assert scores == evaluate(evaluator.run(model), evaluator.qrels, ["nDCG@10", "R@5", "R@20"])
    with pytest.raises(ConfigError, match="a share of one such as"):
        R.split_share("train[:10]")


def test_taser_train_on_a_beir_zip(scifact_train_zip, tmp_path):
    path, _ = scifact_train_zip
    config = tiny_config(make_tiny_bert(tmp_path / "tiny"), {"train": path, "dev": path}, tmp_path / "run",
                         max_steps=2)
    config["model"] = {"name_or_path": str(tmp_path / "tiny"), "arch": "dpr"}  # the model is not the point here
    config["data"].update(train=[{"format": "beir", "split": "train", "path": str(path)}], dev=None,
                          train_eval_questions=0)
    assert main(["train", "--config", str(write_yaml(config, tmp_path / "c.yaml"))]) == 0
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and all(r["loss"] > 0 for r in log)
