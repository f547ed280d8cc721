//! \file data_parallel.cpp
//! Data-parallel training over NCCL (data_parallel.hpp): replicas, the step, and the run in three modes through
//! the mode runner (common/mode_runner.hpp).

#include "train/data_parallel.hpp"

#include "common/hash.hpp"
#include "common/mode_runner.hpp"
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

void check_data_parallel_options(const train_options& o, const dataset& data, int world_size,
                                 const option_names& names) {
  check_options(o, data, names);
  (void)shard_of(o.batch, 0, world_size); // world_size >= 1, batch >= world_size
  if (o.profiling != nullptr)
    throw std::invalid_argument("profiling applies to the one-GPU run, not to data-parallel training");
  if (o.programmatic)
    throw std::invalid_argument("programmatic dependent launch applies to the one-GPU run, not to data-parallel "
                                "training");
}

std::uint64_t parameters_hash(const host_parameters& p) {
  const std::vector<float> flat = pack(p);
  return scenarios::fnv1a_of(std::span<const float>(flat));
}

namespace {

//! What `step` captures in graph mode, for nccl::agree_on_capture (any value but 0, which means "eager").
constexpr std::uint64_t capture_tag_base = 0x7472'6169'6E5F'6470ULL; // "train_dp"

//! Everything one GPU holds for data-parallel training. Made and destroyed with its device current
//! (data_parallel_program does both).
struct replica {
  replica(const nccl::communicator& c, const dataset& data, int batch, const optimizer_config& opt,
          std::size_t history) :
      comm(&c),
      device(c.device()),
      part(shard_of(batch, c.rank(), c.size())),
      train(detail::upload_split(data.train_images, data.train_labels, stream.get())),
      blas(stream),
      model(opt, stream.get(), /*gradient_tail=*/1),
      act(part.rows),
      x(static_cast<std::size_t>(part.rows) * input_features),
      y(static_cast<std::size_t>(part.rows)),
      perm(static_cast<std::size_t>(train.count)),
      counters(2),
      counts(2),
      loss_history(history) {}

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
                        const optimizer_config& opt, std::size_t history_len) :
      comms_(comms),
      batch_(batch),
      history_len_(static_cast<int>(history_len)) {
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
      kernels::finish_loss(r->model.gradient_tail(), r->counts.data(), r->counters.data() + 1, r->loss_history.data(),
                           history_len_, ctx);
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
      CONVEYOR_CHECK(cudaMemcpyAsync(r->perm.data(), pinned, r->perm.bytes(), cudaMemcpyHostToDevice, r->stream.get()));
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
    throw std::invalid_argument(
        fmt::format("run_data_parallel: {} local communicators but {} ranks", comms.size(), size));
  std::vector<int> ranks;
  for (const nccl::communicator& c : comms) {
    if (c.size() != size)
      throw std::invalid_argument(
          fmt::format("run_data_parallel: communicators of {} and {} ranks given together", size, c.size()));
    if (std::find(ranks.begin(), ranks.end(), c.rank()) != ranks.end())
      throw std::invalid_argument(fmt::format("run_data_parallel: rank {} given twice", c.rank()));
    ranks.push_back(c.rank());
  }
  return size;
}

//! The step captured by hand (one cross-device graph: fork/join across the replicas' streams, NCCL inside),
//! instantiated and launched once before the reset (it uploads the graph and runs its collectives outside the
//! timing); launched on replica 0's stream. Destroyed by the mode runner before the run returns or throws, so the
//! communicators may then be finalised or aborted (NCCL waits for the graphs that captured them to go).
class data_parallel_graph final : public scenarios::graph_step {
public:
  data_parallel_graph(data_parallel_program& program, train_result& result) : program_(program) {
    replica& first = program.front();
    const conveyor::graph g = program.capture_step();
    result.graph_nodes = g.node_count();
    result.graph_edges = g.edge_count();
    result.graph_dot = conveyor::to_dot(g, "train_step_data_parallel");
    const device_guard on(first.device);
    exec_.emplace(conveyor::instantiate(g));
    exec_->launch(first.stream);
  }
  void launch(std::size_t) override { exec_->launch(program_.front().stream); }

private:
  data_parallel_program& program_;
  std::optional<conveyor::graph_exec> exec_;
};

//! One data-parallel run as a workload of the mode runner: as the one-GPU run (a round is a timed chunk, each epoch
//! begun untimed before its first chunk), on every replica. The eager warm-up step (every mode) also makes NCCL's
//! connections outside any capture; every rank then agrees on capturing or not (nccl::agree_on_capture).
class data_parallel_run final : public scenarios::workload {
public:
  data_parallel_run(std::span<const nccl::communicator> comms, const train_options& o, const dataset& data,
                    execution_mode mode, train_result& result) :
      options_(o),
      mode_(mode),
      result_(result),
      length_(detail::length_of(o, data.train_images.count)),
      program_(comms, data, o.batch, o.optimizer, length_.steps),
      init_(he_init(o.seed)),
      order_(data.train_images.count),
      chunks_(length_, o.chunk_steps) {
    result_.mode = mode;
    result_.step = step_kind::unfused; // the replicas run mlp's cuBLAS passes
    result_.steps_per_epoch = length_.steps_per_epoch;
    result_.steps = length_.steps;
    result_.epochs = length_.epochs;
  }

