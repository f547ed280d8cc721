#!/usr/bin/env bash
# One device call that checks a whole change (run ON THE GPU MACHINE from the repository root, after
# scripts/gpu-pack.sh here), in order of importance, each step skipped when the call's time (BUDGET_S, default 570 s)
# would not hold it: the named new tests with their output (NEW_TESTS="program:filter ..."), the whole GPU suite
# (CTest -j 6, failures' output), the main job in all modes, `conveyor bench capture-checks`, compute-sanitizer
# (memcheck, racecheck, synccheck) on SANITIZER_PROGRAMS, the main job beside PyTorch, `conveyor bench graphed --quick`.
# BENCH_BASELINE (an older `conveyor` binary, carried): `conveyor bench suite --quick` of it and of this build,
# alternating twice, JSON into $OUT (bench-{base,new}-{1,2}.json; `conveyor bench render` writes the tables here).
# Logs into $OUT (or /tmp/final); one line per step.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
start=$(date +%s)
budget=${BUDGET_S:-570}
left() { echo $((budget - ($(date +%s) - start))); }
fits() { [ "$(left)" -gt "$1" ] || { echo "[skipped: $2, $(left) s left]"; return 1; }; }
bash scripts/gpu-unpack.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/gpu-carry/lib:/usr/local/cuda/lib64
export CONVEYOR_FASHION_MNIST_DIR=$PWD/gpu-carry/fashion-mnist CONVEYOR_SHARED_DATA=$PWD/gpu-carry/shared-data
DEST=${OUT:-/tmp/final}
mkdir -p "$DEST"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in ${NEW_TESTS:-}; do
  prog=${t%%:*}
  timeout 90 gpu-build/tests/$prog --gtest_filter="${t#*:}" >"$DEST/new-$prog.log" 2>&1
  grep -E "^\[ +(OK|FAILED|SKIPPED) +\]|Failure|Expected|Which is|Value of|actual|stream watch|reordered|Skipped" \
    "$DEST/new-$prog.log" | cut -c1-400 | head -30
done
if fits 200 "suite"; then
  s0=$(date +%s)
  (cd gpu-build && timeout 240 ctest -j 6 --output-on-failure -E '^Cli\.' >"$DEST/suite.log" 2>&1)
  echo "[suite] $(($(date +%s) - s0)) s: $(grep -E 'tests passed' "$DEST/suite.log")"
  grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|\(Subprocess" "$DEST/suite.log" | head -10
  grep -B2 -A12 "Failure$" "$DEST/suite.log" | cut -c1-300 | head -60
fi
if fits 120 "train"; then
  timeout 110 gpu-build/bin/conveyor train --mode all --epochs 10 --data "$CONVEYOR_FASHION_MNIST_DIR" >"$DEST/train.log" 2>&1
  echo "[train] rc=$?"; sed -n '/^device/,$p' "$DEST/train.log" | grep -v "^  call " | head -12
fi
if [ -n "${BENCH_BASELINE:-}" ] && fits 250 "bench suite, baseline and new"; then
  for round in 1 2; do
    for which in base new; do
      bin=gpu-build/bin/conveyor
      [ "$which" = base ] && bin=$BENCH_BASELINE
      timeout 90 "$bin" bench suite --quick --json "$DEST/bench-$which-$round.json" >"$DEST/bench-$which-$round.log" 2>&1
      echo "[bench $which $round] rc=$? $(grep -c . "$DEST/bench-$which-$round.log") lines"
    done
  done
fi
if fits 60 "capture-checks"; then
  echo "== conveyor bench capture-checks"
  timeout 60 gpu-build/bin/conveyor bench capture-checks 2>&1 | tail -13
fi
if [ -n "${SANITIZER_PROGRAMS:-}" ] && fits 150 "sanitizers"; then
  GPU_CHECK_SUITE=0 SANITIZER_TIMEOUT=$(( $(left) - 60 < 200 ? $(left) - 60 : 200 )) OUT=$DEST BUILD_DIR=$PWD/gpu-build \
    bash scripts/gpu-check.sh 2>&1 | grep -A12 "gpu-check summary"
fi
if fits 100 "pytorch"; then
  echo "== main job beside PyTorch"
  gpu-build/bin/conveyor train --mode graph --epochs 10 --data "$CONVEYOR_FASHION_MNIST_DIR" 2>&1 | grep -E "^graph |^device" | head -3
  timeout $(( $(left) - 30 )) python3 bench/peers/pytorch_train.py "$CONVEYOR_FASHION_MNIST_DIR" --json "$DEST/torch.json" 2>&1 |
    grep -vi warn | tail -7
  gpu-build/bin/conveyor train --mode graph --epochs 10 --data "$CONVEYOR_FASHION_MNIST_DIR" 2>&1 | grep -E "^graph |^device" | head -3
fi
if fits 70 "graphed study"; then
  echo "== conveyor bench graphed --quick"
  timeout $(( $(left) - 10 )) gpu-build/bin/conveyor bench graphed --quick 2>&1 | tail -24
fi
echo "[done in $(($(date +%s) - start)) s]"
