"""Train once, use everywhere: a training config's finished run, trained only when none exists yet.

    >>> from taser_book.runs.cache import trained_run, trained_runs
    >>> run = trained_run("configs/squad_open_taser.yaml", seed=1)    # trains, or reuses the finished run
    >>> model = run.load()                                            # the selected (best) model
    >>> runs = trained_runs(config, seeds=[1, 2, 3])                  # one run per seed, each trained once

A run is keyed by a hash of the resolved config (`config_to_dict`, any kind, with the seed and relative paths made
absolute) without the fields that do not change the trained model (`IGNORED_KEYS`: where the run is written, how
often it checkpoints and logs, caches), together with the data's fingerprint: the sha256 of every file or folder
the config names by path (a folder: of each file in it, `meta.json` and hidden files aside) and of every registered
dataset it names without a `path` beside the name (`data_fingerprint`: squad-open by its prepared folder, prepared
now if missing as training would; the others by their registered sha256s). File hashes are computed once and kept
in `<runs_root>/fingerprints.json` by path, size and modification time. So Table 1, Table A1 and Table 2, asking
for the same model on the same data, share one run. The key does not cover the library's code or the machine.

Runs live in `<runs_root>/<kind>-<hash12>/`: the trainer's own layout (checkpoints, curve, best/, final/, ...) plus
`config.yaml` (the resolved config, commented), `fingerprint.json` (the key and all it was computed from) and
`finished.json` (written last: the TrainResult and the time). `runs_root`: the argument, else $TASER_RUNS_DIR, else
`runs/cache` at the root of the taser repository when the working directory lies inside it (notebooks run in
notebooks/ and the CLI at the root: both find the same folder), else ~/.cache/taser/runs.

- A finished run is reused: no training; "reusing finished run <dir>" is printed. Its resumable checkpoints are
  deleted when it finishes (the selected and final models stay): a smoke CI run trains dozens of runs.
- A run without `finished.json` (killed mid-way) resumes from its newest checkpoint (the loop's resume), under the
  config it was started with (its checkpoint and log settings win over a new caller's).
- `force=True`, or $TASER_FORCE_RETRAIN, retrains a finished run from scratch into the same folder (the key does not
  cover the library's code: forcing is how a run trained by since-fixed code is redone). The finished run is first
  renamed to `<dir>.previous-<time>` and deleted only once the new run has finished; a retrain that is interrupted
  is resumed by the next unforced call, and a call that finds only the renamed run puts it back. An unfinished run
  started before the force is discarded and trained again.
  $TASER_FORCE_RETRAIN=1 retrains runs finished before this process started; a Unix time
  (`TASER_FORCE_RETRAIN=1717171717.5`, what `force_retrain_env()` gives) retrains runs finished before that time,
  so that several notebooks of one forced `taser reproduce` retrain a shared run once, not once each.
- Two processes asking for the same run: the second waits on a file lock (`<dir>.lock`, fcntl.flock) and then
  reuses what the first trained. Under torch.distributed rank 0 decides and locks; every rank trains.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import inspect
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from taser_lib.io import sha256_file
from taser_lib.errors import ConfigError
from taser_lib.io import atomic_write_json, atomic_write_text
from taser_lib.meta import run_metadata
from taser_lib.export.card import refresh_model_cards
from taser_lib.training.config import apply_overrides, config_to_dict, to_yaml
from taser_lib.training.kinds import config_from_dict, get_kind, load_config
from taser_lib.training.distributed import all_gather_objects, barrier, is_main_process
from taser_lib.training.loop import TrainResult

try:  # POSIX; elsewhere runs are not guarded against concurrent training
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

ENV_RUNS_DIR = "TASER_RUNS_DIR"
ENV_FORCE = "TASER_FORCE_RETRAIN"
KEY_VERSION = 1
CONFIG_FILE, FINGERPRINT_FILE, FINISHED_FILE = "config.yaml", "fingerprint.json", "finished.json"
FINGERPRINT_CACHE = "fingerprints.json"

# Dotted config keys that do not change the trained model, and key names ignored at any depth.
IGNORED_KEYS = frozenset({"loop.output_dir", "loop.checkpoint_every", "loop.keep_last", "loop.log_every"})
IGNORED_NAMES = frozenset({"output_dir", "progress", "logging", "log_every", "cache"})
IGNORED_SUFFIXES = ("_cache",)  # e.g. cross-encoder teacher_cache: where scores are cached, not what they are
# Options added to a config kind after runs of it were cached: left out of the key while they hold this value (the
# behaviour those runs had), so adding an option does not orphan every cached run of that kind.
ADDED_OPTIONS = {"teacher.released": None}
# Options renamed after runs were cached: {dotted name now: the name the key keeps}, so a rename does not orphan every
# cached run either; a run folder's saved config that has the old name reads back under the new one.
RENAMED_OPTIONS = {"loop.learning_rate": "lr"}  # issue 53: one spelling, transformers' TrainingArguments'

_PROCESS_START = time.time()


# --- where runs live --------------------------------------------------------------------------------------------

def repository_root(start: str | os.PathLike | None = None) -> Path | None:
    """The taser repository holding `start` (default: the working directory): the nearest folder with both
    pyproject.toml and taser_lib/; None outside it."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "taser_lib").is_dir():
            return folder
    return None


