"""Where dataset files live, and how they get there: from an offline mirror, or downloaded from their source.

- Data directory: `resolve_data_dir()` = the explicit argument (CLI `--data-dir`), else $TASER_DATA_DIR, else
  ~/.cache/taser/data. Files sit at <data dir>/<folder>/<file>, the layout of the offline mirror.
- Offline mirror: `resolve_mirror()` = the explicit argument (CLI `--mirror`), else $TASER_DATA_MIRROR (empty: none),
  else ../shared/data beside the checkout the package runs from: a local folder laid out like ../shared/data. When set, files are copied from it and never downloaded, unless the mirror lacks
  the file and the caller asked to download.
- Checksums: every fetch hashes the file (also one already in place) and compares it with the registry's sha256
  and/or md5 (every one registered is checked); a mismatch raises ChecksumError and the bad bytes never reach the
  final path. md5 exists because some distributors publish only that (MS MARCO's README, Zenodo): it is checked the
  same way. A file whose source publishes no checksum at all (sha256 and md5 None: online files such as DPR's) is
  fetched only with `allow_unverified=True`; its hash is then recorded in "<file>.sha256" (marked unverified) and
  later fetches check the file against that record.
- Downloads (urllib; only when `download=True`, i.e. the user asked to fetch) write "<file>.part", resume it with
  an HTTP Range request when the server supports one (otherwise restart), verify, then rename into place. An
  interrupted download leaves only the .part file. An unreachable network raises OfflineError naming
  TASER_DATA_MIRROR.
"""

from __future__ import annotations

import hashlib
import http.client
import logging
import os
import socket
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from ..progress import tqdm

from ..errors import ChecksumError, OfflineError, TaserError
from ..io import atomic_path, atomic_write_text, hash_file, sha256_file

logger = logging.getLogger("taser_lib.data")

ENV_DATA_DIR = "TASER_DATA_DIR"
ENV_MIRROR = "TASER_DATA_MIRROR"
DEFAULT_DATA_DIR = Path("~/.cache/taser/data")
UNVERIFIED_SUFFIX = ".sha256"
_BLOCK = 1 << 20


class DownloadError(TaserError):
    """The server answered, but not with the file (HTTP error, interrupted transfer)."""


@dataclass(frozen=True)
class DataFile:
    """One file of a dataset.

    path: relative to the data directory and to the mirror ("cranfield/cran.qry").
    url: where exactly these bytes are downloaded from.
    sha256: of those bytes; None when the source publishes none (the offline mirror, whose SOURCE.md files list
        sha256s, then does not hold the file).
    md5: of those bytes, where that is what the source publishes (MS MARCO, Zenodo); checked like sha256. With
        neither, fetch needs allow_unverified.
    split: the split the file serves (fetch can skip other splits' files); None = needed by all.
    mirror_zip_sha256: the mirror holds this file zipped, as "<path>.zip" with this sha256 and the file as its only
        member (SQuAD: the official dev-v1.1.json is mirrored as dev-v1.1.json.zip); both hashes are checked.
    """

    path: str
    url: str
    sha256: str | None
    split: str | None = None
    mirror_zip_sha256: str | None = None
    md5: str | None = None

    def __post_init__(self):
        pure = PurePosixPath(self.path)
        if pure.is_absolute() or ".." in pure.parts or len(pure.parts) < 2:
            raise ValueError(f"DataFile.path must be '<folder>/<file>' inside the data directory, got {self.path!r}")
        for name, digest, size in (("sha256", self.sha256, 64), ("md5", self.md5, 32)):
            if digest is not None and (len(digest) != size or digest.strip("0123456789abcdef")):
                raise ValueError(f"DataFile {self.path}: {name} must be {size} lowercase hex digits, got {digest!r}")

    @property
    def checksums(self) -> dict[str, str]:
        """The registered checksums by algorithm ({"sha256": ..., "md5": ...}); empty when none is known."""
        return {name: digest for name, digest in (("sha256", self.sha256), ("md5", self.md5)) if digest}


