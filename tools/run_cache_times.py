"""What a profile's trained runs cost, read from a run cache: per kind of run, how many finished, the seconds of
their timed training steps (`usage.step_seconds`) and the wall time of each run's last leg (from its
`run_config.json`, written when the leg starts, to `finished.json`: training, dev evaluations and test scoring).

    python tools/run_cache_times.py runs/cache [--since 2026-11-28T11:00]

A run killed part way and started again counts its last leg only (the killed legs' time is lost), so the total is a
lower bound on what the runs cost; the pages' own evaluation time is in each result's meta.json (Run times page).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path)
    parser.add_argument("--since", default=None, help="only runs finished at or after this UTC time (ISO)")
    args = parser.parse_args()
    since = datetime.fromisoformat(args.since).replace(tzinfo=timezone.utc).timestamp() if args.since else None
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for finished in sorted(args.cache.glob("*/finished.json")):
        record = json.loads(finished.read_text())
        end = float(record["finished_at"])
        if since is not None and end < since:
            continue
        start = (finished.parent / "run_config.json").stat().st_mtime
        kind = finished.parent.name.rsplit("-", 1)[0]
        row = totals[kind]
        row[0] += 1
        row[1] += float((record.get("usage") or {}).get("step_seconds") or 0.0)
        row[2] += max(0.0, end - start)
    print(f"{'kind':<16}{'runs':>6}{'training steps (min)':>22}{'last leg wall (min)':>22}")
    for kind, (n, steps, wall) in sorted(totals.items()):
        print(f"{kind:<16}{n:>6}{steps / 60:>22.1f}{wall / 60:>22.1f}")
    n, steps, wall = (sum(r[i] for r in totals.values()) for i in range(3))
    print(f"{'all':<16}{n:>6}{steps / 60:>22.1f}{wall / 60:>22.1f}")


if __name__ == "__main__":
    main()
