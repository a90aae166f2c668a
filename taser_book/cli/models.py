"""`taser params` (TASER Table A1/A3 parameter counts) and `taser encode` (embeddings + ids for a corpus)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser("params", help="parameter counts of DPR and every TASER variant (Table A1/A3)")
    p.add_argument("--base", default="bert-base",
                   help="'bert-base' (transformers.BertConfig(), no download), 'default', or a checkpoint folder")
    p.add_argument("--shared-blocks", "-T", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.set_defaults(func=_params)

    e = subparsers.add_parser("encode", help="encode a corpus file into embeddings (.npy shards) + ids")
    e.add_argument("corpus", type=Path, help="BEIR corpus.jsonl or DPR psgs_w100.tsv")
    e.add_argument("--model", default="default", help="'default', a saved model folder, or a hub name")
    e.add_argument("--out", type=Path, required=True, help="output folder (resumable)")
    e.add_argument("--batch-size", type=int, default=64)
    e.add_argument("--max-length", type=int, default=256)
    e.add_argument("--shard-size", type=int, default=100_000)
    e.add_argument("--device", default=None)
    e.add_argument("--precision", choices=ENCODE_PRECISIONS, default="auto", help=PRECISION_HELP)
    e.add_argument("--compile", action="store_true", help=COMPILE_HELP)
    e.set_defaults(func=_encode)


ENCODE_PRECISIONS = ("fp32", "bf16", "auto", "int8")  # int8 for encoding a corpus only (taser_lib.speed.quantized)
PRECISION_HELP = ("auto (default): bf16 where it measured faster than fp32 (CUDA; a CPU with native bf16 and a "
                  "probe that found it faster), else fp32; int8: weight matrix products at int8, CPU only, for "
                  "indexing a large corpus, on the engine a cached probe measured fastest here (PyTorch's dynamic "
                  "quantisation, or ONNX Runtime where it is installed; `taser bench --only precision` measures its "
                  "speed and R@K); recorded in the manifest with its engine (e.g. int8-onnxruntime)")


COMPILE_HELP = ("run the encoder compiled by torch.compile (taser_lib.speed.compiled: Inductor with the weights "
                "frozen; its first batch compiles, 30-50 s on two cores; needs a C++ compiler), at --precision fp32, "
                "bf16 or auto; recorded in the manifest (e.g. bf16-compiled)")


def cli_encoder(model: str, precision: str, compile: bool = False, **kwargs):
    """The encoder `--model`, `--precision` and `--compile` ask for: `load_encoder`, its int8 copy
    (`speed.quantized`) or its compiled form (`speed.compiled`)."""
    from taser_lib.errors import ConfigError
    from taser_lib.models import load_encoder

    if compile and precision == "int8":
        raise ConfigError("--compile runs a float encoder: use it with --precision fp32, bf16 or auto, not int8")
    if compile:
        from taser_lib.speed.compiled import compiled_encoder

        return compiled_encoder(load_encoder(model, precision=precision, **kwargs))
    if precision != "int8":
        return load_encoder(model, precision=precision, **kwargs)
    from taser_lib.speed.quantized import int8_encoder

    return int8_encoder(load_encoder(model, precision="fp32", **kwargs))


def _base_config(base: str):
    from transformers import BertConfig

    if base == "bert-base":
        return BertConfig()
    from taser_lib.models import resolve_checkpoint

    return BertConfig.from_pretrained(resolve_checkpoint(base))


def _params(args: argparse.Namespace) -> int:
    from taser_lib.models import parameter_table

    rows = parameter_table(_base_config(args.base), shared_blocks=args.shared_blocks)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'arch':6} {'routing':13} {'I':>2} {'params':>12} {'ours (M)':>9} {'paper (M)':>9}")
    for r in rows:
        print(f"{r['arch']:6} {r['routing'] or '-':13} {r['experts'] or '-':>2} {r['params']:>12,} "
              f"{r['params_m']:>9} {r['paper_m']:>9}")
    return 0


def _encode(args: argparse.Namespace) -> int:
    import itertools

    from taser_lib.data.formats import iter_corpus_file
    from taser_lib.retrieval.dense import encode_stream_to_shards

    from taser_lib.errors import FormatError, TaserError

    if not args.corpus.exists():
        raise TaserError(f"{args.corpus}: no such corpus file")
    # Streamed: one shard of passages in memory at a time, whatever the corpus size (DPR's 21M passages).
    rows = iter_corpus_file(args.corpus)
    first = next(rows, None)
    if first is None:
        raise FormatError(args.corpus, None, None, "holds no passages")
    encoder = cli_encoder(args.model, args.precision, args.compile, batch_size=args.batch_size,
                          max_passage_length=args.max_length, device=args.device)
    start = time.perf_counter()
    try:
        shards = encode_stream_to_shards(encoder, itertools.chain([first], rows), args.out,
                                         shard_size=args.shard_size, model_name=args.model)
    except ValueError as err:  # another corpus, shard size, model or precision in --out; a bad shard size
        raise TaserError(str(err)) from None
    seconds = time.perf_counter() - start
    print(f"encoded {len(shards)} passages from {args.corpus} into {args.out} at {encoder.resolved_precision} "
          f"({len(shards) / max(seconds, 1e-9):.1f} passages/s, resumed shards included)")
    return 0
