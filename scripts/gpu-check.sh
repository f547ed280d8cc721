#!/usr/bin/env bash
# Run ON THE GPU MACHINE from the folders scripts/gpu-pack.sh made here (gpu-build/, gpu-carry/). Runs
#   (1) every GPU test program through CTest,
#   (2) each GPU test program under compute-sanitizer memcheck (leak check on), racecheck (shared-memory hazards)
#       and synccheck (barrier misuse), several programs at a time (SANITIZER_JOBS, default 6), each with a timeout
#       (SANITIZER_TIMEOUT seconds, default 240), leaving out the long runs named in SANITIZER_EXCLUDE (a gtest
#       negative filter; they run in (1)). The programs named in SANITIZER_SERIAL (default: test_conditional,
#       test_solve and test_libraries, whose WHILE/IF graphs end in cudaErrorIllegalAddress under a sanitizer when several sanitized
#       programs share the GPU, and pass alone) run afterwards, one at a time. SANITIZER_PROGRAMS (names) limits the
#       sanitized programs; GPU_CHECK_SUITE=0 skips (1) and (3). Errors returned by CUDA calls are not counted (--report-api-errors no):
#       the error-path tests provoke them on purpose and check them themselves; memory access errors, leaks, races
#       and synchronisation errors are counted,
#   (3) the main job, `conveyor train --mode all` (CONVEYOR_CHECK_EPOCHS epochs, default 10),
# and prints one summary line each. Logs go to $OUT/gpu-check (or /tmp/gpu-check). SANITIZERS chooses the tools
# (default "memcheck racecheck synccheck"). Under a sanitizer CUPTI refuses a second subscriber, so test_profiler's
# Profiler.* tests skip there with that reason (its other tests run); they run in (1).
set -uo pipefail
CONVEYOR_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD_DIR:-$CONVEYOR_ROOT/gpu-build}
CARRY=$CONVEYOR_ROOT/gpu-carry
LOG=${OUT:-/tmp}/gpu-check
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$CARRY/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CONVEYOR_FASHION_MNIST_DIR="$CARRY/fashion-mnist"
[ -d "$CARRY/shared-data" ] && export CONVEYOR_SHARED_DATA="$CARRY/shared-data"
export NCCL_NVLS_ENABLE=0
EPOCHS=${CONVEYOR_CHECK_EPOCHS:-10}
SANITIZERS=${SANITIZERS-memcheck racecheck synccheck} # set but empty: no sanitizer run
export SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-${MEMCHECK_TIMEOUT:-240}}
export SANITIZER_EXCLUDE=${SANITIZER_EXCLUDE:-${MEMCHECK_EXCLUDE:-Train.GraphModeReachesAccuracyTarget:CavityGpu.Re100ProfilesMatchGhia:CavityGpu.ConvergenceStopsEveryModeAtTheSameStep:Solve.Poisson3dOnes:Lifetime.MemoryStaysBoundedOverManyWholeGraphUpdates:Soundness.ABufferReallocatedWithCudaMallocAt*:StepThroughDeathTest.*:ReleaseAtExit.*}}
# StepThroughDeathTest.*: makes an illegal address on purpose in a child process, which hangs under a sanitizer
# (H200, 2026-12-02: the 240 s timeout, no report); it runs in (1). ReleaseAtExit.*: its child exits while a kernel
# spins for 2 s; under every tool the child did not end within 270 s (H100, 2026-12-05), each other test of
# test_lifetime passing with no report before it; it runs in (1).
# Soundness.ABufferReallocatedWithCudaMallocAt*: passes alone and in the suite, but under compute-sanitizer (any tool)
# the process dies (rc 11) right after the test has passed, with no report (H200, 2026-12-01; not found yet).
# racecheck is slowest: these long tests run under the other tools only (their kernels are raced-checked by the
# shorter tests of the same programs).
# ThreadSafety.* exercises host threads (racecheck checks shared memory) and outlasts the timeout under racecheck, as
# do DataParallel.OneGpu* (test_train_multi's one-GPU tests: the trainer's kernels, which test_train's shorter tests
# race-check). Train.FusedAndUnfusedStepsTrainAlike and Train.SgdModesAgreeAcrossEpochs took 113 s and 121 s under
# racecheck alone (0 hazards; H200, 2026-12-05), which put test_train past the timeout; their kernels are those of
# Train.StepGradientsMatchCpuReference (both steps) and Train.ProgrammaticGraphGivesBitwiseTheSameLosses.
export RACECHECK_EXCLUDE=${RACECHECK_EXCLUDE:-Train.ModesGiveTheSameLossesOver100Steps:Train.FusedAndUnfusedStepsTrainAlike:Train.SgdModesAgreeAcrossEpochs:CavityGpu.ConservesMass:ThreadSafety.*:DataParallel.OneGpu*}
# MPI programs (test_*_mpi) take a case and two ranks: CTest runs them under mpirun (tests/mpi/run_mpi.sh); under a
# sanitizer they run as `mpirun -np 2 --allow-run-as-root compute-sanitizer ... PROGRAM CASE` where two ranks fit (2
# GPUs or more: NCCL refuses two ranks on one GPU), else they are left out with that reason.
MPI_CASES=${MPI_CASES:-all_reduce}
# (tool:program) pairs not run: cuSPARSE's csrmv_v3 kernel, which every test of test_solve uses, draws thousands of
# "Barrier error detected. Divergent thread(s) in warp" reports from synccheck and shared-memory race warnings from
# racecheck, whose process then dies (rc 11) in the first test; the same happens with the build from before this
# change (H200, 2026-11-30). Those kernels are NVIDIA's; memcheck checks test_solve, and the solver's own kernels
# are raced-checked nowhere else (noted in the closing report).
# racecheck and synccheck do not support CUDA dynamic parallelism, which device-side graph launch is to them
# ("Warning: CUDA Dynamic Parallelism is not supported by the selected tool", counted as an error by synccheck, with
# every test passing; H200, 2026-12-01): test_device_launch runs under memcheck only.
# racecheck:test_cavity_multi: its GPU tests (CavityMultiGpu.*) outlast the timeout under racecheck, and without them
# the program makes no CUDA call (the tool then fails it); its kernels are the cavity kernels test_cavity race-checks.
# test_libraries (cuBLAS, cuBLASLt, cuSPARSE, cuFFT, CUB, Thrust inside graphs): under synccheck cuBLAS's own
# sm80_xmma_gemm kernel draws "Barrier error detected. Divergent thread(s) in warp" and the process then fails with
# cudaErrorLaunchFailure; under racecheck the process dies (rc 11) in Libraries.CublasLtInAWhileBody with 0 hazards
# reported (H200, 2026-12-02). Alone, every test passes under memcheck with 0 errors and no leak; with 25 sanitized
# programs sharing the GPU its WHILE-body tests failed (as test_conditional's and test_solve's do), so it runs serially.
SANITIZER_SKIP=${SANITIZER_SKIP:-racecheck:test_solve synccheck:test_solve racecheck:test_device_launch synccheck:test_device_launch racecheck:test_cavity_multi racecheck:test_libraries synccheck:test_libraries}
GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
export LOG
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true

