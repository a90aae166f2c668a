"""`taser index`, `taser search`, `taser evaluate`: retrieve from a dataset and score the run.

A dataset is a registered name with an optional split (`squad-open:test`), a prepared folder (corpus.jsonl,
queries.jsonl, qrels.tsv, meta.json; `taser data prepare`), or a standard BEIR folder (corpus.jsonl, queries.jsonl,
qrels/<split>.tsv) or zip, a folder or zip taking its split after a colon (`my-beir:dev`; default test).
An index folder holds `taser_index.json` (which retriever, which model) and `bm25/` or `faiss/` + `embeddings/`.

A dense index of a corpus that is one file (a corpus file given as the dataset: psgs_w100.tsv[.gz], corpus.jsonl
[.gz]; a prepared or BEIR folder's corpus.jsonl; dpr-wiki) is STREAMED from that file into resumable embedding shards
(`retrieval.dense.encode_stream_to_shards`; memory bounded by --shard-size), never loading the corpus. Flat (exact)
streamed indexes keep only the shards and `taser search` scans them shard by shard from memory maps
(`ShardedEmbeddings.search`, the same top k as a faiss flat index); hnsw and ivfpq also build `faiss/` from the
shards (its memory: the faiss index), which search then loads. BM25 indexes load the corpus as before.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from taser_lib.errors import ConfigError, FormatError, TaserError
from .models import ENCODE_PRECISIONS, PRECISION_HELP, cli_encoder

_INDEX_META = "taser_index.json"
DEFAULT_PASSAGE_LENGTH = 192  # the cpu profile's max_passage_length (taser_book/profiles.yaml)
QA_QUERY_CAP = 32             # questions are cut at 32 tokens, as in the papers and the profiles
_DATASET_HELP = ("a registered dataset NAME[:SPLIT] (e.g. squad-open:test), a prepared folder, or a BEIR folder "
                 "(corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv) or zip, with an optional :SPLIT (default test)")


def register(subparsers) -> None:
    p = subparsers.add_parser("index", help="build a BM25 or dense index of a prepared dataset's corpus")
    p.add_argument("dataset", help=_DATASET_HELP + "; or a corpus file (psgs_w100.tsv[.gz], corpus.jsonl[.gz])")
    p.add_argument("--retriever", choices=("bm25", "dense"), required=True)
    p.add_argument("--out", type=Path, required=True, help="index folder")
    _bm25_options(p)
    _dense_options(p, precisions=ENCODE_PRECISIONS)
    p.add_argument("--index-type", choices=("flat", "hnsw", "ivfpq"), default="flat")
    p.add_argument("--index-param", action="append", default=[], metavar="NAME=INT",
                   help="faiss index parameter, e.g. M=32 or nlist=1024 (repeatable)")
    p.add_argument("--shard-size", type=int, default=100_000, help="passages per embedding shard (resumable)")
    p.set_defaults(func=_index)

    s = subparsers.add_parser("search", help="retrieve the top k passages per query; writes a TREC run")
    s.add_argument("dataset", help=_DATASET_HELP + "; or a folder of corpus.jsonl and queries.jsonl alone (no qrels: "
                   "the run only)")
    s.add_argument("--retriever", choices=("bm25", "dense", "hybrid"), required=True)
    s.add_argument("--out", type=Path, required=True, help="TREC run file to write")
    s.add_argument("-k", type=int, default=1000, help="passages per query (default 1000, the depth Pyserini writes "
                   "and trec_eval scores; the hybrid fuses --k-prime from each retriever)")
    s.add_argument("--bm25-index", type=Path, help="index folder from `taser index --retriever bm25` "
                                                  "(default: build one in memory)")
    s.add_argument("--dense-index", type=Path, help="index folder from `taser index --retriever dense` "
                                                   "(default: encode the corpus in memory)")
    _bm25_options(s)
    _dense_options(s, queries=True)
    s.add_argument("--alpha", type=float, help="hybrid: weight of BM25 in Eq. 6 (choose it on a dev set)")
    s.add_argument("--k-prime", type=int, default=100, help="hybrid: candidates from each retriever (default 100)")
    s.add_argument("--tag", default=None, help="run tag (default: the retriever name)")
    s.set_defaults(func=_search)

    e = subparsers.add_parser("evaluate", help="score a TREC run: R@K for QA sets, ir-measures for qrels sets",
                              description="Scores a TREC run. The two arguments go in either order: QRELS RUN as "
                              "trec_eval and ir_measures take them, or RUN DATASET; each is told apart by what it "
                              "holds (a run: 'qid Q0 docid rank score tag' lines; a TREC qrels file: 'qid 0 docid "
                              "grade' lines; a BEIR qrels file: qrels/SPLIT.tsv; else a dataset).")
    e.add_argument("first", metavar="QRELS|RUN", help="a TREC or BEIR qrels file or a dataset (" + _DATASET_HELP
                   + "), or the TREC run")
    e.add_argument("second", metavar="RUN|DATASET", help="the TREC run, or the qrels file or dataset it was made on")
    e.add_argument("--ks", type=int, nargs="+", default=[1, 5, 20, 100], help="K of R@K (QA sets)")
    e.add_argument("--measures", nargs="+", default=["nDCG@10", "RR@10", "R@100"],
                   help="ir-measures measure strings (qrels sets)")
    e.add_argument("--corpus", help="QA sets without passages of their own (dpr-nq, ...): the corpus the run "
                   "retrieved from, a dataset or corpus file (e.g. dpr-wiki); only the run's passages are read")
    e.add_argument("--out", type=Path, help="JSON file for the scores (default: <run>.eval.json)")
    e.add_argument("--per-query", type=Path, metavar="FILE",
                   help="CSV of every query's values, for significance tests (columns query_id,metric,value; "
                        "metric = family/name, e.g. answer_recall/R@20; default: beside --out, "
                        "<run>.per_query.csv)")
    e.set_defaults(func=_evaluate)


def _bm25_options(p: argparse.ArgumentParser) -> None:
    from taser_lib.retrieval.bm25 import BM25Params

    defaults = BM25Params()
    p.add_argument("--k1", type=float, default=defaults.k1, help=f"BM25 k1 (default {defaults.k1})")
    p.add_argument("--b", type=float, default=defaults.b, help=f"BM25 b (default {defaults.b})")


def _dense_options(p: argparse.ArgumentParser, queries: bool = False,
                   precisions: tuple[str, ...] = ("fp32", "bf16", "auto")) -> None:
    p.add_argument("--model", default="default", help="dense encoder: 'default' or a saved model folder")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    p.add_argument("--precision", choices=precisions, default="auto",
                   help=PRECISION_HELP if "int8" in precisions else
                   "encoder precision; auto (default): bf16 where it measured faster than fp32, else fp32 (an index "
                   "built at int8 is searched with queries encoded at this precision)")
    p.add_argument("--max-passage-length", type=int, default=DEFAULT_PASSAGE_LENGTH, metavar="TOKENS",
                   help=f"passages are cut to this many tokens (default {DEFAULT_PASSAGE_LENGTH}, as the book's cpu "
                        "pages encode them)")
    if "int8" in precisions:  # the commands that encode a corpus
        from .models import COMPILE_HELP

        p.add_argument("--compile", action="store_true", help=COMPILE_HELP)
    if not queries:
        return
    p.add_argument("--max-query-length", type=int, default=None, metavar="TOKENS",
                   help="queries are cut to this many tokens (default: the length that cuts none of the dataset's "
                        f"queries, at most {QA_QUERY_CAP} for a QA set, as the book's pages do: "
                        "taser_book.analyses.baselines.query_length)")


def _load_dataset(spec: str):
    """Any dataset spec: a registered NAME[:SPLIT] (squad-open is prepared first if it is not), a prepared folder,
    or a BEIR folder or zip, with an optional :SPLIT (taser_lib.data.resolve)."""
    from taser_lib.datasets.ready import load_evaluation_set

    return load_evaluation_set(spec)


def _encoder(args: argparse.Namespace):
    for flag in ("max_passage_length", "max_query_length"):
        value = getattr(args, flag, None)
        if value is not None and value < 1:
            raise ConfigError(f"--{flag.replace('_', '-')} must be positive, got {value}")
    return cli_encoder(args.model, args.precision, getattr(args, "compile", False), batch_size=args.batch_size,
                       device=args.device, max_passage_length=args.max_passage_length)


def _index_params(pairs: list[str]) -> dict[str, int]:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not value.lstrip("-").isdigit():
            raise ConfigError(f"--index-param {pair!r}: expected NAME=INTEGER")
        params[name] = int(value)
    return params


def _read_index_meta(folder: Path, retriever: str) -> dict:
    path = folder / _INDEX_META
    if not path.is_file():
        raise TaserError(f"{folder} is not an index folder (no {_INDEX_META}; `taser index` writes one)")
    try:
        meta = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise FormatError(path, getattr(err, "lineno", None), None, f"not a JSON index description ({err}); "
                          f"build the index again with `taser index`") from None
    if not isinstance(meta, dict) or meta.get("retriever") not in ("bm25", "dense"):
        raise FormatError(path, None, "retriever", "missing or unknown; build the index again with `taser index`")
    if meta["retriever"] != retriever:
        raise TaserError(f"{folder} is a {meta['retriever']} index, not a {retriever} one")
    return meta


def _index(args: argparse.Namespace) -> int:
    from taser_lib.data.formats import load_corpus_file
    from taser_lib.data.types import Dataset
    from taser_lib.io import atomic_write_json
    from taser_lib.meta import run_metadata
    from taser_lib.retrieval.bm25 import BM25Index, BM25Params
    from taser_lib.retrieval.dense import DenseIndex, encode_corpus_to_shards
    from taser_lib.datasets.streamed import corpus_file, is_corpus_file

    if args.shard_size < 1:
        raise ConfigError("--shard-size must be positive")
    if args.retriever == "dense":
        path = corpus_file(args.dataset)
        if path is not None:
            return _index_streamed(args, path)
    if is_corpus_file(args.dataset):
        dataset = Dataset(Path(args.dataset).name, "all", corpus=load_corpus_file(args.dataset))
    else:
        dataset = _load_dataset(args.dataset)
    if not dataset.corpus:
        raise TaserError(f"{args.dataset} has no documents to index (an empty corpus.jsonl, or a question set "
                         f"without passages)")
    start = time.perf_counter()
    meta = {"retriever": args.retriever, "dataset": str(args.dataset), "n_docs": len(dataset.corpus)}
    if args.retriever == "bm25":
        BM25Index.build(dataset.corpus, BM25Params(k1=args.k1, b=args.b)).save(args.out / "bm25")
    else:
        params = _index_params(args.index_param)
        encoder = _encoder(args)
        shards = encode_corpus_to_shards(encoder, dataset.corpus, args.out / "embeddings",
                                         shard_size=args.shard_size, model_name=args.model)
        DenseIndex.from_shards(shards, args.index_type, params).save(args.out / "faiss")
        meta.update(model=args.model, index_type=args.index_type, index_params=params,
                    precision=encoder.resolved_precision,
                    max_passage_length=getattr(encoder, "max_passage_length", None))
    seconds = time.perf_counter() - start
    atomic_write_json(args.out / _INDEX_META, {**meta, "seconds": seconds, **run_metadata()})
    print(f"indexed {len(dataset.corpus)} passages of {args.dataset} with {args.retriever} into {args.out} "
          f"({seconds:.1f} s)")
    return 0


def _index_streamed(args: argparse.Namespace, path: Path) -> int:
    """A dense index streamed from the corpus file `path` (module docstring): shards, plus faiss/ unless flat."""
    import shutil

    from taser_lib.data.formats import iter_corpus_file
    from taser_lib.io import atomic_write_json
    from taser_lib.meta import run_metadata
    from taser_lib.retrieval.dense import DenseIndex, encode_stream_to_shards

    params = _index_params(args.index_param)
    encoder = _encoder(args)
    start = time.perf_counter()
    shards = encode_stream_to_shards(encoder, iter_corpus_file(path), args.out / "embeddings",
                                     shard_size=args.shard_size, model_name=args.model)
    if args.index_type == "flat":
        search = "shards"
        if (args.out / "faiss").is_dir():  # from an earlier build of this folder: search must not read it
            shutil.rmtree(args.out / "faiss")
    else:
        search = "faiss"
        DenseIndex.from_shards(shards, args.index_type, params).save(args.out / "faiss")
    manifest = json.loads((args.out / "embeddings" / "manifest.json").read_text(encoding="utf-8"))
    seconds = time.perf_counter() - start
    atomic_write_json(args.out / _INDEX_META, {
        "retriever": "dense", "dataset": str(args.dataset), "corpus_file": str(path.resolve()),
        "n_docs": len(shards), "ids_sha256": manifest["ids_sha256"], "streamed": True, "search": search,
        "model": args.model, "index_type": args.index_type, "index_params": params,
        "precision": encoder.resolved_precision, "max_passage_length": getattr(encoder, "max_passage_length", None),
        "seconds": seconds, **run_metadata()})
    print(f"indexed {len(shards)} passages of {args.dataset} with dense, streamed from {path} into {args.out} "
          f"({shards.n_shards} shards; searched {'exactly from the shards' if search == 'shards' else 'with faiss'}; "
          f"{seconds:.1f} s)")
    return 0


def _bm25_run(args: argparse.Namespace, dataset, k: int):
    from taser_lib.retrieval.bm25 import BM25Index, BM25Params

    if args.bm25_index:
        _read_index_meta(args.bm25_index, "bm25")
        index = BM25Index.load(args.bm25_index / "bm25")
    else:
        index = BM25Index.build(dataset.corpus, BM25Params(k1=args.k1, b=args.b))
    if dataset.corpus and index.doc_ids != list(dataset.corpus):  # a question set: the index of its corpus
        raise TaserError(f"the BM25 index was built from another corpus than {args.dataset}'s")
    return index.search(dataset.queries, k=k)


def _dense_run(args: argparse.Namespace, dataset, k: int):
    from taser_book.analyses.baselines import query_length
    from taser_lib.retrieval.dense import DenseIndex, ShardedEmbeddings, ids_digest, dense_search, encode_corpus

    if args.dense_index:
        meta = _read_index_meta(args.dense_index, "dense")
        if meta.get("model") != args.model:
            raise TaserError(f"{args.dense_index} was encoded with --model {meta.get('model')!r}, not {args.model!r}")
        # A question set without passages of its own (dpr-nq) searches the index of the corpus it retrieves from.
        if meta.get("search") == "shards":
            index = ShardedEmbeddings(args.dense_index / "embeddings")
            same = not dataset.corpus or ids_digest(list(dataset.corpus)) == meta.get("ids_sha256")
        else:
            index = DenseIndex.load(args.dense_index / "faiss")
            same = not dataset.corpus or index.doc_ids == list(dataset.corpus)
        if not same:
            raise TaserError(f"the dense index was built from another corpus than {args.dataset}'s")
        encoder = _encoder(args)
    else:
        encoder = _encoder(args)
        doc_ids, embeddings = encode_corpus(encoder, dataset.corpus)
        index = DenseIndex.from_embeddings(embeddings, doc_ids)
    # the queries' length the book's pages use (one rule for both: analyses.baselines.query_length), for an
    # encoder that cuts its queries (a DenseEncoder); another implementation of the Encoder protocol searches as it is
    cut = nullcontext()
    if hasattr(encoder, "query_length"):
        cut = encoder.query_length(args.max_query_length or query_length(dataset, encoder, qa_cap=QA_QUERY_CAP))
    with cut:
        return dense_search(encoder, index, dataset.queries, k=k)


def _search_set(spec: str):
    """What `taser search` reads: any dataset spec, or a folder of corpus.jsonl and queries.jsonl alone (no qrels:
    a user who only wants a run, as with Pyserini's `--topics`)."""
    from taser_lib.data.formats.beir import read_beir_corpus, read_beir_queries
    from taser_lib.data.types import Dataset

    folder = Path(spec)
    files = {name: next((folder / f"{name}.jsonl{gz}" for gz in ("", ".gz")
                         if (folder / f"{name}.jsonl{gz}").is_file()), None) for name in ("corpus", "queries")}
    if folder.is_dir() and all(files.values()) and not (folder / "qrels").exists() \
            and not (folder / "meta.json").exists() and not (folder / "qrels.tsv").exists():
        print(f"{spec}: corpus and queries without qrels: writing the run only", file=sys.stderr)
        return Dataset(folder.name, "all", corpus=read_beir_corpus(files["corpus"]),
                       queries=read_beir_queries(files["queries"]))
    return _load_dataset(spec)


def _run_lines(path: Path) -> int | None:
    """The number of fields on the first non-blank line of a file (6: a TREC run, 4: TREC qrels); None when `path`
    is not a readable file."""
    if not path.is_file():
        return None
    from taser_lib.data.text import iter_lines

    try:
        for _, line in iter_lines(path):
            if line.strip():
                return len(line.split())
    except (TaserError, UnicodeError, OSError):  # a zip, a binary file: not a run (it may be a dataset)
        return None
    return 0


def _evaluation_inputs(first: str, second: str) -> tuple[Path, str]:
    """(the run, the qrels file or dataset) of `taser evaluate`'s two arguments, in either order (ir_measures' QRELS
    RUN, or RUN DATASET): the run is the file of 6-field lines. Neither a run: a one-line error saying so."""
    fields = {arg: _run_lines(Path(arg)) for arg in (first, second)}
    runs = [arg for arg in (first, second) if fields[arg] == 6]
    if len(runs) == 1:
        run = runs[0]
        return Path(run), second if run == first else first
    if not runs:
        gone = [arg for arg in (first, second) if not Path(arg).exists()]
        if len(gone) == 1:  # the other is a file or folder: this one was the run
            raise TaserError(f"{gone[0]}: no such run file")
        empty = [arg for arg in (first, second) if fields[arg] == 0]
        if len(empty) == 1:
            raise FormatError(empty[0], None, None, "the run is empty (no 'qid Q0 docid rank score tag' line)")
        raise TaserError(f"neither {first} nor {second} is a TREC run ('qid Q0 docid rank score tag' per line): "
                         "taser evaluate takes QRELS RUN, as trec_eval and ir_measures do, or RUN DATASET")
    raise TaserError(f"both {first} and {second} read as TREC runs (6 fields per line): give the qrels file or the "
                     "dataset as one of them")


def _qrels_set(spec: str):
    """(the dataset `taser evaluate` scores against, whether it is a plain qrels file): a TREC qrels file ('qid 0
    docid grade'), a BEIR qrels file (qrels/SPLIT.tsv: three columns under its header, which its reader checks),
    else a dataset."""
    path = Path(spec)
    fields = _run_lines(path)
    if fields in (3, 4):
        from taser_lib.data.formats.beir import read_beir_qrels
        from taser_lib.data.formats.trec import read_trec_qrels
        from taser_lib.data.types import Dataset, Query

        qrels = read_trec_qrels(path) if fields == 4 else read_beir_qrels(path)
        return Dataset(path.name, "qrels", queries={q: Query(q, "") for q in qrels}, qrels=qrels), True
    return _load_dataset(spec), False


def _search(args: argparse.Namespace) -> int:
    from taser_lib.retrieval.hybrid import fuse
    from taser_lib.retrieval.runs import write_run

    if args.k < 1 or args.k_prime < 1:
        raise ConfigError("-k and --k-prime must be positive")
    if args.retriever == "hybrid" and args.alpha is None:
        raise ConfigError("--retriever hybrid needs --alpha (TASER App. D: chosen on dev data from 0.5..2.0; "
                          "see taser_lib.retrieval.choose_alpha)")
    dataset = _search_set(args.dataset)
    start = time.perf_counter()
    if args.retriever == "bm25":
        run = _bm25_run(args, dataset, args.k)
    elif args.retriever == "dense":
        run = _dense_run(args, dataset, args.k)
    else:
        run = fuse(_dense_run(args, dataset, args.k_prime), _bm25_run(args, dataset, args.k_prime), args.alpha,
                   k=args.k, k_prime=args.k_prime)
    write_run(args.out, run, tag=args.tag or args.retriever)
    empty = sum(1 for qid in dataset.queries if not run.get(qid))
    print(f"{args.retriever}: {len(dataset.queries)} queries of {args.dataset}, top {args.k} -> {args.out} "
          f"({time.perf_counter() - start:.1f} s" + (f"; {empty} queries retrieved nothing)" if empty else ")"))
    return 0


def _check_documents(path: Path, run, corpus, dataset: str) -> None:
    """Answer matching reads each retrieved passage: a document id the corpus lacks is an error naming the run
    file's first line that holds one."""
    unknown = {doc for scores in run.values() for doc in scores if doc not in corpus}
    if not unknown:
        return
    from taser_lib.data.text import iter_lines

    for number, line in iter_lines(path):  # read_run has checked the file; find the line only
        fields = line.split()
        if len(fields) == 6 and fields[2] in unknown:
            raise FormatError(path, number, "docid", f"document {fields[2]!r} is not in the corpus of {dataset} "
                              f"({len(unknown)} unknown document id(s) in the run): was it made on another corpus?")
    raise FormatError(path, None, "docid", f"{len(unknown)} document id(s) are not in the corpus of {dataset}, e.g. "
                      f"{sorted(unknown)[:3]}")


def _evaluate(args: argparse.Namespace) -> int:
    from taser_lib.data.answers import AnswerMatcher
    from taser_lib.evaluation.answer_recall import answer_hits, hits_at_k, top_k_accuracy
    from taser_lib.evaluation.metrics import evaluate, per_query
    from taser_lib.evaluation.records import flatten, per_query_path, write_per_query
    from taser_lib.io import atomic_write_json
    from taser_lib.meta import run_metadata
    from taser_lib.retrieval.runs import read_run

    args.run, args.dataset = _evaluation_inputs(args.first, args.second)
    run = read_run(args.run)
    if not run:
        raise FormatError(args.run, None, None, "the run is empty (no 'qid Q0 docid rank score tag' line)")
    dataset, qrels_file = _qrels_set(args.dataset)
    if qrels_file:  # a plain qrels file judges some queries; a run's others are not scored, as in trec_eval
        run = {q: docs for q, docs in run.items() if q in dataset.qrels} or run
    if args.corpus:
        if dataset.corpus:
            raise TaserError(f"{args.dataset} has passages of its own: --corpus is for question sets without them")
        from taser_lib.datasets.streamed import corpus_file, lookup_passages

        path = corpus_file(args.corpus)
        dataset.corpus = (lookup_passages(path, {d for scores in run.values() for d in scores}) if path
                          else _load_dataset(args.corpus).corpus)
    unknown = set(run) - set(dataset.queries)
    if unknown:
        raise TaserError(f"{args.run} has {len(unknown)} queries that {args.dataset} does not, "
                         f"e.g. {sorted(unknown)[:3]}: was it made on another dataset or split?")
    with_answers = [q for q in dataset.queries.values() if q.answers]
    if with_answers and len(with_answers) != len(dataset.queries):
        raise TaserError(f"{args.dataset}: {len(dataset.queries) - len(with_answers)} of {len(dataset.queries)} "
                         f"queries have no answers")
    if with_answers:
        _check_documents(args.run, run, dataset.corpus, args.dataset)
    judged = set(dataset.queries) if with_answers else set(dataset.qrels)
    lacking = len(judged - set(run))
    if lacking:
        print(f"taser: warning: {args.run} has no results for {lacking} of the {len(judged)} judged queries of "
              f"{args.dataset}: they score 0", file=sys.stderr)
    # Two families, kept apart: answer recall's R@K (TASER's top-K accuracy) and ir-measures' R@K (qrels recall)
    # share a name.
    scores: dict[str, dict[str, float]] = {}
    values: dict[str, dict[str, dict[str, float]]] = {}  # family -> metric -> query id -> value
    timings: dict[str, float] = {}
    if with_answers:
        start = time.perf_counter()
        hits = answer_hits(AnswerMatcher(dataset.corpus), dataset.queries, run, max(args.ks))
        scores["answer_recall"] = top_k_accuracy(hits, args.ks)
        values["answer_recall"] = {f"R@{k}": hits_at_k(hits, k) for k in args.ks}
        timings["answer_matching_seconds"] = time.perf_counter() - start
    if dataset.qrels:
        scores["ir_measures"] = evaluate(run, dataset.qrels, args.measures)
        values["ir_measures"] = per_query(run, dataset.qrels, args.measures)
    if not scores:
        raise TaserError(f"{args.dataset} has neither answers nor qrels to evaluate against")
    out = args.out or args.run.with_name(args.run.name + ".eval.json")
    per_query_file = write_per_query(args.per_query or per_query_path(out), flatten(values))
    beside = per_query_file.parent.resolve() == out.parent.resolve()
    atomic_write_json(out, {"run": str(args.run), "dataset": str(args.dataset), "queries": len(dataset.queries),
                            "judged_queries_without_results": lacking,
                            **scores, **timings, **run_metadata(),
                            "per_query": per_query_file.name if beside else str(per_query_file.resolve())})
    titles = {"answer_recall": "answer recall (top-K accuracy, DPR matching)", "ir_measures": "qrels (ir-measures)"}
    for family, values in scores.items():
        print(titles[family])
        for name, value in values.items():
            print(f"  {name:>10}  {value:.4f}")
    print(f"({len(dataset.queries)} queries; scores written to {out}, per-query values to {per_query_file})")
    return 0
