#pragma once
//! \file data_parallel.hpp
//! Data-parallel training of the perceptron on several GPUs: `conveyor train --gpus N` (one process drives N
//! devices) and `mpirun -np N conveyor train --distributed` (one process per device). Every GPU holds a replica of
//! the network (parameters, gradients, optimizer state), its own copy of the training set, a cuBLAS handle and a
//! stream; the global batch of `batch` rows is split into one shard per GPU, the gradients are summed by one NCCL
//! all-reduce per step, and every replica applies the same optimizer update, so the parameters stay bitwise
//! identical on every GPU.
//!
//! One step, on every replica (rank k of N, shard rows [k*batch/N, (k+1)*batch/N) of the batch's window of the
//! epoch's permutation):
//!   1. gather the shard and compute the real row counts on the device (kernels::gather_shard: the batch counter
//!      and the training-set size give both the batch's and the shard's real rows, so the partial last batch of an
//!      epoch needs no other graph);
//!   2. forward; softmax cross-entropy with the gradient scaled by 1 / (the global batch's real rows), not the
//!      shard's; the shard's loss sum into the float after the gradients (mlp's gradient tail); backward;
//!   3. one in-place NCCL all-reduce (sum) of the gradient buffer and its tail: the gradients of the global batch and
//!      the sum of its losses, on every rank;
//!   4. loss = the all-reduced sum / global real rows into the loss history; the optimizer update; the counters.
//! With one process driving N devices the N all-reduces are one nccl::group (NCCL requires it).
//!
//! Modes: sync and stream run the step eagerly (sync waits after every call; after the all-reduce it waits through
//! nccl::synchronize, with the communicators' timeout). Graph mode captures the step once, NCCL's all-reduce inside:
//! with several devices in one process as ONE cross-device graph (captured on replica 0's stream, conveyor::fork to
//! every other replica's stream, conveyor::join back), with one device per process each process captures its own.
//! Every rank calls nccl::agree_on_capture before the timed steps (tag 0 eager, a hash of the step in graph mode),
//! so that ranks disagreeing on capture fail instead of hanging. The one captured graph serves every batch, the
//! partial last batch of each epoch included (the row counts are read on the device): no re-capture and no update
//! of an executable graph holding NCCL's resources (a re-capture would make new NCCL resources owned by the new
//! graph, which an update of the old executable graph could leave its kernel nodes pointing past).
//!
//! Determinism: everything but the all-reduce is the one-GPU trainer's fixed-order arithmetic. With N = 2 each
//! gradient element is one addition of two values, a + b = b + a in IEEE arithmetic whichever rank adds, so the
//! result is bitwise the same in every mode and on every rank. Against the one-GPU run the sums are grouped
//! differently (per shard, then across shards), so the losses agree to rounding (about 1e-7 relative), not bitwise.
//! With one GPU (a one-rank communicator) the step computes bitwise what the one-GPU trainer computes.

#include "train/dataset.hpp"
#include "train/trainer.hpp"

#include <conveyor/nccl/communicator.hpp>

#include <cstdint>
#include <span>

namespace conveyor::train {

//! The rows of a global batch one rank trains on: [offset, offset + rows).
struct shard_rows {
  int offset = 0; //!< first row within the batch
  int rows = 0;   //!< number of rows, at least 1
};

//! Shard `rank` of `world_size` of a batch of `batch` rows: rows [rank*batch/world_size, (rank+1)*batch/world_size)
//! (the shards differ by at most one row and cover the batch).
//! \throws std::invalid_argument when world_size < 1, rank is outside [0, world_size), or batch < world_size (a
//!         shard would be empty).
[[nodiscard]] shard_rows shard_of(int batch, int rank, int world_size);

//! check_options (its messages naming the options as `names` says), and what data-parallel training needs on top:
//! world_size >= 1, a batch of at least world_size rows (every GPU gets at least one row of each batch), no
//! profiling and no programmatic launch (one-GPU features).
//! \throws std::invalid_argument naming the problem.
void check_data_parallel_options(const train_options& options, const dataset& data, int world_size,
                                 const option_names& names = {});

//! FNV-1a (64 bits) of the bytes of `p` packed in the device layout (pack()): equal for bitwise equal parameters, to
//! compare replicas across processes.
//! \throws std::invalid_argument when `p` has the wrong sizes.
[[nodiscard]] std::uint64_t parameters_hash(const host_parameters& p);

//! Trains a freshly initialised network (he_init(options.seed), the same on every replica) data-parallel over the
//! ranks of `comms`, in `mode`, as described in the file comment, and evaluates replica 0's parameters on the test
//! split. `comms` are the communicators this process drives, all of one NCCL communicator (the same size(), ranks
//! distinct; from communicator::init_all for one process with N devices, or one from an MPI launch): replica i runs
//! on comms[i].device() and trains shard comms[i].rank() of comms[i].size(). Every rank of the communicator must make
//! the same call (options and mode) at the same time.
//!
//! Like run_training: one warm-up step (eager, on every replica; it also makes NCCL's connections outside any
//! capture), in graph mode the capture, instantiation and one launch, then a reset of parameters, optimizer state,
//! counters and losses, and `min(epochs * steps_per_epoch, max_steps)` steps timed in chunks (each chunk ends with
//! nccl::synchronize of every replica's stream). The result's losses and final_parameters are replica 0's;
//! world_size, local_replicas, devices, replicas_identical (every local replica's final parameters and losses
//! bitwise equal to replica 0's) and parameters_hash say the rest. options.on_progress is called as in
//! run_training (the caller leaves it empty on ranks that do not print). Whether it returns or throws, the graphs that
//! captured NCCL work are destroyed before it ends, so the caller may then finalise or abort the communicators (NCCL's
//! abort waits for such graphs to be destroyed).
//! \throws std::invalid_argument for invalid options or data, empty `comms` or communicators that do not form one
//!         (sizes differ, a rank twice, more local communicators than ranks); nccl::nccl_error when NCCL fails or a
//!         wait passes the communicators' timeout (a peer failed or does not call the same collectives: the
//!         communicators are aborted); conveyor::cuda_error / conveyor::libraries::library_error when a CUDA or
//!         cuBLAS call fails.
[[nodiscard]] train_result run_data_parallel(const train_options& options, const dataset& data, execution_mode mode,
                                             std::span<const nccl::communicator> comms);

} // namespace conveyor::train
