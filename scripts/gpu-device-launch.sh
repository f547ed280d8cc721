#!/usr/bin/env bash
# On the GPU machine (issue 15, device-side graph launch; docs/faster.md): the device-launch tests (relocatable device code + cudadevrt) and the
# host tests of the rules, each under `timeout 60`, with their gtest results and the relaunch-loop timing. Run from
# the repository root on the GPU machine; the build is in gpu-build/ (test programs in gpu-build/tests/). Writes
# $OUT/device-launch.log (all output) and prints a summary.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-$R/gpu-out}
mkdir -p "$OUT"
L=$OUT/device-launch.log
: > "$L"
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; } | tee -a "$L"
status=0
for t in test_device_launch test_device_launch_rules; do
  bin=$R/gpu-build/tests/$t
  if [ ! -x "$bin" ]; then
    # test_device_launch_rules is host-only: scripts/gpu-pack.sh leaves it out (it runs in CI and here).
    [ "$t" = test_device_launch_rules ] && continue
    echo "== $t: missing ($bin): build the target first" | tee -a "$L"
    status=1
    continue
  fi
  echo "== $t" >> "$L"
  timeout 60 "$bin" --gtest_color=no > "$OUT/$t.log" 2>&1
  rc=$?
  cat "$OUT/$t.log" >> "$L"
  echo "== $t: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 60 s)')"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|^\[  FAILED|^\[ timing|^\[ rules|^\[ note|Failure|error:" "$OUT/$t.log"
  [ $rc = 0 ] || status=1
done
echo "== full log: $L"
exit $status
