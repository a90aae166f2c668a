"""`taser bench`: run the benchmark suite, print the summary table, write results/bench/<name>.json."""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path


def register(subparsers) -> None:
    from ..bench import NAMES, OPT_IN

    p = subparsers.add_parser("bench", help="benchmark encoding, routing, training, matching and search against "
                                            "their peers and the hardware limit")
    p.add_argument("--quick", action="store_true", help="tiny sizes (seconds): a smoke test, not a measurement")
    p.add_argument("--only", nargs="+", choices=NAMES + OPT_IN, metavar="NAME",
                   help=f"run only these benchmarks ({', '.join(NAMES)}; and, only when named, the long "
                        f"{', '.join(OPT_IN)})")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--out", type=Path, default=None,
                   help="folder for <name>.json (default results/bench, or results/bench-quick with --quick; "
                        "another machine's run: results/bench/machines/<machine>, a column of the performance "
                        "page's per-machine table)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None, help="data directory (default: $TASER_DATA_DIR)")
    p.add_argument("--mirror", default=None, help="offline data mirror (default: $TASER_DATA_MIRROR)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_bench)


def _bench(args: argparse.Namespace) -> int:
    from ..bench import NAMES, BenchConfig, format_table, run_benchmark, write_result
    from taser_lib.errors import ConfigError

    try:
        cfg = BenchConfig(quick=args.quick, device=args.device, seed=args.seed, data_dir=args.data_dir,
                          mirror=args.mirror, progress=not args.no_progress)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    out = args.out or Path("results/bench-quick" if args.quick else "results/bench")
    results, failed = [], []
    for name in args.only or NAMES:
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            result = run_benchmark(name, cfg)
        except Exception:  # noqa: BLE001 - one failed benchmark must not lose the others' results
            traceback.print_exc()
            failed.append(name)
            continue
        path = write_result(result, out)
        print(f"   {result['meta']['wall_seconds']:.1f} s -> {path}", file=sys.stderr, flush=True)
        results.append(result)
    print(format_table(results))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
