"""`taser train --config FILE [--output-dir DIR] [--set KEY=VALUE ...]`: train as a YAML config says (resuming a
killed run; `--set` overrides single fields, e.g. `--set loop.learning_rate=1e-5`);
`taser train --print-config [--kind K] [--arch A]`: print every field of a kind's config with its default (the
model fields of arch A, from its model config class);
`taser train --data FOLDER [--arch A] --output-dir DIR`: train a retriever on a BEIR folder with the defaults
(`beir_data_overrides`: its train qrels, its dev qrels or a held-out tenth of train, best/ by dev nDCG@10).

Multi-GPU / multi-node: `torchrun --nproc_per_node N $(which taser) train --config FILE` (DDP; batch_size is per
device; in-batch negatives are gathered across devices)."""

from __future__ import annotations

import argparse
import json
import sys
import zipfile

# The `--set` examples `taser train --help` shows: (kind, KEY=VALUE), each accepted by that kind's default config
# (tests/test_cli_bad_input.py checks them all).
SET_EXAMPLES = (("retriever", "loop.max_steps=50"), ("retriever", "data.dev_questions=null"),
                ("cross-encoder", "data.train_queries=null"))


def _set_examples() -> str:
    kinds = dict.fromkeys(kind for kind, _ in SET_EXAMPLES)
    return "; ".join(" ".join(f"--set {example}" for k, example in SET_EXAMPLES if k == kind) + f" (kind {kind})"
                     for kind in kinds)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train", help="train a retriever, cross-encoder or distilled student from a YAML config",
        description="Train from a YAML config (see `taser train --print-config`). Started again with the same "
                    "config and output folder, a killed run resumes from its newest checkpoint.")
    p.add_argument("--config", help="the YAML training config")
    p.add_argument("--data", metavar="FOLDER",
                   help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/train.tsv [, qrels/dev.tsv]) to train a "
                        "retriever on: its dev qrels, else the first 10%% of its train queries, choose best/ by "
                        "nDCG@10 (without --config: every other field at its default)")
    p.add_argument("--output-dir", help="run folder (overrides loop.output_dir)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override one config field, value read as YAML (repeatable), e.g. " + _set_examples() +
                        "; each kind's fields: --print-config --kind K")
    p.add_argument("--cache", action="store_true",
                   help="train into the run cache ($TASER_RUNS_DIR, else runs/cache of the repository): a finished "
                        "run of the same config and data is reused, an unfinished one resumed (no --output-dir)")
    p.add_argument("--force", action="store_true", help="with --cache: retrain a finished run from scratch")
    p.add_argument("--print-config", action="store_true", help="print the default config of --kind and exit")
    p.add_argument("--kind", default="retriever",
                   help="with --print-config: retriever | cross-encoder | distill (default: retriever)")
    p.add_argument("--arch", help="with --print-config: the model section's arch (dpr | taser | shared | colbert; "
                                  "default: the kind's own), whose model fields are listed; with --data: the "
                                  "architecture to train (default: taser)")
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    from taser_lib.errors import ConfigError
    from taser_lib.training.kinds import default_yaml, train
    from taser_lib.training.distributed import destroy_distributed, init_distributed, is_main_process

    if args.print_config:
        sys.stdout.write(default_yaml(args.kind, args.arch))
        return 0
    if not args.config and not args.data:
        raise ConfigError("give --config FILE or --data FOLDER (or --print-config to see a full default config)")
    if args.data:
        args.overrides = [*beir_data_overrides(args.data), *args.overrides]  # the user's --set win
    if args.cache:
        return _train_cached(args)
    config = _config(args)
    distributed = init_distributed()  # under torchrun: join the process group (DDP); else a no-op
    main = is_main_process()
    try:
        result = train(config)
    finally:
        if distributed:
            destroy_distributed()
    if not main:
        return 0
    from taser_lib.export.card import refresh_model_cards

    refresh_model_cards(config.loop.output_dir)  # best/ and final/ get their README.md: architecture, data, metrics
    summary = {"best_step": result.best_step, "best_metric": result.best_metric, "final_step": result.final_step,
               "select_metric": config.loop.select_metric, "paths": result.paths}
    if result.curve:
        summary["last_curve_row"] = result.curve[-1]
    print(json.dumps(summary, indent=2))
    return 0


