#!/usr/bin/env bash
# CTest Mpi.TrainDistributed* (tests/CMakeLists.txt), two modes.
#
# Training: train_distributed.sh CONVEYOR [ARGS...]
#   runs mpirun --allow-run-as-root --oversubscribe -np 2 CONVEYOR train --distributed --world-size 2 [ARGS...]
#   and passes when it exits 0 and printed "data-parallel checks: pass" (rank 0's verdict, which every rank shares).
#   Exits 77 (CTest: skipped) without mpirun, with fewer than 2 GPUs visible (nvidia-smi -L, limited by
#   CUDA_VISIBLE_DEVICES when set) or without Fashion-MNIST (CONVEYOR_FASHION_MNIST_DIR, else the Debian package's
#   folder). NCCL_NVLS_ENABLE=0: no NVLink multicast (see the device notes).
#
# Refusal: train_distributed.sh --refuses CONVEYOR EXPECT0 EXPECT1 ARGS0 ARGS1
#   runs two ranks, rank 0 as `CONVEYOR train --distributed ARGS0` and rank 1 with ARGS1 (each one string, split at
#   blanks; @DATA@ stands for the Fashion-MNIST folder) and passes when the job ends within 60 s (no rank left
#   waiting for another), exits non-zero, and printed "conveyor: error: rank 0 of 2: " followed by a match of the
#   extended regular expression EXPECT0, and the same for rank 1 with EXPECT1. Needs no GPU: these refusals come
#   before the device check. A rank whose ARGS name no --data gets --data @DATA@. Exits 77 without mpirun, or
#   without the data.
set -u
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: no mpirun on PATH"
  exit 77
fi
data=${CONVEYOR_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
have_data() { [ -f "$data/train-images-idx3-ubyte.gz" ]; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT

if [ "${1:-}" = "--refuses" ]; then
  conveyor=$2 expect0=$3 expect1=$4 args0=$5 args1=$6
  # A rank whose arguments name no --data reads the data folder (checked before the refusals the job agrees on):
  # give it the one found here.
  case "$args0" in *--data*) ;; *) args0="$args0 --data @DATA@" ;; esac
  case "$args1" in *--data*) ;; *) args1="$args1 --data @DATA@" ;; esac
  case "$args0 $args1" in
  *@DATA@*)
    if ! have_data; then
      echo "SKIP: no Fashion-MNIST in $data (set CONVEYOR_FASHION_MNIST_DIR)"
      exit 77
    fi
    ;;
  esac
  args0=${args0//@DATA@/$data}
  args1=${args1//@DATA@/$data}
  # shellcheck disable=SC2086 # ARGS0 and ARGS1 are split at blanks on purpose
  timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np 1 "$conveyor" train --distributed $args0 \
    : -np 1 "$conveyor" train --distributed $args1 >"$log" 2>&1
  rc=$?
  cat "$log"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "FAIL: mpirun did not end within 60 s: a rank was left waiting"
    exit 1
  fi
  if [ "$rc" = 0 ]; then
    echo "FAIL: mpirun exited 0, a refusal was expected"
    exit 1
  fi
  status=0
  if ! grep -Eq "conveyor: error: rank 0 of 2: $expect0" "$log"; then
    echo "FAIL: no line 'conveyor: error: rank 0 of 2: $expect0'"
    status=1
  fi
  if ! grep -Eq "conveyor: error: rank 1 of 2: $expect1" "$log"; then
    echo "FAIL: no line 'conveyor: error: rank 1 of 2: $expect1'"
    status=1
  fi
  [ "$status" = 0 ] && echo "refused on both ranks as expected (mpirun exit status $rc)"
  exit "$status"
fi

conveyor=$1
shift
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
if ! have_data; then
  echo "SKIP: no Fashion-MNIST in $data (set CONVEYOR_FASHION_MNIST_DIR)"
  exit 77
fi
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
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
