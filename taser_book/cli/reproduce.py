"""`taser reproduce` (run the notebooks at a profile, then build the book) and `taser book` (build it from results)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers) -> None:
    r = subparsers.add_parser(
        "reproduce", help="run every notebook with papermill at a profile, then build the book",
        description="Runs notebooks/*.ipynb at the profile's parameters, writes results/<profile>/<notebook>/ "
                    "(only for notebooks that succeed), prints a summary and builds the book into _build/html. "
                    "A notebook whose result at the profile is up to date (same notebook, library files and "
                    "parameters) is skipped. Exits 1 if any notebook or the book failed.")
    r.add_argument("--profile", required=True, help="smoke, cpu, gpu, full, or one of your --profiles file")
    r.add_argument("--only", nargs="+", metavar="NAME", help="run only these notebooks (stems, e.g. baselines; spaces or commas between names)")
    r.add_argument("--jobs", type=int, default=1, help="notebooks run in parallel (default 1)")
    _common(r)
    r.add_argument("--profiles", type=Path, default=None,
                   help="extra profiles YAML (default: $TASER_PROFILES); see taser_book/profiles.yaml")
    r.add_argument("--no-book", action="store_true", help="run the notebooks only (e.g. one task of a job array)")
    r.add_argument("--list", action="store_true",
                   help="print the notebooks it would run, one per line in run order (the profile's run_first "
                        "first), and run nothing: the tasks of a job array (book/reproduce.md, 'A Slurm job array')")
    r.add_argument("--dry-run", action="store_true",
                   help="print what it would run (each notebook that is missing or stale, why, and the minutes its "
                        "last published run took) and the total, and run nothing")
    r.add_argument("--force", action="store_true",
                   help="run notebooks whose results are up to date too, and retrain cached training runs "
                        "(sets TASER_FORCE_RETRAIN for the notebooks)")
    r.add_argument("--allow-dirty", action="store_true",
                   help="publish results (any profile but smoke) from a checkout with uncommitted changes outside "
                        "results/; the pages then show the revision as '+dirty'")
    r.set_defaults(func=_reproduce)

    b = subparsers.add_parser(
        "book", help="build the book from existing results (no notebook is run)",
        description="Regenerates the scorecard and the run-times page from results/ and builds the Jupyter Book "
                    "into _build/html, showing for each notebook its executed copy from --profile, else from the "
                    "largest profile that ran it (a stale one with a warning). On a fresh clone it shows the "
                    "committed results.")
    b.add_argument("--profile", default=None, help="prefer this profile's executed notebooks")
    _common(b)
    b.set_defaults(func=_book)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=Path("."),
                   help="the repository root holding notebooks/, book/, _config.yml (default: .)")
    p.add_argument("--results", type=Path, default=None, help="results folder (default: <root>/results)")


def _reproduce(args: argparse.Namespace) -> int:
    from ..reproduce import plan, plan_text, planned_notebooks, reproduce

    if args.dry_run:
        print(plan_text(plan(args.profile, args.only, root=args.root, results_root=args.results,
                             profiles_file=args.profiles, force=args.force), args.profile))
        return 0
    if args.list:
        print("\n".join(planned_notebooks(args.profile, args.only, root=args.root, profiles_file=args.profiles)))
        return 0
    return reproduce(args.profile, only=args.only, jobs=args.jobs, root=args.root, results_root=args.results,
                     profiles_file=args.profiles, book=not args.no_book, force=args.force,
                     allow_dirty=args.allow_dirty)


def _book(args: argparse.Namespace) -> int:
    from ..book import build_book

    index = build_book(args.root, args.results, prefer=args.profile)
    print(f"book: {index}")
    return 0
