#!/usr/bin/env bash
# One device call's worth of checks (run ON THE GPU MACHINE after scripts/gpu-unpack.sh): the graph-file checks
# (scripts/gpu-graph-files.sh), the GPU suite, test_graph_file_gpu under compute-sanitizer memcheck, and the main job
# (conveyor train --mode all --epochs 10). Logs into $DEST (default /tmp/session); one summary line each.
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${DEST:-/tmp/session}
mkdir -p "$DEST"
cd "$CONVEYOR_ROOT"
export LD_LIBRARY_PATH="$PWD/gpu-carry/lib:/usr/local/cuda/lib64" CONVEYOR_FASHION_MNIST_DIR="$PWD/gpu-carry/fashion-mnist"
export CONVEYOR_SHARED_DATA="$PWD/gpu-carry/shared-data" NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
OUT=$DEST timeout 200 bash scripts/gpu-graph-files.sh
(cd gpu-build && timeout 200 ctest -j 6 -E '^Cli\.|GraphFile' >"$DEST/suite.log" 2>&1)
echo "[suite] $(grep -E 'tests passed' "$DEST/suite.log") $(grep -E '\*\*\*(Failed|Timeout|Exception)' "$DEST/suite.log" | tr -s ' ' | tr '\n' ';')"
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
  gpu-build/tests/test_graph_file_gpu >"$DEST/memcheck.log" 2>&1
echo "[memcheck test_graph_file_gpu] rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$DEST/memcheck.log" | tail -3 | tr '\n' ' ')"
timeout 120 gpu-build/bin/conveyor train --mode all --epochs 10 >"$DEST/train.log" 2>&1
echo "[train] rc=$? $(grep -E 'graph|bitwise|accuracy' "$DEST/train.log" | tail -6 | tr '\n' ' ')"
