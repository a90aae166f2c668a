"""Each `taser reproduce` of a profile, recorded, so that a run of a whole profile that spans several sessions still
has one measured wall time.

A `taser reproduce` writes a leg to `results/<profile>/reproduce_log.json` when it starts and rewrites it every
HEARTBEAT_S seconds while it runs (so a leg killed with its session keeps the time it ran), then once more when it
ends: when it started, how long it ran, the machine, `--jobs`, which notebooks it was asked for, whether the run
cache held any trained run when it started, each notebook's outcome, and the seconds it spent on each notebook it
ran (`notebook_seconds`, a running notebook's so far).

`clean_run` reads the legs back: the latest run of the whole profile that started from an empty run cache, and every
leg after it (the run cache resumes trained runs across sessions), until the first leg after which every notebook
of the profile had succeeded. Its wall time is the sum of those legs' times; with `--jobs 2` the notebooks' own
minutes add up to more than that, because two ran at a time. Each notebook's minutes in the run are summed over the
legs too, every attempt included: a page run again after its notebook or a library file changed counts twice, which
a page's `meta.json` (the time of the result it holds) does not show.
"""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from taser_lib.io import atomic_write_json, atomic_write_text

try:
    import fcntl
except ImportError:  # not on Windows: one writer at a time is then up to the user
    fcntl = None

LEDGER_NAME = "reproduce_log.json"
CACHE_ID_NAME = ".cache-id"  # in the run cache: which cache a leg ran on (a cache moved aside keeps its own)
HEARTBEAT_S = 30.0
DONE = ("ok", "skipped")  # a notebook whose result is current after a leg


def runs_cache_is_empty(runs_root: str | os.PathLike) -> bool:
    """True when `runs_root` holds no trained run, finished or not (a run is a folder with its `config.yaml` or
    `finished.json`; hash caches and lock files are not runs)."""
    root = Path(runs_root)
    if not root.is_dir():
        return True
    return not any((d / "config.yaml").is_file() or (d / "finished.json").is_file() for d in root.iterdir()
                   if d.is_dir())


