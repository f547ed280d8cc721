#!/usr/bin/env bash
# Issue 16, workload 5, on the GPU machine (docs/cavity.md "Several GPUs"; the numbers go to docs/multi-gpu.md):
# `conveyor cavity --gpus N`, the lattice split into slabs of rows, one per GPU, halo rows exchanged by peer copies
# inside one cross-device graph per block. Run from the repository root there, with the build in gpu-build/
# (scripts/gpu-pack.sh) and CONVEYOR_SHARED_DATA (default gpu-carry/shared-data, for the Ghia tables). Every
# command runs under `timeout`; about 2 minutes on two H200s. Writes every output to $OUT/cavity-multi/ and prints a
# compact summary ($OUT/cavity-multi/summary.txt).
#
#   1. GPU tests: test_cavity_multi (slabs {0,0} and {0,0,0} on one device; {0,1} and {1,0} when 2 GPUs are
#      visible, else that test skips) and test_cavity (the one-slab path, which runs the same code);
#   2. Re 100 at 257², --mode all, --gpus 1 and --gpus 2 (with 2 GPUs; else --devices 0,0): the final-state hashes
#      (FNV-1a 64 of the populations) must be equal across the runs and modes, and the Ghia differences the same;
#   3. the one-GPU path at 257^2 against the times docs/cavity.md had before (regression check); MLUPS, graph mode,
#      Re 1000, --tol 0: 1 against 2 GPUs at 1025² (20,000 steps) and 4097² (2,000 steps), two
#      rounds alternated, the speedup of 2 over 1 per round; 4097² also with --halo-copy 1d and with stream mode.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CONVEYOR_SHARED_DATA=${CONVEYOR_SHARED_DATA:-$R/gpu-carry/shared-data}
export NCCL_NVLS_ENABLE=0 # (no NCCL here; the machine's convention for multi-GPU runs)
OUT=${OUT:-$R/gpu-out}
W=$OUT/cavity-multi
mkdir -p "$W"
C=$R/gpu-build/bin/conveyor
S=$W/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
say "== $(date -u) $(nvidia-smi --query-gpu=index,name,driver_version,clocks.sm --format=csv,noheader 2>&1 | tr '\n' ';')"
nvidia-smi topo -m > "$W/topo.txt" 2>&1 || true
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
if [ "$GPUS" -ge 2 ]; then TWO="--gpus 2"; else TWO="--devices 0,0"; fi
say "visible GPUs: $GPUS; the two-slab runs use: $TWO"
status=0

# 1. GPU tests.
for t in test_cavity_multi test_cavity; do
  bin=$R/gpu-build/tests/$t
  if [ ! -x "$bin" ]; then say "$t: MISSING ($bin)"; status=1; continue; fi
  start=$(date +%s)
  timeout 240 "$bin" --gtest_color=no > "$W/$t.log" 2>&1
  rc=$?
  say "$t: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 240 s)') in $(( $(date +%s) - start )) s: $(grep -E '^\[  PASSED  \]' "$W/$t.log") $(grep -cE '^\[  SKIPPED \] [A-Z]' "$W/$t.log") skipped"
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
# The table row of MODE (first column) in a cavity log: steps, us/step, MLUPS, of bound.
cavity_row() {
  awk -F'|' -v m="$2" '{for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)}
    $1 == m {print $2 " steps, " $4 " us/step, " $5 " MLUPS, " $7 " of bound"}' "$W/$1.log" | head -1
}
mlups() {
  awk -F'|' -v m="$2" '{for (i = 1; i <= NF; i++) gsub(/^ +| +$/, "", $i)} $1 == m {print $5; exit}' "$W/$1.log"
}

# 2. Bitwise and Ghia: Re 100 at 257², every mode, one and two slabs.
say "-- Re 100, 257^2, --mode all: 1 slab and 2 ($TWO)"
run cavity257-1 120 cavity --n 257 --re 100 --mode all
# shellcheck disable=SC2086
run cavity257-2 120 cavity --n 257 --re 100 --mode all $TWO
for name in cavity257-1 cavity257-2; do
  grep -hE "^(slabs|peer access|state |final state|  (u|v)/U on)" "$W/$name.log" | sed "s/^/  $name: /" | tee -a "$S"
