#!/usr/bin/env bash
# One device call (run ON THE GPU MACHINE from the repository root, after scripts/gpu-pack.sh here): the new tests
# by name with their output, the whole GPU suite (scripts/gpu-session.sh: suite, memcheck of the graph-file tests,
# the main job), the main job beside PyTorch's configurations (bench/peers/pytorch_train.py), and
# `conveyor bench capture-checks` and `conveyor bench suite --quick`. Logs into $OUT (or /tmp/round). FILTER: the gtest filter of the new tests.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/gpu-unpack.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/gpu-carry/lib:/usr/local/cuda/lib64
DEST=${OUT:-/tmp/round}
mkdir -p "$DEST"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in ${NEW_TESTS:-}; do
  prog=${t%%:*}; filter=${t#*:}
  timeout 120 gpu-build/tests/$prog --gtest_filter="$filter" 2>&1 | grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) +\]|Failure|Expected|Which is|actual|reason|reordered|error" | head -40
done
[ "${SUITE:-1}" = 1 ] && DEST=$DEST/s SUITE_TIMEOUT=300 bash scripts/gpu-session.sh 2>&1
[ "${SUITE:-1}" = 1 ] && grep -B3 -A20 "Failure" "$DEST/s/suite.log" | head -80
if [ "${TORCH:-1}" = 1 ]; then
  echo "== main job beside PyTorch"
  gpu-build/bin/conveyor train --mode graph --epochs 10 --data gpu-carry/fashion-mnist 2>&1 | grep -E "^graph|accuracy|ms" | tail -5
  timeout 300 python3 bench/peers/pytorch_train.py gpu-carry/fashion-mnist --json "$DEST/torch.json" 2>&1 | grep -vi warn | tail -8
  gpu-build/bin/conveyor train --mode graph --epochs 10 --data gpu-carry/fashion-mnist 2>&1 | grep -E "^graph|accuracy|ms" | tail -5
fi
if [ "${CHECKS:-1}" = 1 ]; then
  echo "== bench capture-checks"
  timeout 120 gpu-build/bin/conveyor bench capture-checks 2>&1 | tail -14
fi
if [ "${GRAPHED:-1}" = 1 ]; then
  echo "== bench graphed --quick"
  timeout 150 gpu-build/bin/conveyor bench graphed --quick 2>&1 | tail -40
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "== bench suite --quick"
  OUT=$DEST/bench timeout 200 bash scripts/gpu-bench.sh --quick 2>&1 | tail -60
fi
