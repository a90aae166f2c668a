"""One data pipeline: every dataset spec (registered NAME[:SPLIT], prepared folder, BEIR folder or zip) through
`resolve_dataset`, `taser search` / `taser evaluate` on a BEIR folder made from the real SciFact, the error for a
folder that is neither, `ensure_prepared` == `taser data prepare`, and the notebooks' loader in the library."""

from __future__ import annotations

import json
import zipfile

import ir_measures
import pytest

from taser_book.cli import main
from taser_lib.datasets import registry
from taser_lib.data.formats.beir import write_corpus_jsonl, write_prepared, write_qrels_tsv, write_queries_jsonl
from taser_lib.data.resolve import parse_dataset_spec, resolve_dataset
from taser_lib.datasets.slicing import slice_dataset
from taser_lib.data.training_examples import qrels_training_examples
from taser_lib.data.types import Dataset
from taser_lib.errors import TaserError
from taser_lib.meta import run_metadata
from taser_lib.datasets.ready import ensure_prepared, load_evaluation_set
from taser_lib.retrieval.runs import read_run


@pytest.fixture(autouse=True)
def _no_data_settings(monkeypatch):
    # Data directory and mirror are passed explicitly (or set here); a developer's settings must not leak in.
    monkeypatch.delenv("TASER_DATA_DIR", raising=False)
    monkeypatch.setenv("TASER_DATA_MIRROR", "")  # set but empty: no mirror


@pytest.fixture(scope="module")
def scifact_slices(shared_data, tmp_path_factory):
    """SciFact test and train (real data, the registry's loader), 15 queries each over one 300-document corpus."""
    data_dir = tmp_path_factory.mktemp("data")
    test = slice_dataset(registry.load_dataset("scifact", "test", data_dir=data_dir, mirror=shared_data),
                         n_queries=15, n_docs=300, seed=1)
    full_train = registry.load_dataset("scifact", "train", data_dir=data_dir, mirror=shared_data)
    train_qids = sorted(q for q, judged in full_train.qrels.items() if set(judged) <= set(test.corpus))
    train = Dataset("scifact", "train", test.corpus, {q: full_train.queries[q] for q in train_qids},
                    {q: full_train.qrels[q] for q in train_qids})
    return test, train


def _write_beir(folder, test: Dataset, train: Dataset) -> None:
    """A standard BEIR folder, as BEIR's own zips hold it: all queries in one file, qrels per split."""
    write_corpus_jsonl(test.corpus, folder / "corpus.jsonl")
    write_queries_jsonl({**test.queries, **train.queries}, folder / "queries.jsonl")
    write_qrels_tsv(test.qrels, folder / "qrels" / "test.tsv")
    write_qrels_tsv(train.qrels, folder / "qrels" / "train.tsv")


@pytest.fixture(scope="module")
def beir_folder(scifact_slices, tmp_path_factory):
    folder = tmp_path_factory.mktemp("beir") / "scifact-small"
    _write_beir(folder, *scifact_slices)
    return folder


@pytest.fixture(scope="module")
def beir_zip(beir_folder):
    path = beir_folder.parent / "scifact-small.zip"
    with zipfile.ZipFile(path, "w") as archive:  # BEIR's zips: members under "<name>/"
        for file in sorted(beir_folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"scifact-small/{file.relative_to(beir_folder)}")
    return path


def _same(a: Dataset, b: Dataset) -> bool:
    return (a.corpus, a.queries, a.qrels, a.split) == (b.corpus, b.queries, b.qrels, b.split)