def run_cache_id(runs_root: str | os.PathLike, create: bool = True) -> str | None:
    """The run cache's identity, written into it at first use (`.cache-id`, a random hex string): legs of one run
    share their cache, so a leg of another checkout or another cache is not counted into it, and two pages that read
    one cache read the same trained runs. None when it cannot be read or written, or (`create=False`) when the cache
    has no identity yet and no folder (nothing trained there)."""
    path = Path(runs_root) / CACHE_ID_NAME
    try:
        if not path.is_file():
            if not create and not path.parent.is_dir():
                return None
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, uuid.uuid4().hex[:16] + "\n")
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def read_legs(profile_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The legs recorded for one profile, oldest first (none when the file is missing or unreadable)."""
    path = Path(profile_dir) / LEDGER_NAME
    try:
        legs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return sorted((leg for leg in legs if isinstance(leg, dict)), key=lambda leg: str(leg.get("start_time_utc")))


@contextlib.contextmanager
def _locked(profile_dir: Path) -> Iterator[None]:
    """One writer at a time: two `taser reproduce` of one profile (two lanes) share the ledger."""
    profile_dir.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(profile_dir / f".{LEDGER_NAME}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Ticker:
    """Calls `write` once at the start of a `with` block, then every `every` seconds from a daemon thread until the
    block ends: a heartbeat that leaves a record behind when its process is killed."""

    def __init__(self, write, every: float, name: str):
        self.write, self.every = write, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name=name)

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self.write()

    def __enter__(self) -> "Ticker":
        self.write()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


class Leg:
    """One `taser reproduce`, kept in the ledger while it runs (`with Leg(...) as leg: ... leg.record(stem, status)`)."""

    def __init__(self, profile_dir: str | os.PathLike, *, start_time_utc: str, only: Sequence[str] | None,
                 jobs: int, run_cache_empty: bool, machine: str, git_revision: str | None,
                 run_cache: str | None = None, clock=time.time, heartbeat_s: float = HEARTBEAT_S):
        self.profile_dir, self.clock = Path(profile_dir), clock
        self.started = clock()
        self.entry: dict[str, Any] = {
            "id": uuid.uuid4().hex[:12], "start_time_utc": start_time_utc, "seconds": 0.0, "finished": False,
            "jobs": jobs, "only": list(only) if only else None, "run_cache_empty": run_cache_empty,
            "run_cache": run_cache,
            "machine": machine, "git_revision": git_revision, "notebooks": {}, "notebook_seconds": {}}
        self._running: dict[str, float] = {}  # notebook -> when it started (clock)
        self._lock = threading.Lock()
        self._ticker = Ticker(self._write, heartbeat_s, "reproduce-ledger")

    def _write(self) -> None:
        with self._lock:
            now = self.clock()
            self.entry["seconds"] = round(now - self.started, 1)
            entry = json.loads(json.dumps(self.entry))
            for notebook, since in self._running.items():
                entry["notebook_seconds"][notebook] = self._spent(notebook, since, now)
        try:
            with _locked(self.profile_dir):
                legs = [leg for leg in read_legs(self.profile_dir) if leg.get("id") != entry["id"]]
                atomic_write_json(self.profile_dir / LEDGER_NAME, [*legs, entry])
        except OSError:  # a read-only results folder: the run goes on without its ledger
            pass

    def _spent(self, notebook: str, since: float, now: float) -> float:
        """A notebook's seconds in this leg: what it had before this attempt, and this attempt's from `since`."""
        return round(self.entry["notebook_seconds"].get(notebook, 0.0) + now - since, 1)

    def start(self, notebook: str) -> None:
        """A notebook begins: its seconds count from now (in every beat) until `record`."""
        with self._lock:
            self._running[notebook] = self.clock()

    def record(self, notebook: str, status: str) -> None:
        """A notebook's outcome (ok | skipped | failed), written at once; a skipped one spent no time on its page. A
        notebook that ran to its result gets the time it finished (`notebook_finished_utc`): the Run times page places
        it on the run's clock by that, even after its page is made again by a later run."""
        with self._lock:
            self.entry["notebooks"][notebook] = status
            since = self._running.pop(notebook, None)
            now = self.clock()
            if since is not None and status != "skipped":
                self.entry["notebook_seconds"][notebook] = self._spent(notebook, since, now)
            if status == "ok":
                self.entry.setdefault("notebook_finished_utc", {})[notebook] = \
                    datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")
        self._write()

    def __enter__(self) -> "Leg":
        self._ticker.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._ticker.__exit__(*exc)
        with self._lock:
            self.entry["finished"] = True
        self._write()


def clean_run(legs: Sequence[dict[str, Any]], notebooks: Sequence[str]) -> dict[str, Any] | None:
    """The latest run of the whole profile (`notebooks`) from an empty run cache, over its legs (those on the same run
    cache, by `run_cache_id`; a leg that recorded none counts): when it started, how many legs, their summed seconds,
    the machines and `--jobs`, how many notebooks are done and whether all are (`complete`), and each notebook's
    seconds summed over the legs (`notebook_seconds`; `legs_without_notebook_seconds` counts legs that recorded none,
    from before the ledger kept them, and `legs_reconstructed` those whose per-notebook seconds were filled in
    afterwards, with the reason in `notebook_seconds_reconstructed`), and when each notebook's result was made in
    the run (`finished_utc`, from the last of its legs that made it and recorded the time). None when no leg of the
    whole profile started from an empty run cache."""
    wanted = set(notebooks)
    starts = [i for i, leg in enumerate(legs) if leg.get("run_cache_empty") and
              (not leg.get("only") or wanted <= set(leg["only"]))]
    if not starts:
        return None
    done: set[str] = set()
    used: list[dict[str, Any]] = []
    cache = legs[starts[-1]].get("run_cache")
    for leg in legs[starts[-1]:]:
        if cache and leg.get("run_cache") and leg["run_cache"] != cache:
            continue  # another run cache (another checkout, or a cache moved aside): not a leg of this run
        used.append(leg)
        statuses = leg.get("notebooks") or {}
        done |= {nb for nb, status in statuses.items() if status in DONE}
        done -= {nb for nb, status in statuses.items() if status not in DONE}
        if wanted <= done:
            break
    per_notebook: dict[str, float] = {}
    finished: dict[str, str] = {}
    for leg in used:
        for notebook, seconds in (leg.get("notebook_seconds") or {}).items():
            per_notebook[notebook] = round(per_notebook.get(notebook, 0.0) + float(seconds or 0.0), 1)
        for notebook, when in (leg.get("notebook_finished_utc") or {}).items():
            if (leg.get("notebooks") or {}).get(notebook) in DONE:
                finished[notebook] = str(when)  # the last leg that made it
    return {"start_time_utc": used[0].get("start_time_utc"), "legs": len(used),
            "notebook_seconds": per_notebook, "finished_utc": finished, "done_notebooks": sorted(wanted & done),
            "spans": [[str(leg.get("start_time_utc")), float(leg.get("seconds") or 0.0)] for leg in used],
            "legs_without_notebook_seconds": sum(1 for leg in used if not isinstance(leg.get("notebook_seconds"), dict)),
            "legs_reconstructed": sum(1 for leg in used if leg.get("notebook_seconds_reconstructed")),
            "seconds": round(sum(float(leg.get("seconds") or 0.0) for leg in used), 1),
            "machines": sorted({str(leg.get("machine")) for leg in used if leg.get("machine")}),
            "jobs": sorted({int(leg.get("jobs") or 1) for leg in used}),
            "done": len(wanted & done), "notebooks": len(wanted), "complete": wanted <= done}


def _utc(text: Any) -> datetime | None:
    """An ISO time from the ledger or a `meta.json` as an aware UTC datetime (a naive one is read as UTC)."""
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def hours_into_run(run: Mapping[str, Any], when_utc: Any) -> float | None:
    """How many hours of the run's wall time (`clean_run`'s legs, gaps between sessions left out) had passed at
    `when_utc`, for example when a page's result was written (its `meta.json`'s `time_utc`). A time between two legs
    counts as the end of the earlier one, a time up to a heartbeat after a killed leg's last record as that record;
    None for a time before the run started or after its last leg (another run's result), or unreadable."""
    when = _utc(when_utc)
    if when is None:
        return None
    elapsed = 0.0
    for start_text, seconds in run.get("spans") or []:
        start = _utc(start_text)
        if start is None:
            return None
        offset = (when - start).total_seconds()
        if offset < 0:
            return elapsed / 3600 if elapsed else None
        if offset <= seconds + HEARTBEAT_S:
            return (elapsed + min(offset, seconds)) / 3600
        elapsed += seconds
    return None
