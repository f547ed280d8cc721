#!/usr/bin/env bash
# Issue 15, item 5 (pipelining across iterations), ON THE GPU MACHINE, from the repository root with the build in
# gpu-build/ (bin/conveyor, tests/...). Runs:
#   (1) the host test of the pipeline schedule (when the build has it) and the GPU tests of conveyor::frame_pipeline (pipelined results equal
#       the unpipelined ones bitwise, step graph branches, misuse) and of the filter chain (the three modes unchanged);
#   (2) `conveyor filter --mode all --pipeline 3` at 1920x1080 and 3840x2160 on the five photographs: the table with
#       the fourth row "pipe-3", then the bound table (upload alone, chain alone, download alone, bound, frames/s as a
#       fraction of the bound, speedup over graph mode, outputs bitwise equal to the other modes);
#   (3) the same in graph mode at depth 2 at 512x512 and 3840x2160.
# Logs go to $OUT/pipeline (or ./pipeline-out). Each command has its own timeout; the whole stays under 90 s.
set -u
R=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=${BUILD_DIR:-$R/gpu-build}
export LD_LIBRARY_PATH="$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVEYOR_SHARED_DATA=${CONVEYOR_SHARED_DATA:-$R/gpu-carry/shared-data}
IMAGES=$CONVEYOR_SHARED_DATA/images
DEST=${OUT:-$R/pipeline-out}/pipeline
mkdir -p "$DEST"
status=0
begin=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

run() { # run NAME SECONDS COMMAND...: logs to $DEST/NAME.txt, prints it, records failure
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*"
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$DEST/$name.txt" 2>&1
  local rc=$?
  cat "$DEST/$name.txt"
  echo "($name: rc=$rc, $(($(date +%s) - t0)) s)"
  [ "$rc" -eq 0 ] || status=1
}

if [ -x "$B/tests/test_pipeline_schedule" ]; then # host-only: scripts/gpu-pack.sh leaves it out (it runs in CI)
  run test_pipeline_schedule 5 "$B/tests/test_pipeline_schedule" --gtest_brief=1
fi
run test_frame_pipeline 20 "$B/tests/test_frame_pipeline"
run test_filter 15 "$B/tests/test_filter" --gtest_brief=1
run filter_all_pipe3 35 "$B/bin/conveyor" filter --input "$IMAGES" --mode all --sizes 1920x1080,3840x2160 \
  --repeat 20 --pipeline 3
run filter_graph_pipe2 15 "$B/bin/conveyor" filter --input "$IMAGES" --mode graph --sizes 512x512,3840x2160 \
  --repeat 20 --pipeline 2

echo "== run_pipeline summary ($(($(date +%s) - begin)) s)"
for f in filter_all_pipe3 filter_graph_pipe2; do
  sed -n '/^device:/,$p' "$DEST/$f.txt"
done
grep -hE "bitwise identical|checks failed" "$DEST"/filter_*.txt || true
grep -hE "tests? (passed|failed)|PASSED|FAILED|SKIPPED" "$DEST"/test_*.txt || true
exit "$status"
