#!/usr/bin/env bash
# One device call's worth of checks (run ON THE GPU MACHINE after scripts/gpu-unpack.sh): the whole GPU suite
# (CTest, -j 6; the Cli.* tests read the source tree and run here too, but need no GPU), the graph-file tests under
# compute-sanitizer memcheck, and the main job (conveyor train --mode all --epochs 10). Logs into $DEST (default
# /tmp/session); one summary line each. The graph-file checks and the bench study: scripts/gpu-graph-files.sh.
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEST=${DEST:-/tmp/session}
mkdir -p "$DEST"
cd "$CONVEYOR_ROOT"
export LD_LIBRARY_PATH="$PWD/gpu-carry/lib:/usr/local/cuda/lib64" CONVEYOR_FASHION_MNIST_DIR="$PWD/gpu-carry/fashion-mnist"
export CONVEYOR_SHARED_DATA="$PWD/gpu-carry/shared-data" NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
start=$(date +%s)
(cd gpu-build && timeout ${SUITE_TIMEOUT:-330} ctest -j 6 --output-on-failure -E '^Cli\.' >"$DEST/suite.log" 2>&1)
echo "[suite] $(($(date +%s) - start)) s: $(grep -E 'tests passed' "$DEST/suite.log") $(grep -E '\*\*\*(Failed|Timeout|Exception)|\(Failed\)|\(Timeout\)' "$DEST/suite.log" | tr -s ' ' | tr '\n' ';')"
grep -E "^\[ pipeline \]" -r gpu-build/Testing 2>/dev/null | head -2
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --leak-check full --report-api-errors no \
  gpu-build/tests/test_graph_file_gpu >"$DEST/memcheck.log" 2>&1
echo "[memcheck test_graph_file_gpu] rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$DEST/memcheck.log" | tail -3 | tr '\n' ' ')"
timeout 120 gpu-build/bin/conveyor train --mode all --epochs 10 --data "$PWD/gpu-carry/fashion-mnist" >"$DEST/train.log" 2>&1
echo "[train] rc=$? $(grep -E 'accuracy|bitwise|graph ' "$DEST/train.log" | tail -6 | tr '\n' ' ')"
