"""Prepared folders keep their promise: meta.json records each file's sha256 and record count, reading checks the
counts, `taser data verify` the hashes, and a damaged folder is a one-line error saying to prepare it again."""

from __future__ import annotations

import json
import shutil

import pytest

from taser_book.cli import main
from taser_lib.datasets import registry
from taser_lib.data.formats.beir import read_prepared, write_prepared
from taser_lib.data.prepared import sha256_file, verify_folder
from taser_lib.data.resolve import resolve_dataset
from taser_lib.data.squad_open import SquadOpen, load_squad_open, read_training_json, write_squad_open
from taser_lib.data.types import Dataset, Document, Query
from taser_lib.errors import FormatError, TaserError

AGAIN = "run `taser data prepare"


def toy_dataset(name: str = "toy", split: str = "test") -> Dataset:
    corpus = {f"d{i}": Document(f"d{i}", f"text number {i}", f"title {i}") for i in range(5)}
    queries = {f"q{i}": Query(f"q{i}", f"question {i}", (f"answer {i}",)) for i in range(3)}
    qrels = {"q0": {"d0": 1, "d1": 0}, "q1": {"d2": 2}, "q2": {"d4": 1}}
    return Dataset(name, split, corpus, queries, qrels, candidates={"q0": ["d1", "d0"], "q1": ["d2"]})


@pytest.fixture
def prepared(tmp_path):
    """A split folder where `taser data prepare toy` would write it: <data dir>/prepared/toy/test."""
    return write_prepared(toy_dataset(), tmp_path / "data" / "prepared" / "toy" / "test", meta={"source": "toy"})


def drop_line(path, index: int) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    del lines[index]
    path.write_text("".join(lines), encoding="utf-8")


def test_meta_records_each_files_sha256_and_records(prepared):
    meta = json.loads((prepared / "meta.json").read_text())
    assert set(meta["files"]) == {"corpus.jsonl", "queries.jsonl", "qrels.tsv", "candidates.tsv"}
    for name, entry in meta["files"].items():
        assert entry["sha256"] == sha256_file(prepared / name)
    # records counted independently of the writer: data lines (less the tsv header)
    lines = {name: len((prepared / name).read_text().splitlines()) for name in meta["files"]}
    assert {n: e["records"] for n, e in meta["files"].items()} == {
        "corpus.jsonl": lines["corpus.jsonl"], "queries.jsonl": lines["queries.jsonl"],
        "qrels.tsv": lines["qrels.tsv"] - 1, "candidates.tsv": lines["candidates.tsv"] - 1}
    assert read_prepared(prepared, verify=True) == toy_dataset()
    result = verify_folder(prepared)
    assert result.ok and len(result.checked) == 4 and not result.unhashed


@pytest.mark.parametrize("damage, file, says", [
    (lambda f: (f / "meta.json").write_text('{"name": "toy", '), "meta.json", "invalid JSON"),
    (lambda f: (f / "meta.json").write_bytes(b'{"name": "\xff"}'), "meta.json", "not UTF-8"),
    (lambda f: (f / "meta.json").write_text("[1, 2]"), "meta.json", "expected a JSON object"),
    (lambda f: (f / "meta.json").write_text(json.dumps({"split": "test"})), "meta.json", "field 'name' missing"),
    (lambda f: (f / "qrels.tsv").unlink(), "qrels.tsv", "missing"),
    (lambda f: (f / "candidates.tsv").unlink(), "candidates.tsv", "missing"),
    (lambda f: drop_line(f / "corpus.jsonl", 2), "corpus.jsonl", "holds 4 records but meta.json says 5"),
    (lambda f: drop_line(f / "qrels.tsv", 1), "qrels.tsv", "holds 3 records but meta.json says 4"),
    (lambda f: (f / "queries.jsonl").write_text((f / "queries.jsonl").read_text()[:-20]), "queries.jsonl:3",
     "invalid JSON"),
])
def test_a_damaged_folder_is_one_line_naming_the_file_and_the_remedy(prepared, damage, file, says, capsys):
    damage(prepared)
    with pytest.raises(FormatError) as err:
        read_prepared(prepared)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(prepared / file))
    assert says in message and message.endswith("run `taser data prepare toy` again")
    # the same error through every way in: resolve (the folder, its dataset folder), the registry, the CLI
    with pytest.raises(FormatError, match="taser data prepare toy"):
        resolve_dataset(prepared)
    with pytest.raises(TaserError, match="taser data prepare toy"):
        resolve_dataset(f"{prepared.parent}:test")
    out = prepared.parent.parent.parent.parent / "r.trec"
    assert main(["search", str(prepared), "--retriever", "bm25", "--out", str(out)]) == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("taser: error: ") and stderr.count("\n") == 1 and AGAIN in stderr
    out.write_text("q0 Q0 d0 1 1.0 x\n")
    assert main(["evaluate", str(out), str(prepared)]) == 2
    assert capsys.readouterr().err == stderr


