"""BEIR's layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv; Thakur et al., 2021), read from a folder or a
BEIR zip, and the prepared per-split layout this project writes for every dataset (same record forms).

Queries may carry two extra keys BEIR does not define, so QA sets round-trip: "answers" (list of strings) and
"answers_are_patterns" (bool); BEIR's own tools ignore them. "metadata" holds `Query.meta`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import FormatError
from ...io import atomic_dir, atomic_path, atomic_write_json
from ..types import Candidates, Corpus, Dataset, Document, Qrels, Queries, Query
from ..text import zip_names
from ._common import (OnBad, PathLike, SkipReport, StrictJson, display_name, iter_lines, parse_int, require_id,
                      split_columns)

QRELS_HEADER = ("query-id", "corpus-id", "score")
CANDIDATES_HEADER = ("query-id", "corpus-id", "rank")


def _json_lines(path: PathLike, member: str | None, on_bad: OnBad) -> Iterator[tuple[int, dict[str, Any]]]:
    where, strict = display_name(path, member), StrictJson()
    for lineno, line in iter_lines(path, member, on_bad):
        if not line.strip():
            continue
        try:
            record = strict.loads(line, where, lineno)
            if not isinstance(record, dict):
                raise FormatError(where, lineno, None, "expected a JSON object")
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


def _beir_documents(path: PathLike, member: str | None, on_bad: OnBad) -> Iterator[tuple[int, Document]]:
    """(line, Document) of each valid corpus.jsonl line, in file order; a bad line goes to `on_bad`."""
    where = display_name(path, member)
    for lineno, record in _json_lines(path, member, on_bad):
        try:
            doc_id = require_id(_string(record, "_id", where, lineno), where, lineno, "_id", "document")
            yield lineno, Document(doc_id, _string(record, "text", where, lineno),
                                   _string(record, "title", where, lineno, required=False))
        except FormatError as err:
            on_bad(err)


def read_beir_corpus(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                     report: SkipReport | None = None) -> Corpus:
    """corpus.jsonl: {"_id", "title", "text"} per line (title optional). Empty text is allowed (BEIR has some)."""
    on_bad, corpus = OnBad(skip_bad, report), {}
    for lineno, doc in _beir_documents(path, member, on_bad):
        if doc.id in corpus:
            on_bad(FormatError(display_name(path, member), lineno, "_id", f"duplicate document id {doc.id!r}"))
            continue
        corpus[doc.id] = doc
    return corpus


def iter_beir_corpus(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                     report: SkipReport | None = None) -> Iterator[Document]:
    """corpus.jsonl streamed as Documents in file order, one line in memory at a time (for corpora too large to
    load; unlike `read_beir_corpus` it cannot check ids for duplicates, which would hold every id)."""
    for _, doc in _beir_documents(path, member, OnBad(skip_bad, report)):
        yield doc


def read_beir_queries(path: PathLike, member: str | None = None, *, skip_bad: bool = False,
                      report: SkipReport | None = None) -> Queries:
    """queries.jsonl: {"_id", "text"} per line, plus this project's optional "answers", "answers_are_patterns"."""
    on_bad, where, queries = OnBad(skip_bad, report), display_name(path, member), {}
    for lineno, record in _json_lines(path, member, on_bad):
        try:
            qid = require_id(_string(record, "_id", where, lineno), where, lineno, "_id", "query")
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
    seen_header = False
    for lineno, line in iter_lines(path, member, on_bad):
        if not seen_header:  # the header is not skippable: a bad or missing one is an error even with skip_bad
            if lineno != 1 or tuple(line.split("\t")) != header:
                raise FormatError(where, 1, None, f"expected the header line {'<TAB>'.join(header)!r}")
            seen_header = True
            continue
        if not line.strip():
            continue
        try:
            columns = split_columns(line, "\t", header, where, lineno)
            for name, value in zip(header[:2], columns):  # the two id columns
                require_id(value, where, lineno, name, name.split("-")[0])
        except FormatError as err:
            on_bad(err)
            continue
        yield lineno, columns
    if not seen_header:
        raise FormatError(where, 1, None, f"empty file: expected the header line {'<TAB>'.join(header)!r}")


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
    on_bad, ranked, first_line = OnBad(skip_bad, report), {}, {}
    for lineno, (qid, doc_id, rank) in _tsv_with_header(path, None, CANDIDATES_HEADER, on_bad):
        try:
            ranked.setdefault(qid, []).append((parse_int(rank, str(path), lineno, "rank"), doc_id))
            first_line.setdefault(qid, lineno)
        except FormatError as err:
            on_bad(err)
    candidates: Candidates = {}
    for qid, pairs in ranked.items():
        pairs.sort()
        if [rank for rank, _ in pairs] != list(range(1, len(pairs) + 1)):
            on_bad(FormatError(path, first_line[qid], "rank", f"query {qid!r}: ranks are not 1..{len(pairs)}"))
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
        names = set(zip_names(path))
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
    """Write one split as <folder>/{corpus.jsonl, queries.jsonl, qrels.tsv, candidates.tsv, meta.json}; meta.json
    records each file's sha256 and record count (`taser_lib.data.prepared`), which reading checks.

    The folder is replaced whole (written next to it, then renamed): a reader sees the old or the new, never a mix.
    """
    from ..prepared import FILES_KEY, file_entry

    n_qrels = sum(len(v) for v in dataset.qrels.values())
    counts = {"documents": len(dataset.corpus), "queries": len(dataset.queries), "qrels": n_qrels,
              "candidate_lists": len(dataset.candidates)}
    records = {"corpus.jsonl": len(dataset.corpus), "queries.jsonl": len(dataset.queries), "qrels.tsv": n_qrels}
    with atomic_dir(folder) as tmp:
        write_corpus_jsonl(dataset.corpus, tmp / "corpus.jsonl")
        write_queries_jsonl(dataset.queries, tmp / "queries.jsonl")
        write_qrels_tsv(dataset.qrels, tmp / "qrels.tsv")
        if dataset.candidates:
            write_candidates_tsv(dataset.candidates, tmp / "candidates.tsv")
            records["candidates.tsv"] = sum(len(v) for v in dataset.candidates.values())
        files = {name: file_entry(tmp / name, n) for name, n in records.items()}
        atomic_write_json(tmp / "meta.json", {"name": dataset.name, "split": dataset.split, "counts": counts,
                                              **(meta or {}), FILES_KEY: files})
    return Path(folder)


