#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the folders scripts/gpu-pack.sh made here (gpu-build/, gpu-carry/). Runs
#   (1) every GPU test program through CTest,
#   (2) each GPU test program under compute-sanitizer memcheck (leak check on), leaving out the long runs named in
#       MEMCHECK_EXCLUDE (a gtest negative filter; they run in (1)). Errors returned by CUDA calls are not counted
#       (--report-api-errors no): the error-path tests provoke them on purpose and check them themselves; memory
#       access errors and leaks are counted,
#   (3) the main job, `conveyor train --mode all` (CONVEYOR_CHECK_EPOCHS epochs, default 10),
# and prints one summary line each. Logs go to $OUT/gpu-check (or /tmp/gpu-check).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build}
CARRY=$CONVEYOR_ROOT/gpu-carry
LOG=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVEYOR_FASHION_MNIST_DIR="$CARRY/fashion-mnist"
[ -d "$CARRY/shared-data" ] && export CONVEYOR_SHARED_DATA="$CARRY/shared-data"
EPOCHS=${CONVEYOR_CHECK_EPOCHS:-10}
MEMCHECK_EXCLUDE=${MEMCHECK_EXCLUDE:-Train.GraphModeReachesAccuracyTarget:CavityGpu.Re100ProfilesMatchGhia:CavityGpu.ConvergenceStopsEveryModeAtTheSameStep:Solve.Poisson3dOnes}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

# (1) the GPU suite
ctest --test-dir "$BUILD" --output-on-failure --timeout 300 -j 2 >"$LOG/ctest.log" 2>&1
ctest_rc=$?
tests_line=$(grep -E "tests passed|tests failed" "$LOG/ctest.log" | tail -1)
skipped=$(grep -c "(Skipped)" "$LOG/ctest.log" || true)
grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$LOG/ctest.log" | head -20

# (3) the main job
"$BUILD/bin/conveyor" train --mode all --epochs "$EPOCHS" --data "$CONVEYOR_FASHION_MNIST_DIR" \
  --dot "$LOG/train-step.dot" >"$LOG/train.log" 2>/dev/null
train_rc=$?

# (2) memcheck
mc_errors=0
mc_programs=0
for bin in "$BUILD"/tests/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  mc_programs=$((mc_programs + 1))
  name=$(basename "$bin")
  timeout "${MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
    --error-exitcode 99 \
    "$bin" --gtest_filter="-$MEMCHECK_EXCLUDE" >"$LOG/memcheck-$name.log" 2>&1
  rc=$?
  n=$(grep -Eo "ERROR SUMMARY: [0-9]+" "$LOG/memcheck-$name.log" | awk '{s+=$3} END {print s+0}')
  mc_errors=$((mc_errors + n))
  if [ "$rc" -ne 0 ] || [ "$n" -ne 0 ]; then
    echo "memcheck: $name rc=$rc errors=$n"
    [ "$n" -eq 0 ] && mc_errors=$((mc_errors + 1))
  fi
done

echo "== gpu-check summary =="
echo "tests:    ${tests_line:-no ctest summary} (skipped: $skipped; rc=$ctest_rc)"
echo "memcheck: $mc_programs programs, $mc_errors errors (long runs left out: $MEMCHECK_EXCLUDE)"
echo "train:    rc=$train_rc"
sed -n '/^device/,$p' "$LOG/train.log" | grep -v "^  call "
[ "$ctest_rc" -eq 0 ] && [ "$mc_errors" -eq 0 ] && [ "$train_rc" -eq 0 ]