def beir_data_overrides(folder: str) -> list[str]:
    """The `--set` overrides that train a retriever on the BEIR folder or zip `folder`: train on qrels/train.tsv;
    select best/ on qrels/dev.tsv, or, without one, on the first 10% of the train queries (trained on the other 90%);
    by nDCG@10, or by answer recall R@20 when every dev query carries answers (as `training.retriever` scores it)."""
    from pathlib import Path

    from taser_lib.errors import ConfigError

    root = Path(folder)
    if root.is_file() and zipfile.is_zipfile(root):  # BEIR's own zips: one folder inside
        with zipfile.ZipFile(root) as archive:
            names = {"/".join(n.split("/")[1:]) if n.count("/") > n.startswith("qrels/") else n
                     for n in archive.namelist()}
    elif root.is_dir():
        names = {str(f.relative_to(root)) for f in root.rglob("*") if f.is_file()}
    else:
        raise ConfigError(f"--data {folder}: no such BEIR folder or zip")
    if not {"corpus.jsonl", "queries.jsonl"} <= names:
        raise ConfigError(f"--data {folder}: expected a BEIR folder with corpus.jsonl and queries.jsonl")
    if "qrels/train.tsv" not in names:
        raise ConfigError(f"--data {folder}: no qrels/train.tsv, so no judged training queries (search and evaluate "
                          f"need only qrels/test.tsv: `taser search {folder}`)")
    has_dev = "qrels/dev.tsv" in names
    from taser_lib.training.config import DataSource
    from taser_lib.training.retriever import load_beir_source

    train, dev = ("train", "dev") if has_dev else ("train[10%:]", "train[:10%]")
    held = load_beir_source(DataSource("beir", dev, str(root.resolve()))).queries  # read once: training reuses it
    metric = "R@20" if all(q.answers for q in held.values()) else "nDCG@10"  # as training.retriever scores them
    path = json.dumps(str(root.resolve()))
    return [f"data.train=[{{format: beir, path: {path}, split: '{train}'}}]",
            f"data.dev={{format: beir, path: {path}, split: '{dev}'}}", f"loop.select_metric={metric}"]


def _config(args: argparse.Namespace):
    """The config of --config (or, with --data alone, the retriever defaults of --arch), --set applied."""
    from taser_lib.training.config import apply_overrides, config_to_dict
    from taser_lib.training.kinds import config_from_dict, default_config, load_config

    if args.config:
        return load_config(args.config, output_dir=args.output_dir, overrides=args.overrides)
    data = config_to_dict(default_config("retriever", args.arch or "taser"))
    apply_overrides(data, args.overrides, {})
    config = config_from_dict(data, "--data")
    if args.output_dir is not None:
        config.loop.output_dir = str(args.output_dir)
    return config


def _train_cached(args: argparse.Namespace) -> int:
    """`--cache`: `runs.cache.trained_run`; prints the run's folder, model and summary."""
    from taser_lib.errors import ConfigError
    from ..runs.cache import trained_run
    from taser_lib.training.distributed import destroy_distributed, init_distributed, is_main_process

    if args.output_dir:
        raise ConfigError("--cache chooses the run folder itself: drop --output-dir")
    distributed = init_distributed()
    try:
        config = args.config or _config(args)  # --data alone: the retriever defaults with its overrides
        run = trained_run(config, overrides=args.overrides if args.config else (), force=True if args.force else None)
    finally:
        if distributed:
            destroy_distributed()
    if is_main_process():
        summary = {k: run.result.get(k) for k in ("best_step", "best_metric", "final_step", "select_metric")}
        print(json.dumps({"run_dir": str(run.dir), "model": str(run.model_path), "reused": run.reused, **summary,
                          "paths": run.result.get("paths")}, indent=2))
    return 0