def default_runs_root() -> Path:
    """$TASER_RUNS_DIR, else <repository>/runs/cache when the working directory is inside the taser repository,
    else ~/.cache/taser/runs."""
    if os.environ.get(ENV_RUNS_DIR):
        return Path(os.environ[ENV_RUNS_DIR]).expanduser().resolve()
    root = repository_root()
    return root / "runs" / "cache" if root else Path.home() / ".cache" / "taser" / "runs"


# --- data fingerprints ------------------------------------------------------------------------------------------

class _HashCache:
    """sha256 of files, remembered by (absolute path, size, mtime) in <runs_root>/fingerprints.json."""

    def __init__(self, path: Path):
        self.path, self.dirty = path, False
        try:
            self.entries: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.entries = {}

    def sha256(self, file: Path) -> str:
        st = file.stat()
        key, stamp = str(file), [st.st_size, st.st_mtime_ns]
        entry = self.entries.get(key)
        if entry and entry.get("stamp") == stamp:
            return entry["sha256"]
        digest = sha256_file(file)
        self.entries[key] = {"stamp": stamp, "sha256": digest}
        self.dirty = True
        return digest

    def save(self) -> None:
        if self.dirty and is_main_process():
            with contextlib.suppress(OSError):  # a cache: losing a write costs a re-hash, nothing more
                atomic_write_json(self.path, self.entries)
            self.dirty = False


def path_fingerprint(path: Path, hashes: _HashCache) -> dict[str, Any]:
    """{"sha256", "size"} of a file; of a folder, the sha256 over each file's relative path and sha256 (hidden
    files and meta.json, which holds times and versions, left out) with the file count and total size."""
    if path.is_file():
        return {"sha256": hashes.sha256(path), "size": path.stat().st_size}
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name != "meta.json"
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    digest = hashlib.sha256()
    for p in files:
        digest.update(f"{p.relative_to(path).as_posix()}\0{hashes.sha256(p)}\n".encode("utf-8"))
    return {"sha256": digest.hexdigest(), "files": len(files), "size": sum(p.stat().st_size for p in files)}


def _dataset_fingerprint(name: str, hashes: _HashCache) -> dict[str, Any]:
    """A registered dataset by content. A derived one (squad-open) is read from its prepared folder, which training
    prepares when missing (so it is prepared now, and keyed by what it holds: its split, mined negatives, ...);
    any other is read from its raw files, verified against their registered sha256s (or md5s, as "md5:<hex>";
    files without either: the local copy's sha256, None while it is not fetched), or from a prepared copy converted
    from them."""
    from taser_lib.datasets import registry

    entry = registry.get(name)
    if entry.derived_from:
        from taser_lib.datasets.ready import ensure_prepared
        return {"prepared": path_fingerprint(ensure_prepared(name), hashes)}
    files = {}
    for spec in entry.files:
        local = registry.resolve_data_dir() / spec.path
        registered = spec.sha256 or (f"md5:{spec.md5}" if spec.md5 else None)  # fetch verified the file by it
        files[spec.path] = registered or (hashes.sha256(local) if local.is_file() else None)
    return {"files_sha256": files}


