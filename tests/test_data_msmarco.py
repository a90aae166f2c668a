"""MS MARCO passage readers (taser_lib.datasets.formats.msmarco) and registry entries.

FORMAT TEST: the files below are a few lines each, written here in the exact layout of the real files (tab-separated
columns, tar.gz / .gz packing, member names) as documented by Microsoft's MS MARCO passage README and by Hofstätter et
al.'s neural-ranking-kd README; the real files (GBs, online only) are not read here."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

import pytest

from taser_lib.datasets import registry
from taser_lib.datasets.formats.msmarco import (ScoredTriple, iter_collection, iter_id_triples, iter_scored_triples,
                                            iter_top1000, read_queries)
from taser_lib.data.formats._common import SkipReport
from taser_lib.errors import FormatError

COLLECTION = ("0\tThe presence of communication amid scientific minds.\n"
              "1\tThe Manhattan Project and its atomic bomb.\n"
              "2\tEssay on the Manhattan Project.\n3\tThe Manhattan Project was the name for a project.\n")
QUERIES = "121352\tdefine extreme\n634306\twhat does chattel mean on credit history\n"
TOP1000 = "188714\t1000052\tfoods and supplements to lower blood sugar\tWatch portion sizes: even healthy food.\n" \
          "188714\t4\tfoods and supplements to lower blood sugar\tAnother passage.\n"
T1 = "11.25\t-3.5\t121352\t2\t1\n11.25\t-1.0\t121352\t2\t3\n"
TRIPLES = "400296\t1540783\t3518497\n400296\t1540783\t4605333\n"


def write_tar_gz(path: Path, member: str, text: str) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        data = text.encode("utf-8")
        info = tarfile.TarInfo(member)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return path


def write_gz(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode("utf-8")))
    return path


def test_format_collection_streams_from_the_tar_member(tmp_path):
    path = write_tar_gz(tmp_path / "collection.tar.gz", "collection.tsv", COLLECTION)
    docs = list(iter_collection(path))
    assert [d.id for d in docs] == ["0", "1", "2", "3"] and docs[1].text.startswith("The Manhattan Project and")
    # wanted: only those passages, and reading stops once they were all seen
    assert [d.id for d in iter_collection(path, wanted={"2", "1"})] == ["1", "2"]
    with pytest.raises(FormatError, match="no member 'nope.tsv'"):
        list(iter_collection(path, "nope.tsv"))


def test_format_queries_top1000_and_triples(tmp_path):
    queries = read_queries(write_tar_gz(tmp_path / "queries.tar.gz", "queries.train.tsv", QUERIES),
                           "queries.train.tsv", wanted={"634306"})
    assert list(queries) == ["634306"] and queries["634306"].text == "what does chattel mean on credit history"
    top = write_gz(tmp_path / "msmarco-passagetest2019-top1000.tsv.gz", TOP1000)
    assert list(iter_top1000(top)) == [(1, "188714", "1000052"), (2, "188714", "4")]
    packed = write_tar_gz(tmp_path / "top1000.dev.tar.gz", "top1000.dev", TOP1000)
    assert [pid for _, _, pid in iter_top1000(packed, "top1000.dev")] == ["1000052", "4"]
    scored = tmp_path / "bertbase_cat_msmarcopassage_train_scores_ids.tsv"
    scored.write_text(T1)
    assert list(iter_scored_triples(scored)) == [ScoredTriple("121352", "2", "1", 11.25, -3.5),
                                                 ScoredTriple("121352", "2", "3", 11.25, -1.0)]
    ids = write_gz(tmp_path / "qidpidtriples.train.full.2.tsv.gz", TRIPLES)
    assert list(iter_id_triples(ids))[1] == ScoredTriple("400296", "1540783", "4605333")


@pytest.mark.parametrize("reader, name, text, line, field", [
    ("collection", "collection.tsv", "0\tok\n1 no tab here\n", 2, "passage"),
    ("collection", "collection.tsv", "0\tok\n\tempty id\n", 2, "pid"),
    ("collection", "collection.tsv", "0\tok\n0\tagain\n", 2, "pid"),
    ("queries", "queries.train.tsv", "1\tok\n2\t \n", 2, "query"),
    ("queries", "queries.train.tsv", "1\tok\n1\tagain\n", 2, "qid"),
    ("top1000", "top1000.dev", "1\t2\tq\tp\n1\t3\tq\n", 2, "passage"),
    ("top1000", "top1000.dev", "1\t\tq\tp\n", 1, "pid"),
    ("scored", "scores.tsv", "1.0\t0.5\t1\t2\t3\n1.0\tlow\t1\t2\t3\n", 2, "score_neg"),
    ("scored", "scores.tsv", "nan\t0.5\t1\t2\t3\n", 1, "score_pos"),
    ("scored", "scores.tsv", "1.0\t0.5\t1\t2\n", 1, "pid_neg"),
    ("ids", "triples.tsv", "1\t2\t3\n1\t\t3\n", 2, "pid_pos"),
])
def test_a_bad_line_names_file_line_and_field(tmp_path, reader, name, text, line, field):
    if reader in ("collection", "queries", "top1000"):
        path = write_tar_gz(tmp_path / f"{name}.tar.gz", name, text)
        member = name
    else:
        path, member = tmp_path / name, None
        path.write_text(text)
    read = {"collection": lambda **kw: list(iter_collection(path, member, **kw)),
            "queries": lambda **kw: read_queries(path, member, **kw),
            "top1000": lambda **kw: list(iter_top1000(path, member, **kw)),
            "scored": lambda **kw: list(iter_scored_triples(path, **kw)),
            "ids": lambda **kw: list(iter_id_triples(path, **kw))}[reader]
    with pytest.raises(FormatError) as info:
        read()
    err = info.value
    assert (err.line, err.field) == (line, field) and err.path.startswith(str(path))
    assert f":{line}:" in str(err) and f"'{field}'" in str(err)
    report = SkipReport()
    read(skip_bad=True, report=report)  # the policy: skipped and counted, never dropped silently
    assert len(report) == 1


def test_damaged_tar_is_a_format_error(tmp_path):
    path = tmp_path / "collection.tar.gz"
    path.write_bytes(b"not a tar archive")
    with pytest.raises(FormatError, match="collection.tar.gz"):
        list(iter_collection(path))


def test_registry_entries_name_official_urls_and_md5s():
    entry = registry.get("msmarco-passage")
    urls = {f.path.split("/")[-1]: f for f in entry.files}
    assert set(urls) == {"collection.tar.gz", "queries.tar.gz", "qrels.train.tsv", "top1000.dev.tar.gz",
                         "msmarco-passagetest2019-top1000.tsv.gz"}
    for name, spec in urls.items():
        assert spec.url == f"https://msmarco.z22.web.core.windows.net/msmarcoranking/{name}"
        assert spec.sha256 is None and len(spec.md5) == 32  # published md5s, no sha256: online only, verified
    assert urls["collection.tar.gz"].md5 == "87dd01826da3e2ad45447ba5af577628"
    assert entry.online_only and set(entry.splits) == {"train", "dev-small", "dl19"}
    (t1,) = registry.get("msmarco-passage-t1").files
    assert t1.url == ("https://zenodo.org/record/4068216/files/bertbase_cat_msmarcopassage_train_scores_ids.tsv"
                      "?download=1") and t1.md5 == "a2575af08a19b47c2041e67c9efcd917"
    (triples,) = registry.get("msmarco-passage-triples").files
    assert triples.url.endswith("/qidpidtriples.train.full.2.tsv.gz") and triples.md5
