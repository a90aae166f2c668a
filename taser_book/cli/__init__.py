"""The `taser` console script: a thin dispatcher. Each command group lives in its own module here and
exposes `register(subparsers)`; a command parses its arguments, calls the library, prints."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# Command-group modules, in the order `taser --help` lists them.
_GROUPS = ("models", "data", "retrieval", "train", "export", "reproduce", "bench")


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


def _unreadable(err: BaseException) -> str | None:
    """A one-line description of an error that reading a user's file raised outside the library's own checks
    (a missing or unreadable file, undecodable bytes, a damaged archive, broken JSON or YAML), else None."""
    import json
    import zipfile
    import zlib

    if isinstance(err, OSError) and err.filename is not None:
        return f"{err.filename}: {err.strerror or err}"
    file_errors = [OSError, UnicodeError, EOFError, zipfile.BadZipFile, zlib.error, json.JSONDecodeError]
    if "yaml" in sys.modules:
        file_errors.append(sys.modules["yaml"].YAMLError)
    if isinstance(err, tuple(file_errors)):
        return f"cannot read the input ({type(err).__name__}: {err})"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run one command. The library's errors (and a file that cannot be read at all) print one line,
    `taser: error: ...`, and exit 2; TASER_TRACEBACK=1 shows the traceback instead."""
    import taser_lib.datasets  # noqa: F401  (the dataset registry: any argument or config may name a dataset)
    from taser_lib.errors import TaserError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TaserError as err:
        if os.environ.get("TASER_TRACEBACK"):
            raise
        _error(str(err))
        return 2
    except Exception as err:  # noqa: BLE001 - only unreadable input is turned into one line; the rest re-raises
        line = _unreadable(err)
        if line is None or os.environ.get("TASER_TRACEBACK"):
            raise
        _error(line)
        return 2


def _error(message: str) -> None:
    """Print `taser: error: message` as one line, on a line of its own: progress bars the failure left open are
    closed first, and a message's line breaks (a YAML parser's, say) become spaces."""
    tqdm = sys.modules.get("tqdm")
    if tqdm is not None:
        for bar in list(getattr(tqdm.tqdm, "_instances", ())):
            bar.close()
    sys.stderr.flush()
    print("taser: error: " + " ".join(part.strip() for part in message.splitlines() if part.strip()),
          file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
