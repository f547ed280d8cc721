#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the folders scripts/gpu-pack.sh made on the development machine (gpu-build/ with the
# programs, gpu-carry/ with Debian's libbenchmark.so.1debian, which the machine lacks). Runs `conveyor bench suite`
# (the full run, under 5 minutes on an H200; `--quick`, under 1 minute, when given) and writes into $OUT (or
# /tmp/gpu-bench): bench.json (schema conveyor-bench/1), bench.md (the Markdown report), gbench.json (Google
# Benchmark's own JSON) and bench-console.log (Google Benchmark's progress); with BENCH_PLOTS=1 and Matplotlib
# there, also plots/*.svg (off by default: GPU machines often lack Matplotlib, and copying results back is
# simpler with fewer files; plot on the development machine with `/usr/bin/python3 scripts/plot_bench.py
# bench.json plots/`). Prints the Markdown report last.
# Usage: scripts/gpu-bench.sh [--quick] [other `conveyor bench suite` options, e.g. --filter '^launch/']
# Environment: BUILD_DIR (default gpu-build, else build), BENCH_PLOTS (1: make the SVG plots too).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build}
[ -n "${BUILD_DIR:-}" ] || [ -x "$BUILD/bin/conveyor" ] || BUILD=$CONVEYOR_ROOT/build
CARRY=$CONVEYOR_ROOT/gpu-carry
DEST=${OUT:-/tmp/gpu-bench}
mkdir -p "$DEST"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --format=csv \
  --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,clocks_event_reasons.active ||
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv || true

start=$(date +%s)
"$BUILD/bin/conveyor" bench suite --json "$DEST/bench.json" --markdown "$DEST/bench.md" --gbench-json "$DEST/gbench.json" \
  "$@" >/dev/null 2>"$DEST/bench-console.log"
rc=$?
elapsed=$(($(date +%s) - start))

if [ "$rc" -ne 0 ]; then
  echo "== conveyor bench suite failed (rc=$rc); last lines of $DEST/bench-console.log:"
  tail -n 40 "$DEST/bench-console.log"
fi
if [ "${BENCH_PLOTS:-0}" = 1 ] && [ -s "$DEST/bench.json" ]; then
  python=""
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c 'import matplotlib' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  if [ -n "$python" ]; then
    "$python" "$CONVEYOR_ROOT/scripts/plot_bench.py" "$DEST/bench.json" "$DEST/plots" || echo "plot_bench.py failed"
  else
    echo "(Matplotlib not available here: run scripts/plot_bench.py $DEST/bench.json <folder> elsewhere)"
  fi
fi
echo "== conveyor bench suite $*: rc=$rc, ${elapsed} s; files in $DEST"
[ -s "$DEST/bench.md" ] && cat "$DEST/bench.md"
exit "$rc"