def test_a_changed_byte_is_found_by_verify_not_by_reading(prepared, capsys):
    corpus = prepared / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("text number 3", "text number 8"))
    assert len(read_prepared(prepared).corpus) == 5  # counts agree: reading alone cannot tell
    with pytest.raises(FormatError, match=r"corpus.jsonl: sha256 \w+ differs from meta.json's"):
        read_prepared(prepared, verify=True)
    result = verify_folder(prepared)
    assert not result.ok and len(result.problems) == 1 and "corpus.jsonl" in result.problems[0]
    assert main(["data", "verify", str(prepared)]) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("DIFFERS") and "corpus.jsonl" in captured.out
    assert captured.err.count("\n") == 1 and "1 problem(s)" in captured.err and AGAIN + " toy` again" in captured.err
    assert main(["data", "verify", str(prepared.parent)]) == 2  # the dataset folder: every split in it


def test_verify_by_name_and_every_problem_listed(prepared, capsys):
    data_dir = prepared.parent.parent.parent
    write_prepared(toy_dataset(split="dev"), prepared.parent / "dev", meta={"source": "toy"})
    # any registered name will do: verify reads <data dir>/prepared/<name>
    shutil.copytree(prepared.parent, data_dir / "prepared" / "cranfield")
    assert main(["data", "verify", "cranfield", "--data-dir", str(data_dir)]) == 0
    assert capsys.readouterr().out.startswith("OK")
    root = data_dir / "prepared" / "cranfield"
    drop_line(root / "dev" / "corpus.jsonl", 0)
    (root / "test" / "qrels.tsv").unlink()
    assert main(["data", "verify", "cranfield", "--data-dir", str(data_dir)]) == 2
    out, err = capsys.readouterr()
    assert out.count("DIFFERS") == 2 and "holds 4 records but meta.json says 5" in out
    assert "dev/corpus.jsonl: sha256" in out  # one line per file, every difference in it
    assert "test/qrels.tsv: missing" in out and "run `taser data prepare cranfield` again" in err
    assert main(["data", "verify", "wikiqa", "--data-dir", str(data_dir)]) == 2
    assert "wikiqa is not prepared" in capsys.readouterr().err


def test_folders_prepared_before_hashes_still_load(prepared, capsys):
    meta = json.loads((prepared / "meta.json").read_text())
    del meta["files"]  # what write_prepared wrote before: name, split, counts
    (prepared / "meta.json").write_text(json.dumps(meta))
    assert read_prepared(prepared) == toy_dataset()
    assert main(["data", "verify", str(prepared)]) == 0
    out = capsys.readouterr().out
    assert "carries no hashes" in out and out.splitlines()[-1].startswith("OK")
    drop_line(prepared / "corpus.jsonl", 0)  # their counts are still checked
    with pytest.raises(FormatError, match="corpus.jsonl: holds 4 records but meta.json says 5"):
        read_prepared(prepared)
    assert main(["data", "verify", str(prepared)]) == 2


def test_registry_load_dataset_checks_the_prepared_copy(shared_data, tmp_path):
    kw = dict(data_dir=tmp_path, mirror=shared_data)
    registry.prepare("cranfield", **kw)
    folder = registry.prepared_dir("cranfield", tmp_path) / "test"
    assert verify_folder(folder).ok
    assert len(registry.load_dataset("cranfield", verify=True, **kw).corpus) == 1400
    drop_line(folder / "queries.jsonl", 7)
    with pytest.raises(FormatError, match=r"queries.jsonl: holds 224 records .* run `taser data prepare cranfield`"):
        registry.load_dataset("cranfield", **kw)
    (folder / "meta.json").write_text(json.dumps({"split": "test"}))
    with pytest.raises(FormatError, match=r"meta.json: field 'name' missing.*taser data prepare cranfield"):
        registry.load_dataset("cranfield", **kw)


def tiny_squad_open() -> SquadOpen:
    corpus = {f"p{i}": Document(f"p{i}", f"passage {i} about topic {i}", f"Article {i}") for i in range(6)}
    splits = {s: {f"{s}{i}": Query(f"{s}{i}", f"{s} question {i}", (f"topic {i}",)) for i in range(2)}
              for s in ("train", "dev", "test")}
    positives = {qid: [f"p{int(qid[-1]) + 2 * k}"] for k, s in enumerate(splits) for qid in splits[s]}
    return SquadOpen(corpus, splits, positives, {"counts": {"passages": 6}, "seed": 0})


def test_squad_open_records_its_training_json(tmp_path):
    root = write_squad_open(tiny_squad_open(), tmp_path / "prepared" / "squad-open")
    files = json.loads((root / "meta.json").read_text())["files"]
    assert set(files) == {"dpr/train.json", "dpr/dev.json", "dpr/test.json", "split.json"}
    assert files["dpr/train.json"]["records"] == 2 and "records" not in files["split.json"]
    assert [e.query.id for e in read_training_json(root, "train")] == ["train0", "train1"]
    assert load_squad_open(root).splits == tiny_squad_open().splits
    assert verify_folder(root).ok and len(verify_folder(root).checked) == 4 + 3 * 3
    # an element cut from the training json: its count differs
    train = json.loads((root / "dpr" / "train.json").read_text())
    (root / "dpr" / "train.json").write_text(json.dumps(train[:1]))
    with pytest.raises(FormatError, match=r"dpr/train.json: holds 1 records but meta.json says 2.*"
                                          r"taser data prepare squad-open` again"):
        read_training_json(root, "train")
    assert any("dpr/train.json" in p for p in verify_folder(root).problems)
    (root / "split.json").write_text("{")
    with pytest.raises(FormatError, match=r"split.json:1: invalid JSON.*taser data prepare squad-open"):
        load_squad_open(root)
