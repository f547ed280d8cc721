#pragma once
//! \file allreduce.hpp
//! The `conveyor allreduce` subcommand: NCCL all-reduce, eager against captured into a graph.

#include <CLI/CLI.hpp>

//! Adds the subcommand `allreduce` to `app`: an NCCL all-reduce (float sum) over every visible GPU in one process
//! (conveyor::nccl::communicator::init_all; `--gpus N` for the first N), or with `--distributed` one process per GPU
//! under mpirun (init_with_mpi; device = the rank on its host), for sizes from `--min-bytes` (default 4) to
//! `--max-bytes` (default 64 MiB) by a factor `--factor` (default 4). For each size it times, with CUDA events on
//! rank 0's stream and after a warm-up, the median over `--trials` (default 5) of: eager calls enqueued back to back
//! (Conveyor's nonblocking communicators), the same with plain blocking NCCL communicators (`ncclCommInitAll`,
//! the usual baseline), and `--calls-per-graph` (default 20) all-reduces captured into one graph and replayed; then
//! prints a table of microseconds per call, algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2(n-1)/n,
//! NCCL's PERFORMANCE.md), and checks every result (inputs of 1.0: every element must equal the number of ranks).
//! `--json FILE` writes the rows (schema conveyor-allreduce/1). Runs in well under a minute on an H200.
//!
//! Every option is checked before the GPU is needed; then it throws std::runtime_error("no CUDA device: ...") where
//! there is none, conveyor::nccl::nccl_error when NCCL fails or times out (`--timeout-ms`, default 60000), and
//! std::runtime_error when a result is wrong (after printing the table).
void register_allreduce_command(CLI::App& app);
