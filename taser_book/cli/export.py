"""`taser export`: a trained model in another library's format (sentence-transformers), with its model card."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="write a trained model as a sentence-transformers folder (with a model card)",
        description="Write RUN (a training run folder, its best/ or final/ model, any saved model folder, or "
                    "'default') as a sentence-transformers model folder OUT, atomically. SentenceTransformer(OUT) "
                    "loads it; its encode_query / encode_document give our query and passage vectors. DPR and "
                    "Shared load with no flag; TASER with specialized blocks needs taser_lib and "
                    "trust_remote_code=True. Pass titled passages as (title, text) tuples.")
    p.add_argument("run", help="training run folder (its best/, else final/ model), a model folder, or 'default'")
    p.add_argument("out", type=Path, help="the new model folder")
    p.add_argument("--format", default="sentence-transformers", choices=["sentence-transformers"],
                   help="target format (default: sentence-transformers)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--max-query-length", type=int, default=None,
                   help="query tokens (default: DenseEncoder's, as `taser encode` / `taser index` use)")
    p.add_argument("--max-passage-length", type=int, default=None, help="passage tokens (default: DenseEncoder's)")
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from taser_lib.export.card import stored_parameters
    from taser_lib.export import export_sentence_transformers

    out = export_sentence_transformers(args.run, args.out, force=args.force, max_query_length=args.max_query_length,
                                       max_passage_length=args.max_passage_length)
    parameters, tensors = stored_parameters(out)
    print(f"exported {args.run} to {out} ({args.format}: {parameters:,} parameters in {tensors} tensors; "
          f"model card {out / 'README.md'})")
    return 0
