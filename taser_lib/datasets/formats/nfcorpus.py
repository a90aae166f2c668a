"""NFCorpus (Boteva et al., ECIR 2016), original release: "ID<TAB>TEXT" docs and queries, TREC qrels.

What mirrors BEIR NFCorpus test (SOURCE.md, README.txt): the 2-1-0 qrels ("used for the experiments"; levels 2 =
direct link, 1 = indirect link) give exactly BEIR's 323 queries / 12,334 judgments; queries are the "titles" type,
restricted to the judged ones (2 of test's 325 titles have no judgment). The corpus is the split's .docs file (3,162
test documents, every judged document among them). Unlike BEIR, text is the release's preprocessed form
(lowercased, stop-word filtered, tokenised): BEIR's raw text (raw/doc_dump.txt) is not in the offline mirror.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import FormatError
from ...data.types import Corpus, Dataset, Document, Queries
from ...data.formats._common import OnBad, PathLike, SkipReport, read_id_text_lines
from ...data.formats.trec import read_trec_qrels, read_trec_topics

QUERY_TYPES = ("titles", "all", "nontopic-titles", "vid-titles", "vid-desc")
QREL_LEVELS = ("2-1-0", "3-2-1")


def read_nfcorpus_docs(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Corpus:
    """"ID<TAB>TEXT" lines (no titles in the preprocessed release)."""
    texts = read_id_text_lines(path, "id", "document", require_text=False, skip_bad=skip_bad, report=report)
    return {doc_id: Document(doc_id, text) for doc_id, text in texts.items()}


def load_nfcorpus(root: PathLike, split: str = "test", *, query_type: str = "titles", qrel_levels: str = "2-1-0",
                  judged_only: bool = True, skip_bad: bool = False, report: SkipReport | None = None):
    """NFCorpus `split` ("dev" or "test"; train.docs is not in the mirror). Defaults mirror BEIR (module doc)."""
    if split not in ("dev", "test"):
        raise ValueError(f"NFCorpus split must be 'dev' or 'test' (train.docs is not mirrored), got {split!r}")
    if query_type not in QUERY_TYPES:
        raise ValueError(f"query_type must be one of {QUERY_TYPES}, got {query_type!r}")
    if qrel_levels not in QREL_LEVELS:
        raise ValueError(f"qrel_levels must be one of {QREL_LEVELS}, got {qrel_levels!r}")
    root, on_bad = Path(root), OnBad(skip_bad, report)
    kw = dict(skip_bad=skip_bad, report=on_bad.report)
    corpus = read_nfcorpus_docs(root / f"{split}.docs", **kw)
    queries: Queries = read_trec_topics(root / f"{split}.{query_type}.queries", **kw)
    qrels_path = root / f"{split}.{qrel_levels}.qrel"
    qrels = read_trec_qrels(qrels_path, **kw)
    for qid, judged in list(qrels.items()):
        if qid not in queries:
            on_bad(FormatError(qrels_path, None, "query_id", f"judged query {qid!r} has no {query_type} text"))
            del qrels[qid]
            continue
        dangling = [d for d in judged if d not in corpus]
        if dangling:
            on_bad(FormatError(qrels_path, None, "doc_id", f"query {qid!r}: documents not in {split}.docs: "
                               f"{dangling[:5]}"))
            qrels[qid] = {d: g for d, g in judged.items() if d in corpus}
    if judged_only:
        queries = {qid: q for qid, q in queries.items() if qid in qrels}
    return Dataset("nfcorpus", split, corpus, queries, qrels)