  [[nodiscard]] cudaStream_t stream() const override { return program_.front().stream.get(); }
  void reset() override { program_.reset(init_); }
  void warm_up(const launch_ctx&) override {
    begin_epoch(0);
    program_.enqueue_step(false);
    program_.synchronize();
    program_.agree_on_capture(mode_ == execution_mode::graph);
  }
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override {
    return std::make_unique<data_parallel_graph>(program_, result_);
  }
  void synchronize() override { program_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t) override {
    return chunks_.next([&](int epoch) {
      begin_epoch(epoch);
      program_.synchronize(); // keep the uploads out of the first chunk's time
    });
  }
  void enqueue(const launch_ctx& ctx, std::size_t) override { program_.enqueue_step(ctx.sync_each); }
  [[nodiscard]] std::size_t end_round(std::size_t steps) override {
    chunks_.finish_chunk();
    if (options_.on_progress) {
      replica& first = program_.front();
      const device_guard on(first.device);
      options_.on_progress(
          train_progress{mode_, chunks_.epoch(), length_.epochs, chunks_.done(), length_.steps, length_.steps_per_epoch,
                         detail::read_loss(first.loss_history, chunks_.done() - 1, first.stream.get())});
    }
    return steps;
  }

  //! The results after the run: replica 0's losses and parameters, their hash, whether every replica ended bitwise
  //! equal to replica 0, the test accuracy of replica 0's parameters.
  void collect(const dataset& data);

private:
  void begin_epoch(int epoch) {
    program_.synchronize(); // the previous uploads from the pinned order have completed
    program_.begin_epoch(order_.fill(options_.seed, epoch));
  }

  const train_options& options_;
  execution_mode mode_;
  train_result& result_;
  detail::run_length length_;
  data_parallel_program program_;
  host_parameters init_;
  detail::epoch_order order_;
  detail::chunk_schedule chunks_;
};

void data_parallel_run::collect(const dataset& data) {
  replica& first = program_.front();
  const std::size_t total = length_.steps;
  {
    const device_guard on(first.device);
    result_.losses = first.loss_history.download(total, first.stream.get());
    result_.final_parameters = first.model.parameters(first.stream.get());
  }
  result_.parameters_hash = parameters_hash(result_.final_parameters);
  const std::vector<float> reference = pack(result_.final_parameters);
  for (std::size_t i = 1; i < program_.replicas().size(); ++i) {
    replica& r = *program_.replicas()[i];
    const device_guard on(r.device);
    const std::vector<float> losses = r.loss_history.download(total, r.stream.get());
    const std::vector<float> params = pack(r.model.parameters(r.stream.get()));
    // Bitwise: compared as bytes, so that -0 against +0 or NaN payloads count as differences.
    const bool same = losses.size() == result_.losses.size() && params.size() == reference.size() &&
                      std::memcmp(losses.data(), result_.losses.data(), losses.size() * sizeof(float)) == 0 &&
                      std::memcmp(params.data(), reference.data(), params.size() * sizeof(float)) == 0;
    result_.replicas_identical = result_.replicas_identical && same;
  }
  const device_guard on(first.device);
  const device_split test = detail::upload_split(data.test_images, data.test_labels, first.stream.get());
  result_.test_accuracy = detail::evaluate(first.model, first.blas, test, data.test_labels, first.stream.get());
}

} // namespace

train_result run_data_parallel(const train_options& options, const dataset& data, execution_mode mode,
                               std::span<const nccl::communicator> comms) {
  const int world = check_communicators(comms);
  check_data_parallel_options(options, data, world);
  train_result result;
  result.world_size = world;
  result.local_replicas = static_cast<int>(comms.size());
  for (const nccl::communicator& c : comms) result.devices.push_back(c.device());
  data_parallel_run run(comms, options, data, mode, result);
  scenarios::run_settings settings;
  settings.mode = mode;
  const scenarios::mode_timing timing = scenarios::run_workload(run, settings);
  result.chunk_ms_per_step = timing.ms_per_unit;
  result.ms_per_step = timing.median_ms_per_unit;
  result.steps_per_second = result.ms_per_step > 0.0 ? 1000.0 / result.ms_per_step : 0.0;
  run.collect(data);
  return result;
}

} // namespace conveyor::train
