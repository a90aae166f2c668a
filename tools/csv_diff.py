"""Compare a page's committed CSV tables (results/<profile>/<page>) with a rerun's, ignoring timing columns:
`python tools/csv_diff.py results/cpu/taser_in_domain /path/to/rerun/results/cpu/taser_in_domain`. Prints, per table,
identical, or which columns differ in how many rows (numbers within 1e-6 relative count as equal)."""
import re
import sys
from pathlib import Path
import pandas as pd

TIMING = re.compile(r"second|wall|time|_s$|per_s|/s|elapsed|minutes|throughput", re.I)

def read(p: Path):
    return pd.read_csv(p, compression="gzip" if p.suffix == ".gz" else None)

def tables(folder: Path):
    out = {}
    for p in sorted(folder.glob("*.csv*")):
        out[p.name.replace(".csv.gz", ".csv")] = p
    return out

def main(old, new):
    old, new = Path(old), Path(new)
    a, b = tables(old), tables(new)
    for name in sorted(set(a) | set(b)):
        if name not in a: print(f"  {name}: only in the rerun"); continue
        if name not in b: print(f"  {name}: only in the committed"); continue
        x, y = read(a[name]), read(b[name])
        keep = [c for c in x.columns if not TIMING.search(str(c))]
        if list(x.columns) != list(y.columns):
            print(f"  {name}: columns differ: -{sorted(set(x.columns)-set(y.columns))} +{sorted(set(y.columns)-set(x.columns))}")
            keep = [c for c in keep if c in y.columns]
        if len(x) != len(y):
            print(f"  {name}: rows {len(x)} -> {len(y)}"); continue
        xs, ys = x[keep].reset_index(drop=True), y[keep].reset_index(drop=True)
        diff = []
        for c in keep:
            u, v = xs[c], ys[c]
            if pd.api.types.is_bool_dtype(u) or pd.api.types.is_bool_dtype(v):
                bad = ~(u.astype(str) == v.astype(str))
            elif pd.api.types.is_numeric_dtype(u) and pd.api.types.is_numeric_dtype(v):
                bad = ~((u - v).abs().le(1e-9 + 1e-6 * v.abs()) | (u.isna() & v.isna()))
            else:
                bad = ~((u.astype(str) == v.astype(str)).fillna(False).astype(bool) | (u.isna() & v.isna()))
            if bad.any(): diff.append((c, int(bad.sum())))
        print(f"  {name}: {'identical' if not diff else 'differs ' + str(diff[:6])} ({len(x)} rows; ignored {[c for c in x.columns if TIMING.search(str(c))]})")

if __name__ == "__main__":
    main(*sys.argv[1:3])