def _ignored(dotted: str) -> bool:
    name = dotted.rsplit(".", 1)[-1].split("[", 1)[0]
    plain = "".join(part.split("[", 1)[0] + "." for part in dotted.split("."))[:-1]
    return plain in IGNORED_KEYS or name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES)


def _walk(data: Any, prefix: str = "", parent: dict | None = None) -> Iterator[tuple[str, Any, dict | None]]:
    """(dotted key, value, the mapping holding it) of every leaf not under an ignored key."""
    if isinstance(data, dict):
        for key, value in data.items():
            where = f"{prefix}.{key}" if prefix else str(key)
            if not _ignored(where):
                yield from _walk(value, where, data)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _walk(value, f"{prefix}[{i}]", parent)
    else:
        yield prefix, data, parent


def _strip_ignored(data: Any, prefix: str = "") -> Any:
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            where = f"{prefix}.{key}" if prefix else str(key)
            if not _ignored(where):
                out[key] = _strip_ignored(value, where)
        return out
    if isinstance(data, list):
        return [_strip_ignored(v, f"{prefix}[{i}]") for i, v in enumerate(data)]
    return data


def _looks_like_path(value: str) -> bool:
    return bool(value) and ("/" in value or os.sep in value or "." in value) and Path(value).exists()


def data_fingerprint(config_dict: dict[str, Any], hashes: _HashCache) -> dict[str, Any]:
    """What the config reads, by content: {dotted key: path fingerprint} for values naming a file or folder, and
    {"dataset:<name>": fingerprint} for values naming a registered dataset (unless a `path` beside it says where
    the data is read from instead, e.g. `{format: squad-open, path: FOLDER}`)."""
    from taser_lib.datasets import registry

    datasets = set(registry.names())
    out: dict[str, Any] = {}
    for key, value, parent in _walk(config_dict):
        if not isinstance(value, str):
            continue
        if _looks_like_path(value):
            out[key] = path_fingerprint(Path(value).resolve(), hashes)
        elif value in datasets and f"dataset:{value}" not in out:
            shadowed = not key.endswith(".path") and parent is not None and parent.get("path") is not None
            if not shadowed:
                out[f"dataset:{value}"] = _dataset_fingerprint(value, hashes)
    return out


# --- configs ----------------------------------------------------------------------------------------------------

def _absolute_paths(data: Any, prefix: str = "") -> Any:
    """Relative paths that exist made absolute (the same run from notebooks/ and from the repository root)."""
    if isinstance(data, dict):
        return {k: (v if _ignored(f"{prefix}.{k}" if prefix else str(k)) else
                    _absolute_paths(v, f"{prefix}.{k}" if prefix else str(k))) for k, v in data.items()}
    if isinstance(data, list):
        return [_absolute_paths(v, f"{prefix}[{i}]") for i, v in enumerate(data)]
    if isinstance(data, str) and not os.path.isabs(data) and _looks_like_path(data):
        return str(Path(data).resolve())
    return data


def resolve_config(config: Any, *, seed: int | None = None, overrides: Sequence[str] = ()) -> Any:
    """The config object of a config object, a plain dict or a YAML file, with `overrides` (`dotted.key=value`)
    and `seed` (loop.seed) applied and existing relative paths made absolute; the input is left unchanged."""
    if isinstance(config, (str, os.PathLike)):
        config = load_config(config, overrides=overrides)
        overrides = ()
    data = copy.deepcopy(config) if isinstance(config, dict) else config_to_dict(config)
    if not isinstance(data, dict):
        raise ConfigError(f"trained_run needs a training config, a dict or a YAML path, got {type(config).__name__}")
    if overrides:
        apply_overrides(data, overrides, {})
    if seed is not None:
        data.setdefault("loop", {})["seed"] = int(seed)
    return config_from_dict(_absolute_paths(data))


