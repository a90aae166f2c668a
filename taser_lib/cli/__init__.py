"""The `taser` console script: a thin dispatcher. Each command group lives in its own module here and
exposes `register(subparsers)`; a command parses its arguments, calls the library, prints."""

from __future__ import annotations

import argparse
import importlib
import sys

# Command-group modules, in the order `taser --help` lists them.
_GROUPS = ("models", "data", "retrieval", "train", "reproduce", "bench")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="taser", description="TASER / dual-encoder retrieval toolkit.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in _GROUPS:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"{__name__}.{name}":
                continue  # group not part of this build
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..errors import TaserError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TaserError as err:
        print(f"taser: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
