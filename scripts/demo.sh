#!/usr/bin/env bash
# Installs what is missing, builds Release, and runs the main job: the Fashion-MNIST training step in the three
# execution modes (sync, stream, graph). Extra arguments go to `conveyor train`. Needs a CUDA GPU to run.
set -euo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$CONVEYOR_ROOT/scripts/common.sh"
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/build}

conveyor_install_missing
conveyor_configure "$BUILD"
cmake --build "$BUILD" -j "$(nproc)" --target conveyor_cli
exec "$BUILD/bin/conveyor" train --mode all "$@"
