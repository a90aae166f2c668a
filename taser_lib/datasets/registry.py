"""The registry of named datasets: where each file comes from (URL, sha256), its license and citation, and the
loader that turns it into the canonical form; plus `fetch`, `load_dataset` and `prepare` by name.

Download URLs: each file's `url` serves exactly the bytes whose sha256 is registered. Where the official
distributor serves those bytes (SQuAD, NQ-open, EntityQuestions, DPR, BEIR, Anserini's topics and qrels) the URL is
the official one; where the official release is a differently packed archive (Glasgow's cran.tar.gz, NFCorpus's
tarball, allenai's SciFact tarball, Microsoft's WikiQA zip) the URL is the commit-pinned copy the offline mirror was
taken from (see each folder's SOURCE.md), and the official source is listed in `DatasetEntry.official` for
provenance and citation. Files with no known checksum (DPR's, BEIR's full corpora) are online only and need
`allow_unverified` (see fetch.py).

MS MARCO passage (`msmarco-passage`, `msmarco-passage-triples`) and the T1 teacher scores (`msmarco-passage-t1`)
are online only too (not in the offline mirror), but verified: their distributors publish md5s, not sha256s, and
fetch checks the md5 (`_MSMARCO_MD5` says where each one was read).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FormatError, TaserError
from .fetch import DataFile, fetch_file, resolve_data_dir, resolve_mirror
from ..data.formats._common import SkipReport
from .formats.answer_selection import load_trecqa, load_wikiqa
from ..data.formats.beir import load_beir, read_prepared, write_prepared
from ..data.formats.dpr import read_dpr_qas, read_dpr_passages
from .formats.msmarco import iter_id_triples, iter_scored_triples, iter_top1000, read_queries
from .formats.glasgow import load_cisi, load_cranfield
from .formats.nfcorpus import load_nfcorpus
from .formats.qa import load_curatedtrec, load_entityquestions, load_nq_open, load_webquestions
from .formats.scifact import load_scifact
from ..data.formats.squad import load_squad
from ..data.formats.trec import read_trec_qrels, read_trec_topics
from ..data.prepared import Verification, verify_folder
from ..data.training_examples import TrainingExample, iter_dpr_retriever_json
from ..data.types import Dataset, Query

Loader = Callable[..., Dataset]  # loader(root: Path, split: str, *, skip_bad=False, report=None, **options)


@dataclass(frozen=True)
class DatasetEntry:
    """One named dataset: its files (URL + sha256 each), license, citation, official source, and loader."""

    name: str
    description: str
    files: tuple[DataFile, ...]
    license: str
    citation: str  # BibTeX key(s) of the paper(s) to cite
    official: tuple[str, ...]  # the official source(s): homepage or distribution
    loader: Loader
    splits: tuple[str, ...]
    default_split: str
    derived_from: str | None = None  # built by `prepare` from another entry's files (squad-open)
    options: dict[str, Any] = field(default_factory=dict)  # loader options fixed for this entry

    @property
    def folder(self) -> str:
        """The entry's folder under the data directory (and in the mirror)."""
        folders = {f.path.split("/")[0] for f in self.files}
        return folders.pop() if len(folders) == 1 else self.name

    @property
    def online_only(self) -> bool:
        """True when some file has no registered sha256, i.e. the offline mirror (whose SOURCE.md files list
        sha256s) does not hold it. Such a file may still be verified at download by its md5 (MS MARCO)."""
        return any(f.sha256 is None for f in self.files)

    def files_for(self, splits: list[str] | tuple[str, ...] | None = None) -> tuple[DataFile, ...]:
        if splits is None:
            return self.files
        unknown = sorted(set(splits) - set(self.splits))
        if unknown:
            raise TaserError(f"{self.name} has no split(s) {unknown}; it has {list(self.splits)}")
        return tuple(f for f in self.files if f.split is None or f.split in splits)


def by_prefix(name: str) -> str:
    """A file's split when it is the file's first path component ("test/a.toks" -> "test")."""
    return name.split("/")[0]


