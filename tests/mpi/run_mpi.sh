#!/bin/sh
# Runs one case of the MPI test program on 2 processes (CTest: tests/CMakeLists.txt, "NCCL (issue 16)"):
#   run_mpi.sh CONFIGURED_MPIRUN PROGRAM CASE
# mpirun is taken from PATH (the GPU machine's own), else the one CMake found. Where no mpirun can start two
# processes, the test is skipped with the reason (exit 77, CTest's SKIP_RETURN_CODE). Open MPI options: root is
# allowed (CI and the GPU machine run as root), more processes than cores, and a rank may exit without MPI_Finalize
# (the early_exit case) without mpirun killing the others. NCCL_NVLS_ENABLE=0: no NVLink multicast on shared GPUs.
set -u
configured=$1 program=$2 case=$3
mpirun=$(command -v mpirun 2>/dev/null || true)
[ -n "$mpirun" ] || mpirun=$configured
if [ ! -x "$mpirun" ]; then
  echo "SKIP: needs mpirun to start 2 processes: none in PATH and '$configured' is not executable"
  exit 77
fi
if ! probe=$(timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np 2 true 2>&1); then
  echo "SKIP: '$mpirun --allow-run-as-root --oversubscribe -np 2 true' cannot start 2 processes here:"
  echo "$probe" | head -20
  exit 77
fi
export NCCL_NVLS_ENABLE=0
exec timeout -k 10 110 "$mpirun" --allow-run-as-root --oversubscribe --mca orte_allowed_exit_without_sync 1 \
  -x NCCL_NVLS_ENABLE -np 2 "$program" "$case"
