#!/usr/bin/env bash
# Run ON THE GPU MACHINE from a build made on the development machine and carried there with gpu-carry/ (see
# scripts/gpu-pack.sh, which copies ../shared/data into gpu-carry/shared-data). Runs `conveyor solve --mode all` on
# every Matrix Market file in gpu-carry/shared-data/matrices and on the 2D Poisson problem --poisson 1024
# (1,048,576 unknowns), prints each table, keeps the logs and the graph-while DOT in $OUT/gpu-solve (or
# /tmp/gpu-solve), and ends with one summary line per problem. Takes well under a minute on an H200.
# Environment: BUILD_DIR (default build), CONVEYOR_MATRICES (default gpu-carry/shared-data/matrices).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build} # made by scripts/gpu-pack.sh
CARRY=$CONVEYOR_ROOT/gpu-carry
LOG=${OUT:-/tmp}/gpu-solve
BIN=$BUILD/bin/conveyor
MATRICES=${CONVEYOR_MATRICES:-$CARRY/shared-data/matrices}
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

summary=()
failed=0
# run <name> <args...>: one `conveyor solve --mode all` with its table on stdout and in $LOG/<name>.log.
run() {
  local name=$1
  shift
  echo "== $name"
  "$BIN" solve --mode all "$@" 2>&1 | tee "$LOG/$name.log"
  local rc=${PIPESTATUS[0]}
  echo
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
  summary+=("$name: rc=$rc; $(grep -E '^graph-while' "$LOG/$name.log" | tr -s ' ' | cut -c1-120)")
}

matrices=("$MATRICES"/*.mtx)
if [ -e "${matrices[0]}" ]; then
  for m in "${matrices[@]}"; do run "$(basename "$m" .mtx)" --matrix "$m"; done
else
  echo "no matrices in $MATRICES (run scripts/gpu-pack.sh on the development machine)" >&2
  failed=$((failed + 1))
fi
run poisson2d-1024 --poisson 1024 --dot "$LOG/poisson2d-1024-graph-while.dot"

echo "== gpu-solve summary (logs in $LOG)"
printf '%s\n' "${summary[@]}"
[ "$failed" -eq 0 ]