def _renamed(data: dict[str, Any], *, to_key: bool) -> dict[str, Any]:
    """`data` with each of RENAMED_OPTIONS under the name the key keeps (`to_key`), or back under its name now."""
    data = copy.deepcopy(data)
    for dotted, keyed in RENAMED_OPTIONS.items():
        *parents, name = dotted.split(".")
        old, new = (name, keyed) if to_key else (keyed, name)
        holder = data
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and old in holder:
            holder[new] = holder.pop(old)
    return data


def key_form(data: dict[str, Any]) -> dict[str, Any]:
    """A config's saved form (`config_to_dict`) as its run key reads it: each renamed option under the name runs were
    keyed by, and the added options that hold their default left out."""
    return _strip_added_defaults(_renamed(data, to_key=True))


def _strip_added_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """`data` without the ADDED_OPTIONS that hold their default value."""
    data = copy.deepcopy(data)
    for dotted, default in ADDED_OPTIONS.items():
        *parents, name = dotted.split(".")
        holder = data
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and name in holder and holder[name] == default:
            del holder[name]
    return data


def run_key(config: Any, hashes: _HashCache) -> tuple[str, dict[str, Any]]:
    """(sha256 hex, everything it was computed from) of a resolved config."""
    data = key_form(config_to_dict(config))
    material = {"version": KEY_VERSION, "kind": data.get("kind"),
                "config": json.loads(json.dumps(_strip_ignored(data), sort_keys=True, default=str)),
                "data": data_fingerprint(data, hashes)}
    key = hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()
    return key, material


# --- the cached run ---------------------------------------------------------------------------------------------

@dataclass
class CachedRun:
    """A finished training run in the run cache. `result` is what `finished.json` holds: best_metric,
    best_step, final_step, curve and paths (the TrainResult) and select_metric; `reused`: no training this call."""

    dir: Path
    key: str
    config: Any
    result: dict[str, Any] = field(repr=False)
    reused: bool = False

    @property
    def seed(self) -> int:
        return self.config.loop.seed

    @property
    def train_result(self) -> TrainResult:
        names = {f.name for f in dataclasses.fields(TrainResult)}
        return TrainResult(**{k: v for k, v in self.result.items() if k in names})

    @property
    def model_path(self) -> Path:
        """The selected model (output_dir/best), or the final one when the run had no dev evaluation."""
        paths = self.result.get("paths", {})
        return Path(paths.get("best") or paths["final"])

    @property
    def metric(self) -> float | None:
        return self.result.get("best_metric")

    def load(self, **kwargs: Any):
        """The selected model, through `taser_lib.models.load_model`."""
        from taser_lib.models import load_model
        return load_model(self.model_path, **kwargs)

    def tokenizer(self):
        from taser_lib.models import load_tokenizer
        return load_tokenizer(self.model_path)


def _force_since(force: bool | None) -> float | None:
    """Finished runs older than this time are retrained; None: never."""
    if force is not None:
        return time.time() if force else None
    value = os.environ.get(ENV_FORCE, "").strip()
    if value.lower() in ("", "0", "false", "no", "off"):
        return None
    try:
        number = float(value)
    except ValueError:
        return _PROCESS_START
    return number if number > 1 else _PROCESS_START


def force_retrain_env(since: float | None = None) -> dict[str, str]:
    """The environment that makes every `trained_run` of child processes retrain runs finished before `since`
    (default: now) exactly once: what `taser reproduce --force` sets for its notebooks."""
    return {ENV_FORCE: f"{time.time() if since is None else since:.6f}"}


