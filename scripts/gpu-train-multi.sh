#!/usr/bin/env bash
# Issue 16, workload 4, on the GPU machine (docs/train.md "Several GPUs"; the numbers go to docs/multi-gpu.md):
# data-parallel training, `conveyor train --gpus N` (one process, N GPUs, one cross-device graph with NCCL's
# all-reduce inside) and `mpirun -np N conveyor train --distributed` (one process per GPU). Run from the repository
# root there, with the build in gpu-build/ (scripts/gpu-pack.sh) and CONVEYOR_FASHION_MNIST_DIR (default
# gpu-carry/fashion-mnist). Every command runs under `timeout`; a few minutes on two H200s. Writes every output to
# $OUT/train-multi/ and prints a compact summary ($OUT/train-multi/summary.txt).
#
#   1. GPU tests: test_train_multi (one GPU: the data-parallel path with a one-rank communicator against the one-GPU
#      trainer and across modes; two GPUs: 1e-5 against one GPU over 100 steps, modes bitwise, replicas identical,
#      accuracy after 10 epochs; those skip with one GPU) and test_train (the one-GPU run, unchanged); the one-GPU
#      run in graph mode for 10 epochs (its accuracy as in docs/train.md);
#   2. `conveyor train --gpus 2 --mode all` (10 epochs): table, bitwise lines, checks (1-GPU reference, accuracy);
#   3. `mpirun -np 2 conveyor train --distributed --world-size 2 --mode all` (10 epochs): the same from rank 0, and
#      the CTest entry Mpi.TrainDistributedTwoRanks (100 steps);
#   4. steps/s, 1 against 2 GPUs (--gpus 1, --gpus 2, --distributed), every mode, 2 epochs, global batch 128 and
#      1024, two rounds alternated.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVEYOR_FASHION_MNIST_DIR=${CONVEYOR_FASHION_MNIST_DIR:-$R/gpu-carry/fashion-mnist}
export NCCL_NVLS_ENABLE=0 # no NVLink multicast (the machine's convention for NCCL)
OUT=${OUT:-$R/gpu-out}
W=$OUT/train-multi
mkdir -p "$W"
C=$R/gpu-build/bin/conveyor
D=$CONVEYOR_FASHION_MNIST_DIR
S=$W/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
say "== $(date -u) $(nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader 2>&1 | tr '\n' ';')"
nvidia-smi topo -m > "$W/topo.txt" 2>&1 || true
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
MPIRUN=$(command -v mpirun || true)
say "visible GPUs: $GPUS; mpirun: ${MPIRUN:-none} ($( [ -n "$MPIRUN" ] && "$MPIRUN" --version 2>&1 | head -1))"
status=0
if [ ! -f "$D/train-images-idx3-ubyte.gz" ]; then
  say "no Fashion-MNIST in $D: set CONVEYOR_FASHION_MNIST_DIR"
  exit 1
fi

# 1. GPU tests.
for t in test_train_multi test_train; do
  bin=$R/gpu-build/tests/$t
  if [ ! -x "$bin" ]; then say "$t: MISSING ($bin)"; status=1; continue; fi
  start=$(date +%s)
  timeout 300 "$bin" --gtest_color=no > "$W/$t.log" 2>&1
  rc=$?
  say "$t: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 300 s)') in $(( $(date +%s) - start )) s: $(grep -E '^\[  PASSED  \]' "$W/$t.log") $(grep -cE '^\[  SKIPPED \] [A-Z]' "$W/$t.log") skipped"
  grep -E '^\[  (FAILED  |SKIPPED )\] [A-Z]' "$W/$t.log" | grep -v ' ms)$' | sed 's/^/    /' | tee -a "$S"
  grep -E '^note:' "$W/$t.log" | sort -u | sed 's/^/    /' | tee -a "$S"
  [ $rc = 0 ] || status=1
done