def test_every_spec_kind_resolves_to_the_same_dataset(scifact_slices, beir_folder, beir_zip, tmp_path):
    test, train = scifact_slices
    assert parse_dataset_spec(beir_folder).kind == "beir" and parse_dataset_spec(beir_zip).kind == "beir-zip"
    assert _same(resolve_dataset(beir_folder), test)  # BEIR's default split is test
    assert _same(resolve_dataset(beir_zip), test)
    assert _same(resolve_dataset(f"{beir_folder}:train"), train)
    assert _same(resolve_dataset(beir_zip, "train"), train)
    prepared = write_prepared(test, tmp_path / "prepared" / "scifact" / "test")
    assert _same(resolve_dataset(prepared), test)
    assert _same(resolve_dataset(tmp_path / "prepared" / "scifact"), test)  # a folder of split folders
    assert _same(resolve_dataset(f"{tmp_path / 'prepared' / 'scifact'}:test"), test)
    with pytest.raises(TaserError, match="holds the 'test' split, not 'train'"):
        resolve_dataset(prepared, "train")
    with pytest.raises(TaserError, match="names split 'test' but split 'train'"):
        resolve_dataset(f"{beir_folder}:test", "train")


def test_registered_names_resolve_through_the_registry(shared_data, tmp_path):
    kw = dict(data_dir=tmp_path, mirror=shared_data)
    by_name = resolve_dataset("cranfield:test", **kw)
    assert _same(by_name, registry.load_dataset("cranfield", "test", **kw)) and len(by_name.corpus) == 1400
    with pytest.raises(TaserError, match="unknown dataset"):
        resolve_dataset("no-such-set", **kw)
    with pytest.raises(TaserError, match="does not exist"):
        resolve_dataset(str(tmp_path / "nowhere"), **kw)


def test_errors_say_what_a_folder_must_hold(beir_folder, tmp_path, capsys):
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "corpus.jsonl").write_text("")
    expected = (f"{odd} is neither a prepared folder (meta.json, corpus.jsonl, queries.jsonl, qrels.tsv; or a folder "
                f"of such split folders) nor a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv; no meta.json)"
                f"; it holds: corpus.jsonl")
    with pytest.raises(TaserError) as err:
        resolve_dataset(odd)
    assert str(err.value) == expected
    assert main(["search", str(odd), "--retriever", "bm25", "--out", str(tmp_path / "r.trec")]) == 2
    assert expected in capsys.readouterr().err
    with pytest.raises(TaserError, match=r"without qrels/dev.tsv \(its splits: test, train\)"):
        resolve_dataset(f"{beir_folder}:dev")


def test_search_and_evaluate_on_a_beir_folder_and_zip(scifact_slices, beir_folder, beir_zip, tmp_path, capsys):
    test, _ = scifact_slices
    runs = {}
    for kind, spec in (("folder", beir_folder), ("zip", beir_zip)):
        run_path = tmp_path / f"{kind}.trec"
        assert main(["search", str(spec), "--retriever", "bm25", "--out", str(run_path), "-k", "50"]) == 0
        assert main(["evaluate", str(run_path), str(spec)]) == 0
        runs[kind] = read_run(run_path)
        scores = json.loads((tmp_path / f"{kind}.trec.eval.json").read_text())
        assert scores["queries"] == len(test.queries) and "answer_recall" not in scores  # qrels only: no answers
        # The CLI's scores are ir-measures' own on the run file and the slice's qrels.
        expected = ir_measures.calc_aggregate([ir_measures.parse_measure("nDCG@10")], test.qrels, runs[kind])
        assert scores["ir_measures"]["nDCG@10"] == pytest.approx(next(iter(expected.values())))
    assert runs["folder"] == runs["zip"] and set(runs["folder"]) == set(test.queries)
    # SciFact claims share words with their cited abstracts: BM25 ranks far above chance (about 0.03 on 300 docs).
    assert scores["ir_measures"]["nDCG@10"] > 0.4
    assert "qrels (ir-measures)" in capsys.readouterr().out


def test_index_on_a_beir_zip_then_search_the_folder(beir_folder, beir_zip, tmp_path):
    # One corpus, two specs: the index built from the zip serves searches on the folder.
    assert main(["index", str(beir_zip), "--retriever", "bm25", "--out", str(tmp_path / "idx")]) == 0
    assert main(["search", str(beir_folder), "--retriever", "bm25", "--bm25-index", str(tmp_path / "idx"),
                 "--out", str(tmp_path / "r.trec"), "-k", "5"]) == 0
    assert main(["search", str(beir_folder), "--retriever", "bm25", "--out", str(tmp_path / "s.trec"), "-k", "5"]) == 0
    assert read_run(tmp_path / "r.trec") == read_run(tmp_path / "s.trec")


