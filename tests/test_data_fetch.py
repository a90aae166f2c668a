"""Fetching: data-dir and mirror settings, checksum refusal, resumable downloads (file:// and a local HTTP
server on 127.0.0.1), the unverified-file policy, and a clear OfflineError. Nothing here reaches the internet."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import zipfile
from pathlib import Path

import pytest

from taser_lib.datasets.fetch import (DataFile, DownloadError, fetch_file, resolve_data_dir, resolve_mirror,
                                  sha256_file)
from taser_lib.errors import ChecksumError, OfflineError, TaserError

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


def leftovers(folder: Path) -> list[str]:
    """Temporary or partial files a failed fetch might leave behind."""
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and (".part" in p.name or p.name.startswith(".")))



@pytest.fixture(autouse=True)
def _no_data_settings(monkeypatch):
    # These tests pass the data directory and mirror explicitly; a developer's or CI's settings must not leak in.
    monkeypatch.delenv("TASER_DATA_DIR", raising=False)
    monkeypatch.setenv("TASER_DATA_MIRROR", "")  # set but empty: no mirror

def test_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("TASER_DATA_DIR", raising=False)
    monkeypatch.setenv("TASER_DATA_MIRROR", "")  # set but empty: no mirror
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve_data_dir() == tmp_path / "home" / ".cache" / "taser" / "data"
    assert resolve_mirror() is None
    monkeypatch.setenv("TASER_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "cli") == tmp_path / "cli"  # the CLI option beats the environment
    monkeypatch.setenv("TASER_DATA_MIRROR", str(tmp_path))
    assert resolve_mirror() == tmp_path
    with pytest.raises(TaserError, match="not a folder"):
        resolve_mirror(tmp_path / "missing")


def test_datafile_paths_stay_inside():
    for bad in ("/etc/passwd", "../x/y", "flat-name"):
        with pytest.raises(ValueError):
            DataFile(bad, "file:///x", None)


def test_mirror_copy_and_corrupted_copy(shared_data, tmp_path):
    spec = DataFile("cranfield/cran.qry", "http://unused.invalid/cran.qry",
                    "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f")  # SOURCE.md
    data = tmp_path / "data"
    path = fetch_file(spec, data_dir=data, mirror=shared_data)
    assert path == data / "cranfield" / "cran.qry"
    assert path.read_bytes() == (shared_data / "cranfield" / "cran.qry").read_bytes()
    assert fetch_file(spec, data_dir=data, mirror=shared_data) == path  # in place: verified again, kept

    mirror = tmp_path / "mirror"
    (mirror / "cranfield").mkdir(parents=True)
    corrupt = bytearray((shared_data / "cranfield" / "cran.qry").read_bytes())
    corrupt[100] ^= 1
    (mirror / "cranfield" / "cran.qry").write_bytes(bytes(corrupt))
    fresh = tmp_path / "fresh"
    with pytest.raises(ChecksumError, match="refusing"):
        fetch_file(spec, data_dir=fresh, mirror=mirror)
    assert not (fresh / "cranfield" / "cran.qry").exists() and leftovers(fresh) == []

    # A file corrupted after it was fetched is refused too, and force=True replaces it from a good source.
    path.write_bytes(bytes(corrupt))
    with pytest.raises(ChecksumError, match="force"):
        fetch_file(spec, data_dir=data, mirror=shared_data)
    fetch_file(spec, data_dir=data, mirror=shared_data, force=True)
    assert sha256_file(path) == spec.sha256


def test_mirror_zip_member(shared_data, tmp_path):
    from taser_lib.datasets.registry import get

    (spec,) = get("squad-v1.1").files
    path = fetch_file(spec, data_dir=tmp_path / "data", mirror=shared_data)
    # The official file's md5 (SOURCE.md) identifies the extracted member as the official dev-v1.1.json.
    assert hashlib.md5(path.read_bytes()).hexdigest() == "3e85deb501d4e538b6bc56f786231552"
    mirror = tmp_path / "mirror" / "squad-v1.1"
    mirror.mkdir(parents=True)
    with zipfile.ZipFile(mirror / "dev-v1.1.json.zip", "w") as archive:
        archive.writestr("dev-v1.1.json", "{}")
    with pytest.raises(ChecksumError):
        fetch_file(spec, data_dir=tmp_path / "other", mirror=tmp_path / "mirror")
    assert not (tmp_path / "other" / "squad-v1.1" / "dev-v1.1.json").exists()


def test_missing_without_download_never_touches_network(tmp_path):
    spec = DataFile("x/y.txt", "http://127.0.0.1:9/never", PAYLOAD_SHA)
    with pytest.raises(TaserError, match="not in") as info:
        fetch_file(spec, data_dir=tmp_path, mirror=None)
    assert not isinstance(info.value, OfflineError)


def test_file_url_download(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD)
    spec = DataFile("x/payload.bin", source.as_uri(), PAYLOAD_SHA)
    path = fetch_file(spec, data_dir=tmp_path / "data", download=True, progress=False)
    assert path.read_bytes() == PAYLOAD and leftovers(tmp_path / "data") == []
    wrong = DataFile("x/wrong.bin", source.as_uri(), "0" * 64)
    with pytest.raises(ChecksumError):
        fetch_file(wrong, data_dir=tmp_path / "data", download=True, progress=False)
    assert not (tmp_path / "data" / "x" / "wrong.bin").exists() and leftovers(tmp_path / "data") == []


class _Server:
    """A tiny HTTP server on 127.0.0.1 serving PAYLOAD, with Range support that can be switched off and a switch
    that cuts the next response in half (the connection closes early)."""

    def __init__(self):
        self.ranges: list[str | None] = []
        self.cut_next = False
        self.honour_range = True
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                header = self.headers.get("Range")
                outer.ranges.append(header)
                start = int(header[6:-1]) if header and outer.honour_range else 0
                body = PAYLOAD[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(PAYLOAD) - 1}/{len(PAYLOAD)}")
                self.end_headers()
                if outer.cut_next:
                    outer.cut_next = False
                    self.wfile.write(body[: len(body) // 2])
                    return
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/payload.bin"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def test_interrupted_download_resumes(server, tmp_path):
    spec = DataFile("x/payload.bin", server.url, PAYLOAD_SHA)
    target = tmp_path / "x" / "payload.bin"
    server.cut_next = True
    with pytest.raises(DownloadError, match="resumes"):
        fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    part = target.with_name("payload.bin.part")
    assert not target.exists() and part.stat().st_size == len(PAYLOAD) // 2
    path = fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    assert server.ranges == [None, f"bytes={len(PAYLOAD) // 2}-"]
    assert path.read_bytes() == PAYLOAD and not part.exists()


def test_server_without_range_restarts(server, tmp_path):
    server.honour_range = False
    spec = DataFile("x/payload.bin", server.url, PAYLOAD_SHA)
    part = tmp_path / "x" / "payload.bin.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"stale bytes that must not be kept")
    path = fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    assert path.read_bytes() == PAYLOAD and not part.exists()


def test_bad_download_is_deleted(server, tmp_path):
    spec = DataFile("x/payload.bin", server.url, hashlib.sha256(b"something else").hexdigest())
    with pytest.raises(ChecksumError):
        fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    assert not (tmp_path / "x" / "payload.bin").exists() and leftovers(tmp_path) == []


def test_unverified_needs_consent_and_is_recorded(server, tmp_path):
    spec = DataFile("x/payload.bin", server.url, None)
    with pytest.raises(ChecksumError, match="allow_unverified"):
        fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    assert server.ranges == []  # refused before downloading anything
    path = fetch_file(spec, data_dir=tmp_path, download=True, allow_unverified=True, progress=False)
    record = path.with_name("payload.bin.sha256").read_text()
    assert record.split()[0] == PAYLOAD_SHA and "UNVERIFIED" in record
    assert fetch_file(spec, data_dir=tmp_path) == path  # later fetches check it against the recorded hash
    path.write_bytes(PAYLOAD[:-1])
    with pytest.raises(ChecksumError):
        fetch_file(spec, data_dir=tmp_path)


def test_unreachable_network_is_offline_error(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = DataFile("x/payload.bin", f"http://127.0.0.1:{port}/payload.bin", PAYLOAD_SHA)
    with pytest.raises(OfflineError, match="TASER_DATA_MIRROR"):
        fetch_file(spec, data_dir=tmp_path, download=True, progress=False)
    assert leftovers(tmp_path) == []


def test_mirror_without_the_file_falls_back_only_when_asked(server, tmp_path):
    spec = DataFile("x/payload.bin", server.url, PAYLOAD_SHA)
    (tmp_path / "mirror").mkdir()
    with pytest.raises(TaserError, match="not in the mirror"):
        fetch_file(spec, data_dir=tmp_path / "data", mirror=tmp_path / "mirror")
    assert server.ranges == []
    path = fetch_file(spec, data_dir=tmp_path / "data", mirror=tmp_path / "mirror", download=True, progress=False)
    assert path.read_bytes() == PAYLOAD


# --- md5: what MS MARCO and Zenodo publish instead of a sha256 ------------------------------------------------------

PAYLOAD_MD5 = hashlib.md5(PAYLOAD).hexdigest()


def test_md5_only_file_is_verified_not_unverified(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD)
    spec = DataFile("x/payload.bin", source.as_uri(), None, md5=PAYLOAD_MD5)
    assert spec.checksums == {"md5": PAYLOAD_MD5}
    # No allow_unverified needed: the md5 verifies the download, and no "unverified" record is written.
    path = fetch_file(spec, data_dir=tmp_path / "data", download=True, progress=False)
    assert path.read_bytes() == PAYLOAD and not path.with_name("payload.bin.sha256").exists()
    assert fetch_file(spec, data_dir=tmp_path / "data") == path  # in place: its md5 checked again
    path.write_bytes(PAYLOAD[:-1] + b"\0")
    with pytest.raises(ChecksumError, match="md5 .* differs"):
        fetch_file(spec, data_dir=tmp_path / "data")


def test_wrong_md5_is_rejected(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(PAYLOAD)
    wrong = DataFile("x/wrong.bin", source.as_uri(), None, md5="0" * 32)
    with pytest.raises(ChecksumError, match=f"md5 {PAYLOAD_MD5} differs from the expected {'0' * 32}"):
        fetch_file(wrong, data_dir=tmp_path / "data", download=True, progress=False)
    assert not (tmp_path / "data" / "x" / "wrong.bin").exists() and leftovers(tmp_path / "data") == []
    # Both checksums registered: both are checked, a right sha256 does not excuse a wrong md5.
    both = DataFile("x/both.bin", source.as_uri(), PAYLOAD_SHA, md5="0" * 32)
    with pytest.raises(ChecksumError, match="md5"):
        fetch_file(both, data_dir=tmp_path / "data", download=True, progress=False)
    # A mirror copy is checked against the md5 as well.
    mirror = tmp_path / "mirror"
    (mirror / "x").mkdir(parents=True)
    (mirror / "x" / "wrong.bin").write_bytes(PAYLOAD)
    with pytest.raises(ChecksumError, match="refusing"):
        fetch_file(wrong, data_dir=tmp_path / "data", mirror=mirror)
    good = DataFile("x/wrong.bin", "http://unused.invalid/", None, md5=PAYLOAD_MD5)
    assert fetch_file(good, data_dir=tmp_path / "fresh", mirror=mirror).read_bytes() == PAYLOAD


def test_checksums_must_look_like_digests():
    with pytest.raises(ValueError, match="md5"):
        DataFile("x/y.bin", "file:///x", None, md5="ABC")
    with pytest.raises(ValueError, match="sha256"):
        DataFile("x/y.bin", "file:///x", "0" * 32)
