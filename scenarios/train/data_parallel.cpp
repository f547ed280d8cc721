//! \file data_parallel.cpp
//! Data-parallel training over NCCL (data_parallel.hpp): replicas, the step, and the run in three modes.

#include "train/data_parallel.hpp"

#include "train/cublas.hpp"
#include "train/device_data.hpp"
#include "train/kernels.hpp"
#include "train/mlp.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/nccl/collectives.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace conveyor::train {

using detail::device_split;

shard_rows shard_of(int batch, int rank, int world_size) {
  if (world_size < 1) throw std::invalid_argument(fmt::format("{} GPUs: need at least one", world_size));
  if (rank < 0 || rank >= world_size)
    throw std::invalid_argument(fmt::format("rank {} outside [0, {})", rank, world_size));
  if (batch < world_size)
    throw std::invalid_argument(fmt::format("batch size {} is smaller than the {} GPUs it is split over: every GPU "
                                            "needs at least one row of each batch",
                                            batch, world_size));
  const auto b = static_cast<long long>(batch);
  const auto first = static_cast<int>(b * rank / world_size);
  const auto end = static_cast<int>(b * (rank + 1) / world_size);
  return {first, end - first};
}

void check_data_parallel_options(const train_options& o, const dataset& data, int world_size) {
  check_options(o, data);
  (void)shard_of(o.batch, 0, world_size); // world_size >= 1, batch >= world_size
  if (o.profiling != nullptr)
    throw std::invalid_argument("profiling (--profile, --doctor) applies to the one-GPU run, not to data-parallel "
                                "training");
  if (o.programmatic)
    throw std::invalid_argument("--pdl applies to the one-GPU run, not to data-parallel training");
}

std::uint64_t parameters_hash(const host_parameters& p) {
  const std::vector<float> flat = pack(p);
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const float v : flat) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) {
      h ^= (bits >> (8 * i)) & 0xFFU;
      h *= 0x100000001B3ULL;
    }
  }
  return h;
}

namespace {

//! What `step` captures in graph mode, for nccl::agree_on_capture (any value but 0, which means "eager").
constexpr std::uint64_t capture_tag_base = 0x7472'6169'6E5F'6470ULL; // "train_dp"

//! Everything one GPU holds for data-parallel training. Made and destroyed with its device current
//! (data_parallel_program does both).
struct replica {
  replica(const nccl::communicator& c, const dataset& data, int batch, const optimizer_config& opt,
          std::size_t history)
      : comm(&c), device(c.device()), part(shard_of(batch, c.rank(), c.size())),
        train(detail::upload_split(data.train_images, data.train_labels, stream.get())), blas(stream.get()),
        model(opt, stream.get(), /*gradient_tail=*/1), act(part.rows),
        x(static_cast<std::size_t>(part.rows) * input_features), y(static_cast<std::size_t>(part.rows)),
        perm(static_cast<std::size_t>(train.count)), counters(2), counts(2), loss_history(history) {}

  const nccl::communicator* comm; // this replica's rank
  int device;
  shard_rows part;
  conveyor::stream stream; // on `device` (made while it is current)
  device_split train;
  cublas_handle blas;
  mlp model;                         // gradients and, in their tail, the shard's loss sum: one all-reduce
  activations act;                   // part.rows rows
  device_buffer<float> x;            // part.rows x 784
  device_buffer<int> y;              // part.rows
  device_buffer<int> perm;           // training-set size
  device_buffer<int> counters;       // [0] batch within the epoch, [1] global step
  device_buffer<int> counts;         // [0] real rows of the global batch, [1] of this shard (gather_shard)
  device_buffer<float> loss_history; // one loss per step (the global batch's)
};

//! Destroys a replica with its device current (cuBLAS handles, streams and memory are released on their device).
struct replica_deleter {
  void operator()(replica* r) const noexcept {
    int previous = -1;
    const bool known = cudaGetDevice(&previous) == cudaSuccess;
    (void)cudaSetDevice(r->device);
    delete r;
    if (known) (void)cudaSetDevice(previous);
  }
};

//! The replicas of this process and the step over all of them.
class data_parallel_program {
public:
  data_parallel_program(std::span<const nccl::communicator> comms, const dataset& data, int batch,
                        const optimizer_config& opt, std::size_t history_len)
      : comms_(comms), batch_(batch), history_len_(static_cast<int>(history_len)) {
    if (history_len < 1 || history_len > static_cast<std::size_t>(INT_MAX))
      throw std::invalid_argument("step count outside [1, INT_MAX]");
    for (const nccl::communicator& c : comms) {
      const device_guard on(c.device());
      replicas_.emplace_back(new replica(c, data, batch, opt, history_len));
      streams_.push_back(&replicas_.back()->stream);
    }
  }