def _github(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _mirrored(folder: str, repo: str, commit: str, repo_dir: str, names: list[str],
              split_of: Callable[[str], str | None] = lambda name: None) -> tuple[DataFile, ...]:
    """Files of one mirror folder, downloaded from a commit-pinned GitHub copy, with their registered sha256."""
    prefix = f"{repo_dir}/" if repo_dir else ""
    return tuple(DataFile(f"{folder}/{name}", _github(repo, commit, prefix + name), _SHA256[f"{folder}/{name}"],
                          split_of(name)) for name in names)


# ---- loaders with the registry signature (root folder, split) --------------------------------------------------

def _load_squad(root: Path, split: str, **kw) -> Dataset:
    return load_squad(root / "dev-v1.1.json", split, **kw)


def _load_scifact(root: Path, split: str, **kw) -> Dataset:
    return load_scifact(root / "scifact.zip", split, **kw)


BEIR_TOPICS_QRELS = ("arguana", "bioasq", "climate-fever", "cqadupstack-android", "cqadupstack-english",
                     "cqadupstack-gaming", "cqadupstack-gis", "cqadupstack-mathematica", "cqadupstack-physics",
                     "cqadupstack-programmers", "cqadupstack-stats", "cqadupstack-tex", "cqadupstack-unix",
                     "cqadupstack-webmasters", "cqadupstack-wordpress", "dbpedia-entity", "fever", "fiqa",
                     "hotpotqa", "nfcorpus", "nq", "quora", "scidocs", "scifact", "signal1m", "trec-covid",
                     "trec-news", "webis-touche2020")


def _topics_qrels(name: str, topics: Path, qrels_path: Path, split: str, **kw) -> Dataset:
    queries = read_trec_topics(topics, **kw)
    qrels = read_trec_qrels(qrels_path, **kw)
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise TaserError(f"{qrels_path}: judged queries missing from {topics}: {missing[:3]}")
    return Dataset(name, split, queries=queries, qrels=qrels)


def _load_beir_topics_qrels(root: Path, split: str, **kw) -> Dataset:
    """split = the BEIR dataset name (test split): its queries and qrels, no corpus."""
    return _topics_qrels(f"beir-{split}", root / f"topics.beir-v1.0.0-{split}.test.tsv.gz",
                         root / f"qrels.beir-v1.0.0-{split}.test.txt", "test", **kw)


MSMARCO_FILES = {"dev-small": ("topics.msmarco-passage.dev-subset.txt", "qrels.msmarco-passage.dev-subset.txt"),
                 "dl19": ("topics.dl19-passage.txt", "qrels.dl19-passage.txt"),
                 "dl20": ("topics.dl20.txt", "qrels.dl20-passage.txt")}


def _load_msmarco(root: Path, split: str, **kw) -> Dataset:
    topics, qrels_name = MSMARCO_FILES[split]
    return _topics_qrels("msmarco-passage", root / topics, root / qrels_name, split, **kw)


# The MS MARCO passage files of the re-ranking testbed (taser_lib/datasets/msmarco.py), from Microsoft's official
# storage. The dev-small and TREC DL 2019 topics and qrels are not repeated: they are msmarco-passage-topics-qrels'
# (Anserini's copies, in the offline mirror).
MSMARCO_URL = "https://msmarco.z22.web.core.windows.net/msmarcoranking"
MSMARCO_PASSAGE = {  # split -> (file, member inside it or None)
    "collection": ("collection.tar.gz", "collection.tsv"),
    "train-queries": ("queries.tar.gz", "queries.train.tsv"),
    "train-qrels": ("qrels.train.tsv", None),
    "dev-small": ("top1000.dev.tar.gz", "top1000.dev"),
    "dl19": ("msmarco-passagetest2019-top1000.tsv.gz", None),
}
MSMARCO_TRIPLES = "qidpidtriples.train.full.2.tsv.gz"
T1_SCORES = "bertbase_cat_msmarcopassage_train_scores_ids.tsv"
# md5s as published: Microsoft's MS MARCO passage README ("File size on disk and md5sum"; also ir_datasets 0.6.3's
# etc/downloads.json) for every MS MARCO file but qidpidtriples.train.full.2, which that README table lacks (it lists
# the older qidpidtriples.train.full): ir_datasets 0.6.3's downloads.json only. T1: datamaestro-text's registry
# (experimaestro-ir, the same value in two of its versions); Zenodo record 4068216 lists md5s per file, but that page
# could not be read here, so this value is a third party's. No sha256 is published for any of them.
_MSMARCO_MD5 = {
    "collection.tar.gz": "87dd01826da3e2ad45447ba5af577628",
    "queries.tar.gz": "c177b2795d5f2dcc524cf00fcd973be1",
    "qrels.train.tsv": "733fb9fe12d93e497f7289409316eccf",
    "top1000.dev.tar.gz": "8c140662bdf123a98fbfe3bb174c5831",
    "msmarco-passagetest2019-top1000.tsv.gz": "ec9e012746aa9763c7ff10b3336a3ce1",
    MSMARCO_TRIPLES: "219083e80a0a751c08b968c2f31a4e0b",
    T1_SCORES: "a2575af08a19b47c2041e67c9efcd917",
}


def _msmarco_file(name: str, split: str | None) -> DataFile:
    return DataFile(f"msmarco-passage/{name}", f"{MSMARCO_URL}/{name}", None, split, md5=_MSMARCO_MD5[name])


def _load_msmarco_passage(root: Path, split: str, **kw) -> Dataset:
    """train: the judged training queries (queries.train.tsv) and qrels.train. dev-small / dl19: the topics and
    qrels of msmarco-passage-topics-qrels (fetched beside this folder) and the BM25 top-1000 as candidate lists
    (file order; a pair listed twice is a FormatError). No corpus: the 8.8M passages are streamed by the
    re-ranking testbed for the candidates it needs (taser_lib/datasets/msmarco.py)."""
    if split == "train":
        qrels = read_trec_qrels(root / MSMARCO_PASSAGE["train-qrels"][0], **kw)
        file, member = MSMARCO_PASSAGE["train-queries"]
        queries = read_queries(root / file, member, wanted=qrels, **kw)
        return Dataset("msmarco-passage", split, queries=queries, qrels=qrels)
    fetch("msmarco-passage-topics-qrels", [split], data_dir=root.parent, progress=False)
    judged = _load_msmarco(root.parent / "msmarco-passage-topics-qrels", split, **kw)
    file, member = MSMARCO_PASSAGE[split]
    candidates: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()
    for lineno, qid, pid in iter_top1000(root / file, member, **kw):
        if qid not in judged.queries:
            continue
        if (qid, pid) in seen:
            raise FormatError(f"{root / file}!{member}" if member else root / file, lineno, "pid",
                              f"({qid}, {pid}) listed twice")
        seen.add((qid, pid))
        candidates.setdefault(qid, []).append(pid)
    return Dataset("msmarco-passage", split, queries=judged.queries, qrels=judged.qrels, candidates=candidates)


def _load_triples_qrels(root: Path, split: str, *, file: str, scored: bool, **kw) -> Dataset:
    """The positives of a triples file as qrels (its one Dataset view; the triples themselves are read by the
    re-ranking testbed, taser_lib/datasets/msmarco.py)."""
    reader = iter_scored_triples if scored else iter_id_triples
    qrels: dict[str, dict[str, int]] = {}
    for triple in reader(root / file, **kw):
        qrels.setdefault(triple.qid, {})[triple.pos] = 1
    return Dataset(f"msmarco-passage-{'t1' if scored else 'triples'}", split, qrels=qrels)


def _load_dpr(root: Path, split: str, *, files: dict[str, str], patterns: bool = False, name: str = "",
              **kw) -> Dataset:
    """test: the qas csv's questions. train/dev: the retriever json's questions, their positives as qrels (ids of
    DPR's Wikipedia passages, dpr-wiki)."""
    if split == "test":
        return Dataset(name, split, queries=read_dpr_qas(root / files[split], answers_are_patterns=patterns, **kw))
    queries, qrels = {}, {}
    for example in iter_dpr_retriever_json(root / files[split], **kw):
        q = example.query
        queries[q.id] = Query(q.id, q.text, q.answers, patterns, q.meta)
        judged = {doc.id: 1 for doc in example.positives if doc.id}
        if judged:
            qrels[q.id] = judged
    return Dataset(name, split, queries=queries, qrels=qrels)


def _load_dpr_wiki(root: Path, split: str, **kw) -> Dataset:
    return Dataset("dpr-wiki", split, corpus=read_dpr_passages(root / "psgs_w100.tsv.gz", **kw))


def _load_beir_zip(root: Path, split: str, *, beir_name: str, **kw) -> Dataset:
    return load_beir(root / f"{beir_name}.zip", split, name=f"beir-{beir_name}", **kw)


def _load_squad_open(root: Path, split: str, **kw) -> Dataset:
    from ..data.squad_open import load_squad_open  # avoids a registry <-> squad_open import cycle
    return load_squad_open(root).dataset(split)


# ---- the entries -------------------------------------------------------------------------------------------------

_DPR = "https://dl.fbaipublicfiles.com/dpr"
_BEIR_ZIPS = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"
# BEIR's public zips (Thakur et al., 2021); bioasq, signal1m, trec-news, robust04 need licences and are not there.
BEIR_PUBLIC = ("msmarco", "trec-covid", "nfcorpus", "nq", "hotpotqa", "fiqa", "arguana", "webis-touche2020",
               "cqadupstack", "quora", "dbpedia-entity", "scidocs", "fever", "climate-fever", "scifact")


def _dpr_entry(key: str, title: str, train: str | None, dev: str | None, test: str, citation: str,
               license_: str, patterns: bool = False) -> DatasetEntry:
    files = [DataFile(f"dpr/{test}", f"{_DPR}/data/retriever/{test}", None, "test")]
    training = {"train": train, "dev": dev}
    files += [DataFile(f"dpr/{name}", f"{_DPR}/data/retriever/{name}", None, split)
              for split, name in training.items() if name]
    return DatasetEntry(
        f"dpr-{key}", f"DPR's {title}: retriever json (train/dev, with BM25 hard negatives) and test questions (qas "
        f"csv); online only", tuple(files), license_, f"karpukhin2020dense; {citation}",
        ("https://github.com/facebookresearch/DPR",), _load_dpr, ("test", *(s for s, n in training.items() if n)),
        "test", options={"files": {"test": test, **{s: n for s, n in training.items() if n}}, "patterns": patterns,
                         "name": f"dpr-{key}"})


def _entries() -> list[DatasetEntry]:
    squad = DataFile("squad-v1.1/dev-v1.1.json", "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v1.1.json",
                     "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9", "dev",
                     mirror_zip_sha256="6cf38c56fc7341bab8a5132f205dd7198148a6be9073ccd8ef07d55ca73b09b7")
    nf_names = ["README.txt"] + [f"{s}.{kind}" for s in ("dev", "test") for kind in (
        "docs", "titles.queries", "all.queries", "nontopic-titles.queries", "vid-titles.queries",
        "vid-desc.queries", "2-1-0.qrel", "3-2-1.qrel")]
    eq_names = sorted(p.split("/", 1)[1] for p in _SHA256 if p.startswith("entityquestions/"))
    anserini = ("castorini/anserini-tools", "5b819c1a45c8a0a3ec9426f476694f44a29dfaf3")
    beir_files = tuple(
        DataFile(f"beir-topics-qrels/{kind}.beir-v1.0.0-{name}.test.{ext}",
                 _github(*anserini, f"{kind_dir}/{kind}.beir-v1.0.0-{name}.test.{ext}"),
                 _SHA256[f"beir-topics-qrels/{kind}.beir-v1.0.0-{name}.test.{ext}"], name)
        for name in BEIR_TOPICS_QRELS
        for kind, kind_dir, ext in (("topics", "topics", "tsv.gz"), ("qrels", "qrels", "txt")))
    msmarco_files = tuple(
        DataFile(f"msmarco-passage-topics-qrels/{name}", _github(*anserini, f"{name.split('.')[0]}/{name}"),
                 _SHA256[f"msmarco-passage-topics-qrels/{name}"], split)
        for split, names in MSMARCO_FILES.items() for name in names)
    return [
        DatasetEntry("squad-v1.1", "SQuAD v1.1 dev set: 48 articles, 2,067 paragraphs, 10,570 questions",
                     (squad,), "CC BY-SA 4.0", "rajpurkar2016squad",
                     ("https://rajpurkar.github.io/SQuAD-explorer/",), _load_squad, ("dev",), "dev"),
        DatasetEntry("squad-open", "SQuAD-open: 100-word passages from SQuAD v1.1 dev, articles split "
                     "train/dev/test (built by `taser data prepare squad-open`)", (), "CC BY-SA 4.0",
                     "rajpurkar2016squad; cheng2023taser", ("https://rajpurkar.github.io/SQuAD-explorer/",),
                     _load_squad_open, ("train", "dev", "test"), "test", derived_from="squad-v1.1"),
        DatasetEntry("scifact", "SciFact as BEIR SciFact: 5,183 abstracts; test = 300 claims / 339 qrels",
                     _mirrored("scifact-allenai", "sumithra-p-v/claimverifier",
                               "b42f1c3444b28884ddcfadffafbfe223646c6c37", "data", ["scifact.zip"]),
                     "CC BY-NC 2.0", "wadden2020fact; thakur2021beir",
                     ("https://github.com/allenai/scifact",
                      "https://scifact.s3-us-west-2.amazonaws.com/release/latest/data.tar.gz"),
                     _load_scifact, ("test", "train"), "test"),
        DatasetEntry("nfcorpus", "NFCorpus original release (preprocessed text): test 3,162 docs, 323 judged "
                     "title queries, 12,334 graded qrels (= BEIR's test qrels)",
                     _mirrored("nfcorpus", "hakimamarullah/medisearch-api",
                               "0ae71a4bb2416506dbdd9a5f8894e7830b99f19f", "data/nfcorpus", nf_names,
                               lambda n: None if n == "README.txt" else n.split(".")[0]),
                     "academic use only (NFCorpus README.txt; other uses: NutritionFacts.org terms)",
                     "boteva16full", ("https://www.cl.uni-heidelberg.de/statnlpgroup/nfcorpus/",),
                     load_nfcorpus, ("test", "dev"), "test"),
        DatasetEntry("cranfield", "Cranfield 1400: 1,400 documents, 225 queries, 1,837 graded judgments",
                     _mirrored("cranfield", "noramtboraas/information-retrieval",
                               "4ea1b8e02da1db64b68b0364d50620b3c95528dc", "",
                               ["cran.all.1400", "cran.qry", "cranqrel", "cranqrel.readme"]),
                     "none stated; distributed freely for research by the Glasgow IR group", "cleverdon1967cranfield",
                     ("http://ir.dcs.gla.ac.uk/resources/test_collections/cran/",), load_cranfield, ("test",), "test"),
        DatasetEntry("cisi", "CISI: 1,460 documents, 112 queries (76 judged), 3,114 relevant pairs",
                     _mirrored("cisi", "Shakiba-Alipour/Information-Retrieval-on-CISI",
                               "7a23c34602e8949d795bb1835004546e00d1d1ba", "",
                               ["CISI.ALL", "CISI.QRY", "CISI.REL", "CISI.BLN"]),
                     "none stated; distributed freely for research by the Glasgow IR group", "cisi1980",
                     ("http://ir.dcs.gla.ac.uk/resources/test_collections/cisi/",), load_cisi, ("test",), "test"),
        DatasetEntry("wikiqa", "WikiQA answer selection (castorini's filtered form): 873 / 126 / 243 questions",
                     _mirrored("wikiqa-castorini", "castorini/data", "056cbbcbf997cc0b35032430110c5e5e5525700a",
                               "WikiQA", [f"{s}/{f}" for s in ("train", "dev", "test")
                                          for f in ("a.toks", "b.toks", "id.txt", "sim.txt")], by_prefix),
                     "Microsoft Research Data License Agreement (original release)", "yang2015wikiqa",
                     ("https://www.microsoft.com/en-us/download/details.aspx?id=52419",), load_wikiqa,
                     ("train", "dev", "test"), "test"),
        DatasetEntry("trecqa", "TrecQA answer selection (raw splits): 94 / 82 / 100 questions",
                     _mirrored("trecqa", "castorini/data", "056cbbcbf997cc0b35032430110c5e5e5525700a",
                               "TrecQA/data", ["TRAIN.xml", "DEV.xml", "TEST.xml"],
                               lambda n: n.split(".")[0].lower()),
                     "none stated (TREC QA-derived research data)", "wang2007jeopardy; yao2013answer",
                     ("https://github.com/castorini/data/tree/master/TrecQA",), load_trecqa,
                     ("train", "dev", "test"), "test"),
        DatasetEntry("nq-open", "NQ-open questions: test (= NQ's dev, 3,610; DPR's nq-test), EfficientQA dev/test",
                     _mirrored("nq-open", "google-research-datasets/natural-questions",
                               "fb26a3073b1fe636c97302890a27b491d6530130", "nq_open",
                               ["NQ-open.dev.jsonl", "NQ-open.efficientqa.dev.1.1.jsonl",
                                "NQ-open.efficientqa.test.1.1.jsonl"],
                               {"NQ-open.dev.jsonl": "test", "NQ-open.efficientqa.dev.1.1.jsonl": "efficientqa-dev",
                                "NQ-open.efficientqa.test.1.1.jsonl": "efficientqa-test"}.get),
                     "CC BY-SA 3.0", "kwiatkowski2019natural; lee2019latent",
                     ("https://github.com/google-research-datasets/natural-questions/tree/master/nq_open",),
                     load_nq_open, ("test", "efficientqa-dev", "efficientqa-test"), "test"),
        DatasetEntry("webquestions", "WebQuestions questions (brmson's organised release): train 3,778, test 2,032",
                     _mirrored("webquestions", "brmson/dataset-factoid-webquestions",
                               "668890853388010fe6ae9a5eb035a7917b88933b", "main",
                               ["trainmodel.json", "val.json", "devtest.json", "test.json"],
                               lambda n: "test" if n == "test.json" else None),
                     "CC-BY 4.0 (brmson README; WebQuestions CC-BY)", "berant2013semantic",
                     ("https://nlp.stanford.edu/software/sempre/",), load_webquestions,
                     ("train", "trainmodel", "val", "devtest", "test"), "test"),
        DatasetEntry("curatedtrec", "CuratedTREC questions with answer regular expressions (brmson v2 files)",
                     _mirrored("curatedtrec", "brmson/dataset-factoid-curated",
                               "3b757bfe8e88cdadbd070ecbb5d030df720d2a3a", "",
                               ["curated-train.tsv", "curated-test.tsv", "curated-full.tsv",
                                "large2470-train.tsv", "large2470-test.tsv"],
                               lambda n: n[:-4].replace("curated-", "")),
                     "research use (no license stated; TREC QA 1999-2003 questions)", "baudis2015modeling",
                     ("https://github.com/brmson/dataset-factoid-curated",), load_curatedtrec,
                     ("train", "test", "full", "large2470-train", "large2470-test"), "test"),
        DatasetEntry("entityquestions", "EntityQuestions: 24 relations; test 22,075, dev 22,068, train 176,560",
                     _mirrored("entityquestions", "princeton-nlp/EntityQuestions",
                               "096c261f327431b30af7ff718670f4bd13214908", "dataset", eq_names, by_prefix),
                     "MIT", "sciavolino2021simple",
                     ("https://github.com/princeton-nlp/EntityQuestions",
                      "https://nlp.cs.princeton.edu/projects/entity-questions/dataset.zip"),
                     load_entityquestions, ("test", "dev", "train"), "test"),
        DatasetEntry("beir-topics-qrels", "BEIR test queries and qrels of 28 datasets (Anserini's conversion), "
                     "no corpora; split = the BEIR dataset name", beir_files,
                     "per dataset (see BEIR); anserini-tools Apache-2.0", "thakur2021beir",
                     ("https://github.com/beir-cellar/beir", "https://github.com/castorini/anserini-tools"),
                     _load_beir_topics_qrels, BEIR_TOPICS_QRELS, "scifact"),
        DatasetEntry("msmarco-passage-topics-qrels", "MS MARCO passage dev-small, TREC DL19/DL20 queries and "
                     "qrels, no passages", msmarco_files,
                     "MS MARCO terms (non-commercial research); anserini-tools Apache-2.0",
                     "nguyen2016msmarco; craswell2020overview",
                     ("https://microsoft.github.io/msmarco/", "https://github.com/castorini/anserini-tools"),
                     _load_msmarco, tuple(MSMARCO_FILES), "dev-small"),
        DatasetEntry("msmarco-passage", "MS MARCO passage ranking: 8.8M passages (collection.tar.gz), training "
                     "queries and qrels, BM25 top-1000 of dev-small and TREC DL 2019 (their topics and qrels: "
                     "msmarco-passage-topics-qrels); online only, md5-verified",
                     (_msmarco_file("collection.tar.gz", None), _msmarco_file("queries.tar.gz", "train"),
                      _msmarco_file("qrels.train.tsv", "train"), _msmarco_file("top1000.dev.tar.gz", "dev-small"),
                      _msmarco_file("msmarco-passagetest2019-top1000.tsv.gz", "dl19")),
                     "MS MARCO terms (non-commercial research)", "nguyen2016msmarco; craswell2020overview",
                     ("https://microsoft.github.io/msmarco/",
                      "https://github.com/microsoft/MSMARCO-Passage-Ranking"),
                     _load_msmarco_passage, ("train", "dev-small", "dl19"), "dev-small"),
        DatasetEntry("msmarco-passage-triples", "MS MARCO passage training triples as ids "
                     "(qidpidtriples.train.full.2, 397M triples; a superset of the ~40M 'small' triples that "
                     "msmarco-passage-t1 scores); online only, md5-verified",
                     (_msmarco_file(MSMARCO_TRIPLES, "train"),),
                     "MS MARCO terms (non-commercial research)", "nguyen2016msmarco",
                     ("https://github.com/microsoft/MSMARCO-Passage-Ranking",), _load_triples_qrels, ("train",),
                     "train", options={"file": MSMARCO_TRIPLES, "scored": False}),
        DatasetEntry("msmarco-passage-t1", "Hofstätter et al.'s T1 teacher (BERT-Base CAT) scores of the ~40M MS "
                     "MARCO 'Train Triples Small' (score_pos score_neg qid pid_pos pid_neg): the re-ranking "
                     "testbed's training triples and its released teacher; online only, md5-verified",
                     (DataFile(f"msmarco-passage-t1/{T1_SCORES}",
                               f"https://zenodo.org/record/4068216/files/{T1_SCORES}?download=1", None, "train",
                               md5=_MSMARCO_MD5[T1_SCORES]),),
                     "as stated on Zenodo record 4068216; MS MARCO terms (non-commercial research) for the data",
                     "hofstatter2020margin",
                     ("https://github.com/sebastian-hofstaetter/neural-ranking-kd",
                      "https://zenodo.org/record/4068216"), _load_triples_qrels, ("train",), "train",
                     options={"file": T1_SCORES, "scored": True}),
        DatasetEntry("dpr-wiki", "DPR's 21M 100-word Wikipedia passages (psgs_w100.tsv.gz, Dec 2018 dump); online "
                     "only", (DataFile("dpr/psgs_w100.tsv.gz", f"{_DPR}/wikipedia_split/psgs_w100.tsv.gz", None),),
                     "CC BY-SA 3.0 (Wikipedia text)", "karpukhin2020dense",
                     ("https://github.com/facebookresearch/DPR",), _load_dpr_wiki, ("all",), "all"),
        _dpr_entry("nq", "Natural Questions", "biencoder-nq-train.json.gz", "biencoder-nq-dev.json.gz",
                   "nq-test.qa.csv", "kwiatkowski2019natural", "CC BY-SA 3.0"),
        _dpr_entry("trivia", "TriviaQA", "biencoder-trivia-train.json.gz", "biencoder-trivia-dev.json.gz",
                   "trivia-test.qa.csv.gz", "joshi2017triviaqa", "Apache-2.0 (TriviaQA)"),
        _dpr_entry("squad1", "SQuAD v1.1", "biencoder-squad1-train.json.gz", "biencoder-squad1-dev.json.gz",
                   "squad1-test.qa.csv", "rajpurkar2016squad", "CC BY-SA 4.0"),
        _dpr_entry("webq", "WebQuestions", "biencoder-webquestions-train.json.gz",
                   "biencoder-webquestions-dev.json.gz", "webquestions-test.qa.csv", "berant2013semantic", "CC-BY"),
        _dpr_entry("curatedtrec", "CuratedTREC", "biencoder-curatedtrec-train.json.gz",
                   "biencoder-curatedtrec-dev.json.gz", "curatedtrec-test.qa.csv", "baudis2015modeling",
                   "research use", patterns=True),
    ]


def _beir_entry(beir_name: str) -> DatasetEntry:
    return DatasetEntry(
        f"beir-{beir_name}", f"BEIR {beir_name}: full corpus, queries, qrels (public zip); online only",
        (DataFile(f"beir/{beir_name}.zip", f"{_BEIR_ZIPS}/{beir_name}.zip", None),),
        "per dataset (see BEIR)", "thakur2021beir", ("https://github.com/beir-cellar/beir",),
        _load_beir_zip, ("test", "dev", "train"), "test", options={"beir_name": beir_name})


def names() -> list[str]:
    """Registered names, plus "beir-<name>" for each public BEIR corpus."""
    return list(REGISTRY) + [f"beir-{n}" for n in BEIR_PUBLIC]


def get(name: str) -> DatasetEntry:
    if name in REGISTRY:
        return REGISTRY[name]
    if name.startswith("beir-") and name[5:] in BEIR_PUBLIC:
        return _beir_entry(name[5:])
    raise TaserError(f"unknown dataset {name!r}; known: {', '.join(names())}")


# ---- by name: fetch, load, prepare -------------------------------------------------------------------------------

def fetch(name: str, splits: list[str] | None = None, *, data_dir: str | os.PathLike | None = None,
          mirror: str | os.PathLike | None = None, download: bool = False, allow_unverified: bool = False,
          force: bool = False, progress: bool = True) -> list[Path]:
    """Fetch (and verify) a dataset's files, all or those of `splits`. Derived entries fetch their source."""
    entry = get(name)
    if entry.derived_from:
        return fetch(entry.derived_from, data_dir=data_dir, mirror=mirror, download=download,
                     allow_unverified=allow_unverified, force=force, progress=progress)
    return [fetch_file(spec, data_dir=data_dir, mirror=mirror, download=download,
                       allow_unverified=allow_unverified, force=force, progress=progress)
            for spec in entry.files_for(splits)]


def prepared_dir(name: str, data_dir: str | os.PathLike | None = None) -> Path:
    """Where `prepare` writes: <data dir>/prepared/<name>."""
    return resolve_data_dir(data_dir) / "prepared" / name


def local_status(name: str, data_dir: str | os.PathLike | None = None,
                 mirror: str | os.PathLike | None = None) -> str:
    """'prepared', 'fetched', 'partial', 'in mirror', 'online' or 'missing' (presence only; fetch verifies)."""
    entry, root = get(name), resolve_data_dir(data_dir)
    if (prepared_dir(name, data_dir) / "meta.json").is_file() or any(
            prepared_dir(name, data_dir).glob("*/meta.json")):
        return "prepared"
    files = get(entry.derived_from).files if entry.derived_from else entry.files
    present = sum((root / f.path).is_file() for f in files)
    if files and present == len(files):
        return "fetched"
    if present:
        return "partial"
    mirror_root = resolve_mirror(mirror)
    if mirror_root and files and all((mirror_root / f.path).is_file() or
                                     (f.mirror_zip_sha256 and (mirror_root / f"{f.path}.zip").is_file())
                                     for f in files):
        return "in mirror"
    return "online" if any(f.sha256 is None for f in files) else "missing"


def load_dataset(name: str, split: str | None = None, *, data_dir: str | os.PathLike | None = None,
                 mirror: str | os.PathLike | None = None, skip_bad: bool = False, report: SkipReport | None = None,
                 verify: bool = False, **options) -> Dataset:
    """One split of a dataset in canonical form. Reads the prepared copy when there is one (its record counts
    checked against its meta.json, and with `verify` its files' sha256 too); otherwise fetches the raw files (from
    the mirror, never the network) and runs the loader."""
    entry = get(name)
    split = split or entry.default_split
    if split not in entry.splits:
        raise TaserError(f"{name} has no split {split!r}; it has {list(entry.splits)}")
    if entry.derived_from:
        root = prepared_dir(name, data_dir)
        if verify and root.is_dir():
            _raise_unless_ok(verify_folder(root))
        return entry.loader(root, split, skip_bad=skip_bad, report=report)
    prepared = prepared_dir(name, data_dir) / split
    if not options and (prepared / "meta.json").is_file():
        return read_prepared(prepared, verify=verify)
    return _load_raw(entry, split, data_dir, mirror, skip_bad=skip_bad, report=report, **options)


def _raise_unless_ok(result: Verification) -> None:
    if result.problems:
        raise TaserError(f"{len(result.problems)} problem(s) in {result.folder}, first: {result.problems[0]}")


def verify_prepared(name_or_folder: str | os.PathLike, data_dir: str | os.PathLike | None = None) -> Verification:
    """Rehash and recount every file of a prepared dataset (`taser data verify`): a registered name (its folder
    under the data directory) or a prepared folder (a split folder, or a folder of them)."""
    path = Path(name_or_folder)
    if not path.exists():
        name = os.fspath(name_or_folder)
        if "/" in name or os.sep in name:
            raise TaserError(f"{path} does not exist")
        get(name)  # an unknown name raises, listing the known ones
        path = prepared_dir(name, data_dir)
        if not path.is_dir():
            raise TaserError(f"{name} is not prepared in {path.parent}: run `taser data prepare {name}`")
    return verify_folder(path)


def _load_raw(entry: DatasetEntry, split: str, data_dir, mirror, **kw) -> Dataset:
    fetch(entry.name, [split], data_dir=data_dir, mirror=mirror, progress=False)
    root = resolve_data_dir(data_dir) / entry.folder
    return entry.loader(root, split, **{**entry.options, **kw})


def training_examples(name: str, split: str = "train", *, data_dir: str | os.PathLike | None = None,
                      mirror: str | os.PathLike | None = None, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Iterator[TrainingExample]:
    """Stream the DPR retriever-json training examples of `split`: squad-open's prepared dpr/<split>.json, or the
    fetched DPR files (dpr-nq, ...; fetch them first, they are online only)."""
    entry = get(name)
    if name == "squad-open":
        from ..data.squad_open import read_training_json
        root = prepared_dir(name, data_dir)
        if not (root / "meta.json").is_file():
            raise TaserError(f"{root / 'dpr' / f'{split}.json'} is missing; run `taser data prepare squad-open`")
        if skip_bad:
            return iter_dpr_retriever_json(root / "dpr" / f"{split}.json", skip_bad=True, report=report)
        return iter(read_training_json(root, split))  # its example count checked against meta.json
    else:
        wanted = [f for f in entry.files if f.split == split and ".json" in f.path]
        if not wanted:
            raise TaserError(f"{name} has no training json for split {split!r}")
        path = fetch_file(wanted[0], data_dir=data_dir, mirror=mirror, progress=False)
    return iter_dpr_retriever_json(path, skip_bad=skip_bad, report=report)


NegativesMiner = Callable[[Any], tuple[dict[str, list[str]], dict[str, Any]]]


def no_negatives(built: Any) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """The miner that mines nothing: a prepared squad-open whose training json has no hard negatives."""
    return {}, {"method": None, "note": "none mined"}


def prepare(name: str, splits: list[str] | None = None, *, data_dir: str | os.PathLike | None = None,
            mirror: str | os.PathLike | None = None, seed: int | None = None,
            negatives: NegativesMiner | None = None) -> dict[str, Any]:
    """Convert a dataset to the prepared layout under `prepared_dir(name)`; returns a summary (paths, counts,
    seconds). Raw files come from the data directory or the mirror, never the network (fetch first).

    squad-open: build the benchmark (squad_open.py); `negatives(squad_open) -> (question id -> passage ids, meta)`
    supplies the hard negatives of its training json. It is required: the BM25 miner lives in the retrieval layer,
    which this layer cannot import, so the one way to prepare squad-open whole is
    `taser_lib.datasets.ready.prepare` (what `taser data prepare` and the notebooks call); `no_negatives`
    opts out explicitly. Others: one folder per split with corpus.jsonl, queries.jsonl, qrels.tsv
    (+ candidates.tsv), meta.json (formats/beir.py).
    """
    from ..meta import run_metadata
    entry = get(name)
    out = prepared_dir(name, data_dir)
    started = time.perf_counter()
    if name == "squad-open":
        from ..data.squad_open import DEFAULT_SEED, build_squad_open, write_squad_open
        (source,) = fetch(entry.derived_from, data_dir=data_dir, mirror=mirror, progress=False)
        built = build_squad_open(source, DEFAULT_SEED if seed is None else seed)
        built_seconds = time.perf_counter() - started
        if negatives is None:
            raise TaserError("squad-open's training json carries BM25 hard negatives, which the retrieval layer "
                             "mines: prepare it with taser_lib.datasets.ready.prepare (or `taser data prepare "
                             "squad-open`); pass negatives=no_negatives for none")
        mined, mined_meta = negatives(built)
        write_squad_open(built, out, mined, mined_meta)
        return {"name": name, "path": str(out), "counts": built.meta["counts"],
                "build_seconds": round(built_seconds, 3), "hard_negatives": mined_meta,
                "seconds": round(time.perf_counter() - started, 3)}
    summary: dict[str, Any] = {"name": name, "path": str(out), "splits": {}}
    for split in splits or entry.splits:
        dataset = _load_raw(entry, split, data_dir, mirror)
        folder = write_prepared(dataset, out / split, meta=run_metadata(source=name, entry_license=entry.license))
        summary["splits"][split] = {"path": str(folder), "documents": len(dataset.corpus),
                                    "queries": len(dataset.queries),
                                    "qrels": sum(len(v) for v in dataset.qrels.values())}
    summary["seconds"] = round(time.perf_counter() - started, 3)
    return summary


# sha256 of every mirrored file, as listed (and verified) in each folder's SOURCE.md.
_SHA256: dict[str, str] = {
    "beir-topics-qrels/qrels.beir-v1.0.0-arguana.test.txt": "687d4efbee424d462825f554fb9d0eb491e178c789a7e4960fbd889f984eeae3",
    "beir-topics-qrels/qrels.beir-v1.0.0-bioasq.test.txt": "0b75c95005bbcb36b4ef3708d704303314c81ebc079e51072bcf67bc1d1d87d9",
    "beir-topics-qrels/qrels.beir-v1.0.0-climate-fever.test.txt": "c56d76b87252a8cc23faafd7e02c1093b84556b599d9a73077a85378d4674773",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-android.test.txt": "aeb380051e35fb0c59c3404f9901d6b5d6c907cbfc9f9b99cad36de66c718ca4",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-english.test.txt": "b18c3c819ad167589c2714ec9c5093ea2d857dbbc4262afc04ca434ccd6f88ec",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-gaming.test.txt": "4e11a94f20ed9bcdebcd21077b8f6774c058be82afeadbbbe9b8c26b78b4a0a9",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-gis.test.txt": "16b6d82c675b5fef5363ca039598adeb1bc81c3f0f3a5a6bca6bc94a9a39ecbe",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-mathematica.test.txt": "f1d36d19aa50f54a82131a71a74846ba5827773077d7217b6601b5e43ff3716f",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-physics.test.txt": "1546859674b39b6976839fb8ce96c6de0a8b359d99fbe96fdae67a356037bf52",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-programmers.test.txt": "82e85e7e71f4337c55c7d909fc5f9e8ccc1b7e2aedd37b11e5a84bd6240e8a6e",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-stats.test.txt": "fa9f54924d6240b992eac5acc7fded3e31cddc746995e3c90bedb7dc435adc03",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-tex.test.txt": "370ef6f52b6bb32c1c5c1d8f14bc4ac1f413b4c8fd602230e37c0b38e4af4af2",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-unix.test.txt": "33cf4ab18d7997591211a2bdbe4b1cdb91dfcb43c8d80c008453bc0b76cb8f94",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-webmasters.test.txt": "ed0c68c7274a6046423e8a6615226f05e41d0989c2f4a72db63ad15e91210787",
    "beir-topics-qrels/qrels.beir-v1.0.0-cqadupstack-wordpress.test.txt": "c2f847a7f35cde4bd547442c1e1904090f903ddafe658f3c197bfc747f37864f",
    "beir-topics-qrels/qrels.beir-v1.0.0-dbpedia-entity.test.txt": "e903b89f644875e1eb3706ff0a161d0c7c003f75fca5c05dace5f6fe99e2cf5e",
    "beir-topics-qrels/qrels.beir-v1.0.0-fever.test.txt": "a36c0c146779583ba5dbce37eb05e5b87ad29a16749ecd6cf58b6548e8fdb899",
    "beir-topics-qrels/qrels.beir-v1.0.0-fiqa.test.txt": "424164b5418f5e537fd19b97383c7301166e5738cbfa8e249bc9c10f6b6cd926",
    "beir-topics-qrels/qrels.beir-v1.0.0-hotpotqa.test.txt": "484e9f85554fe31d5b251003bf258755cf82ba503b7c090ce0c7332d75e76f3a",
    "beir-topics-qrels/qrels.beir-v1.0.0-nfcorpus.test.txt": "9d822ee3fc9e3b395d7fe25a13d81686f54b2a056992574daa825e792800c959",
    "beir-topics-qrels/qrels.beir-v1.0.0-nq.test.txt": "935d4b66229ef34e69b5935235abebdbffc3d9754fc45cb6eaf0c63d7692f0fe",
    "beir-topics-qrels/qrels.beir-v1.0.0-quora.test.txt": "d03814d38a4a2c097fea81d5e4c774071f8667315a3c53b02e448bcdec4db57b",
    "beir-topics-qrels/qrels.beir-v1.0.0-scidocs.test.txt": "648e2e4c15fc795114bc47664a65e73be59ba600db6a30ead85f8b5fcb4d8c98",
    "beir-topics-qrels/qrels.beir-v1.0.0-scifact.test.txt": "8b7315286f8dc823956025a1fc9c9ff0bfe142d7b409458ccd758cfa0713ccba",
    "beir-topics-qrels/qrels.beir-v1.0.0-signal1m.test.txt": "208dec8d9ba1ecd87c6a55e61939d59faefe7ea53765a2fd54a2a54e84a23f07",
    "beir-topics-qrels/qrels.beir-v1.0.0-trec-covid.test.txt": "0d94dcea5bc3b44a64a1f9b1430f7672fae39fad1c980d581b92890ab0448713",
    "beir-topics-qrels/qrels.beir-v1.0.0-trec-news.test.txt": "81ad5aba09051e0e79ac011a66a23e05bc62c32a2f9e8c10894e51869b2868c2",
    "beir-topics-qrels/qrels.beir-v1.0.0-webis-touche2020.test.txt": "c919d5afb251678825f5dec39f63cbf8540cc59b0450bbd069c5a8e1b468af27",
    "beir-topics-qrels/topics.beir-v1.0.0-arguana.test.tsv.gz": "bdca544b55cf0c0bba3a021075d3f1788a101bd852ef84a1567e82783fc2181b",
    "beir-topics-qrels/topics.beir-v1.0.0-bioasq.test.tsv.gz": "ff61104b083f3373781048ac5dececb52edb22d949cfad0b6a74158400ea9c77",
    "beir-topics-qrels/topics.beir-v1.0.0-climate-fever.test.tsv.gz": "6450ce4f615ba76c651c9a72fc19ea6ab27686bb0bcbdcaf1d6c09b355e4ce8b",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-android.test.tsv.gz": "71671dfdc12b24056cfaa34bb5c9e49ae2b47a04db6429187fd7b5fcfba5b079",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-english.test.tsv.gz": "663a579bf9b427a93e2500161199a6ab213054e788f1b90d97a55ccaf1c9b3b8",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-gaming.test.tsv.gz": "93c3fbf37b983dcfb0db66135b38dd044fd1fab94e830c247af0d9303110e612",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-gis.test.tsv.gz": "b8823c2a0733f503ee049513a48bc57ee547acac482dfbabc914a1c666c84811",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-mathematica.test.tsv.gz": "2c80c8bf3688faf9769a6af8dcf02d35215a7be19e79351484fec5b7c31cb26a",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-physics.test.tsv.gz": "6d1c444d9349d3a6c19898846439cb87f65f1ee3d235dca3954d449872dd46cf",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-programmers.test.tsv.gz": "e32575c2144d272dfc09f1193172d69c6ed6a996ee1ee45b2288ef328bcb4610",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-stats.test.tsv.gz": "adac92449e0d9c674edc2d80b9d86e2b781cc030a4f8c91897e01f13047a9f2d",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-tex.test.tsv.gz": "7d737da88597b8fce2ce8c93ac3a80f3bd7080d74dd41643d4cba451d6105166",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-unix.test.tsv.gz": "bbedf79d528bfe35e65011d4635fe05e44ef218c463629a6147561dcf9073f66",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-webmasters.test.tsv.gz": "4e79f02d396c6bf0766a104b3c761825149f3346c25a216c6556a8ab9426db38",
    "beir-topics-qrels/topics.beir-v1.0.0-cqadupstack-wordpress.test.tsv.gz": "4d7ad572eb0213e4411eaf6d3f8e9e5112fe1ccc98a857fb910f46d3cd237373",
    "beir-topics-qrels/topics.beir-v1.0.0-dbpedia-entity.test.tsv.gz": "6911da4e3e3e71b406c7b2b3338847f4f4c5a84fd3934ae529cb47aab280dc88",
    "beir-topics-qrels/topics.beir-v1.0.0-fever.test.tsv.gz": "2236a43e8137b7692c52dff95f98dd597631028ff618dc039aa3633b2b3052d4",
    "beir-topics-qrels/topics.beir-v1.0.0-fiqa.test.tsv.gz": "35a21f6e7c509e945c110a4e5224cd9e86038662c353edc1e890c8a02f5ef685",
    "beir-topics-qrels/topics.beir-v1.0.0-hotpotqa.test.tsv.gz": "e4ec3e8f973c7f0d04a1420d9abc98b035dae6897d2036aacc96d8ec426edf32",
    "beir-topics-qrels/topics.beir-v1.0.0-nfcorpus.test.tsv.gz": "3b2d068344ae4e711656203c0937cbb4c2eb91759c0d0973525af7545500a345",
    "beir-topics-qrels/topics.beir-v1.0.0-nq.test.tsv.gz": "9a278c94c9c7d6410672544fa5d1c89fd7816b074854e0179c9b8bd61b977bb7",
    "beir-topics-qrels/topics.beir-v1.0.0-quora.test.tsv.gz": "4f644dc5c16e7bef5831bdb5df3165aaf77dbaf577f482dc75b1741612dabd6c",
    "beir-topics-qrels/topics.beir-v1.0.0-scidocs.test.tsv.gz": "f354945ce8b0e08513a90bda322dc2363853746ba805a7c40528e840bf3571a4",
    "beir-topics-qrels/topics.beir-v1.0.0-scifact.test.tsv.gz": "a624d39fa2a41da44b0148ac2b1c2cb9856ece2c4afbb6ac9360e8e524d66b4f",
    "beir-topics-qrels/topics.beir-v1.0.0-signal1m.test.tsv.gz": "4a6542d689c665ff943d34e679b109383fc831703622c9c926b4778e54b7d4d5",
    "beir-topics-qrels/topics.beir-v1.0.0-trec-covid.test.tsv.gz": "5c0823de359690f6582736be6b50e55afc17602bdf3f3aa7a29e173d5163552b",
    "beir-topics-qrels/topics.beir-v1.0.0-trec-news.test.tsv.gz": "7247e5eab81d286d5e7966c4ed22f1a344af999f293c187be4c265406553c439",
    "beir-topics-qrels/topics.beir-v1.0.0-webis-touche2020.test.tsv.gz": "7b9b264ce5d2eca6ee35b9ebf780c6c1b0de7c665f67640f43ce673083f4f6a3",
    "cisi/CISI.ALL": "c13934ad921234b571e7b424af3461fe39dccb16757cb21954b3aea5250d072e",
    "cisi/CISI.BLN": "28967c0e01c9de25cece406de9b7aee4052a72fc8e3364f446544daa19ef9fb5",
    "cisi/CISI.QRY": "b72de0e0cb8aa5c93ac988e5be0400cc18949d0a94913a248783a37dd97d5470",
    "cisi/CISI.REL": "f7396c92586c61953ccb7ae99ad8d3ac749ac3b989041fc93a9e311568f58997",
    "cranfield/cran.all.1400": "fbb8935a93263ab6c9fadefb507fd7cd5e101e7fbeb31c12e6bff6dd501315e8",
    "cranfield/cran.qry": "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
    "cranfield/cranqrel": "a90f56082cd44db70bf2c21ebca39a1a34e37c82ccb5ddf1bcc64f18795234c7",
    "cranfield/cranqrel.readme": "5d5b5e72a4799df3e4ea98476ed803b2caac01d90c859a91771ac794971a1ad3",
    "curatedtrec/curated-full.tsv": "9493707b255ec56ad36656eaad132d9a5827ee7eb7904c6558e94dc6a32e316a",
    "curatedtrec/curated-test.tsv": "d1b405b48727640d079bce609052e81f6e4444d35fda060aa23acec74bb33488",
    "curatedtrec/curated-train.tsv": "988ee456852a5c96b9081968e16e34932569f020ad0583ab8eec957bd0054c18",
    "curatedtrec/large2470-test.tsv": "b112e749015566b67836de592d129e315821de6238a9ff1289a9d3e0b21ca0ac",
    "curatedtrec/large2470-train.tsv": "b3c731a970a0f642dc50ea60395d22a520299fc462d046863e64df3dfbb0d176",
    "entityquestions/dev/P106.dev.json": "14b519b85d89111eb8a9fb6900b2a069924ae24b52f2eaff1367594f40c220c0",
    "entityquestions/dev/P112.dev.json": "39e7c40db7cc5de42bb2c0d75761df9abd0939b018a6933dd117eca8f00f4d25",
    "entityquestions/dev/P127.dev.json": "7415d6824a166ba477d40283c1ea4a4b5452467dc38e059eb69d769f766dbb8a",
    "entityquestions/dev/P131.dev.json": "d02cee82135ec30026b518dc2e79c336aad4848948e8c4badba2889216c24f4f",
    "entityquestions/dev/P136.dev.json": "06c94a544e51761de306cc41446458be8592b726ef5673691384e7e699a7013a",
    "entityquestions/dev/P159.dev.json": "888290cd9119a4f89c49b7e8505ac0e45517721db3260b05359e281cee47c999",
    "entityquestions/dev/P17.dev.json": "4879b9b396afc085118d83bc9d3badb2ede82278d181cfc390e9a049723836b3",
    "entityquestions/dev/P170.dev.json": "a42a0c025abd1b0e55d76269d7e33f3e561c350d3a8f1f8e25999706bec0b791",
    "entityquestions/dev/P175.dev.json": "6030031cbb7fafb597041c79e770343a6d104f37b76a9fdd3709735df5ed02a1",
    "entityquestions/dev/P176.dev.json": "92a59f395672590f5fec793c0d090ccf4313735ebc75396fbb19b214196791c9",
    "entityquestions/dev/P19.dev.json": "728c222fb4ceac64a52c3de94c54b68a55ccde4db10b58de0cc66ae357113a6a",
    "entityquestions/dev/P20.dev.json": "c7dcf4848f995175ab263230c2cce42d99843f094b6b01a9af92b222a58d5047",
    "entityquestions/dev/P26.dev.json": "f86960de65a4510e67e88c8e7cab9512fc54ad4883560445ca6380e12dc88328",
    "entityquestions/dev/P264.dev.json": "6062848c6ccf84781d084e5454ad09270a10c89e2d766cbbd5e95c6d2cd4908f",
    "entityquestions/dev/P276.dev.json": "8a6ea5009560daade7e8d4db02a3c3ec17dba9fa456600d1af9290a107a18540",
    "entityquestions/dev/P36.dev.json": "b0123ee7cecb56e58c0f5d01efff38f4c778fd9ef25dff40c0cda04131cee3b7",
    "entityquestions/dev/P40.dev.json": "94d34649d578163d25a80f28553793faff0120dc14a1432d4012cc32c92819de",
    "entityquestions/dev/P407.dev.json": "18a2f68f5e66894ce79594d391191e69d4cb02bdad77b04b36ade291d57aebcb",
    "entityquestions/dev/P413.dev.json": "cc048c41a7d8593f36ecd5be1787da48f13d351b390622fc88dbaea3cb55a0c0",
    "entityquestions/dev/P495.dev.json": "72657aa146402a6770de852479f025da47be71c6f962f3359901f0ae80142d02",
    "entityquestions/dev/P50.dev.json": "ea8ba240363bc99b1b17ea0353786601ae4f7aa80b2e8cc33b0d30494a35492a",
    "entityquestions/dev/P69.dev.json": "f60ef97097af27c93fa187c5bf1fa2d8c46ec88c37c91a9a8fbc73e23bbf38e2",
    "entityquestions/dev/P740.dev.json": "139b085c0175c92ed359751db51082d69e6f47f7539f05f621dbf481ce48c899",
    "entityquestions/dev/P800.dev.json": "1efd5317f6014f7b3a45f8f9d42a169ab92d21d26c6fed25bba9000bed4e0edb",
    "entityquestions/test/P106.test.json": "bec62f5a59315413d1879cc06c0b71609b0f5d6ea0d848a4e06b5cf1fdf8561e",
    "entityquestions/test/P112.test.json": "dc7cb3a7bba554613af54680905ffb57c493f804b29b48f9da888e7507372d42",
    "entityquestions/test/P127.test.json": "bfc902208e52d3c2edbde9412f6711a0e45eb81ceaa055fb0deb4e28dfa43c00",
    "entityquestions/test/P131.test.json": "b82699adf0b94551caa9df73882ccd2e61be2cbaa0dff3dcaa5b3925103321de",
    "entityquestions/test/P136.test.json": "f21abd0338f033d4e4ce7f2b093512861c0077a782f99d1b91516db257d182ac",
    "entityquestions/test/P159.test.json": "93265917282f82466615e3e308492c4a14c44282578e422c33bb5965c94f09e6",
    "entityquestions/test/P17.test.json": "78c6ec6e958441dedbcb2e4487a0fb349d5492ee3357cb502738c2c914139618",
    "entityquestions/test/P170.test.json": "e3d6bb97623b249ca9a7c24bd133acdcf7ebcb8b5c8f4fe71d89fadf9cfc3346",
    "entityquestions/test/P175.test.json": "6d067c807fb906d81408826a37d2dac2b0b9d8d15f8817357e575262fde22ed7",
    "entityquestions/test/P176.test.json": "857db6eab852eb58b6cea9e2148538267f2586fcb1e462ba2888821a5228ed47",
    "entityquestions/test/P19.test.json": "66eb154d9adb6c9e5b0b4859868c39c23939d12deec2bcc748e40528a092830b",
    "entityquestions/test/P20.test.json": "27cb4de7857abf7054ff531ac6d6dc81a1923617d822879c9694fc63683b7006",
    "entityquestions/test/P26.test.json": "4aea2699c4ac4bc290f3243637a2c59969eb39235ce3c1bccd8749b609820c62",
    "entityquestions/test/P264.test.json": "532c5f8ee4f45f7dc828469ac29627114d27e7e5a4db6923ea43aa8098779892",
    "entityquestions/test/P276.test.json": "8c09b685d35cc1ca5a07176445d9b229bd19d420e83969a4f1c4730495a804f0",
    "entityquestions/test/P36.test.json": "49a960d0528f6c92c5b8b2835d287af3ad81aad1e0f816f2161cbaa4583d7e29",
    "entityquestions/test/P40.test.json": "205bb42172fba7917b301783eb0a3763667a43f647b0ddf2c380821ac658b166",
    "entityquestions/test/P407.test.json": "945b0bb34fc82db95c416dde9806bab181a6e14b02962a7b2b7b1197c700614c",
    "entityquestions/test/P413.test.json": "be2276171bd82665dd7068c5e991809f3bd06a3c4f3ef1ac36a591f41b56570d",
    "entityquestions/test/P495.test.json": "c815d2ed5242f421efc25b93828478ac0dc9346c752ee7975a35f686c875e3e2",
    "entityquestions/test/P50.test.json": "1395cfb25fffbe24bb786e24577b6c183e2a25f7ab3d7a6ba0a3e441d8ed7fd5",
    "entityquestions/test/P69.test.json": "2512f63a703cd83134402f52175a5c9d19d6ca81fd6014a881b90bcdff12f32b",
    "entityquestions/test/P740.test.json": "34db08a6ae014d1ae01d679a7ce8747b485e4301b01fcf8d4d61a743848fceb5",
    "entityquestions/test/P800.test.json": "232259cb44c87a26fc8cacfd40e7d8a8cec732a95c0c6c6b5372c11e8650921f",
    "entityquestions/train/P106.train.json": "21024913e4314c86a4f298117aff2f501140fddbd6d2f16599da440791639940",
    "entityquestions/train/P112.train.json": "1d86ccf43030ea64840d03932a32cd452ff5265c833d5972a306d44bf133a2d1",
    "entityquestions/train/P127.train.json": "06d6d66d2b9b52ea3fa934e25feaee05ff017d243530cbf9c8661adf2b434537",
    "entityquestions/train/P131.train.json": "a3431096a667532207cdce5433c35bca5f8bbc9c2e4c2cf742c527b075ad759d",
    "entityquestions/train/P136.train.json": "34376fad66189faabbea3eec9298b1696fd2d4fa994b9db9779523ed3da6b8c3",
    "entityquestions/train/P159.train.json": "67bb7d47fb74f49ae6319386fececee80f8a27fdaa15d84ff6425d1ea6ab8f08",
    "entityquestions/train/P17.train.json": "4bae760f5f17aabd533bea794887d15eff9fdb84e96a76bb90718afb3f37f98b",
    "entityquestions/train/P170.train.json": "722856a6b67d8e49edd9040d3de7c4637c9981d9904d6c03258e0fffafa72385",
    "entityquestions/train/P175.train.json": "16d01ff5eeef4a887c0d68311847d3331abd8f66da6454971c161eaefe3482a0",
    "entityquestions/train/P176.train.json": "eca4c5f17607ce271be2202e52b6e44cea723e8c9f7792847973131f9ff1c356",
    "entityquestions/train/P19.train.json": "0116f43a851ee4bf142321db10960317b07a01d4c7aebb23a4470f427fa7ffc5",
    "entityquestions/train/P20.train.json": "9b729e736beb1fba9b6867779c67498a722d02e18f5be98b4f808ca40947e463",
    "entityquestions/train/P26.train.json": "1c6bc381866e1afc03fee72a8e601f7490249d651adcdfc25c50c8defca00ba3",
    "entityquestions/train/P264.train.json": "73518b90cf9c4a39e0243f67087df882de87171aaa0fba9917c0c3fe91cded91",
    "entityquestions/train/P276.train.json": "88993e0697708a2623413676d55661983f68640658af2a0601860cb33ee179bf",
    "entityquestions/train/P36.train.json": "db4f30cfc4400a7a031eb8e97926da4d5cec49edef6012e42bc3cee68ac60054",
    "entityquestions/train/P40.train.json": "c3d12ef7c4fb37c981c517fec5860612a34fcc4cba312ddbae599e60b6a528cb",
    "entityquestions/train/P407.train.json": "442501e84542b261c04ea0d8ca76588ad8a84574a083deacf9a988f43a3dd78c",
    "entityquestions/train/P413.train.json": "aea01304174bdfb403a140a0038ca5424d4936dc31f3c287620753131abcab09",
    "entityquestions/train/P495.train.json": "fcb3dea18bf04546e98ed64afe56e60c92d85a27fa8de98c2066caba7347b0a2",
    "entityquestions/train/P50.train.json": "cdd1930d17f472e1afd0063630aa100655b35176839904db91cc1001a049364c",
    "entityquestions/train/P69.train.json": "001729be43e34b5c80c254d1ded38f376503c23f59fd29565c610800e7c66b32",
    "entityquestions/train/P740.train.json": "83f8d9285b4b1cfdf5da61081be39497dd4dcc235f764903090b021f3ce13d3d",
    "entityquestions/train/P800.train.json": "7243ff3a9b5eebb190016a55edf355ba71e0ef96a11a0eed80ae746001bb3ccd",
    "msmarco-passage-topics-qrels/qrels.dl19-passage.txt": "8a1f10d550732e4cd91d7fc49846a3784de4040972f583e69285a88f3c5fee92",
    "msmarco-passage-topics-qrels/qrels.dl20-passage.txt": "60d4c34561f9687f8f73e0a752ba80ab80159b3e9c1bedd0a351f747ed6f5684",
    "msmarco-passage-topics-qrels/qrels.msmarco-passage.dev-subset.txt": "34ef51a24e049b3dd19b0a448b764f26b0def22ec42f421ecba2db91f82e7042",
    "msmarco-passage-topics-qrels/topics.dl19-passage.txt": "518992da259fb61f64e4790791df91a7b42ea5773f374aed59220ebb51d58d90",
    "msmarco-passage-topics-qrels/topics.dl20.txt": "726cb4018b85a335fcbe09004df7f084ec1bf20531961d9af7b0c71dd609e69b",
    "msmarco-passage-topics-qrels/topics.msmarco-passage.dev-subset.txt": "f4f71fa87b6be4fb968cca2b8f8554c4ebd003e6c3488af3ac1cc5629c3de189",
    "nfcorpus/README.txt": "191c16392f4e9edd9fdb4b9948192814df2e7a8d1f38b94c843b1ad0bb1c6780",
    "nfcorpus/dev.2-1-0.qrel": "7828a511ee263e09cb4d9e01c8f7adb4101877f1bc84af2b370af9854d72ffe2",
    "nfcorpus/dev.3-2-1.qrel": "bb7048b9c7b029da5fe3a6f537f8be6e9e291554997c6face817d99c993c6c75",
    "nfcorpus/dev.all.queries": "f14fae97eb0b5e48923da05c27b54469576cec3d99efab546e1fd6797095fb82",
    "nfcorpus/dev.docs": "b7cf623af8f991e9d006d901a585234da65b0560a215e3bee85f884946b39751",
    "nfcorpus/dev.nontopic-titles.queries": "377315480fa06c29cc9edc05288ca31e18fa4a15529c65eb50b6fe34a39954f8",
    "nfcorpus/dev.titles.queries": "548d2deef61bdc5a9db538f12679c503eb1b117c8ad7d8517493fdb4d5741ca6",
    "nfcorpus/dev.vid-desc.queries": "3c64279be6b80f0ba393a27d370ee02a524344201d1420540b7f82f099e990e3",
    "nfcorpus/dev.vid-titles.queries": "5f363df504a6be5a35307433cc3f8694a8b184215a5ac9769a192f185120ef1e",
    "nfcorpus/test.2-1-0.qrel": "854da1b7a95e32383e508a89bf62848dd12b7aed28d2e35796e0190dfb97c3ae",
    "nfcorpus/test.3-2-1.qrel": "da94251f365be353ca30f15a46956b6e94dea5deac4d9174668cfa46f1b96b07",
    "nfcorpus/test.all.queries": "e4d563ad21eccf12a7a0164caffc86b9630556ea24c7c3de322f3188105a54cf",
    "nfcorpus/test.docs": "9d779d34db160e63a92a6b753ac79bcbc80d0f04dd01bdde71f38e98d6ad1f16",
    "nfcorpus/test.nontopic-titles.queries": "57984936460c5286c6f6e2c2ef1601f2deb9342d4e310a60a0f9a1b5bb8cea66",
    "nfcorpus/test.titles.queries": "be3c7287d8784ab6f24e215693cdb0716468ff090252147415abe26a056a2648",
    "nfcorpus/test.vid-desc.queries": "9cdcdb4ee0f20d19a8751380fd8ed70c4ade55c256989f6c61a0e3e6c6a9daca",
    "nfcorpus/test.vid-titles.queries": "01cea991395121faba4b1a37c4ab8e29b1205aaa5a9b9a037c40876ab5409d8d",
    "nq-open/NQ-open.dev.jsonl": "f15567f38099f3615f5b8a685c0aef449c11ad90d3da3735e8d1b98115b40616",
    "nq-open/NQ-open.efficientqa.dev.1.1.jsonl": "0ad45e2fa9fd32d10b3cf08c63e6d22f97ba1a0ce44ea98040f4c18bce7e268d",
    "nq-open/NQ-open.efficientqa.test.1.1.jsonl": "c37b3cb2069632dfef219fa770d7910ac77ff6d12a08e8f3d5f058b388aca8a6",
    "scifact-allenai/scifact.zip": "a798a7046af0f6fa04476448459ce7cafeea5bd90d4d99c53a0e27dc5e1a4673",
    "trecqa/DEV.xml": "87f6ed5818fcb885dc8e8206c83cce658d7187118d1e093d841629a08d9291bc",
    "trecqa/TEST.xml": "fb96ee795015c98299fe78f1e697eb9e74789b1db6b1bbc0203416dedc0c467f",
    "trecqa/TRAIN.xml": "8c36007a23b754807344f08b52bc1baeaa6fa5dc85b8ad49f340cc8acc438b66",
    "webquestions/devtest.json": "2541838645f7b8a6f24c4f409f12568b1616095f2edb6280eec924ea3df123c8",
    "webquestions/test.json": "de320953700cd08300b9bcd2e60399da43b458a1be02db3f93c40344729fed39",
    "webquestions/trainmodel.json": "eef8b21e5b65697b643f3904c4f1122f077a8afdf3dc91a2058d3cf7d34baa50",
    "webquestions/val.json": "eece8cddb324972d55bae4ac05eb06d728bc6e4111585509391efcff5c29e063",
    "wikiqa-castorini/dev/a.toks": "428082fde4c5fcc8e17c7e0b12a05fd414d99396674c9c0e53c64178ff925a4b",
    "wikiqa-castorini/dev/b.toks": "19609980bc1fe2e1ae82662f77c42ce2ba4265cf07c90b81e3d0d15a08fc4e58",
    "wikiqa-castorini/dev/id.txt": "d746fa352f0c5a5548cfaec15eb288e12ea94f8a2b41afc966b96ed2774c17c1",
    "wikiqa-castorini/dev/sim.txt": "0986e5b75578db43056ff0770443e1d40e789735958f0abf3054bca7cef550e3",
    "wikiqa-castorini/test/a.toks": "4e0eadef8b14d2e7ec65522220752ba41fa368c558c691ef379534d6796beef8",
    "wikiqa-castorini/test/b.toks": "669a1251693d152ff7d2d45f4ec6ba80bece79fe2c644d55cdb05cdb4fc467f7",
    "wikiqa-castorini/test/id.txt": "0ad4f1e4c9faf2170a5a6d44eb790b4dfefddb3a6642accbc557929fceb9e8fa",
    "wikiqa-castorini/test/sim.txt": "ff957f92f255fe5075e808dadbde64d9855cda218b9db75d2ba3eb73571fad4a",
    "wikiqa-castorini/train/a.toks": "1cb4f6b9ad69e70d7ffabb02e1d4f75f67d4d9f6fa63db2db28599958eb6ad05",
    "wikiqa-castorini/train/b.toks": "c20564c144cd32bc13ea5de43ff2f550b78b3937b07bae8a98a82cab777777eb",
    "wikiqa-castorini/train/id.txt": "201afeca76d29289e970a495936bc20a714c7df21186328c21e08262c1030216",
    "wikiqa-castorini/train/sim.txt": "85ad83b8e3643ed7e5f9707ba628bafed6991f883e0283111282ba199ea9f908",
}
REGISTRY: dict[str, DatasetEntry] = {entry.name: entry for entry in _entries()}
