"""The CLI on damaged input: every command that reads a file answers a missing file, invalid UTF-8, broken
JSON / YAML, a truncated .gz or .zip and an empty file with the library's one-line error (`taser: error: ...`,
naming the file) and exit code 2, never a Python traceback. Plus: every `--set` example `taser train --help` shows
is accepted by its kind's config."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from taser_book.cli import build_parser, main
from taser_book.cli.train import SET_EXAMPLES
from taser_lib.data.formats.beir import write_prepared
from taser_lib.data.types import Dataset, Document, Query
from taser_lib.training.config import apply_overrides, config_to_dict
from taser_lib.training.kinds import config_from_dict, default_config

REPO = Path(__file__).resolve().parents[1]
CORPUS = [{"_id": f"d{i}", "title": f"T{i}", "text": f"passage number {i} about item {i}"} for i in range(4)]
QUERIES = [{"_id": f"q{i}", "text": f"item {i}"} for i in range(2)]
RUN = "q0 Q0 d0 1 2.0 x\nq0 Q0 d1 2 1.0 x\nq1 Q0 d1 1 2.0 x\n"
CONFIG = "kind: retriever\nloop:\n  output_dir: runs/x\n  max_steps: 1\n"
PROFILES = "profiles:\n  tiny:\n    extends: smoke\n"


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def beir_folder(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text(jsonl(CORPUS))
    (root / "queries.jsonl").write_text(jsonl(QUERIES))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nq1\td1\t1\n")
    return root


def beir_zip(root: Path) -> Path:
    folder = beir_folder(root / "src" / "toy")
    path = root / "toy.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                archive.write(file, f"toy/{file.relative_to(folder)}")
    return path


def prepared(root: Path) -> Path:
    corpus = {r["_id"]: Document(r["_id"], r["text"], r["title"]) for r in CORPUS}
    queries = {r["_id"]: Query(r["_id"], r["text"]) for r in QUERIES}
    return write_prepared(Dataset("toy", "test", corpus, queries, {"q0": {"d0": 1}, "q1": {"d1": 1}}), root)


# The damages: each turns a good file's bytes into a bad one's (None: the file is not there).
def invalid_utf8(good: bytes) -> bytes:
    cut = good.index(b"\n") + 3 if b"\n" in good else 2
    return good[:cut] + b"\xff\xfe" + good[cut:]


def broken(good: bytes) -> bytes:
    """Broken JSON (a brace gone), a tsv line without its tab, a run line without a field, broken YAML."""
    for old, new in ((b"}", b""), (b"\t", b" "), (b" Q0 ", b" "), (b":", b": [")):
        if old in good:
            return good.replace(old, new, 1)
    raise AssertionError("nothing to break")


def truncated_gz(good: bytes) -> bytes:
    data = gzip.compress(good * 20)
    return data[:len(data) // 2]


def truncated_zip(good: bytes) -> bytes:
    return good[:len(good) // 2]


DAMAGES = {"missing": None, "invalid-utf8": invalid_utf8, "broken": broken, "empty": lambda good: b""}


def damage(path: Path, how) -> Path:
    good = path.read_bytes()
    if how is None:
        path.unlink()
    else:
        path.write_bytes(how(good))
    return path


def case_data_verify(tmp: Path, how):
    folder = prepared(tmp / "prepared" / "toy" / "test")
    if how is None:
        return ["data", "verify", str(tmp / "nowhere" / "toy")], tmp / "nowhere" / "toy"
    return ["data", "verify", str(folder)], damage(folder / "meta.json", how)


def case_data_prepare(tmp: Path, how, shared_data: Path):
    data_dir = tmp / "data"
    (data_dir / "cisi").mkdir(parents=True)
    for name in ("CISI.ALL", "CISI.QRY", "CISI.REL", "CISI.BLN"):
        (data_dir / "cisi" / name).write_bytes((shared_data / "cisi" / name).read_bytes())
    (tmp / "empty-mirror").mkdir()
    argv = ["data", "prepare", "cisi", "--data-dir", str(data_dir), "--mirror", str(tmp / "empty-mirror")]
    return argv, damage(data_dir / "cisi" / "CISI.QRY", how)


def case_index_folder(tmp: Path, how):
    folder = beir_folder(tmp / "beir")
    return ["index", str(folder), "--retriever", "bm25", "--out", str(tmp / "idx")], damage(folder / "corpus.jsonl",
                                                                                            how)


def case_index_zip(tmp: Path, how):
    path = beir_zip(tmp)
    return ["index", str(path), "--retriever", "bm25", "--out", str(tmp / "idx")], damage(path, how)


def case_search_prepared(tmp: Path, how):
    folder = prepared(tmp / "prep")
    argv = ["search", str(folder), "--retriever", "bm25", "--out", str(tmp / "r.trec")]
    return argv, damage(folder / "queries.jsonl", how)


def case_search_qrels(tmp: Path, how):
    folder = beir_folder(tmp / "beir")
    argv = ["search", str(folder), "--retriever", "bm25", "--out", str(tmp / "r.trec")]
    return argv, damage(folder / "qrels" / "test.tsv", how)


def case_evaluate(tmp: Path, how, suffix: str = ".trec"):
    folder = prepared(tmp / "prep")
    run = tmp / f"run{suffix}"
    run.write_bytes(gzip.compress(RUN.encode()) if suffix.endswith(".gz") else RUN.encode())
    if how is not None and suffix.endswith(".gz"):
        run.write_bytes(how(RUN.encode()))
        return ["evaluate", str(run), str(folder)], run
    return ["evaluate", str(run), str(folder)], damage(run, how)


def case_train(tmp: Path, how):
    config = tmp / "train.yaml"
    config.write_text(CONFIG)
    return ["train", "--config", str(config), "--output-dir", str(tmp / "out")], damage(config, how)


def case_encode(tmp: Path, how, name: str = "corpus.jsonl"):
    corpus = tmp / name
    good = jsonl(CORPUS).encode()
    corpus.write_bytes(gzip.compress(good) if name.endswith(".gz") else good)
    if how is not None and name.endswith(".gz"):
        corpus.write_bytes(how(good))
        return ["encode", str(corpus), "--out", str(tmp / "emb")], corpus
    return ["encode", str(corpus), "--out", str(tmp / "emb")], damage(corpus, how)


def case_reproduce(tmp: Path, how):
    profiles = tmp / "profiles.yaml"
    profiles.write_text(PROFILES)
    argv = ["reproduce", "--profile", "tiny", "--profiles", str(profiles), "--root", str(tmp), "--no-book"]
    return argv, damage(profiles, how)


CASES = {
    "data verify": case_data_verify,
    "index (BEIR folder)": case_index_folder,
    "index (BEIR zip)": case_index_zip,
    "search (prepared folder)": case_search_prepared,
    "search (BEIR qrels)": case_search_qrels,
    "evaluate": case_evaluate,
    "train --config": case_train,
    "encode": case_encode,
    "reproduce --profiles": case_reproduce,
}
PARAMS = [pytest.param(case, name, id=f"{case}: {name}") for case in CASES for name in DAMAGES
          if not (case == "index (BEIR zip)" and name == "broken")
          and not (case == "train --config" and name == "empty")]  # an empty config is every default, not damage
PARAMS += [pytest.param("index (BEIR zip)", "truncated", id="index (BEIR zip): truncated zip"),
           pytest.param("evaluate", "truncated-gz", id="evaluate: truncated .gz run"),
           pytest.param("encode", "truncated-gz", id="encode: truncated corpus.jsonl.gz")]


def one_error_line(err: str) -> str:
    """The single line stderr holds, a `taser: error: ...` line (progress bars, written with \\r, aside)."""
    lines = [line for line in err.splitlines() if line.strip() and not re.search(r"\d+%\||\[\d+:\d\d", line)]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("taser: error: "), err
    return lines[0]


@pytest.mark.parametrize("case, damage_name", PARAMS)
def test_a_damaged_input_is_one_error_line(case, damage_name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if damage_name == "truncated-gz":
        argv, path = (case_evaluate(tmp_path, truncated_gz, ".trec.gz") if case == "evaluate"
                      else case_encode(tmp_path, truncated_gz, "corpus.jsonl.gz"))
    elif damage_name == "truncated":
        argv, path = case_index_zip(tmp_path, truncated_zip)
    else:
        argv, path = CASES[case](tmp_path, DAMAGES[damage_name])
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert path.name in line, line  # the message names the damaged file


@pytest.mark.parametrize("damage_name", ["invalid-utf8", "missing"])
def test_data_prepare_on_a_damaged_raw_file(damage_name, shared_data, tmp_path, capsys):
    argv, path = case_data_prepare(tmp_path, DAMAGES[damage_name], shared_data)
    assert main(argv) == 2
    assert path.name in one_error_line(capsys.readouterr().err)


def test_the_console_script_prints_no_traceback(tmp_path):
    argv, path = case_evaluate(tmp_path, invalid_utf8)
    script = Path(sys.executable).with_name("taser")  # the installed console script (pip install -e .)
    command = [str(script)] if script.is_file() else [sys.executable, "-c", "import sys; from taser_book.cli import "
                                                                           "main; sys.exit(main())"]
    proc = subprocess.run([*command, *argv], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 2
    line = one_error_line(proc.stderr)
    assert re.match(rf"taser: error: {re.escape(str(path))}:2: invalid UTF-8", line), line


# ---- `taser train --help` ------------------------------------------------------------------------------------------

def test_every_set_example_in_the_train_help_is_accepted(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    shown = re.findall(r"--set ([a-z_.]+=[^\s\]]+)", help_text)  # not the usage line's "[--set KEY=VALUE]"
    assert shown and set(shown) == {example for _, example in SET_EXAMPLES}
    for kind, example in SET_EXAMPLES:
        data = config_to_dict(default_config(kind))
        apply_overrides(data, [example], {})
        key, value = example.split("=")
        config = config_from_dict(data)
        node = config
        for part in key.split("."):
            node = getattr(node, part)
        assert node == (None if value == "null" else type(node)(value)), example