  //! The replicas, replica 0 first.
  [[nodiscard]] const std::vector<std::unique_ptr<replica, replica_deleter>>& replicas() const noexcept {
    return replicas_;
  }
  //! Replica 0.
  [[nodiscard]] replica& front() const noexcept { return *replicas_.front(); }

  //! Enqueues one training step on every replica (file comment of data_parallel.hpp). Reads no host memory:
  //! capturable. `sync_each`: wait after every call (sync mode); the all-reduce is waited for with
  //! nccl::synchronize (the communicators' timeout) instead of cudaStreamSynchronize, which would wait forever for
  //! a peer that failed.
  void enqueue_step(bool sync_each) {
    for (const auto& r : replicas_) {
      const device_guard on(r->device);
      const launch_ctx ctx{r->stream.get(), sync_each};
      kernels::gather_shard(r->train.x.data(), r->train.y.data(), r->train.count, input_features, r->perm.data(),
                            r->train.count, r->counters.data(), batch_, r->part.offset, r->part.rows, r->x.data(),
                            r->y.data(), r->counts.data(), ctx);
      r->model.forward(r->blas, r->x.data(), r->part.rows, r->act, ctx);
      kernels::softmax_cross_entropy_shard(r->act.logits.data(), r->y.data(), r->part.rows, r->counts.data(),
                                           num_classes, r->act.d_logits.data(), r->act.row_loss.data(), ctx);
      kernels::shard_loss_sum(r->act.row_loss.data(), r->counts.data(), r->model.gradient_tail(), ctx);
      r->model.backward(r->blas, r->x.data(), r->part.rows, r->act, ctx);
    }
    {
      // One thread drives every local communicator: NCCL requires their collectives in one group.
      nccl::group g;
      for (const auto& r : replicas_) {
        float* buffer = r->model.gradient_buffer();
        nccl::all_reduce(*r->comm, buffer, buffer, r->model.gradient_buffer_size(), nccl::reduce_op::sum, r->stream);
      }
      g.end();
    }
    if (sync_each) synchronize();
    for (const auto& r : replicas_) {
      const device_guard on(r->device);
      const launch_ctx ctx{r->stream.get(), sync_each};
      kernels::finish_loss(r->model.gradient_tail(), r->counts.data(), r->counters.data() + 1,
                           r->loss_history.data(), history_len_, ctx);
      r->model.update(r->counters.data() + 1, ctx);
      kernels::advance_step(r->counters.data(), ctx);
    }
  }

  //! Captures one step into one graph: on replica 0's stream, every other replica's stream forked in (and so its
  //! device's work, cross-device) and joined back.
  [[nodiscard]] conveyor::graph capture_step() {
    const conveyor::stream& origin = front().stream;
    const device_guard on(front().device);
    return conveyor::capture(origin, [&] {
      for (std::size_t i = 1; i < replicas_.size(); ++i) conveyor::fork(origin, replicas_[i]->stream);
      enqueue_step(false);
      for (std::size_t i = 1; i < replicas_.size(); ++i) conveyor::join(origin, replicas_[i]->stream);
    });
  }

  //! nccl::agree_on_capture over this process's communicators: tag 0 (eager) or the step's tag.
  void agree_on_capture(bool graph) const {
    const auto shape = (static_cast<std::uint64_t>(batch_) << 32) ^ static_cast<std::uint64_t>(comms_.front().size());
    const std::uint64_t tag = graph ? capture_tag_base ^ shape : 0;
    nccl::agree_on_capture(comms_, streams_, tag);
  }

