"""Lines of the core: every file of taser_lib's models, losses, data, retrieval, evaluation and training, plus every
taser_lib module they import (at the top of a file or inside a function), followed to the end.

    python tools/core_lines.py              # the total, and the lines per package
    python tools/core_lines.py --files      # every counted file with its lines
    python tools/core_lines.py --notebooks  # the notebooks' lines of code (non-blank lines of code cells)
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "taser_lib"
CORE = ("models", "losses", "data", "retrieval", "evaluation", "training")


def module_file(name: str) -> Path | None:
    rel = Path(*name.split("."))
    for candidate in (ROOT / rel / "__init__.py", ROOT / rel.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def imported(path: Path) -> set[Path]:
    """The taser_lib files `path` imports (a package's __init__ for `from pkg import name` too)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1] if parts[-1] != "__init__" else parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            if name.split(".")[0] == "taser_lib" and (file := module_file(name)) is not None:
                found.add(file)
    return found


def core_files() -> list[Path]:
    todo = [p for pkg in CORE for p in ((LIB / pkg).rglob("*.py") if (LIB / pkg).is_dir() else [LIB / f"{pkg}.py"])]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(imported(path) - seen)
    return sorted(seen)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def notebook_lines(path: Path) -> int:
    """Non-blank lines of a notebook's code cells."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
               for c in cells if c["cell_type"] == "code")
    return sum(1 for source in sources for line in source.splitlines() if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", action="store_true", help="list every counted file")
    parser.add_argument("--notebooks", action="store_true", help="count the notebooks' lines of code instead")
    args = parser.parse_args()
    if args.notebooks:
        counts = {p.stem: notebook_lines(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
        print(f"notebook code: {sum(counts.values()):,} lines in {len(counts)} notebooks")
        for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            print(f"  {name:24s} {n:5,d}")
        return
    files = core_files()
    by_package: dict[str, int] = {}
    for path in files:
        rel = path.relative_to(LIB)
        key = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        by_package[key] = by_package.get(key, 0) + lines(path)
        if args.files:
            print(f"{lines(path):6d}  {path.relative_to(ROOT)}")
    print(f"core: {sum(by_package.values()):,} lines in {len(files)} files")
    for key, n in sorted(by_package.items(), key=lambda kv: -kv[1]):
        print(f"  {key:12s} {n:6,d}")


if __name__ == "__main__":
    main()