def read_prepared(folder: PathLike, *, verify: bool = False) -> Dataset:
    """Read a folder written by `write_prepared`, checking each file's record count against meta.json (and with
    `verify`, first every file's sha256: `taser_lib.data.prepared.verify_folder`). A damaged folder (meta.json
    missing, not JSON or without its keys, a data file missing or unreadable, a count or hash that differs) raises
    FormatError naming the file and saying to prepare the dataset again. Folders written before meta.json held
    hashes load as before (their `counts` are checked)."""
    from ..prepared import SPLIT_FILES, again, check_counts, damaged, read_meta, verify_folder

    folder = Path(folder)
    meta = read_meta(folder, required=("name", "split"))
    if verify:
        result = verify_folder(folder)
        if result.problems:
            raise FormatError(folder, None, None, f"{len(result.problems)} problem(s), first: {result.problems[0]}")
    for name in SPLIT_FILES:
        if not (folder / name).is_file():
            raise FormatError(folder / name, None, None, f"missing; {again(folder, meta)}")
    has_candidates = (folder / "candidates.tsv").is_file()
    if not has_candidates and "candidates.tsv" in (meta.get("files") or {}):
        raise FormatError(folder / "candidates.tsv", None, None, f"missing; {again(folder, meta)}")
    try:
        candidates = read_candidates(folder / "candidates.tsv") if has_candidates else {}
        dataset = Dataset(meta["name"], meta["split"], read_beir_corpus(folder / "corpus.jsonl"),
                          read_beir_queries(folder / "queries.jsonl"), read_beir_qrels(folder / "qrels.tsv"),
                          candidates)
    except FormatError as err:
        raise damaged(err, folder, meta) from None
    actual = {"corpus.jsonl": len(dataset.corpus), "queries.jsonl": len(dataset.queries),
              "qrels.tsv": sum(len(v) for v in dataset.qrels.values())}
    if has_candidates:
        actual["candidates.tsv"] = sum(len(v) for v in candidates.values())
    check_counts(folder, meta, actual)
    return dataset