  //! Waits for every replica's stream (nccl::synchronize: the communicators' timeout, abort and nccl_error on a
  //! failed peer).
  void synchronize() const { nccl::synchronize(comms_, streams_); }

  //! Uploads an epoch's permutation from pinned memory to every replica and zeroes their batch counters
  //! (asynchronous; `pinned` must stay unchanged until synchronize()).
  void begin_epoch(const int* pinned) {
    for (const auto& r : replicas_) {
      const device_guard on(r->device);
      CONVEYOR_CHECK(cudaMemcpyAsync(r->perm.data(), pinned, r->perm.bytes(), cudaMemcpyHostToDevice,
                                     r->stream.get()));
      CONVEYOR_CHECK(cudaMemsetAsync(r->counters.data(), 0, sizeof(int), r->stream.get()));
    }
  }

  //! Every replica back to parameters `init`, zero gradients and optimizer state, counters and losses; waits.
  void reset(const host_parameters& init) {
    for (const auto& r : replicas_) {
      const device_guard on(r->device);
      r->counters.zero_async(r->stream.get());
      r->counts.zero_async(r->stream.get());
      r->loss_history.zero_async(r->stream.get());
      r->model.load(init, r->stream.get()); // synchronises the stream
    }
  }

private:
  std::span<const nccl::communicator> comms_;
  int batch_;
  int history_len_;
  std::vector<std::unique_ptr<replica, replica_deleter>> replicas_;
  std::vector<const conveyor::stream*> streams_;
};

//! Checks that `comms` are ranks of one communicator; returns its size.
int check_communicators(std::span<const nccl::communicator> comms) {
  if (comms.empty()) throw std::invalid_argument("run_data_parallel: no communicator");
  const int size = comms.front().size();
  if (static_cast<int>(comms.size()) > size)
    throw std::invalid_argument(fmt::format("run_data_parallel: {} local communicators but {} ranks", comms.size(),
                                            size));
  std::vector<int> ranks;
  for (const nccl::communicator& c : comms) {
    if (c.size() != size)
      throw std::invalid_argument(fmt::format("run_data_parallel: communicators of {} and {} ranks given together",
                                              size, c.size()));
    if (std::find(ranks.begin(), ranks.end(), c.rank()) != ranks.end())
      throw std::invalid_argument(fmt::format("run_data_parallel: rank {} given twice", c.rank()));
    ranks.push_back(c.rank());
  }
  return size;
}

} // namespace

