#pragma once
//! \file allreduce.hpp
//! The `conveyor allreduce` workload: NCCL all-reduce (float sum), eager calls against the same calls captured into
//! one graph, on every visible GPU in one process or one process per GPU under mpirun.

#include <cstddef>
#include <string>

namespace conveyor::allreduce {

//! What to measure and how; the command line's options (apps/conveyor/commands/allreduce.cpp).
struct options {
  std::size_t min_bytes = 4;                     //!< smallest size, bytes: a multiple of 4 (a float)
  std::size_t max_bytes = std::size_t{64} << 20; //!< largest size, bytes (at most 1 GiB)
  std::size_t factor = 4;                        //!< each size is the previous one times this
  int gpus = 0;                                  //!< the first N GPUs (one process); 0: every visible GPU
  int calls_per_graph = 20;                      //!< all-reduces captured into one graph
  int trials = 5;                                //!< timed trials per size and mode (the median is reported)
  long long timeout_ms = 60000;                  //!< the communicators' timeout
  bool distributed = false;                      //!< one process per GPU under mpirun instead of one process
  bool blocking_baseline = false;                //!< measure the blocking baseline under --distributed too
  bool no_blocking_baseline = false;             //!< leave the blocking baseline out (one process)
  std::string json;                              //!< also write the rows to this file (empty: none)

  //! The blocking baseline column: on by default in one process; off by default under --distributed, where a
  //! blocking communicator has no timeout (a rank that fails leaves the others waiting in it for ever).
  [[nodiscard]] bool with_blocking_baseline() const { return distributed ? blocking_baseline : !no_blocking_baseline; }
};

//! Checks `o` before any GPU work: the sizes, the JSON output path, and that this build can run it.
//! \throws conveyor::scenarios::usage_error for a size out of range; std::invalid_argument for a --json path that
//!         cannot be written; std::runtime_error when this build has no NCCL, or no MPI and `o.distributed`.
void check_options(const options& o);

//! Measures an NCCL all-reduce (float sum) over every visible GPU in one process
//! (conveyor::nccl::communicator::init_all; the first `o.gpus` when set), or with `o.distributed` one process per
//! GPU under mpirun (init_with_mpi; device = the rank on its host), for sizes from `o.min_bytes` to `o.max_bytes`
//! by a factor `o.factor`. For each size it times, with CUDA events on rank 0's stream and after a warm-up, the
//! median over `o.trials` of: eager calls enqueued back to back (Conveyor's nonblocking communicators), the same
//! with plain blocking NCCL communicators (`ncclCommInitAll`, the usual baseline; see with_blocking_baseline), and
//! `o.calls_per_graph` all-reduces captured into one graph and replayed; then prints (rank 0) a table of
//! microseconds per call, algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2(n-1)/n, NCCL's
//! PERFORMANCE.md), writes `o.json` (schema conveyor-allreduce/1) and checks every result (inputs of 1.0: every
//! element must equal the number of ranks). Under `o.distributed` an error on one rank is printed with its rank and
//! device and ends the whole job (MPI_Abort).
//! \throws std::runtime_error("no CUDA device: ...") where there is none, or when a result is wrong (after printing
//!         the table); conveyor::nccl::nccl_error when NCCL fails or times out; conveyor::cuda_error.
void run(const options& o);

} // namespace conveyor::allreduce