done
hashes=$(grep -h "^final state" "$W/cavity257-1.log" "$W/cavity257-2.log" | awk '{print $6}' | sort -u | wc -l)
if [ "$hashes" = 1 ]; then
  say "  final states: one hash over both runs and all modes: BITWISE IDENTICAL"
else
  say "  final states: $hashes different hashes: DIFFER"
  status=1
fi
grep -h "memcpy), " "$W/cavity257-2.log" | sed 's/^/  /' | tee -a "$S"

# The one-GPU path runs the same (slab-aware) kernels and a built instead of a captured graph: against
# docs/cavity.md's plain-graph flat-layout times (257^2: 2.764 us/step; 1025^2: 24.07; 4097^2: 340.1, see 3. below).
run cavity257-1gpu-graph 60 cavity --n 257 --re 100 --mode graph --steps 50000 --tol 0
say "  257^2 1 GPU graph (docs/cavity.md before: 2.764 us/step): $(cavity_row cavity257-1gpu-graph graph)"

# 3. MLUPS, 1 against 2 GPUs (graph mode), two rounds alternated.
say "-- MLUPS, graph mode, Re 1000, --tol 0 (columns: steps, us/step, MLUPS, of bound)"
for n in 1025 4097; do
  steps=$([ $n = 1025 ] && echo 20000 || echo 2000)
  for round in 1 2; do
    run cavity$n-1gpu-$round 120 cavity --n $n --re 1000 --mode graph --steps $steps --tol 0
    # shellcheck disable=SC2086
    run cavity$n-2gpu-$round 120 cavity --n $n --re 1000 --mode graph --steps $steps --tol 0 $TWO
    one=$(mlups cavity$n-1gpu-$round graph)
    two=$(mlups cavity$n-2gpu-$round graph)
    say "  ${n}^2 round $round, 1 GPU : $(cavity_row cavity$n-1gpu-$round graph)"
    say "  ${n}^2 round $round, 2 GPUs: $(cavity_row cavity$n-2gpu-$round graph)"
    say "  ${n}^2 round $round: 2 GPUs / 1 GPU = $(awk -v a="$two" -v b="$one" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "n/a"}')x"
    h1=$(grep -h "^final state graph" "$W/cavity$n-1gpu-$round.log" | awk '{print $6}')
    h2=$(grep -h "^final state graph" "$W/cavity$n-2gpu-$round.log" | awk '{print $6}')
    if [ -n "$h1" ] && [ "$h1" = "$h2" ]; then say "    final state bitwise identical ($h1)"; else say "    final state DIFFERS ($h1 vs $h2)"; status=1; fi
  done
done
grep -h "memcpy), " "$W/cavity4097-2gpu-1.log" | sed 's/^/  /' | tee -a "$S"
# shellcheck disable=SC2086
run cavity4097-2gpu-halo1d 120 cavity --n 4097 --re 1000 --mode graph --steps 2000 --tol 0 --halo-copy 1d $TWO
say "  4097^2 2 GPUs --halo-copy 1d: $(cavity_row cavity4097-2gpu-halo1d graph)"
run cavity4097-1gpu-stream 120 cavity --n 4097 --re 1000 --mode stream --steps 2000 --tol 0
# shellcheck disable=SC2086
run cavity4097-2gpu-stream 120 cavity --n 4097 --re 1000 --mode stream --steps 2000 --tol 0 $TWO
say "  4097^2 stream mode, 1 GPU : $(cavity_row cavity4097-1gpu-stream stream)"
say "  4097^2 stream mode, 2 GPUs: $(cavity_row cavity4097-2gpu-stream stream)"

say "== done $(date -u), status $status; logs in $W"
exit $status
