#!/usr/bin/env bash
# Run ON THE GPU MACHINE from a build made on the development machine and carried there (with gpu-carry/ from
# scripts/gpu-pack.sh, which holds the Ghia et al. tables under gpu-carry/shared-data/ghia1982):
#   `conveyor cavity --mode all` at Re 100, 400 and 1000 on a 257 x 257 lattice, each run to a velocity change per
#   step below 1e-7 of the lid speed (capped at 250 convective times, 642,500 steps), writing the centre-line
#   profiles (CSV), the velocity-magnitude pictures (PNG) and the captured 100-step graph (DOT) into $OUT (or
#   ./cavity-out), and printing the timing tables and the differences from Ghia et al.
# Extra arguments go to every `conveyor cavity` run (e.g. --steps-per-graph 500, --n 513).
# Expected run time on an H200: well under a minute per Reynolds number (see docs/cavity.md).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build} # made by scripts/gpu-pack.sh
CARRY=$CONVEYOR_ROOT/gpu-carry
DEST=${OUT:-$CONVEYOR_ROOT/cavity-out}
mkdir -p "$DEST/csv"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -z "${CONVEYOR_SHARED_DATA:-}" ] && [ -d "$CARRY/shared-data" ]; then
  export CONVEYOR_SHARED_DATA="$CARRY/shared-data"
fi
N=${CAVITY_N:-257}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

status=0
for re in 100 400 1000; do
  echo "== conveyor cavity --re $re --n $N --mode all =="
  start=$(date +%s)
  "$BUILD/bin/conveyor" cavity --mode all --re "$re" --n "$N" --csv "$DEST/csv" \
    --png "$DEST/cavity_re${re}_n${N}.png" --dot "$DEST/cavity_re${re}_n${N}_graph.dot" "$@" \
    2>"$DEST/cavity_re${re}_n${N}.progress" | tee "$DEST/cavity_re${re}_n${N}.txt"
  rc=${PIPESTATUS[0]}
  echo "(Re $re: rc=$rc, $(($(date +%s) - start)) s wall)"
  if [ "$rc" -ne 0 ]; then
    status=1
    tail -n 5 "$DEST/cavity_re${re}_n${N}.progress"
  fi
done

echo "== gpu-cavity summary =="
for re in 100 400 1000; do
  f="$DEST/cavity_re${re}_n${N}.txt"
  [ -f "$f" ] || continue
  echo "Re $re: $(grep -E '^graph +\|' "$f" | tr -s ' ')"
  grep -E "max \|ours - Ghia\||bitwise|DIFFER|mass:" "$f" | sed "s/^/  Re $re: /"
done
exit "$status"