ctest_rc=0
train_rc=0
tests_line="not run (GPU_CHECK_SUITE=0)"
skipped=0
if [ "${GPU_CHECK_SUITE:-1}" != 0 ]; then
  # (1) the GPU suite
  ctest --test-dir "$BUILD" --output-on-failure --timeout 300 -j 2 -E '^Cli\.' >"$LOG/ctest.log" 2>&1
  ctest_rc=$?
  tests_line=$(grep -E "tests passed|tests failed" "$LOG/ctest.log" | tail -1)
  skipped=$(grep -c "(Skipped)" "$LOG/ctest.log" || true)
  grep -E "\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Not Run" "$LOG/ctest.log" | head -20

  # (3) the main job (before the sanitizers, which share the GPU)
  "$BUILD/bin/conveyor" train --mode all --epochs "$EPOCHS" --data "$CONVEYOR_FASHION_MNIST_DIR" \
    --dot "$LOG/train-step.dot" >"$LOG/train.log" 2>/dev/null
  train_rc=$?
fi

# (2) the sanitizers: one job per (tool, program); each prints "tool program errors rc"
sanitize() {
  local tool=$1 bin=$2 name extra=""
  name=$(basename "$bin")
  local exclude=$SANITIZER_EXCLUDE
  [ "$tool" = memcheck ] && extra="--leak-check full"
  [ "$tool" = racecheck ] && exclude="$exclude:$RACECHECK_EXCLUDE"
  if [[ "$name" == *_mpi ]]; then
    # shellcheck disable=SC2086
    timeout "$SANITIZER_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -np 2 \
      compute-sanitizer --tool "$tool" $extra --report-api-errors no --error-exitcode 99 "$bin" $MPI_CASES \
      >"$LOG/$tool-$name.log" 2>&1
  else
    timeout "$SANITIZER_TIMEOUT" compute-sanitizer --tool "$tool" $extra --report-api-errors no --error-exitcode 99 \
      "$bin" --gtest_filter="-$exclude" >"$LOG/$tool-$name.log" 2>&1
  fi
  local rc=$? n
  if [ "$tool" = racecheck ]; then
    # "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
    n=$(grep -Eo "RACECHECK SUMMARY: [0-9]+ hazards displayed \([0-9]+ errors" "$LOG/$tool-$name.log" |
      grep -Eo "\([0-9]+" | tr -d '(' | awk '{s+=$1} END {print s+0}')
  else
    n=$(grep -Eo "ERROR SUMMARY: [0-9]+" "$LOG/$tool-$name.log" | awk '{s+=$3} END {print s+0}')
  fi
  echo "$tool $name $n $rc"
}
export -f sanitize
SANITIZER_SERIAL=${SANITIZER_SERIAL:-test_conditional test_solve test_libraries}
parallel=()
serial=()
left_out=""
for bin in "$BUILD"/tests/*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  name=$(basename "$bin")
  [[ "$name" == test_* ]] || continue # GoogleTest programs only (make_graph_files is a command-line checks' helper)
  if [ -n "${SANITIZER_PROGRAMS:-}" ] && [[ " $SANITIZER_PROGRAMS " != *" $name "* ]]; then continue; fi
  if [[ "$name" == *_mpi ]] && [ "$GPUS" -lt 2 ]; then
    left_out+=" $name (an MPI program of 2 ranks: needs 2 GPUs, $GPUS visible; NCCL refuses two ranks on one GPU)"
    continue
  fi
  if [[ " $SANITIZER_SERIAL " == *" $name "* ]]; then serial+=("$bin"); else parallel+=("$bin"); fi
done
: >"$LOG/sanitizers.txt"
skipped_pairs=""
runs_of() { # the (tool, program) jobs of the programs given, less SANITIZER_SKIP
  for tool in $SANITIZERS; do for bin in "$@"; do
    if [[ " $SANITIZER_SKIP " == *" $tool:$(basename "$bin") "* ]]; then continue; fi
    echo "$tool $bin"
  done; done
}
for tool in $SANITIZERS; do for bin in "${parallel[@]}" "${serial[@]}"; do
  [[ " $SANITIZER_SKIP " == *" $tool:$(basename "$bin") "* ]] && skipped_pairs+=" $tool:$(basename "$bin")"
done; done
if ((${#parallel[@]})); then
  runs_of "${parallel[@]}" |
    xargs -r -P "${SANITIZER_JOBS:-6}" -n 2 bash -c 'sanitize "$0" "$1"' >>"$LOG/sanitizers.txt"
fi
if ((${#serial[@]})); then
  runs_of "${serial[@]}" | while read -r tool bin; do sanitize "$tool" "$bin" | tee -a "$LOG/sanitizers.txt"; done
fi
# Per tool: errors the sanitizer reported, programs that timed out (rc 124: not finished, nothing counted), and
# programs that failed otherwise (a crash, a failing test: rc other than 0 and 99) with no sanitizer report.
declare -A errors runs timeouts failures
bad=0
while read -r tool name n rc; do
  errors[$tool]=$(( ${errors[$tool]:-0} + n ))
  runs[$tool]=$(( ${runs[$tool]:-0} + 1 ))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    timeouts[$tool]+=" $name"
    echo "$tool: $name timed out after ${SANITIZER_TIMEOUT} s (errors reported before: $n)"
    bad=1
  elif [ "$rc" -ne 0 ] || [ "$n" -ne 0 ]; then
    echo "$tool: $name rc=$rc errors=$n"
    [ "$n" -eq 0 ] && [ "$rc" -ne 99 ] && failures[$tool]+=" $name"
    bad=1
  fi
done <"$LOG/sanitizers.txt"

echo "== gpu-check summary =="
echo "tests:    ${tests_line:-no ctest summary} (skipped: $skipped; rc=$ctest_rc)"
echo "          (sanitized in parallel: ${#parallel[@]} programs; one at a time: ${#serial[@]})"
for tool in $SANITIZERS; do
  printf '%-9s %s programs, %s errors' "$tool:" "${runs[$tool]:-0}" "${errors[$tool]:-0}"
  [ -n "${timeouts[$tool]:-}" ] && printf '; timed out (%s s):%s' "$SANITIZER_TIMEOUT" "${timeouts[$tool]}"
  [ -n "${failures[$tool]:-}" ] && printf '; failed without a sanitizer report:%s' "${failures[$tool]}"
  printf '\n'
done
echo "          (long runs left out of the sanitizers: $SANITIZER_EXCLUDE; of racecheck also: $RACECHECK_EXCLUDE;"
echo "          not run:${skipped_pairs:- none}; left out:${left_out:- none})"
echo "train:    rc=$train_rc"
[ -f "$LOG/train.log" ] && sed -n '/^device/,$p' "$LOG/train.log" | grep -v "^  call "
[ "$ctest_rc" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$train_rc" -eq 0 ]
