#!/usr/bin/env bash
# Run ON THE GPU MACHINE from a build made on the development machine and carried there (with gpu-carry/ from
# scripts/gpu-pack.sh, which copies ../shared/data to gpu-carry/shared-data):
#   (1) `conveyor filter --mode all` on the five photographs of gpu-carry/shared-data/images resized to 512x512,
#       1920x1080 and 3840x2160: the timing table (sync, stream, graph), the graph statistics and what each image
#       did to the graph, bitwise agreement of the modes, the first frame of each size checked against the CPU
#       reference (--verify), and the graph of the first size as DOT;
#   (2) the same chain at each image's own size (--sizes native, graph re-instantiated per size) writing the edges
#       and sharpened PNGs.
# Everything goes to $OUT/filter (or ./filter-out). Extra arguments go to both runs (e.g. --repeat 50).
# Expected run time on an H200: well under a minute (the host resize and CPU check of the 4K frames dominate).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build} # made by scripts/gpu-pack.sh
CARRY=$CONVEYOR_ROOT/gpu-carry
DEST=${OUT:-$CONVEYOR_ROOT/filter-out}/filter
IMAGES=${CONVEYOR_FILTER_IMAGES:-$CARRY/shared-data/images}
mkdir -p "$DEST/images"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
status=0

echo "== conveyor filter --mode all --sizes 512x512,1920x1080,3840x2160 =="
start=$(date +%s)
"$BUILD/bin/conveyor" filter --input "$IMAGES" --mode all --sizes 512x512,1920x1080,3840x2160 --repeat 20 \
  --verify --dot "$DEST/filter_graph_512x512.dot" "$@" 2>&1 | tee "$DEST/filter_sizes.txt"
rc=${PIPESTATUS[0]}
echo "(sizes run: rc=$rc, $(($(date +%s) - start)) s wall)"
[ "$rc" -eq 0 ] || status=1

echo "== conveyor filter --mode all --sizes native --out $DEST/images =="
start=$(date +%s)
"$BUILD/bin/conveyor" filter --input "$IMAGES" --mode all --sizes native --repeat 5 --verify \
  --out "$DEST/images" "$@" 2>&1 | tee "$DEST/filter_native.txt"
rc=${PIPESTATUS[0]}
echo "(native run: rc=$rc, $(($(date +%s) - start)) s wall)"
[ "$rc" -eq 0 ] || status=1

echo "== gpu-filter summary =="
grep -E "^[0-9]+x[0-9]+ +\| graph" "$DEST/filter_sizes.txt" | tr -s ' ' || true
grep -E "bitwise identical|verify|checks failed" "$DEST/filter_sizes.txt" "$DEST/filter_native.txt" | sed "s|$DEST/||" || true
exit "$status"
