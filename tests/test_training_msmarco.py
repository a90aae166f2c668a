"""The MS MARCO passage re-ranking testbed (taser_lib.datasets.msmarco): training groups from the T1-scored triples,
dev-small and TREC DL 2019 lists, the streamed collection, and the released teacher's scores.

FORMAT TEST: every MS MARCO file is replaced by a few lines written here in its exact real layout (see
test_data_msmarco.py); the dev-small and DL19 topics and qrels are the real ones from the offline mirror. Only the
file-location step is replaced (the tiny files cannot carry the registered md5s)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_data_msmarco import write_gz, write_tar_gz

from taser_lib.datasets import registry
from taser_lib.datasets.formats.msmarco import ScoredTriple
from taser_lib.errors import TaserError
from taser_lib.datasets import msmarco
from taser_lib.datasets.msmarco import aggregate_triples, msmarco_reranking, released_teacher_scores
from taser_lib.training.reranking import RerankingDataConfig, load_reranking_sets

# Training triples (score_pos score_neg qid pid_pos pid_neg): query 10 has one positive (100) and five negatives,
# query 11 one positive and one negative, query 12 only a positive that is also its negative (no group).
T1 = "".join(f"{sp}\t{sn}\t{q}\t{p}\t{n}\n" for sp, sn, q, p, n in [
    (9.0, 1.0, 10, 100, 101), (9.0, 5.0, 10, 100, 102), (9.0, 3.0, 10, 100, 103), (9.0, 7.0, 10, 100, 104),
    (9.0, 5.0, 10, 100, 102), (9.0, -2.0, 10, 100, 105), (4.0, 6.0, 11, 110, 111), (2.0, 2.0, 12, 120, 120)])
QRELS_TRAIN = "10\t0\t100\t1\n10\t0\t103\t1\n11\t0\t110\t1\n"  # 103: a triple negative judged relevant
QUERIES_TRAIN = "10\twhat is a manhattan project\n11\tdefine extreme\n12\tchattel\n99\tunused query\n"
DEV = {"300674": ["7067032", "200", "201"], "125705": ["300", "301"]}  # real dev-small queries; 7067032 relevant
DL19 = {"1037798": ["3641634", "3167284", "400"], "19335": ["1017759", "401"]}  # real DL19: grades 3, 1, -, 0


def top1000(lists: dict[str, list[str]]) -> str:
    return "".join(f"{q}\t{p}\tquery text\tpassage text\n" for q, docs in lists.items() for p in docs)


@pytest.fixture
def files(tmp_path, monkeypatch, shared_data):
    data = tmp_path / "data"
    folder = data / "msmarco-passage"
    folder.mkdir(parents=True)
    pids = sorted({p for line in T1.splitlines() for p in line.split("\t")[3:]} |
                  {p for lists in (DEV, DL19) for docs in lists.values() for p in docs} | {"999"}, key=int)
    write_tar_gz(folder / "collection.tar.gz", "collection.tsv", "".join(f"{p}\tpassage {p}\n" for p in pids))
    write_tar_gz(folder / "queries.tar.gz", "queries.train.tsv", QUERIES_TRAIN)
    (folder / "qrels.train.tsv").write_text(QRELS_TRAIN)
    write_tar_gz(folder / "top1000.dev.tar.gz", "top1000.dev", top1000(DEV))
    write_gz(folder / "msmarco-passagetest2019-top1000.tsv.gz", top1000(DL19))
    (data / "msmarco-passage-t1").mkdir()
    (data / "msmarco-passage-t1" / registry.T1_SCORES).write_text(T1)

    def fetched(name, split, data_dir):  # the registry's files for that split, from here, unverified
        return {Path(f.path).name: data / f.path for f in registry.get(name).files_for([split])}

    monkeypatch.setattr(msmarco, "_fetched", fetched)
    monkeypatch.setenv("TASER_DATA_MIRROR", str(shared_data))  # the real dev-small / DL19 topics and qrels
    monkeypatch.setenv("TASER_DATA_DIR", str(data))
    return data


def test_aggregation_keeps_top_k_by_teacher_score_and_the_positives():
    triples = [ScoredTriple("q", "p", f"n{i}", 9.0, float(i)) for i in range(50)]
    triples += [ScoredTriple("q", "p2", "n49", 0.5, 49.0), ScoredTriple("r", "x", "x", 1.0, 1.0)]
    groups = aggregate_triples(triples, 4)
    # n49 scores above every positive; p2 (0.5) is kept anyway, last: the positives always stay (up to k-1)
    assert groups["q"] == [("n49", False, 49.0), ("n48", False, 48.0), ("p", True, 9.0), ("p2", True, 0.5)]
    assert "r" not in groups  # its only negative is its positive: no group
    assert aggregate_triples(triples, 2)["q"] == [("n49", False, 49.0), ("p", True, 9.0)]
    with pytest.raises(ValueError):
        aggregate_triples(triples, 1)


def test_sets_from_the_real_formats(files):
    sets = msmarco_reranking(k=3)
    train, dev, test = sets["train"], sets["dev"], sets["test"]
    assert (train.name, train.split, dev.split, test.split) == ("msmarco-passage", "train", "dev", "test")
    assert set(train.candidates) == {"10", "11"}  # query 12 forms no group
    assert train.candidates["10"] == ["100", "104", "102"]  # top 3 by T1 score, the positive kept
    assert train.labels["10"] == [1, 0, 0] and train.candidates["11"] == ["111", "110"]
    assert train.labels["11"] == [0, 1] and train.queries["11"].text == "define extreme"
    assert train.meta["queries_in_triples"] == 2 and train.meta["registry_split"] == "train"
    # dev: the real dev-small topics and qrels, candidates in file order, binary labels
    assert dev.candidates == DEV and dev.labels["300674"] == [1, 0, 0] and dev.labels["125705"] == [0, 0]
    assert dev.meta["file_order"] and dev.meta["queries_without_relevant_candidate"] == 1
    # test: DL19's graded labels; only the judged DL19 queries that have lists
    assert test.candidates == DL19 and test.labels["1037798"] == [3, 1, 0] and test.labels["19335"] == [0, 0]
    assert test.qrels() == {"1037798": {"3641634": 3, "3167284": 1}}
    # the corpus of each split: exactly its candidates' passages, read from the collection
    assert set(train.corpus) == {"100", "104", "102", "110", "111"}
    assert train.corpus["104"].text == "passage 104" and "999" not in dev.corpus


def test_negatives_judged_relevant_are_relabelled(files):
    train = msmarco_reranking(["train"], k=6)["train"]
    assert train.candidates["10"] == ["100", "104", "102", "103", "101", "105"]
    assert train.labels["10"] == [1, 0, 0, 1, 0, 0] and train.meta["negatives_judged_relevant"] == 1


def test_limits_sample_queries_with_a_relevant_candidate(files):
    sets = load_reranking_sets("msmarco-passage", ["train", "dev"], k=3, limits={"train": 1, "dev": 1})
    assert len(sets["train"]) == 1 and list(sets["dev"].candidates) == ["300674"]
    config = RerankingDataConfig(dataset="msmarco-passage", candidates=3, dev_queries=None, test_queries=None)
    assert {s: len(r) for s, r in config.load(progress=False).items()} == {"train": 2, "dev": 2, "test": 2}
    with pytest.raises(TaserError, match="has splits"):
        msmarco_reranking(["dl19"])


def test_released_teacher_scores_align_with_the_lists(files):
    train = msmarco_reranking(["train"], k=3)["train"]
    scores, path = released_teacher_scores("msmarco-passage-t1", train)
    assert path.name == registry.T1_SCORES
    np.testing.assert_array_equal(scores["10"], np.float32([9.0, 7.0, 5.0]))
    np.testing.assert_array_equal(scores["11"], np.float32([6.0, 4.0]))
    dev = msmarco_reranking(["dev"])["dev"]
    with pytest.raises(TaserError, match="no msmarco-passage-t1 score"):
        released_teacher_scores("msmarco-passage-t1", dev)
    with pytest.raises(TaserError, match="unknown released teacher"):
        released_teacher_scores("t2", train)


def test_a_candidate_missing_from_the_collection_is_named(files):
    folder = files / "msmarco-passage"
    write_tar_gz(folder / "collection.tar.gz", "collection.tsv", "100\tonly one passage\n")
    with pytest.raises(TaserError, match="not in the collection"):
        msmarco_reranking(["train"], k=3)


def test_load_teacher_scores_reads_the_released_file(files):
    from taser_lib.training.distill import TeacherConfig, load_teacher_scores
    train = msmarco_reranking(["train"], k=3)["train"]
    teacher = load_teacher_scores(TeacherConfig(model=None, released="msmarco-passage-t1"), train)
    assert teacher.index["model_sha256"] == "released:msmarco-passage-t1:md5:a2575af08a19b47c2041e67c9efcd917"
    np.testing.assert_array_equal(teacher.scores["10"], np.float32([9.0, 7.0, 5.0]))
