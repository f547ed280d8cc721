#!/usr/bin/env bash
# Issue 16 (the NCCL layer) on the GPU machine. Run from the repository root there, with the build in gpu-build/
# (scripts/gpu-pack.sh here first). Works with 1 GPU (one-rank communicators; the multi-GPU tests and the MPI cases
# skip with the reason) and with 2 or more (kind nvidia-h200-x2). Every command runs under `timeout`; a few minutes
# in all. Writes every output to $OUT/nccl/ and prints a compact summary:
#   1. the GPU tests of conveyor::nccl (gpu-build/tests/test_nccl, timeout 300 s);
#   2. the MPI tests through CTest (ctest -R '^NcclMpi\.': mpirun -np 2 per case, each with a 120 s CTest timeout);
#   3. `conveyor allreduce` on every GPU in one process (table and JSON), and with 2 or more GPUs
#      `mpirun -np N conveyor allreduce --distributed` (one process per GPU).
# NCCL_NVLS_ENABLE=0 everywhere (no NVLink multicast on shared GPUs); NCCL_DEBUG=WARN shows NCCL's own warnings.
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/gpu-carry/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
OUT=${OUT:-$R/gpu-out}
W=$OUT/nccl
mkdir -p "$W"
B=$R/gpu-build
C=$B/bin/conveyor
S=$W/summary.txt
: > "$S"
say() { echo "$*" | tee -a "$S"; }
status=0
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | wc -l)
say "== $(date -u) $gpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | sort -u | tr '\n' ' ')"
nvidia-smi topo -m > "$W/topology.txt" 2>&1
mpirun=$(command -v mpirun || echo "(no mpirun in PATH)")
say "   mpirun: $mpirun $(mpirun --version 2>/dev/null | head -1); NCCL library: $(ldconfig -p 2>/dev/null | grep -m1 'libnccl.so.2 ' | sed 's/.*=> //')"
for bin in "$C" "$B/tests/test_nccl_mpi"; do
  missing=$(ldd "$bin" 2>/dev/null | grep 'not found')
  [ -z "$missing" ] || { say "   $(basename "$bin") misses shared libraries: $missing"; status=1; }
done

# 1. GPU tests.
start=$(date +%s)
timeout 300 "$B/tests/test_nccl" --gtest_color=no > "$W/test_nccl.log" 2>&1
rc=$?
say "test_nccl: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 300 s)') in $(( $(date +%s) - start )) s: $(grep -E '^\[  PASSED  \]' "$W/test_nccl.log") $(grep -cE '^\[  SKIPPED \] [A-Z]' "$W/test_nccl.log") skipped"
grep -E '^\[  (FAILED  |SKIPPED )\] [A-Z]' "$W/test_nccl.log" | grep -v ' ms)$' | sed 's/^/    /' | tee -a "$S"
grep -B2 -A8 -E 'Failure$' "$W/test_nccl.log" | head -60 | sed 's/^/    | /' | tee -a "$S"
[ $rc = 0 ] || status=1

# 2. MPI tests (CTest runs tests/mpi/run_mpi.sh: mpirun --allow-run-as-root --oversubscribe -np 2 test_nccl_mpi CASE).
start=$(date +%s)
timeout 900 ctest --test-dir "$B" -R '^NcclMpi\.' --output-on-failure -V > "$W/ctest-mpi.log" 2>&1
rc=$?
say "ctest -R NcclMpi: rc=$rc in $(( $(date +%s) - start )) s: $(grep -E 'tests passed|tests failed' "$W/ctest-mpi.log" | tail -1)"
grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: ' "$W/ctest-mpi.log" | sed 's/^ */    /' | tee -a "$S"
grep -E '^[0-9]+: rank [0-9]+' "$W/ctest-mpi.log" | cut -c1-400 | sed 's/^/    | /' | tee -a "$S"
[ $rc = 0 ] || status=1

# 3. The benchmark: one process driving every GPU, then one process per GPU.
start=$(date +%s)
timeout 240 "$C" allreduce --json "$W/allreduce.json" > "$W/allreduce.txt" 2> "$W/allreduce.err"
rc=$?
say "conveyor allreduce: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 240 s)') in $(( $(date +%s) - start )) s"
sed 's/^/    /' "$W/allreduce.txt" | tee -a "$S"
[ $rc = 0 ] || { tail -n 15 "$W/allreduce.err" | sed 's/^/    ! /' | tee -a "$S"; status=1; }
if [ "$gpus" -ge 2 ]; then
  start=$(date +%s)
  timeout 240 mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x NCCL_DEBUG -x LD_LIBRARY_PATH \
    -np "$gpus" "$C" allreduce --distributed --json "$W/allreduce-distributed.json" \
    > "$W/allreduce-distributed.txt" 2> "$W/allreduce-distributed.err"
  rc=$?
  say "mpirun -np $gpus conveyor allreduce --distributed: rc=$rc$([ $rc = 124 ] && echo ' (timed out after 240 s)') in $(( $(date +%s) - start )) s"
  sed 's/^/    /' "$W/allreduce-distributed.txt" | tee -a "$S"
  [ $rc = 0 ] || { tail -n 15 "$W/allreduce-distributed.err" | sed 's/^/    ! /' | tee -a "$S"; status=1; }
else
  say "conveyor allreduce --distributed: not run (needs 2 GPUs, $gpus visible)"
fi

say "== done $(date -u), status $status; logs in $W"
exit $status
