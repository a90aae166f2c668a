"""`taser index | search | evaluate` on small prepared folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from taser_book.cli import main
from taser_lib.data.formats.beir import write_prepared
from taser_lib.data.types import Dataset, Document, Query
from taser_lib.retrieval.runs import read_run, write_run

TEXTS = ["Paris is the capital and largest city of France.", "The Nile is a major river in Africa.",
         "Mount Everest is the highest mountain on Earth.", "Python is a programming language.",
         "The Amazon rainforest covers much of Brazil.", "Tokyo is the capital of Japan."]
QUESTIONS = [("q1", "What is the capital of France?", "Paris", "d0"), ("q2", "Which river is in Africa?", "Nile", "d1"),
             ("q3", "What is the highest mountain?", "Everest", "d2"), ("q4", "capital of Japan", "Tokyo", "d5")]


@pytest.fixture
def qa_folder(tmp_path):
    corpus = {f"d{i}": Document(f"d{i}", t, title=f"Article {i}") for i, t in enumerate(TEXTS)}
    queries = {q: Query(q, text, (answer,)) for q, text, answer, _ in QUESTIONS}
    qrels = {q: {doc: 1} for q, _, _, doc in QUESTIONS}
    return write_prepared(Dataset("toy-qa", "test", corpus, queries, qrels), tmp_path / "qa")


def test_bm25_index_search_evaluate(qa_folder, tmp_path, capsys):
    assert main(["index", str(qa_folder), "--retriever", "bm25", "--out", str(tmp_path / "idx")]) == 0
    run_path = tmp_path / "bm25.trec"
    assert main(["search", str(qa_folder), "--retriever", "bm25", "--bm25-index", str(tmp_path / "idx"),
                 "--out", str(run_path), "-k", "3"]) == 0
    run = read_run(run_path)
    assert {q: next(iter(scores)) for q, scores in run.items()} == {q: d for q, _, _, d in QUESTIONS}
    capsys.readouterr()
    assert main(["evaluate", str(run_path), str(qa_folder), "--ks", "1", "3"]) == 0
    printed = capsys.readouterr().out
    assert "R@1" in printed and "nDCG@10" in printed
    result = json.loads((tmp_path / "bm25.trec.eval.json").read_text())
    # The top passage of every query holds its answer and is its one judged passage.
    assert result["answer_recall"] == {"R@1": 1.0, "R@3": 1.0} and result["queries"] == 4
    assert result["ir_measures"]["nDCG@10"] == 1.0 and result["ir_measures"]["R@100"] == 1.0
    assert "versions" in result and "answer_matching_seconds" in result


def test_user_errors_exit_2(qa_folder, tmp_path, capsys):
    assert main(["search", str(qa_folder), "--retriever", "hybrid", "--out", str(tmp_path / "r")]) == 2
    assert "--alpha" in capsys.readouterr().err
    assert main(["search", str(tmp_path / "nowhere"), "--retriever", "bm25", "--out", str(tmp_path / "r")]) == 2
    assert main(["search", "no-such-dataset:test", "--retriever", "bm25", "--out", str(tmp_path / "r")]) == 2
    other = tmp_path / "other.trec"
    other.write_text("q77 Q0 d0 1 1.0 x\n")
    assert main(["evaluate", str(other), str(qa_folder)]) == 2
    assert "another dataset" in capsys.readouterr().err
    assert main(["search", str(qa_folder), "--retriever", "bm25", "--bm25-index", str(tmp_path),
                 "--out", str(tmp_path / "r")]) == 2


@pytest.mark.slow
def test_dense_and_hybrid_with_default_model(qa_folder, tmp_path, capsys):
    assert main(["index", str(qa_folder), "--retriever", "dense", "--out", str(tmp_path / "dense"),
                 "--shard-size", "4"]) == 0
    assert len(list((tmp_path / "dense" / "embeddings").glob("shard_*.npy"))) == 2
    for retriever, extra in (("dense", []), ("hybrid", ["--alpha", "1.0"])):
        run_path = tmp_path / f"{retriever}.trec"
        assert main(["search", str(qa_folder), "--retriever", retriever, "--dense-index", str(tmp_path / "dense"),
                     "--out", str(run_path), "-k", "3", *extra]) == 0
        # The packaged MiniLM finds each of these one-topic passages first.
        run = read_run(run_path)
        assert {q: max(s, key=s.get) for q, s in run.items()} == {q: d for q, _, _, d in QUESTIONS}
    assert main(["search", str(qa_folder), "--retriever", "dense", "--dense-index", str(tmp_path / "dense"),
                 "--model", str(tmp_path), "--out", str(tmp_path / "x.trec")]) == 2
    assert "encoded with --model 'default'" in capsys.readouterr().err


@pytest.mark.slow
def test_dense_search_cuts_queries_as_the_pages_do(tmp_path):
    """One path: `taser search --retriever dense` gives the run the book's pages make (`first_stage_runs` at the
    query length that cuts none of the queries of a non-QA set; a 32-token cap for questions)."""
    from taser_book.analyses.baselines import first_stage_runs, query_length
    from taser_lib.models import load_encoder

    long_query = " ".join(["which passage describes the largest city of France and its many museums"] * 12)
    corpus = {f"d{i}": Document(f"d{i}", t, title=f"Article {i}") for i, t in enumerate(TEXTS)}
    queries = {"q1": Query("q1", long_query), "q2": Query("q2", "a programming language")}
    qrels = {"q1": {"d0": 1}, "q2": {"d3": 1}}
    dataset = Dataset("toy-ir", "test", corpus, queries, qrels)
    folder = write_prepared(dataset, tmp_path / "ir")
    run_path = tmp_path / "dense.trec"
    assert main(["search", str(folder), "--retriever", "dense", "--precision", "fp32", "--out", str(run_path),
                 "-k", "6"]) == 0
    encoder = load_encoder("default", precision="fp32", max_passage_length=192)
    length = query_length(dataset, encoder, qa_cap=32)
    assert length > 64                                            # longer than any fixed cut the CLI used to apply
    page = first_stage_runs(dataset, encoder, k=6, query_length=length)["dense"]
    cli = read_run(run_path)
    assert cli.keys() == page.keys()
    for qid in page:
        assert list(cli[qid]) == list(page[qid])
        assert cli[qid] == pytest.approx(page[qid], abs=1e-4)    # the run file keeps scores to a few decimals
    cut = first_stage_runs(dataset, encoder, k=6, query_length=32)["dense"]
    assert cut["q1"] != pytest.approx(page["q1"], abs=1e-4)     # a CLI that cut at 32 tokens would fail above


def _bm25_run(qa_folder, tmp_path) -> Path:
    run_path = tmp_path / "bm25.trec"
    assert main(["search", str(qa_folder), "--retriever", "bm25", "--out", str(run_path), "-k", "3"]) == 0
    return run_path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("taser: error: ") and "Traceback" not in err, err
    return err.strip()


def test_evaluate_a_missing_or_empty_run_is_an_error(qa_folder, tmp_path, capsys):
    missing = tmp_path / "nothing.trec"
    assert main(["evaluate", str(missing), str(qa_folder)]) == 2
    assert _one_error_line(capsys) == f"taser: error: {missing}: no such run file"
    empty = tmp_path / "empty.trec"
    empty.write_text("\n")
    assert main(["evaluate", str(empty), str(qa_folder)]) == 2
    assert _one_error_line(capsys) == (f"taser: error: {empty}: the run is empty (no 'qid Q0 docid rank score tag' "
                                       f"line)")
    assert not (tmp_path / "empty.trec.eval.json").exists()


def test_evaluate_an_unknown_document_on_a_qa_set_names_run_line_and_id(qa_folder, tmp_path, capsys):
    lines = _bm25_run(qa_folder, tmp_path).read_text().splitlines()
    lines[4] = lines[4].replace(lines[4].split()[2], "d99")
    bad = tmp_path / "bad.trec"
    bad.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["evaluate", str(bad), str(qa_folder)]) == 2
    assert _one_error_line(capsys).startswith(f"taser: error: {bad}:5: field 'docid' document 'd99' is not in the "
                                              f"corpus of {qa_folder}")


def test_evaluate_a_partial_run_warns_and_scores_the_missing_queries_0(qa_folder, tmp_path, capsys):
    full = read_run(_bm25_run(qa_folder, tmp_path))
    half = tmp_path / "half.trec"
    write_run(half, {q: full[q] for q in ("q1", "q2")})
    capsys.readouterr()
    assert main(["evaluate", str(half), str(qa_folder), "--ks", "1", "3"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("taser:")]
    assert warnings == [f"taser: warning: {half} has no results for 2 of the 4 judged queries of {qa_folder}: they "
                        f"score 0"]
    result = json.loads((tmp_path / "half.trec.eval.json").read_text())
    # the full run finds every answer at rank 1 (test_bm25_index_search_evaluate): half of it finds half
    assert result["answer_recall"] == {"R@1": 0.5, "R@3": 0.5} and result["judged_queries_without_results"] == 2
    assert result["ir_measures"]["nDCG@10"] == 0.5 and result["queries"] == 4


def test_evaluate_a_partial_run_on_a_qrels_set_counts_judged_queries(tmp_path, capsys):
    corpus = {f"d{i}": Document(f"d{i}", t) for i, t in enumerate(TEXTS)}
    queries = {q: Query(q, text) for q, text, _, _ in QUESTIONS}  # no answers: a qrels set
    qrels = {q: {doc: 1} for q, _, _, doc in QUESTIONS[:3]}  # q4 is not judged
    folder = write_prepared(Dataset("toy-ir", "test", corpus, queries, qrels), tmp_path / "ir")
    run = tmp_path / "r.trec"
    write_run(run, {"q1": {"d0": 1.0}, "q4": {"d5": 1.0}})
    assert main(["evaluate", str(run), str(folder)]) == 0
    assert "no results for 2 of the 3 judged queries" in capsys.readouterr().err
    result = json.loads((tmp_path / "r.trec.eval.json").read_text())
    assert result["ir_measures"]["nDCG@10"] == pytest.approx(1 / 3)  # q1 found, q2 and q3 count 0


def test_search_writes_a_run_for_a_folder_without_qrels_at_pyserinis_depth(tmp_path, capsys):
    """A folder of corpus.jsonl and queries.jsonl alone (Pyserini's --topics use): the run, and no qrels needed; the
    default depth is 1,000, as Pyserini writes for trec_eval."""
    folder = tmp_path / "mine"
    folder.mkdir()
    docs = [{"_id": f"d{i}", "title": "", "text": f"passage {i} about topic {i % 3}"} for i in range(1200)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "topic 1 passage"}\n')
    run_path = tmp_path / "mine.trec"
    assert main(["search", str(folder), "--retriever", "bm25", "--out", str(run_path)]) == 0
    assert "without qrels: writing the run only" in capsys.readouterr().err
    lines = run_path.read_text().splitlines()
    assert len(lines) == 1000 and {ln.split()[0] for ln in lines} == {"q1"}


def test_evaluate_takes_a_beir_qrels_file_as_it_takes_the_folder(tmp_path, capsys):
    """A BEIR folder's own qrels/test.tsv, given as the qrels file in either order, scores as the folder does; a
    three-column file without BEIR's header is a one-line error naming the file, the line and the header."""
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "title": "", "text": d}) + "\n"
                                                 for d in ("d1", "d2", "d3")))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": q}) + "\n" for q in ("q1", "q2")))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td3\t2\n")
    run_path = tmp_path / "run.trec"
    run_path.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\nq2 Q0 d3 1 1.0 x\n")
    scores = []
    tsv = str(folder / "qrels" / "test.tsv")
    for args in ([tsv, str(run_path)], [str(run_path), tsv], [str(run_path), str(folder)]):
        assert main(["evaluate", *args, "--measures", "nDCG@10", "RR@10"]) == 0, args
        capsys.readouterr()
        scores.append(json.loads((tmp_path / "run.trec.eval.json").read_text())["ir_measures"])
    assert scores[0] == scores[1] == scores[2] and scores[0]["RR@10"] == pytest.approx(0.75)
    headless = tmp_path / "three.tsv"
    headless.write_text("q1\td2\t1\n")
    assert main(["evaluate", str(headless), str(run_path)]) == 2
    assert "three.tsv:1: expected the header line 'query-id<TAB>corpus-id<TAB>score'" in _one_error_line(capsys)


