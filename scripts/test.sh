#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs the whole test suite with CTest.
# GPU tests skip with "no CUDA device" where no GPU is present. The last line sums up: passed, skipped by reason, failed.
set -euo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$CONVEYOR_ROOT/scripts/common.sh"
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/build}

conveyor_install_missing
conveyor_configure "$BUILD"
cmake --build "$BUILD" -j "$(nproc)"
# The run's end says what happened in one line (scripts/test_summary.py: passed, skipped by reason, failed), instead of
# CTest's list of every skipped test.
set +e
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" --output-junit "$BUILD/ctest-results.xml" |
  awk '/^The following tests did not run:/ {skip = 1; next} skip && /\(Skipped\)$/ {next} {skip = 0; print}'
status=${PIPESTATUS[0]}
set -e
python3 "$CONVEYOR_ROOT/scripts/test_summary.py" "$BUILD/ctest-results.xml" || status=1
exit "$status"