# run NAME TIMEOUT COMMAND...: output in $W/NAME.log; its rc into the summary when not 0.
run() {
  local name=$1 limit=$2
  shift 2
  timeout -k 10 "$limit" "$@" > "$W/$name.log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    say "$name: rc=$rc$([ $rc = 124 ] && echo " (timed out after $limit s)"): $*"
    tail -n 4 "$W/$name.log" | sed 's/^/    /' | tee -a "$S"
    status=1
  fi
  return $rc
}
MPI=("$MPIRUN" --allow-run-as-root -np 2 -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x CONVEYOR_FASHION_MNIST_DIR)
# The summary lines of a train log: the table, the graph line, the bitwise lines and the checks.
summary_of() {
  grep -hE "^(data-parallel|mode +\||sync +\||stream +\||graph +\||graph: |losses |check: |rank 0 of|device( [0-9]|:))" \
    "$W/$1.log" | sed 's/^/  /' | tee -a "$S"
}
# steps/s of MODE in a train log (the table's fourth column).
steps_per_s() {
  awk -F'|' -v m="$2" '{for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)} $1 == m {print $3; exit}' "$W/$1.log"
}

# The one-GPU run, unchanged by this work: 10 epochs in graph mode, 88.68% in docs/train.md.
say "-- conveyor train --gpus 1 --mode graph (10 epochs; docs/train.md: 88.68%, 18 rebinds)"
run gpus1-graph 300 "$C" train --gpus 1 --mode graph --data "$D"
summary_of gpus1-graph
grep -hE "rebind|per-node update" "$W/gpus1-graph.log" | head -3 | sed 's/^/  /' | tee -a "$S"

if [ "$GPUS" -lt 2 ]; then
  say "fewer than 2 GPUs: steps 2-4 need two; done"
  say "== done $(date -u), status $status; logs in $W"
  exit $status
fi

# 2. One process, two GPUs, 10 epochs, every mode.
say "-- conveyor train --gpus 2 --mode all (10 epochs)"
run gpus2-all 600 "$C" train --gpus 2 --mode all --data "$D" --dot "$W/train-step-2gpus.dot"
summary_of gpus2-all

# 3. One process per GPU under mpirun, 10 epochs, every mode; then the CTest entry.
if [ -n "$MPIRUN" ]; then
  say "-- mpirun -np 2 conveyor train --distributed --world-size 2 --mode all (10 epochs)"
  run dist2-all 600 "${MPI[@]}" "$C" train --distributed --world-size 2 --mode all --data "$D"
  summary_of dist2-all
  run ctest-mpi 400 ctest --test-dir "$R/gpu-build" --output-on-failure -R '^Mpi\.TrainDistributed'
  say "  ctest: $(grep -E 'tests passed|tests failed' "$W/ctest-mpi.log" | tail -1) $(grep -c '(Skipped)' "$W/ctest-mpi.log") skipped"
else
  say "-- no mpirun: --distributed not run"
  status=1
fi

# 4. steps/s, 1 against 2 GPUs: two epochs, every mode, global batch 128 (the default) and 1024; two rounds.
say "-- steps/s (median of 50-step chunks), 2 epochs; columns: batch, round, run, sync, stream, graph"
for round in 1 2; do
  for batch in 128 1024; do
    run speed-1gpu-b$batch-r$round 300 "$C" train --gpus 1 --mode all --epochs 2 --batch "$batch" --data "$D"
    run speed-2gpus-b$batch-r$round 300 "$C" train --gpus 2 --mode all --epochs 2 --batch "$batch" --data "$D"
    [ -n "$MPIRUN" ] && run speed-dist2-b$batch-r$round 300 "${MPI[@]}" "$C" train --distributed --world-size 2 --mode all \
      --epochs 2 --batch "$batch" --data "$D"
    for variant in 1gpu 2gpus dist2; do
      name=speed-$variant-b$batch-r$round
      [ -f "$W/$name.log" ] || continue
      say "  $batch $round $variant: $(steps_per_s "$name" sync) $(steps_per_s "$name" stream) $(steps_per_s "$name" graph)"
    done
    for m in sync stream graph; do
      one=$(steps_per_s speed-1gpu-b$batch-r$round $m)
      two=$(steps_per_s speed-2gpus-b$batch-r$round $m)
      [ -n "$one" ] && [ -n "$two" ] &&
        say "    $m: 2 GPUs / 1 GPU = $(awk -v a="$two" -v b="$one" 'BEGIN {printf "%.2f", a / b}') (steps/s, same global batch)"
    done
  done
done

say "== done $(date -u), status $status; logs in $W"
exit $status