@contextlib.contextmanager
def _locked(path: Path, progress: bool) -> Iterator[None]:
    if fcntl is None or not is_main_process():
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another process training {path.with_suffix('')}", progress)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _say(message: str, progress: bool) -> None:
    logger.info(message)
    if progress and is_main_process():
        print(message, flush=True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _previous(run_dir: Path) -> list[Path]:
    return sorted(run_dir.parent.glob(f"{run_dir.name}.previous-*"))


def _prepare(run_dir: Path, force_since: float | None, progress: bool) -> str:
    """Under the lock: 'reuse', 'resume' or 'train'. A finished run to retrain is moved aside first (kept until the
    new one finishes); an unfinished run started before `force_since` is discarded (forcing is the remedy for a run
    trained by code since fixed); a finished run that a killed retrain had moved aside, with nothing in its place,
    is put back."""
    finished = _read_json(run_dir / FINISHED_FILE)
    if finished is None and not run_dir.exists():
        kept = [p for p in _previous(run_dir) if (p / FINISHED_FILE).is_file()]
        if kept and force_since is None:
            os.replace(kept[-1], run_dir)
            finished = _read_json(run_dir / FINISHED_FILE)
    if finished is not None:
        if force_since is None or finished.get("finished_at", 0) >= force_since:
            return "reuse"
        aside = run_dir.with_name(f"{run_dir.name}.previous-{time.time():.6f}")
        os.replace(run_dir, aside)  # atomic; deleted once the new run has finished
        _say(f"retraining {run_dir} from scratch; the finished run is kept in {aside} until the new one finishes",
             progress)
        return "train"
    started = _read_json(run_dir / FINGERPRINT_FILE)
    if started is not None and (force_since is None or started.get("started_at", 0) >= force_since):
        return "resume"
    if run_dir.exists():  # forced, or killed before it wrote its fingerprint: start again
        _say(f"discarding unfinished run {run_dir}", progress)
        shutil.rmtree(run_dir)
    return "train"


def _run_kind(config: Any, progress: bool) -> TrainResult:
    run = get_kind(config.kind).run
    try:
        takes_progress = "progress" in inspect.signature(run).parameters
    except (TypeError, ValueError):
        takes_progress = False
    return run(config, progress=progress) if takes_progress else run(config)


def _rerooted(value: Any, old: str, new: str) -> Any:
    if isinstance(value, dict):
        return {k: _rerooted(v, old, new) for k, v in value.items()}
    if isinstance(value, str) and (value == old or value.startswith(old + os.sep)):
        return new + value[len(old):]
    return value


def _finished_run(run_dir: Path, key: str, config: Any, reused: bool) -> CachedRun:
    """The run as `finished.json` describes it, its paths moved under `run_dir` (the cache may have moved)."""
    result = _read_json(run_dir / FINISHED_FILE) or {}
    if result.get("output_dir") and "paths" in result:
        result["paths"] = _rerooted(result["paths"], result["output_dir"], str(run_dir))
    config.loop.output_dir = str(run_dir)
    return CachedRun(run_dir, key, config, result, reused)


def _locate(config: Any, seed: int | None, overrides: Sequence[str], runs_root: str | os.PathLike | None
            ) -> tuple[Any, Path, str, dict[str, Any]]:
    config = resolve_config(config, seed=seed, overrides=overrides)
    root = Path(runs_root).expanduser().resolve() if runs_root is not None else default_runs_root()
    hashes = _HashCache(root / FINGERPRINT_CACHE)
    key, material = run_key(config, hashes)
    hashes.save()
    return config, root / f"{config.kind}-{key[:12]}", key, material


def run_location(config: Any, *, seed: int | None = None, overrides: Sequence[str] = (),
                 runs_root: str | os.PathLike | None = None) -> Path:
    """The folder `trained_run` uses for these arguments (whether or not it exists yet)."""
    return _locate(config, seed, overrides, runs_root)[1]


def trained_run(config: Any, *, seed: int | None = None, overrides: Sequence[str] = (),
                runs_root: str | os.PathLike | None = None, force: bool | None = None,
                progress: bool = True) -> CachedRun:
    """The finished run of a training config (object, dict or YAML path; `overrides` as `taser train --set`),
    trained now only when the cache holds none. See the module docstring for the key, the folder, `force` (None:
    $TASER_FORCE_RETRAIN decides) and resuming."""
    config, run_dir, key, material = _locate(config, seed, overrides, runs_root)
    with _locked(run_dir.with_name(run_dir.name + ".lock"), progress):
        action = _prepare(run_dir, _force_since(force), progress) if is_main_process() else None
        action = all_gather_objects(action)[0]
        if action == "reuse":
            _say(f"reusing finished run {run_dir}", progress)
            return _finished_run(run_dir, key, _saved_config(run_dir, config), reused=True)
        if action == "resume":
            config = _saved_config(run_dir, config)
            config.loop.output_dir = str(run_dir)
            _say(f"resuming unfinished run {run_dir}", progress)
        else:
            config.loop.output_dir = str(run_dir)
            if is_main_process():
                run_dir.mkdir(parents=True, exist_ok=True)
                atomic_write_text(run_dir / CONFIG_FILE, f"# trained by taser_book.runs.cache, key {key}\n"
                                  + to_yaml(config))
                atomic_write_json(run_dir / FINGERPRINT_FILE, {"key": key, **material, "started_at": time.time(),
                                                               "resolved_config": config_to_dict(config)})
            barrier()
            _say(f"training {run_dir}", progress)
        result = _run_kind(config, progress)
        if is_main_process():
            atomic_write_json(run_dir / FINISHED_FILE, {
                **dataclasses.asdict(result), "select_metric": config.loop.select_metric, "output_dir": str(run_dir),
                "finished_at": time.time(), "metadata": run_metadata()})
            refresh_model_cards(run_dir)  # the models' README.md, now with the selection and test metrics
            _drop_checkpoints(run_dir)
            for old in _previous(run_dir):
                shutil.rmtree(old, ignore_errors=True)
        barrier()
        return _finished_run(run_dir, key, config, reused=False)


def _drop_checkpoints(run_dir: Path) -> None:
    """A finished run is reused, never resumed (a forced retrain starts from scratch), so its resumable
    checkpoints (weights plus AdamW state, about 3x the model each, `loop.keep_last` of them, per mining round)
    go once `finished.json` is written; the selected and final models stay."""
    for folder in sorted(run_dir.rglob("checkpoints")):
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)