train_result run_data_parallel(const train_options& options, const dataset& data, execution_mode mode,
                               std::span<const nccl::communicator> comms) {
  const int world = check_communicators(comms);
  check_data_parallel_options(options, data, world);
  train_result result;
  result.mode = mode;
  result.world_size = world;
  result.local_replicas = static_cast<int>(comms.size());
  for (const nccl::communicator& c : comms) result.devices.push_back(c.device());
  result.steps_per_epoch = steps_per_epoch(data.train_images.count, options.batch);
  const std::size_t spe = result.steps_per_epoch;
  std::size_t total = spe * static_cast<std::size_t>(options.epochs);
  if (options.max_steps > 0) total = std::min(total, options.max_steps);
  result.steps = total;
  result.epochs = static_cast<int>((total + spe - 1) / spe);

  data_parallel_program program(comms, data, options.batch, options.optimizer, total);
  replica& first = program.front();
  const host_parameters init = he_init(options.seed);
  program.reset(init);

  pinned_buffer<int> perm_host(data.train_images.count);
  auto begin_epoch = [&](int epoch) {
    program.synchronize(); // the previous uploads from perm_host have completed
    const std::vector<int> perm = epoch_permutation(options.seed, epoch, perm_host.size());
    std::copy(perm.begin(), perm.end(), perm_host.data());
    program.begin_epoch(perm_host.data());
  };

  // Warm-up step, eager on every mode (it also makes NCCL's connections outside any capture); graph mode then
  // captures, instantiates and launches the step once; then everything is reset, so that every mode trains from the
  // same state.
  begin_epoch(0);
  program.enqueue_step(false);
  program.synchronize();
  const bool graph_mode = mode == execution_mode::graph;
  program.agree_on_capture(graph_mode);
  // The graph that captured NCCL's all-reduce and its executable graph hold NCCL's resources for it: they go before
  // the communicators, also when a step or a wait throws (the caller then finalises or aborts the communicators,
  // and NCCL's abort and finalisation wait for the graphs that captured the communicator to be destroyed). The
  // captured graph lives in the capture's block only; the executable graph is reset on every way out of the steps.
  std::optional<conveyor::graph_exec> step_exec;
  try {
    if (graph_mode) {
      const conveyor::graph g = program.capture_step();
      result.graph_nodes = g.node_count();
      result.graph_edges = g.edge_count();
      result.graph_dot = conveyor::to_dot(g, "train_step_data_parallel");
      const device_guard on(first.device);
      step_exec.emplace(conveyor::instantiate(g));
      step_exec->launch(first.stream); // once before the reset: uploads it and runs its collectives outside the timing
    }
    program.synchronize();
    program.reset(init);

    using clock = std::chrono::steady_clock;
    std::size_t done = 0;
    for (int epoch = 0; epoch < result.epochs; ++epoch) {
      begin_epoch(epoch);
      program.synchronize(); // keep the uploads out of the first chunk's time
      const std::size_t in_epoch = std::min(spe, total - done);
      for (std::size_t c = 0; c < in_epoch; c += static_cast<std::size_t>(options.chunk_steps)) {
        const std::size_t n = std::min(static_cast<std::size_t>(options.chunk_steps), in_epoch - c);
        const auto t0 = clock::now();
        for (std::size_t k = 0; k < n; ++k) {
          if (step_exec)
            step_exec->launch(first.stream);
          else
            program.enqueue_step(mode == execution_mode::sync);
        }
        program.synchronize();
        const auto t1 = clock::now();
        result.chunk_ms_per_step.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() /
                                           static_cast<double>(n));
        done += n;
        if (options.on_progress) {
          const device_guard on(first.device);
          options.on_progress(train_progress{mode, epoch, result.epochs, done, total, spe,
                                             detail::read_loss(first.loss_history, done - 1, first.stream.get())});
        }
      }
    }
  } catch (...) {
    step_exec.reset();
    throw;
  }
  step_exec.reset(); // before the communicators can go: it holds NCCL's resources for the captured all-reduce

  result.ms_per_step = detail::median(result.chunk_ms_per_step);
  result.steps_per_second = result.ms_per_step > 0.0 ? 1000.0 / result.ms_per_step : 0.0;
  {
    const device_guard on(first.device);
    result.losses = first.loss_history.download(total, first.stream.get());
    result.final_parameters = first.model.parameters(first.stream.get());
  }
  result.parameters_hash = parameters_hash(result.final_parameters);
  const std::vector<float> reference = pack(result.final_parameters);
  for (std::size_t i = 1; i < program.replicas().size(); ++i) {
    replica& r = *program.replicas()[i];
    const device_guard on(r.device);
    const std::vector<float> losses = r.loss_history.download(total, r.stream.get());
    const std::vector<float> params = pack(r.model.parameters(r.stream.get()));
    // Bitwise: compared as bytes, so that -0 against +0 or NaN payloads count as differences.
    const bool same = losses.size() == result.losses.size() && params.size() == reference.size() &&
                      std::memcmp(losses.data(), result.losses.data(), losses.size() * sizeof(float)) == 0 &&
                      std::memcmp(params.data(), reference.data(), params.size() * sizeof(float)) == 0;
    result.replicas_identical = result.replicas_identical && same;
  }
  {
    const device_guard on(first.device);
    const device_split test = detail::upload_split(data.test_images, data.test_labels, first.stream.get());
    result.test_accuracy = detail::evaluate(first.model, first.blas, test, data.test_labels, first.stream.get());
  }
  return result;
}

} // namespace conveyor::train
