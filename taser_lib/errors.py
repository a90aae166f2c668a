"""Errors that name where bad input came from."""

from __future__ import annotations

from os import PathLike


class TaserError(Exception):
    """Base class for every error this library raises on purpose."""


class FormatError(TaserError, ValueError):
    """A malformed record in an input file: names the file, the line (1-based) and the field."""

    def __init__(self, path: str | PathLike, line: int | None, field: str | None, message: str):
        self.path, self.line, self.field = str(path), line, field
        where = self.path if line is None else f"{self.path}:{line}"
        what = f" field '{field}'" if field else ""
        super().__init__(f"{where}:{what} {message}")


class ChecksumError(TaserError):
    """A fetched file whose sha256 differs from the registry's."""


class OfflineError(TaserError):
    """Something needed the network and the network is not there."""


class ConfigError(TaserError, ValueError):
    """An invalid model, training or profile configuration."""