def _saved_config(run_dir: Path, fallback: Any) -> Any:
    """The config the run was started with (the same key; checkpoint and log settings may differ from a new
    caller's, and a resumed loop insists on its own)."""
    saved = _read_json(run_dir / FINGERPRINT_FILE)
    if not saved or "resolved_config" not in saved:
        return fallback
    return config_from_dict(_renamed(saved["resolved_config"], to_key=False), str(run_dir / FINGERPRINT_FILE))


def trained_runs(config: Any, seeds: Sequence[int], **kwargs: Any) -> list[CachedRun]:
    """`trained_run` once per seed (the same config otherwise), in the order of `seeds`."""
    if not seeds:
        raise ConfigError("trained_runs needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"trained_runs: repeated seeds in {list(seeds)}")
    return [trained_run(config, seed=s, **kwargs) for s in seeds]


def list_runs(runs_root: str | os.PathLike | None = None) -> list[dict[str, Any]]:
    """One row per run folder: dir, kind, key, seed, finished (bool), best_metric."""
    root = Path(runs_root).expanduser().resolve() if runs_root is not None else default_runs_root()
    rows = []
    for folder in sorted(p for p in root.glob("*-*") if p.is_dir() and ".previous-" not in p.name):
        fp, done = _read_json(folder / FINGERPRINT_FILE), _read_json(folder / FINISHED_FILE)
        if fp is None:
            continue
        rows.append({"dir": str(folder), "kind": fp.get("kind"), "key": fp.get("key"),
                     "seed": fp.get("config", {}).get("loop", {}).get("seed"), "finished": done is not None,
                     "best_metric": (done or {}).get("best_metric")})
    return rows