def test_evaluate_takes_a_trec_qrels_file_in_either_order(qa_folder, tmp_path, capsys):
    """`taser evaluate QRELS RUN` as trec_eval and ir_measures take it, or RUN QRELS; a plain TREC qrels file; two
    files neither of which is a run is a one-line error that says the order."""
    import ir_measures

    run_path = tmp_path / "run.trec"
    run_path.write_text("q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 1.0 x\nq2 Q0 d3 1 1.0 x\nq9 Q0 d1 1 1.0 x\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d2 1\nq2 0 d3 2\n")
    scores = []
    for args in ([str(qrels), str(run_path)], [str(run_path), str(qrels)]):
        assert main(["evaluate", *args, "--measures", "nDCG@10", "RR@10"]) == 0
        capsys.readouterr()
        scores.append(json.loads((tmp_path / "run.trec.eval.json").read_text())["ir_measures"])
    want = ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG@10"), ir_measures.parse_measure("RR@10")],
                                      ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run_path)))
    assert scores[0] == scores[1]
    assert scores[0]["nDCG@10"] == pytest.approx(want[ir_measures.parse_measure("nDCG@10")])
    assert scores[0]["RR@10"] == pytest.approx(want[ir_measures.parse_measure("RR@10")])
    assert main(["evaluate", str(qrels), str(qrels)]) == 2
    assert "taser evaluate takes QRELS RUN" in _one_error_line(capsys)
