#!/usr/bin/env bash
# CTest Mpi.TrainDistributedTwoRanks (tests/CMakeLists.txt): runs
#   mpirun --allow-run-as-root --oversubscribe -np 2 CONVEYOR train --distributed --world-size 2 [ARGS...]
# and passes when it exits 0 and printed "data-parallel checks: pass" (rank 0's verdict, which every rank shares).
# Exits 77 (CTest: skipped) without mpirun, with fewer than 2 GPUs visible (nvidia-smi -L, limited by
# CUDA_VISIBLE_DEVICES when set) or without Fashion-MNIST (CONVEYOR_FASHION_MNIST_DIR, else the Debian package's
# folder). NCCL_NVLS_ENABLE=0: no NVLink multicast (see the device notes).
# Usage: train_distributed.sh CONVEYOR [ARGS...]
set -u
conveyor=$1
shift
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: no mpirun on PATH"
  exit 77
fi
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
fi
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  visible=$(printf '%s' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
  [ "$visible" -lt "$gpus" ] && gpus=$visible
fi
if [ "$gpus" -lt 2 ]; then
  echo "SKIP: needs 2 GPUs, $gpus visible"
  exit 77
fi
data=${CONVEYOR_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -f "$data/train-images-idx3-ubyte.gz" ]; then
  echo "SKIP: no Fashion-MNIST in $data (set CONVEYOR_FASHION_MNIST_DIR)"
  exit 77
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Within CTest's TIMEOUT (300 s), so that mpirun and its ranks are ended here rather than left behind.
timeout -k 10 280 mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_NVLS_ENABLE \
  "$conveyor" train --distributed --world-size 2 --data "$data" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
  echo "mpirun exited with status $rc$([ "$rc" = 124 ] && echo ' (timed out after 280 s)')"
  exit 1
fi
if ! grep -q '^data-parallel checks: pass' "$log"; then
  echo "no 'data-parallel checks: pass' line in the output"
  exit 1
fi
