#!/usr/bin/env bash
# Issue 15 on the GPU machine (docs/faster.md, cavity.md, solve.md, train.md): programmatic dependent launch (--pdl)
# in the workloads and the device-relaunch CG loop. Run from the repository root there, with the build in gpu-build/
# (scripts/gpu-pack.sh) and CONVEYOR_SHARED_DATA / CONVEYOR_FASHION_MNIST_DIR set (defaults: gpu-carry/shared-data,
# gpu-carry/fashion-mnist). Every command runs under `timeout`; about 4 minutes on an H200. Writes every output to
# $OUT/workloads/ and prints a compact summary.
#
#   1. the GPU tests of the three workloads (timeout 120 s each);
#   2. cavity 257^2 graph mode, layouts rows and flat, without / with --pdl, alternated twice; the three
#      --pdl-trigger placements; --mode all --pdl (bitwise lines); 1025^2 and 4097^2 against the bandwidth bound;
#   3. solve on bcsstk13 and 1138_bus: graph-per-iteration, graph-while and graph-relaunch, without / with --pdl;
#   4. train, one epoch, graph without / with --pdl; --mode all --max-steps 100 --pdl (bitwise lines).
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVEYOR_SHARED_DATA=${CONVEYOR_SHARED_DATA:-$R/gpu-carry/shared-data}
export CONVEYOR_FASHION_MNIST_DIR=${CONVEYOR_FASHION_MNIST_DIR:-$R/gpu-carry/fashion-mnist}
OUT=${OUT:-$R/gpu-out}
W=$OUT/workloads
mkdir -p "$W"
C=$R/gpu-build/bin/conveyor
S=$W/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
say "== $(date -u) $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader 2>&1)"
status=0

# 1. GPU tests.
for t in test_cavity test_solve test_train; do
  bin=$R/gpu-build/tests/$t
  if [ ! -x "$bin" ]; then say "$t: MISSING ($bin)"; status=1; continue; fi
  start=$(date +%s)
  timeout 120 "$bin" --gtest_color=no > "$W/$t.log" 2>&1
  rc=$?
  say "$t: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 120 s)') in $(( $(date +%s) - start )) s: $(grep -E '^\[  PASSED  \]' "$W/$t.log") $(grep -cE '^\[  SKIPPED \] [A-Z]' "$W/$t.log") skipped"
  grep -E '^\[  (FAILED  |SKIPPED )\] [A-Z]' "$W/$t.log" | grep -v ' ms)$' | sed 's/^/    /' | tee -a "$S"
  [ $rc = 0 ] || status=1
done

# run NAME TIMEOUT ARGS...: one conveyor command, output in $W/NAME.log; its rc into the summary when not 0.
run() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$C" "$@" > "$W/$name.log" 2>&1
  local rc=$?
  if [ $rc != 0 ]; then
    say "$name: rc=$rc$([ $rc = 124 ] && echo " (timed out after $limit s)"): $*"
    tail -n 3 "$W/$name.log" | sed 's/^/    /' | tee -a "$S"
    status=1
  fi
  return $rc
}
# The table row of MODE (first column) in a cavity log, compactly.
cavity_row() {
  awk -F'|' -v m="$2" '{for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)}
    $1 == m {print $1 ": " $2 " steps, " $4 " us/step, " $5 " MLUPS, " $7 " of bound"}' "$W/$1.log" | head -1
}

# 2. cavity: layouts (rows, the layout before 2026-12-01; flat, the default) without / with --pdl, alternated
# twice at 257^2; where the step triggers its dependents (--pdl-trigger); --mode all --pdl (bitwise lines); 1025^2
# and 4097^2 against the bandwidth bound.
say "-- cavity (graph mode, Re 100 at 257^2, Re 1000 above, --tol 0)"
for round in 1 2; do
  for layout in rows flat; do
    run cavity257-$layout-$round 60 cavity --n 257 --re 100 --mode graph --steps 50000 --tol 0 --step-layout $layout
    say "  257^2 round $round $layout: $(cavity_row cavity257-$layout-$round graph)"
    run cavity257-$layout-pdl-$round 60 cavity --n 257 --re 100 --mode graph --steps 50000 --tol 0 \
      --step-layout $layout --pdl
    say "  257^2 round $round $layout: $(cavity_row cavity257-$layout-pdl-$round graph+pdl)"
  done
