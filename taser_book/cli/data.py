"""`taser data list | fetch NAME | prepare NAME | verify NAME|FOLDER`: the dataset registry from the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers) -> None:
    data = subparsers.add_parser("data", help="datasets: list, fetch (verified), prepare")
    sub = data.add_subparsers(dest="data_command", required=True)

    listing = sub.add_parser("list", help="registered datasets, their license and local status")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    _where(listing)
    listing.set_defaults(func=_list)

    fetch = sub.add_parser("fetch", help="copy a dataset from the mirror, or download it, and verify its sha256")
    fetch.add_argument("name")
    fetch.add_argument("--split", action="append", help="only this split's files (repeatable; default: all)")
    fetch.add_argument("--offline", action="store_true", help="never download; use the mirror only")
    fetch.add_argument("--allow-unverified", action="store_true",
                       help="accept files that have no published checksum (their hash is recorded)")
    fetch.add_argument("--force", action="store_true", help="replace files already in the data directory")
    _where(fetch)
    fetch.set_defaults(func=_fetch)

    prepare = sub.add_parser("prepare", help="convert a fetched dataset to the prepared layout (squad-open: build "
                                             "the benchmark)")
    prepare.add_argument("name")
    prepare.add_argument("--split", action="append", help="only this split (repeatable; default: all)")
    prepare.add_argument("--seed", type=int, default=None, help="squad-open: article split seed (default 0)")
    prepare.add_argument("--hard-negatives", type=int, default=None, metavar="N",
                         help="squad-open: BM25 hard negatives per training question, best first (0: none; default "
                              "the library's, 10, of which DPR-style training uses the first)")
    _where(prepare)
    prepare.set_defaults(func=_prepare)

    verify = sub.add_parser("verify", help="check a prepared dataset's files against the sha256 and record counts "
                                           "its meta.json holds")
    verify.add_argument("target", metavar="NAME|FOLDER",
                        help="a registered dataset (its prepared folder) or a prepared folder (split or dataset)")
    verify.add_argument("--data-dir", type=Path, default=None,
                        help="data directory (default: $TASER_DATA_DIR, else ~/.cache/taser/data)")
    verify.set_defaults(func=_verify)


def _where(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=Path, default=None,
                   help="data directory (default: $TASER_DATA_DIR, else ~/.cache/taser/data)")
    p.add_argument("--mirror", type=Path, default=None,
                   help="offline mirror laid out like shared/data (default: $TASER_DATA_MIRROR)")


def _list(args: argparse.Namespace) -> int:
    from taser_lib.datasets.registry import get, local_status, names

    rows = []
    for name in names():
        entry = get(name)
        rows.append({"name": name, "status": local_status(name, args.data_dir, args.mirror),
                     "license": entry.license, "splits": list(entry.splits), "description": entry.description})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["name"]) for r in rows)
    print(f"{'NAME':<{width}}  {'STATUS':<9}  LICENSE")
    for r in rows:
        print(f"{r['name']:<{width}}  {r['status']:<9}  {r['license']}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from taser_lib.datasets.fetch import UNVERIFIED_SUFFIX
    from taser_lib.datasets.registry import fetch

    paths = fetch(args.name, args.split, data_dir=args.data_dir, mirror=args.mirror, download=not args.offline,
                  allow_unverified=args.allow_unverified, force=args.force)
    for path in paths:
        unverified = path.with_name(path.name + UNVERIFIED_SUFFIX).is_file()
        print(f"{'UNVERIFIED' if unverified else 'verified  '}  {path}")
    print(f"{args.name}: {len(paths)} file(s) in place")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from taser_lib.datasets.ready import prepare

    extra = {} if args.hard_negatives is None else {"hard_negatives": args.hard_negatives}
    summary = prepare(args.name, args.split, data_dir=args.data_dir, mirror=args.mirror, seed=args.seed, **extra)
    print(json.dumps(summary, indent=2))
    return 0


def _verify(args: argparse.Namespace) -> int:
    from taser_lib.datasets.registry import verify_prepared
    from taser_lib.errors import TaserError

    result = verify_prepared(args.target, args.data_dir)
    for problem in result.problems:
        print(f"DIFFERS  {problem}")
    for meta in result.unhashed:
        print(f"NOTE     {meta} carries no hashes (prepared before meta.json recorded them): record counts checked "
              f"only; run `taser data prepare {result.name or 'NAME'}` again to record them")
    if result.problems:
        raise TaserError(f"{result.folder}: {len(result.problems)} problem(s) (listed above), the first: "
                         f"{result.problems[0]}")
    checks = "sha256 and record counts" if not result.unhashed else "record counts; no hashes to check"
    print(f"OK       {result.folder}: {len(result.checked)} file(s) match meta.json ({checks})")
    return 0
