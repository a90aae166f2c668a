"""One way to name a dataset for every command, config and notebook: `resolve_dataset(spec, split)`.

A spec is any of
- a registered name, with an optional split: "scifact", "squad-open:dev" (`registry.load_dataset`);
- a prepared split folder: meta.json, corpus.jsonl, queries.jsonl, qrels.tsv (`formats.beir.write_prepared`), or a
  prepared dataset folder holding such split folders (<data dir>/prepared/<name>; `taser data prepare`);
- a standard BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv, and no meta.json (how researchers hold
  their own data), or a BEIR zip of one (`formats.beir.load_beir`).
A folder or zip takes its split after a colon too ("my-beir:dev"); BEIR's default split is "test".

This layer reads what is there and prepares nothing: a derived dataset (squad-open) that is not prepared yet is an
error here. `taser_lib.datasets.ready.load_evaluation_set` prepares it first (its training json carries BM25
hard negatives, which only the retrieval layer can mine).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import TaserError
from .formats.beir import load_beir, read_prepared
from .named import registry
from .prepared import read_meta
from .types import Dataset

PREPARED_FILES = ("meta.json", "corpus.jsonl", "queries.jsonl", "qrels.tsv")
BEIR_FILES = ("corpus.jsonl", "queries.jsonl")
BEIR_DEFAULT_SPLIT = "test"


@dataclass(frozen=True)
class DatasetSpec:
    """What a spec names: `kind` is "registry", "prepared" (a split folder), "prepared-root" (a folder of split
    folders), "beir" (a folder) or "beir-zip"; `target` the registered name or the path."""

    kind: str
    target: str
    split: str | None

    @property
    def path(self) -> Path:
        return Path(self.target)


def _is_prepared_split(folder: Path) -> bool:
    """A prepared split folder: meta.json with corpus.jsonl, queries.jsonl or qrels.tsv beside it (one that lacks
    some of them is a damaged one, which `read_prepared` names)."""
    return (folder / "meta.json").is_file() and any((folder / name).exists() for name in PREPARED_FILES[1:])


def _is_beir(folder: Path) -> bool:
    return all((folder / name).is_file() for name in BEIR_FILES) and (folder / "qrels").is_dir() \
        and not (folder / "meta.json").exists()


def _split_folders(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and _is_prepared_split(p))


def _what_a_folder_holds(folder: Path, split: str | None) -> str:
    beir_split = split or BEIR_DEFAULT_SPLIT
    present = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())[:8]
    return (f"{folder} is neither a prepared folder ({', '.join(PREPARED_FILES)}; or a folder of such split "
            f"folders) nor a BEIR folder ({', '.join(BEIR_FILES)}, qrels/{beir_split}.tsv; no meta.json); "
            f"it holds: {', '.join(present) or 'nothing'}")


def parse_dataset_spec(spec: str | os.PathLike, split: str | None = None) -> DatasetSpec:
    """Classify `spec` (see the module doc) without loading anything. A split given both in the spec
    ("name:dev") and as `split` must agree. Raises TaserError saying what a folder must hold."""
    text = os.fspath(spec)
    path, spec_split = Path(text), None
    if not path.exists() and ":" in text:
        head, _, tail = text.rpartition(":")
        if Path(head).exists() or not _looks_like_path(head):
            path, text, spec_split = Path(head), head, tail or None
    if spec_split and split and spec_split != split:
        raise TaserError(f"{spec}: the spec names split {spec_split!r} but split {split!r} was asked for")
    split = split or spec_split
    if path.is_dir():
        if _is_prepared_split(path):
            return DatasetSpec("prepared", str(path), split)
        if _is_beir(path):
            return DatasetSpec("beir", str(path), split or BEIR_DEFAULT_SPLIT)
        if _split_folders(path):
            return DatasetSpec("prepared-root", str(path), split)
        raise TaserError(_what_a_folder_holds(path, split))
    if path.is_file():
        if path.suffix == ".zip":
            return DatasetSpec("beir-zip", str(path), split or BEIR_DEFAULT_SPLIT)
        raise TaserError(f"{path} is a file, not a dataset: give a prepared or BEIR folder, a BEIR zip, or a "
                         f"registered NAME[:SPLIT]")
    if _looks_like_path(text):
        raise TaserError(f"{text} does not exist (a dataset is a prepared or BEIR folder, a BEIR zip, or a "
                         f"registered NAME[:SPLIT])")
    registry.get(text)  # an unknown name raises, listing the known ones
    return DatasetSpec("registry", text, split)


def _looks_like_path(text: str) -> bool:
    return "/" in text or os.sep in text or text.endswith(".zip") or text.startswith(".") or text.startswith("~")


def resolve_dataset(spec: str | os.PathLike, split: str | None = None, *, data_dir: str | os.PathLike | None = None,
                    mirror: str | os.PathLike | None = None, verify: bool = False) -> Dataset:
    """The dataset a spec names (see the module doc), one split of it, in canonical form. A prepared folder's
    record counts are checked against its meta.json, and with `verify` its files' sha256 too."""
    parsed = parse_dataset_spec(spec, split)
    kind, path, split = parsed.kind, parsed.path, parsed.split
    if kind == "registry":
        return registry.load_dataset(parsed.target, split, data_dir=data_dir, mirror=mirror, verify=verify)
    if kind == "prepared":
        dataset = read_prepared(path, verify=verify)
        if split and dataset.split != split:
            raise TaserError(f"{path} holds the {dataset.split!r} split, not {split!r}")
        return dataset
    if kind == "prepared-root":
        splits = _split_folders(path)
        if split is None:
            default = read_meta(path).get("default_split") if (path / "meta.json").is_file() else None
            split = default or ("test" if "test" in splits else splits[0] if len(splits) == 1 else None)
            if split is None:
                raise TaserError(f"{path} holds the splits {splits}: name one ({path}:SPLIT)")
        if split not in splits:
            raise TaserError(f"{path} has no prepared split {split!r}; it has {splits}")
        return read_prepared(path / split, verify=verify)
    if kind == "beir" and not (path / "qrels" / f"{split}.tsv").is_file():
        have = sorted(p.stem for p in (path / "qrels").glob("*.tsv"))
        raise TaserError(f"{path} is a BEIR folder without qrels/{split}.tsv (its splits: {', '.join(have) or 'none'})")
    return load_beir(path, split)


def registry_name(spec: str | os.PathLike) -> str | None:
    """The registered name a spec names, or None for a folder or zip (no loading)."""
    parsed = parse_dataset_spec(spec)
    return parsed.target if parsed.kind == "registry" else None
