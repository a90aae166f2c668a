"""The registry against the offline mirror: every registered checksum verified by a real fetch, SOURCE.md's
checksums, loading by name, prepare, and the `taser data` commands."""

from __future__ import annotations

import json
import re

import pytest

from taser_book.cli import main
from taser_lib.datasets import registry
from taser_lib.data.formats.beir import read_prepared
from taser_lib.errors import TaserError

REQUIRED = ["squad-v1.1", "squad-open", "scifact", "nfcorpus", "cranfield", "cisi", "wikiqa", "trecqa", "nq-open",
            "webquestions", "curatedtrec", "entityquestions", "beir-topics-qrels", "msmarco-passage-topics-qrels",
            "dpr-wiki", "dpr-nq", "beir-scifact"]
OFFLINE = [n for n in registry.REGISTRY if not registry.get(n).online_only and not registry.get(n).derived_from]



@pytest.fixture(autouse=True)
def _no_data_settings(monkeypatch):
    # These tests pass the data directory and mirror explicitly; a developer's or CI's settings must not leak in.
    monkeypatch.delenv("TASER_DATA_DIR", raising=False)
    monkeypatch.setenv("TASER_DATA_MIRROR", "")  # set but empty: no mirror

def test_names_and_entries():
    assert set(REQUIRED) <= set(registry.names())
    for name in registry.names():
        entry = registry.get(name)
        assert entry.license and entry.citation and entry.official and entry.splits
        assert entry.default_split in entry.splits
        for f in entry.files:
            assert f.url.startswith("https://") and (f.split is None or f.split in entry.splits)
    dpr_wiki = "https://dl.fbaipublicfiles.com/dpr/wikipedia_split/psgs_w100.tsv.gz"  # DPR's download_data.py
    assert registry.get("dpr-wiki").files[0].url == dpr_wiki
    assert registry.get("beir-scifact").online_only
    with pytest.raises(TaserError, match="unknown dataset"):
        registry.get("no-such-set")


def test_checksums_match_source_md(shared_data):
    listed = {}
    for source in shared_data.glob("*/SOURCE.md"):
        for digest, name in re.findall(r"^\s+([0-9a-f]{64})  (.+)$", source.read_text(), re.M):
            listed[f"{source.parent.name}/{name.strip()}"] = digest
    for name in OFFLINE:
        for f in registry.get(name).files:
            key = f"{f.path}.zip" if f.mirror_zip_sha256 else f.path
            assert listed[key] == (f.mirror_zip_sha256 or f.sha256), key


@pytest.mark.parametrize("name", OFFLINE)
def test_fetch_from_mirror(shared_data, tmp_path, name):
    paths = registry.fetch(name, data_dir=tmp_path, mirror=shared_data, progress=False)
    assert len(paths) == len(registry.get(name).files) and all(p.is_file() for p in paths)
    assert registry.local_status(name, tmp_path) == "fetched"


def test_load_by_name(shared_data, tmp_path):
    kw = dict(data_dir=tmp_path, mirror=shared_data)
    assert len(registry.load_dataset("cranfield", **kw).corpus) == 1400
    assert len(registry.load_dataset("beir-topics-qrels", "fiqa", **kw).queries) == 648
    assert len(registry.load_dataset("msmarco-passage-topics-qrels", "dl19", **kw).qrels) == 43
    only_p17 = registry.load_dataset("entityquestions", "test", relations=["P17"], **kw)
    assert {q.meta["relation"] for q in only_p17.queries.values()} == {"P17"}
    with pytest.raises(TaserError, match="no split"):
        registry.load_dataset("cranfield", "train", **kw)
    with pytest.raises(TaserError, match="not in"):  # no mirror, nothing fetched: an error, not a download
        registry.load_dataset("cisi", data_dir=tmp_path / "empty", mirror=None)


def test_prepare_round_trip(shared_data, tmp_path):
    kw = dict(data_dir=tmp_path, mirror=shared_data)
    summary = registry.prepare("wikiqa", ["test"], **kw)
    prepared = read_prepared(tmp_path / "prepared" / "wikiqa" / "test")
    raw = registry.get("wikiqa").loader(tmp_path / "wikiqa-castorini", "test")
    assert (prepared.corpus, prepared.queries, prepared.qrels, prepared.candidates) == \
        (raw.corpus, raw.queries, raw.qrels, raw.candidates)
    assert summary["splits"]["test"]["queries"] == 243
    assert registry.load_dataset("wikiqa", "test", **kw).candidates == raw.candidates  # read from prepared/
    registry.prepare("curatedtrec", ["test"], **kw)
    patterns = read_prepared(tmp_path / "prepared" / "curatedtrec" / "test").queries
    assert all(q.answers_are_patterns for q in patterns.values())


def test_prepare_squad_open(shared_data, tmp_path):
    with pytest.raises(TaserError, match="retrieval layer"):  # no silent build without the BM25 negatives
        registry.prepare("squad-open", data_dir=tmp_path, mirror=shared_data)
    summary = registry.prepare("squad-open", data_dir=tmp_path, mirror=shared_data, negatives=registry.no_negatives)
    assert sum(summary["counts"]["questions"].values()) == 10570  # SOURCE.md: every dev question, once
    test = registry.load_dataset("squad-open", "test", data_dir=tmp_path)
    assert len(test.queries) == summary["counts"]["questions"]["test"]
    assert registry.local_status("squad-open", tmp_path) == "prepared"


def test_cli(shared_data, tmp_path, capsys):
    where = ["--data-dir", str(tmp_path), "--mirror", str(shared_data)]
    assert main(["data", "fetch", "cisi", "--offline", *where]) == 0
    assert capsys.readouterr().out.count("verified") == 4
    assert main(["data", "prepare", "cisi", *where]) == 0
    assert json.loads(capsys.readouterr().out)["splits"]["test"]["queries"] == 112
    assert main(["data", "list", "--json", *where]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["cisi"]["status"] == "prepared" and rows["cranfield"]["status"] == "in mirror"
    assert rows["dpr-wiki"]["status"] == "online"
    assert main(["data", "fetch", "dpr-wiki", "--offline", *where]) == 2  # not in the mirror: a clear error
    assert "not in the mirror" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_prepare_squad_open_with_bm25_negatives(shared_data, tmp_path, capsys):
    pytest.importorskip("taser_lib.retrieval.negatives")
    from taser_lib.data.answers import AnswerMatcher
    from taser_lib.data.squad_open import load_squad_open
    from taser_lib.data.training_examples import read_dpr_retriever_json

    where = ["--data-dir", str(tmp_path), "--mirror", str(shared_data)]
    assert main(["data", "prepare", "squad-open", "--hard-negatives", "2", *where]) == 0
    out = tmp_path / "prepared" / "squad-open"
    built = load_squad_open(out)
    matcher = AnswerMatcher(built.corpus)
    examples = read_dpr_retriever_json(out / "dpr" / "train.json")
    with_negatives = [e for e in examples if e.hard_negatives]
    assert len(with_negatives) > 0.9 * len(examples)
    for e in examples:
        assert len(e.hard_negatives) <= 2
        for doc in e.hard_negatives:
            assert doc.id not in built.positives[e.query.id] and not matcher.has_answer(e.query, doc.id)
