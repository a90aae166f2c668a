"""BEIR's layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv; Thakur et al., 2021), read from a folder or a
BEIR zip, and the prepared per-split layout this project writes for every dataset (same record forms).

Queries may carry two extra keys BEIR does not define, so QA sets round-trip: "answers" (list of strings) and
"answers_are_patterns" (bool); BEIR's own tools ignore them. "metadata" holds `Query.meta`.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import FormatError
from ...io import atomic_dir, atomic_path, atomic_write_json
from ..types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query
from ._common import OnBad, PathLike, SkipReport, display_name, open_text, parse_int, split_columns

QRELS_HEADER = ("query-id", "corpus-id", "score")
CANDIDATES_HEADER = ("query-id", "corpus-id", "rank")


def _json_lines(path: PathLike, member: str | None, on_bad: OnBad) -> Iterator[tuple[int, dict[str, Any]]]:
    where = display_name(path, member)
    with open_text(path, member) as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise FormatError(where, lineno, None, "expected a JSON object")
            except json.JSONDecodeError as err:
                on_bad(FormatError(where, lineno, None, f"invalid JSON: {err.msg}"))
                continue
            except FormatError as err:
                on_bad(err)
                continue
            yield lineno, record


def _string(record: dict, key: str, where: str, lineno: int, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise FormatError(where, lineno, key, "missing" if value is None else f"expected a string, got {value!r}")
    return str(value)


def read_beir_corpus(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                     report: SkipReport | None = None) -> Corpus:
    """corpus.jsonl: {"_id", "title", "text"} per line (title optional). Empty text is allowed (BEIR has some)."""
    on_bad, where, corpus = OnBad(skip_bad, report), display_name(path, member), {}
    for lineno, record in _json_lines(path, member, on_bad):
        try:
            doc_id = _string(record, "_id", where, lineno)
            doc = Document(doc_id, _string(record, "text", where, lineno), _string(record, "title", where, lineno,
                                                                                   required=False))
            if doc_id in corpus:
                raise FormatError(where, lineno, "_id", f"duplicate document id {doc_id!r}")
        except FormatError as err:
            on_bad(err)
            continue
        corpus[doc_id] = doc
    return corpus


def read_beir_queries(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Queries:
    """queries.jsonl: {"_id", "text"} per line, plus this project's optional "answers", "answers_are_patterns"."""
    on_bad, where, queries = OnBad(skip_bad, report), display_name(path, member), {}
    for lineno, record in _json_lines(path, member, on_bad):
        try:
            qid = _string(record, "_id", where, lineno)
            text = _string(record, "text", where, lineno)
            answers = record.get("answers", [])
            if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
                raise FormatError(where, lineno, "answers", f"expected a list of strings, got {answers!r}")
            patterns = record.get("answers_are_patterns", False)
            if not isinstance(patterns, bool):
                raise FormatError(where, lineno, "answers_are_patterns", f"expected true/false, got {patterns!r}")
            meta = record.get("metadata") or {}
            if not isinstance(meta, dict):
                raise FormatError(where, lineno, "metadata", f"expected an object, got {meta!r}")
            if qid in queries:
                raise FormatError(where, lineno, "_id", f"duplicate query id {qid!r}")
        except FormatError as err:
            on_bad(err)
            continue
        queries[qid] = Query(qid, text, tuple(answers), patterns, dict(meta))
    return queries


def _tsv_with_header(path: PathLike, member: str | None, header: tuple[str, ...],
                     on_bad: OnBad) -> Iterator[tuple[int, list[str]]]:
    where = display_name(path, member)
    with open_text(path, member) as lines:
        first = next(lines, None)
        if first is None or tuple(first.rstrip("\n").split("\t")) != header:
            raise FormatError(where, 1, None, f"expected the header line {'<TAB>'.join(header)!r}")
        for lineno, line in enumerate(lines, 2):
            if not line.strip():
                continue
            try:
                yield lineno, split_columns(line.rstrip("\n"), "\t", header, where, lineno)
            except FormatError as err:
                on_bad(err)


def read_beir_qrels(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                    report: SkipReport | None = None) -> Qrels:
    """qrels/<split>.tsv: a "query-id corpus-id score" header, then one tab-separated judgment per line."""
    on_bad, where, qrels = OnBad(skip_bad, report), display_name(path, member), {}
    for lineno, (qid, doc_id, score) in _tsv_with_header(path, member, QRELS_HEADER, on_bad):
        try:
            grade = parse_int(score, where, lineno, "score")
            if doc_id in qrels.get(qid, {}):
                raise FormatError(where, lineno, "corpus-id", f"({qid}, {doc_id}) judged twice")
        except FormatError as err:
            on_bad(err)
            continue
        qrels.setdefault(qid, {})[doc_id] = grade
    return qrels


def read_candidates(path: PathLike, *, skip_bad: bool = False, report: SkipReport | None = None) -> Candidates:
    """candidates.tsv: "query-id corpus-id rank" lines; each query's list comes back ordered by rank (1-based)."""
    on_bad, ranked = OnBad(skip_bad, report), {}
    for lineno, (qid, doc_id, rank) in _tsv_with_header(path, None, CANDIDATES_HEADER, on_bad):
        try:
            ranked.setdefault(qid, []).append((parse_int(rank, str(path), lineno, "rank"), doc_id))
        except FormatError as err:
            on_bad(err)
    candidates: Candidates = {}
    for qid, pairs in ranked.items():
        pairs.sort()
        if [rank for rank, _ in pairs] != list(range(1, len(pairs) + 1)):
            on_bad(FormatError(path, None, "rank", f"query {qid!r}: ranks are not 1..{len(pairs)}"))
            continue
        candidates[qid] = [doc_id for _, doc_id in pairs]
    return candidates