def resolve_data_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The data directory: argument, else $TASER_DATA_DIR, else ~/.cache/taser/data."""
    chosen = explicit or os.environ.get(ENV_DATA_DIR) or DEFAULT_DATA_DIR
    return Path(chosen).expanduser().resolve()


def checkout_mirror() -> Path | None:
    """../shared/data beside the checkout this package runs from (an editable install), if that folder exists."""
    root = Path(__file__).resolve().parents[2]
    beside = root.parent / "shared" / "data"
    return beside if (root / "pyproject.toml").is_file() and beside.is_dir() else None


def resolve_mirror(explicit: str | os.PathLike | None = None) -> Path | None:
    """The offline mirror: the argument, else $TASER_DATA_MIRROR (set but empty: none), else ../shared/data beside
    the checkout (`checkout_mirror`), else None."""
    if not explicit and ENV_MIRROR not in os.environ:
        return checkout_mirror()
    chosen = explicit or os.environ.get(ENV_MIRROR)
    if not chosen:
        return None
    path = Path(chosen).expanduser().resolve()
    if not path.is_dir():
        raise TaserError(f"the data mirror {path} (from {'--mirror' if explicit else ENV_MIRROR}) is not a folder")
    return path


def _mismatch(actual: dict[str, str], expected: dict[str, str]) -> str | None:
    """'md5 <actual> differs from the expected <expected>' for the first differing checksum, else None."""
    for name, digest in expected.items():
        if actual[name] != digest:
            return f"{name} {actual[name]} differs from the expected {digest}"
    return None


def _unverified_record(target: Path) -> Path:
    return target.with_name(target.name + UNVERIFIED_SUFFIX)


def _check_in_place(spec: DataFile, target: Path) -> Path:
    """Verify a file already at its final path against the registry (or its unverified-hash record)."""
    expected = spec.checksums
    if not expected:
        record = _unverified_record(target)
        if not record.is_file():
            raise ChecksumError(f"{target} has no published checksum and no record of its hash from its download; "
                                f"delete it and fetch again with allow_unverified (--allow-unverified)")
        expected = {"sha256": record.read_text(encoding="utf-8").split()[0]}
        logger.warning("%s is UNVERIFIED: no published checksum; it matches the hash recorded at download", target)
    problem = _mismatch(hash_file(target, list(expected)), expected)
    if problem:
        raise ChecksumError(f"{target}: {problem}; the file is corrupt or not the registered one. Delete it (or "
                            f"fetch with force=True / --force).")
    return target


def _copy_verified(source: BinaryIO, target: Path, expected: dict[str, str], what: str) -> None:
    """Copy a stream to `target` through a temporary file; rename only if every checksum in `expected`
    ({algorithm: hex digest}) matches."""
    digests = {name: hashlib.new(name) for name in expected}
    with atomic_path(target, suffix=".part") as tmp:
        with open(tmp, "wb") as out:
            for block in iter(lambda: source.read(_BLOCK), b""):
                for digest in digests.values():
                    digest.update(block)
                out.write(block)
        problem = _mismatch({name: d.hexdigest() for name, d in digests.items()}, expected)
        if problem:
            raise ChecksumError(f"{what}: {problem}; refusing to use it ({target} was not written)")


def _from_mirror(spec: DataFile, mirror: Path, target: Path) -> bool:
    """Copy `spec` from the mirror, verified. False when the mirror does not hold it."""
    source = mirror / spec.path
    if source.is_file():
        if not spec.checksums:
            raise ChecksumError(f"{source}: the registry has no checksum for {spec.path}, so a mirrored copy cannot "
                                f"be verified; add its sha256 to the registry")
        with open(source, "rb") as stream:
            _copy_verified(stream, target, spec.checksums, str(source))
        return True
    zipped = mirror / f"{spec.path}.zip"
    if spec.mirror_zip_sha256 and zipped.is_file():
        actual = sha256_file(zipped)
        if actual != spec.mirror_zip_sha256:
            raise ChecksumError(f"{zipped}: sha256 {actual} differs from the expected {spec.mirror_zip_sha256}; "
                                f"refusing to use it")
        member = PurePosixPath(spec.path).name
        with zipfile.ZipFile(zipped) as archive, archive.open(member) as stream:
            _copy_verified(stream, target, spec.checksums, f"{zipped}!{member}")
        return True
    return False


def _offline(url: str, reason: object) -> OfflineError:
    return OfflineError(f"cannot reach {url} ({reason}). Without network, point {ENV_MIRROR} (or --mirror) at a "
                        f"local folder laid out like shared/data, e.g. export {ENV_MIRROR}=../shared/data")


def _download(spec: DataFile, target: Path, progress: bool) -> dict[str, str]:
    """Download `spec.url` to <target>.part (resuming it if present), returning the sha256 (and the md5, when one
    is registered) of the whole file."""
    part = target.with_name(target.name + ".part")
    offset = part.stat().st_size if part.is_file() else 0
    headers = {"User-Agent": "taser-lib"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(spec.url, headers=headers), timeout=60)
    except urllib.error.HTTPError as err:
        if err.code == 416 and offset:  # nothing left to send: the .part may already be complete
            return hash_file(part, ["sha256", *spec.checksums.keys() - {"sha256"}])
        raise DownloadError(f"{spec.url}: HTTP {err.code} {err.reason}") from None
    except urllib.error.URLError as err:
        raise _offline(spec.url, err.reason) from None
    except (socket.timeout, TimeoutError, ConnectionError) as err:
        raise _offline(spec.url, err) from None
    with response:
        status = getattr(response, "status", None)
        content_range = response.headers.get("Content-Range", "") if response.headers else ""
        resuming = bool(offset) and status == 206 and content_range.startswith(f"bytes {offset}-")
        if offset and not resuming:
            logger.info("%s: the server does not resume (HTTP %s); restarting the download", spec.url, status)
            offset = 0
        length = response.headers.get("Content-Length") if response.headers else None
        total = offset + int(length) if length and length.isdigit() else None
        received = offset
        try:
            with open(part, "ab" if resuming else "wb") as out, \
                    tqdm(total=total, initial=offset, unit="B", unit_scale=True, desc=target.name,
                         disable=not progress) as bar:
                for block in iter(lambda: response.read(_BLOCK), b""):
                    out.write(block)
                    received += len(block)
                    bar.update(len(block))
        except (http.client.IncompleteRead, ConnectionError, socket.timeout, TimeoutError) as err:
            raise DownloadError(f"download of {spec.url} interrupted after {received} bytes ({err!r}); {part} is "
                                f"kept and the next fetch resumes it") from None
        if total is not None and received < total:
            raise DownloadError(f"download of {spec.url} ended after {received} of {total} bytes; {part} is kept "
                                f"and the next fetch resumes it")
    return hash_file(part, ["sha256", *spec.checksums.keys() - {"sha256"}])


def fetch_file(spec: DataFile, *, data_dir: str | os.PathLike | None = None,
               mirror: str | os.PathLike | None = None, download: bool = False, allow_unverified: bool = False,
               force: bool = False, progress: bool = True) -> Path:
    """Make `spec` present and verified under the data directory; return its path.

    Order: a file already in place is verified (force=True replaces it instead); else the mirror, if set and
    holding it; else, only with download=True, its URL. Never touches the network unless download=True.
    """
    root = resolve_data_dir(data_dir)
    mirror_root = resolve_mirror(mirror)
    target = root / spec.path
    if target.is_file() and not force:
        return _check_in_place(spec, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mirror_root is not None and _from_mirror(spec, mirror_root, target):
        _unverified_record(target).unlink(missing_ok=True)
        return target
    if not download:
        where = f"the mirror {mirror_root}" if mirror_root else f"{root} (and no mirror is set)"
        raise TaserError(f"{spec.path} is not in {where}. Fetch it (`taser data fetch` downloads it from "
                         f"{spec.url}), or set {ENV_MIRROR} to a folder laid out like shared/data.")
    if not spec.checksums and not allow_unverified:
        raise ChecksumError(f"{spec.url} has no published checksum, so the download could not be verified; "
                            f"pass allow_unverified=True (--allow-unverified) to accept it with its hash recorded")
    actual = _download(spec, target, progress)
    part = target.with_name(target.name + ".part")
    problem = _mismatch(actual, spec.checksums)
    if problem:
        part.unlink(missing_ok=True)
        raise ChecksumError(f"{spec.url}: {problem}; the download was deleted and {target} not written")
    if not spec.checksums:
        atomic_write_text(_unverified_record(target),
                          f"{actual['sha256']}  UNVERIFIED (no published checksum) {spec.url}\n")
        logger.warning("%s is UNVERIFIED: no published checksum; recorded its sha256 %s", target, actual["sha256"])
    else:
        _unverified_record(target).unlink(missing_ok=True)
    os.replace(part, target)
    return target
