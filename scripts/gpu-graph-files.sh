#!/usr/bin/env bash
# Run ON THE GPU MACHINE (after scripts/gpu-unpack.sh) — graph files (docs/graph-files.md):
#   (1) the graph-file GPU tests (test_graph_file_gpu, test_graph_file_libs) through CTest;
#   (2) each workload's graph saved with --save-graph and checked with --check-saved-graph (loaded into the same
#       buffers and into new ones, each replay compared byte for byte with the original), with and without the
#       buffers' contents: train (one epoch), cavity (n 257, 2000 steps), filter (512x512), solve (graph-while);
#   (3) `conveyor graph show` and `conveyor graph replay` of each saved file (a fresh process: kernels from the
#       embedded images, buffers from the saved contents);
#   (4) `conveyor bench graph-files` (GRAPH_FILES_QUICK=1: --quick).
# Logs and the files go to $OUT/graph-files (or /tmp/graph-files). One summary line per step.
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build}
CARRY=$CONVEYOR_ROOT/gpu-carry
DEST=${OUT:-/tmp}/graph-files
mkdir -p "$DEST"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVEYOR_FASHION_MNIST_DIR="$CARRY/fashion-mnist"
[ -d "$CARRY/shared-data" ] && export CONVEYOR_SHARED_DATA="$CARRY/shared-data"
export NCCL_NVLS_ENABLE=0
C="$BUILD/bin/conveyor"
status=0
step() { # step NAME command...: runs it, logs to $DEST/NAME.log, prints one line
  local name=$1
  shift
  local start=$(date +%s)
  "$@" >"$DEST/$name.log" 2>&1
  local rc=$?
  echo "[$name] rc=$rc $(($(date +%s) - start)) s: $(grep -E 'saved graph|time per launch|tests passed|bitwise|error' "$DEST/$name.log" | tail -3 | tr '\n' ' ')"
  [ "$rc" -eq 0 ] || status=1
}
(cd "$BUILD" && ctest -R 'GraphFile' --output-on-failure -j 2 >"$DEST/ctest.log" 2>&1)
echo "[ctest graph files] $(grep -E 'tests passed' "$DEST/ctest.log") $(grep -E '^\s+[0-9]+ - .*Failed' "$DEST/ctest.log" | tr '\n' ' ')"
grep -E "module_images:|fuzz:" "$DEST/ctest.log" | head -3
for contents in "" "--save-graph-contents"; do
  tag=${contents:+-contents}
  step train$tag "$C" train --mode graph --epochs 1 --data "$CARRY/fashion-mnist" --save-graph "$DEST/train$tag.cgf" --check-saved-graph $contents
  step cavity$tag "$C" cavity --mode graph --n 257 --steps 2000 --tol 0 --save-graph "$DEST/cavity$tag.cgf" --check-saved-graph $contents
  step filter$tag "$C" filter --input "$CARRY/shared-data/images" --mode graph --sizes 512x512 --repeat 3 --save-graph "$DEST/filter$tag.cgf" --check-saved-graph $contents
  step solve$tag "$C" solve --poisson 128 --mode graph-while --save-graph "$DEST/solve$tag.cgf" --check-saved-graph $contents
done
for w in train cavity filter solve; do
  "$C" graph show "$DEST/$w-contents.cgf" --dot "$DEST/$w.dot" >"$DEST/show-$w.txt" 2>&1 || status=1
  echo "[show $w] $(ls -l "$DEST/$w.cgf" | awk '{print $5}') bytes without contents, $(ls -l "$DEST/$w-contents.cgf" | awk '{print $5}') with; $(grep -E "^  '" "$DEST/show-$w.txt" | head -1)"
  step replay-$w "$C" graph replay "$DEST/$w-contents.cgf" --launches 50
done
step diff "$C" graph diff "$DEST/train.cgf" "$DEST/train-contents.cgf"
quick=${GRAPH_FILES_QUICK:+--quick}
step bench "$C" bench graph-files $quick --markdown "$DEST/bench-graph-files.md"
tail -20 "$DEST/bench.log"
exit $status
