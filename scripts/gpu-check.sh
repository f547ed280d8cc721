#!/usr/bin/env bash
# Run ON THE GPU MACHINE from a build made on the development machine and carried there (with gpu-carry/ from
# scripts/gpu-pack.sh). Runs (1) the whole test suite with GPU tests enabled, (2) every test program under
# compute-sanitizer memcheck, (3) a short main-job run, and prints one summary line for each.
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/build}
CARRY=$CONVEYOR_ROOT/gpu-carry
LOG=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVEYOR_FASHION_MNIST_DIR="$CARRY/fashion-mnist"
[ -d "$CARRY/shared-data" ] && export CONVEYOR_SHARED_DATA="$CARRY/shared-data"
EPOCHS=${CONVEYOR_CHECK_EPOCHS:-1}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

# (1) the whole suite, GPU tests enabled
ctest --test-dir "$BUILD" --output-on-failure -j 4 >"$LOG/ctest.log" 2>&1
ctest_rc=$?
tests_line=$(grep -E "tests passed|tests failed" "$LOG/ctest.log" | tail -1)
skipped=$(grep -c "Skipped" "$LOG/ctest.log" || true)

# (2) memcheck on every test program
mc_errors=0
mc_programs=0
for bin in "$BUILD"/tests/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  mc_programs=$((mc_programs + 1))
  name=$(basename "$bin")
  compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 "$bin" >"$LOG/memcheck-$name.log" 2>&1
  rc=$?
  n=$(grep -Eo "ERROR SUMMARY: [0-9]+" "$LOG/memcheck-$name.log" | awk '{s+=$3} END {print s+0}')
  mc_errors=$((mc_errors + n))
  if [ "$rc" -ne 0 ] || [ "$n" -ne 0 ]; then
    echo "memcheck: $name rc=$rc errors=$n"
    [ "$n" -eq 0 ] && mc_errors=$((mc_errors + 1))
  fi
done

# (3) a short main-job run
"$BUILD/bin/conveyor" train --mode all --epochs "$EPOCHS" --data "$CONVEYOR_FASHION_MNIST_DIR" \
  --dot "$LOG/train-step.dot" >"$LOG/train.log" 2>&1
train_rc=$?

echo "== gpu-check summary =="
echo "tests:    ${tests_line:-no ctest summary} (skipped: $skipped; rc=$ctest_rc)"
echo "memcheck: $mc_programs programs, $mc_errors errors"
echo "train:    rc=$train_rc; $(tail -n 8 "$LOG/train.log" | tr '\n' ' ' | tr -s ' ')"
[ "$ctest_rc" -eq 0 ] && [ "$mc_errors" -eq 0 ] && [ "$train_rc" -eq 0 ]