def load_beir(path: PathLike, split: str = "test", *, name: str | None = None, subset: str | None = None,
              skip_bad: bool = False, report: SkipReport | None = None) -> Dataset:
    """A BEIR dataset from its folder or its downloaded zip (members "<name>/corpus.jsonl", ...). A zip holding
    several datasets (cqadupstack: one per forum) needs `subset`, the folder name of one (e.g. "android")."""
    path = Path(path)
    kw = dict(skip_bad=skip_bad, report=report)
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
        roots = sorted(n[: -len("corpus.jsonl")] for n in names if n.endswith("corpus.jsonl"))
        if subset is not None:
            roots = [r for r in roots if r.rstrip("/").rsplit("/", 1)[-1] == subset]
        if len(roots) != 1:
            found = "no corpus.jsonl" if not roots else f"several datasets ({', '.join(roots)}): pass subset"
            raise FormatError(path, None, None, f"zip archive has {found}")
        root = roots[0]
        qrels_member = f"{root}qrels/{split}.tsv"
        if qrels_member not in names:
            raise FormatError(path, None, None, f"zip archive has no {qrels_member}")
        corpus = read_beir_corpus(path, f"{root}corpus.jsonl", **kw)
        queries = read_beir_queries(path, f"{root}queries.jsonl", **kw)
        qrels = read_beir_qrels(path, qrels_member, **kw)
    else:
        corpus = read_beir_corpus(path / "corpus.jsonl", **kw)
        queries = read_beir_queries(path / "queries.jsonl", **kw)
        qrels = read_beir_qrels(path / "qrels" / f"{split}.tsv", **kw)
    # BEIR's queries.jsonl holds every split's queries; a split is the queries its qrels judge.
    missing = [qid for qid in qrels if qid not in queries]
    if missing:
        raise FormatError(path, None, "query-id", f"{len(missing)} judged queries are not in queries.jsonl, "
                          f"e.g. {missing[:3]}")
    queries = {qid: queries[qid] for qid in qrels}
    return Dataset(name or path.stem, split, corpus, queries, qrels)


# ---- writing: the prepared per-split layout ----------------------------------------------------------------------

def write_corpus_jsonl(corpus: Corpus, path: PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for doc in corpus.values():
            out.write(json.dumps({"_id": doc.id, "title": doc.title, "text": doc.text}, ensure_ascii=False) + "\n")


def write_queries_jsonl(queries: Queries, path: PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for q in queries.values():
            record: dict[str, Any] = {"_id": q.id, "text": q.text}
            if q.answers:
                record["answers"] = list(q.answers)
            if q.answers_are_patterns:
                record["answers_are_patterns"] = True
            if q.meta:
                record["metadata"] = q.meta
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def write_qrels_tsv(qrels: Qrels, path: PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write("\t".join(QRELS_HEADER) + "\n")
        for qid, judged in qrels.items():
            for doc_id, grade in judged.items():
                out.write(f"{qid}\t{doc_id}\t{grade}\n")


def write_candidates_tsv(candidates: Candidates, path: PathLike) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as out:
        out.write("\t".join(CANDIDATES_HEADER) + "\n")
        for qid, doc_ids in candidates.items():
            for rank, doc_id in enumerate(doc_ids, 1):
                out.write(f"{qid}\t{doc_id}\t{rank}\n")


def write_prepared(dataset: Dataset, folder: PathLike, meta: dict[str, Any] | None = None) -> Path:
    """Write one split as <folder>/{corpus.jsonl, queries.jsonl, qrels.tsv, candidates.tsv, meta.json}.

    The folder is replaced whole (written next to it, then renamed): a reader sees the old or the new, never a mix.
    """
    counts = {"documents": len(dataset.corpus), "queries": len(dataset.queries),
              "qrels": sum(len(v) for v in dataset.qrels.values()), "candidate_lists": len(dataset.candidates)}
    with atomic_dir(folder) as tmp:
        write_corpus_jsonl(dataset.corpus, tmp / "corpus.jsonl")
        write_queries_jsonl(dataset.queries, tmp / "queries.jsonl")
        write_qrels_tsv(dataset.qrels, tmp / "qrels.tsv")
        if dataset.candidates:
            write_candidates_tsv(dataset.candidates, tmp / "candidates.tsv")
        atomic_write_json(tmp / "meta.json", {"name": dataset.name, "split": dataset.split, "counts": counts,
                                              **(meta or {})})
    return Path(folder)


def read_prepared(folder: PathLike) -> Dataset:
    """Read a folder written by `write_prepared`."""
    folder = Path(folder)
    meta_path = folder / "meta.json"
    if not meta_path.is_file():
        raise FormatError(meta_path, None, None, "missing: the prepared folder is incomplete (run `taser data "
                          "prepare` again)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    candidates = read_candidates(folder / "candidates.tsv") if (folder / "candidates.tsv").is_file() else {}
    return Dataset(meta["name"], meta["split"], read_beir_corpus(folder / "corpus.jsonl"),
                   read_beir_queries(folder / "queries.jsonl"), read_beir_qrels(folder / "qrels.tsv"), candidates)
