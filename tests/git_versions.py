"""A file's text at a digest, from the working tree or git: for tests of declared result-preserving changes that must
still hold after later commits change the files again."""

from __future__ import annotations

import functools
import hashlib
import subprocess
import tempfile
from pathlib import Path

from taser_book.results import notebook_sha256

REPO = Path(__file__).resolve().parents[1]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout


def digest(path: str, text: str) -> str:
    """sha256 of a file's text as the result records read it (a notebook's by `results.notebook_sha256`)."""
    if path.endswith(".ipynb"):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "nb.ipynb").write_text(text, encoding="utf-8")
            return notebook_sha256(Path(tmp) / "nb.ipynb")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@functools.cache
def source_at(path: str, sha256: str) -> str:
    """The text of `path` at `sha256`: the working tree's, or the newest commit's that has it."""
    here = REPO / path
    if here.is_file() and digest(path, here.read_text(encoding="utf-8")) == sha256:
        return here.read_text(encoding="utf-8")
    for commit in git("log", "--all", "--format=%H", "--", path).split():
        try:
            text = git("show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            continue
        if digest(path, text) == sha256:
            return text
    raise AssertionError(f"no version of {path} in git has sha256 {sha256}")
