#!/usr/bin/env bash
# Installs what is missing, builds everything (Release) and runs the whole test suite with CTest.
# GPU tests skip with "no CUDA device" where no GPU is present.
set -euo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$CONVEYOR_ROOT/scripts/common.sh"
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/build}

conveyor_install_missing
conveyor_configure "$BUILD"
cmake --build "$BUILD" -j "$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)"