done
grep -h "programmatic); build" "$W/cavity257-flat-pdl-1.log" | sed 's/^/  /' | tee -a "$S"
for trigger in exit after-wait early; do
  run cavity257-trigger-$trigger 60 cavity --n 257 --re 100 --mode graph --steps 50000 --tol 0 --step-layout rows \
    --pdl --pdl-trigger $trigger
  say "  257^2 rows --pdl-trigger $trigger: $(cavity_row cavity257-trigger-$trigger graph+pdl)"
done
run cavity257-all-pdl 60 cavity --n 257 --re 100 --mode all --steps 4000 --tol 0 --pdl
grep -hE "^state |^(stream|graph)\+pdl *\|" "$W/cavity257-all-pdl.log" | sed 's/^/  257^2 all --pdl: /' | tee -a "$S"
for n in 1025 4097; do
  steps=$([ $n = 1025 ] && echo 4000 || echo 600)
  for layout in rows flat; do
    run cavity$n-$layout 90 cavity --n $n --re 1000 --mode graph --steps $steps --tol 0 --step-layout $layout
    say "  ${n}^2 $layout: $(cavity_row cavity$n-$layout graph)"
    run cavity$n-$layout-pdl 90 cavity --n $n --re 1000 --mode graph --steps $steps --tol 0 --step-layout $layout --pdl
    say "  ${n}^2 $layout: $(cavity_row cavity$n-$layout-pdl graph+pdl)"
  done
done
grep -h "^bound MLUPS" "$W/cavity1025-flat.log" | sed 's/^/  /' | tee -a "$S"

# 3. solve: the µs per iteration of the loop on the GPU, WHILE node vs device relaunch, without / with --pdl.
say "-- solve (columns: mode|iters|solver rel.res|true rel.res|setup ms|solve ms|us/iter|speedup|nodes)"
for m in bcsstk13 1138_bus; do
  file=$CONVEYOR_SHARED_DATA/matrices/$m.mtx
  if [ ! -f "$file" ]; then say "  $m: no $file"; status=1; continue; fi
  for variant in "graph-per-iteration" "graph-per-iteration --pdl" "graph-while" "graph-while --pdl" \
    "graph-relaunch" "graph-relaunch --pdl"; do
    name=solve-$m-$(echo "$variant" | tr ' ' '_' | tr -d '-')
    # shellcheck disable=SC2086
    run "$name" 60 solve --matrix "$file" --mode $variant
    say "  $m: $(grep -E '^graph-(per-iteration|while|relaunch)' "$W/$name.log" | head -1 | tr -s ' ')"
  done
  grep -h "make_programmatic made" "$W/solve-$m-graphwhile_pdl.log" "$W/solve-$m-graphrelaunch_pdl.log" 2>/dev/null |
    sed 's/^/    /' | tee -a "$S"
done

# 4. train: one epoch in graph mode, without / with --pdl.
say "-- train (one epoch; columns: mode|ms/step|steps/s|speedup|test accuracy)"
if [ -f "$CONVEYOR_FASHION_MNIST_DIR/train-images-idx3-ubyte.gz" ]; then
  for variant in "" "--pdl"; do
    name=train-graph$(echo "$variant" | tr -d ' -')
    # shellcheck disable=SC2086
    run "$name" 90 train --data "$CONVEYOR_FASHION_MNIST_DIR" --mode graph --epochs 1 $variant
    say "  $(grep -E '^graph(\+pdl)? +\|' "$W/$name.log" | head -1 | tr -s ' ')"
  done
  grep -h "make_programmatic made" "$W/train-graphpdl.log" | sed 's/^/  /' | tee -a "$S"
  # Bitwise check across modes with --pdl (100 steps, every mode).
  run train-all-pdl 90 train --data "$CONVEYOR_FASHION_MNIST_DIR" --mode all --epochs 1 --max-steps 100 --pdl
  grep -h "^losses" "$W/train-all-pdl.log" | sed 's/^/  /' | tee -a "$S"
else
  say "  no Fashion-MNIST in $CONVEYOR_FASHION_MNIST_DIR"
  status=1
fi

say "== done $(date -u), status $status; logs in $W"
exit $status