def test_qrels_training_examples(scifact_slices, beir_zip):
    _, train = scifact_slices
    examples = qrels_training_examples(resolve_dataset(beir_zip, "train"))
    assert [e.query.id for e in examples] == [q for q, judged in train.qrels.items() if any(judged.values())]
    for e in examples:
        assert [d.id for d in e.positives] == [d for d, g in train.qrels[e.query.id].items() if g > 0]
        assert not e.hard_negatives and not e.negatives


# ---- ensure_prepared == taser data prepare ------------------------------------------------------------------------

VOLATILE = set(run_metadata()) | {"write_seconds"}  # when and where it was written, not what


def _contents(folder) -> dict[str, object]:
    out = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = str(path.relative_to(folder))
        if key == "meta.json":
            out[key] = {k: v for k, v in json.loads(path.read_text()).items() if k not in VOLATILE}
        else:
            out[key] = path.read_bytes()
    return out


def test_ensure_prepared_writes_what_the_cli_writes(shared_data, tmp_path, capsys):
    notebook = ensure_prepared("squad-open", data_dir=tmp_path / "nb", mirror=shared_data)
    assert main(["data", "prepare", "squad-open", "--data-dir", str(tmp_path / "cli"), "--mirror",
                 str(shared_data)]) == 0
    cli = tmp_path / "cli" / "prepared" / "squad-open"
    ours, theirs = _contents(notebook), _contents(cli)
    assert set(ours) == set(theirs) and len(ours) > 10
    assert [k for k in ours if ours[k] != theirs[k]] == []
    assert ours["meta.json"]["hard_negatives"]["method"] == "bm25"  # the mined negatives are in both
    train = json.loads((notebook / "dpr" / "train.json").read_text())
    assert sum(bool(r["hard_negative_ctxs"]) for r in train) > 0.9 * len(train)
    stamp = (notebook / "meta.json").stat().st_mtime_ns
    assert ensure_prepared("squad-open", data_dir=tmp_path / "nb", mirror=shared_data) == notebook
    assert (notebook / "meta.json").stat().st_mtime_ns == stamp  # an existing copy is never rebuilt


# ---- the notebooks' loader -----------------------------------------------------------------------------------------

def _former_notebook_load(name, split, n_queries, n_docs, seed, qa_corpus, data_dir, mirror):
    """baselines.ipynb's `load` before it moved into the library (with the prepare step it relied on)."""
    if registry.get(name).derived_from:
        ensure_prepared(name, data_dir=data_dir, mirror=mirror)
    dataset = registry.load_dataset(name, split, data_dir=data_dir, mirror=mirror)
    if not dataset.corpus and qa_corpus:
        dataset.corpus = registry.load_dataset(qa_corpus, data_dir=data_dir, mirror=mirror).corpus
    return slice_dataset(dataset, n_queries, n_docs, seed)


@pytest.mark.parametrize("name, split, qa_corpus", [("squad-open", "dev", None), ("scifact", "test", None),
                                                    ("cranfield", "test", None), ("nq-open", "test", "cisi")])
def test_load_evaluation_set_is_the_notebooks_former_load(shared_data, tmp_path_factory, name, split, qa_corpus):
    kw = dict(data_dir=tmp_path_factory.getbasetemp() / "loader-data", mirror=shared_data)
    ours = load_evaluation_set(name, split, n_queries=20, n_docs=300, seed=13, qa_corpus=qa_corpus, **kw)
    former = _former_notebook_load(name, split, 20, 300, 13, qa_corpus, **kw)
    assert _same(ours, former) and ours.candidates == former.candidates
    assert len(ours.queries) == 20 and len(ours.corpus) == 300
    other_seed = load_evaluation_set(name, split, n_queries=20, n_docs=300, seed=14, qa_corpus=qa_corpus, **kw)
    assert list(other_seed.queries) != list(ours.queries)
