//! \file trainer.cpp
//! The training loop in three execution modes.

#include "train/trainer.hpp"

#include "train/cublas.hpp"
#include "common/device_buffer.hpp"
#include "common/profiling.hpp"
#include "train/device_data.hpp"
#include "train/kernels.hpp"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

namespace conveyor::train {

using detail::device_split;
using detail::evaluate;
using detail::median;
using detail::read_loss;
using detail::upload_split;

std::size_t steps_per_epoch(std::size_t train_count, int batch) {
  if (batch < 1) throw std::invalid_argument("batch size must be at least 1");
  const auto b = static_cast<std::size_t>(batch);
  return (train_count + b - 1) / b;
}

int rows_in_step(std::size_t train_count, int batch, std::size_t step_in_epoch) {
  const std::size_t first = step_in_epoch * static_cast<std::size_t>(batch);
  if (first >= train_count)
    throw std::invalid_argument(fmt::format("step {} of an epoch starts past the {} training samples", step_in_epoch,
                                            train_count));
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(batch), train_count - first));
}

std::vector<int> epoch_permutation(std::uint64_t seed, int epoch, std::size_t n) {
  // splitmix64 of (seed, epoch): independent, well-mixed seeds per epoch.
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(epoch) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  std::mt19937_64 rng(z);
  std::vector<int> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  for (std::size_t i = n; i > 1; --i) {
    const std::size_t j = static_cast<std::size_t>(rng() % i); // bias below 1e-14 for data-set sizes
    std::swap(perm[i - 1], perm[j]);
  }
  return perm;
}

void check_options(const train_options& o, const dataset& data) {
  validate(data);
  if (o.epochs < 1) throw std::invalid_argument("epochs must be at least 1");
  if (o.batch < 1 || static_cast<std::size_t>(o.batch) > data.train_images.count)
    throw std::invalid_argument(fmt::format("batch size {} outside [1, {}] (the training set size)", o.batch,
                                            data.train_images.count));
  if (o.chunk_steps < 1) throw std::invalid_argument("chunk_steps must be at least 1");
  if (data.train_images.count > static_cast<std::size_t>(INT_MAX) ||
      data.test_images.count > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("data set too large for int indices");
  std::size_t total = steps_per_epoch(data.train_images.count, o.batch) * static_cast<std::size_t>(o.epochs);
  if (o.max_steps > 0) total = std::min(total, o.max_steps);
  if (total > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(fmt::format("{} steps in all ({} epoch(s) of {}-sample batches) are more than the {} a "
                                            "run holds; fewer --epochs, a larger --batch or --max-steps",
                                            total, o.epochs, o.batch, INT_MAX));
}

namespace {

//! Everything one training step touches, and the step itself.
class step_program {
public:
  step_program(const device_split& train, int batch, const optimizer_config& opt, std::size_t history_len,
               cudaStream_t s)
      : train_(train), batch_(batch), history_len_(static_cast<int>(history_len)), blas(s), model(opt, s),
        act(batch), x(static_cast<std::size_t>(batch) * input_features), y(static_cast<std::size_t>(batch)),
        perm(static_cast<std::size_t>(train.count)), counters(2), loss_history(history_len) {
    if (history_len < 1 || history_len > static_cast<std::size_t>(INT_MAX))
      throw std::invalid_argument("step count outside [1, INT_MAX]");
  }

  //! Enqueues one step over `real` samples (the batch size, or fewer for the last batch of an epoch, whose padding
  //! rows the gather zeroes and the loss masks): gather the batch, forward, softmax cross-entropy (loss into
  //! loss_history[step]), backward, optimizer update, counter increment. Reads no host memory: capturable.
  void enqueue(const launch_ctx& ctx, int real) {
    kernels::gather_batch(train_.x.data(), train_.y.data(), train_.count, input_features, perm.data(), train_.count,
                          counters.data(), batch_, x.data(), y.data(), ctx);
    model.forward(blas, x.data(), batch_, act, ctx);
    kernels::softmax_cross_entropy(act.logits.data(), y.data(), batch_, real, num_classes, act.d_logits.data(),
                                   act.row_loss.data(), ctx);
    kernels::mean_loss(act.row_loss.data(), real, counters.data() + 1, loss_history.data(), history_len_, ctx);
    model.backward(blas, x.data(), batch_, act, ctx);
    model.update(counters.data() + 1, ctx);
    kernels::advance_step(counters.data(), ctx);
  }

  //! Back to the initial state: parameters `init`, zero gradients and optimizer state, counters and loss history.
  void reset(const host_parameters& init, cudaStream_t s) {
    counters.zero_async(s);
    loss_history.zero_async(s);
    model.load(init, s); // synchronises s
  }

  //! Uploads an epoch's permutation from pinned memory and zeroes the batch counter (asynchronous, on `s`, never
  //! captured). `pinned` must stay unchanged until the copy has run.
  void begin_epoch(const int* pinned, cudaStream_t s) {
    CONVEYOR_CHECK(cudaMemcpyAsync(perm.data(), pinned, perm.bytes(), cudaMemcpyHostToDevice, s));
    CONVEYOR_CHECK(cudaMemsetAsync(counters.data(), 0, sizeof(int), s));
  }

private:
  const device_split& train_;
  int batch_;
  int history_len_;

public:
  cublas_handle blas;
  mlp model;
  activations act;
  device_buffer<float> x;            // batch x 784
  device_buffer<int> y;              // batch
  device_buffer<int> perm;           // training-set size
  device_buffer<int> counters;       // [0] batch within the epoch, [1] global step
  device_buffer<float> loss_history; // one loss per step
};

} // namespace

train_result run_training(const train_options& options, const dataset& data, execution_mode mode) {
  check_options(options, data);
  train_result result;
  result.mode = mode;
  result.steps_per_epoch = steps_per_epoch(data.train_images.count, options.batch);
  const std::size_t spe = result.steps_per_epoch;
  std::size_t total = spe * static_cast<std::size_t>(options.epochs);
  if (options.max_steps > 0) total = std::min(total, options.max_steps);
  result.steps = total;
  result.epochs = static_cast<int>((total + spe - 1) / spe);

  conveyor::stream s;
  const launch_ctx ctx{s.get(), mode == execution_mode::sync};
  const device_split train = upload_split(data.train_images, data.train_labels, s.get());
  const device_split test = upload_split(data.test_images, data.test_labels, s.get());
  const host_parameters init = he_init(options.seed);
  step_program program(train, options.batch, options.optimizer, total, s.get());
  program.reset(init, s.get());

  pinned_buffer<int> perm_host(data.train_images.count);
  auto begin_epoch = [&](int epoch) {
    s.synchronize(); // the previous upload from perm_host has completed
    const std::vector<int> perm = epoch_permutation(options.seed, epoch, perm_host.size());
    std::copy(perm.begin(), perm.end(), perm_host.data());
    program.begin_epoch(perm_host.data(), s.get());
  };

  // Graph mode runs the step through conveyor::graphed: one executable graph for the batch-size bucket, replayed
  // per batch; the partial last batch of an epoch (fewer real rows, a kernel argument) patches the few nodes that
  // embed the row count, and the next full batch patches them back.
  auto step_body = [&](const conveyor::stream& cs, conveyor::batch_size rows) {
    program.enqueue(launch_ctx{cs.get(), false}, static_cast<int>(rows.real));
  };
  conveyor::graphed_options step_options;
  step_options.warmup_calls = 1;
  step_options.buckets = {static_cast<std::size_t>(options.batch)};
  // The real row count only flows into kernel arguments (the loss mask and mean): declared, so the partial batch
  // patches those fields instead of re-capturing the step (after one verifying re-capture).
  step_options.rebind_arguments = {{0, conveyor::rebind_policy::learn}};
  // --pdl: every capture of the step goes through the programmatic pass before graphed instantiates or updates
  // with it (graphed_options::transform), so replay, rebinding and in-place updates work as without it.
  const bool pdl = mode == execution_mode::graph && options.programmatic;
  result.programmatic = pdl;
  conveyor::waiting_kernels waiting;
  for (const void* f : kernels::waiting_kernel_functions()) waiting.add_function(f);
  conveyor::programmatic_report last_report;
  if (pdl) step_options.transform = [&](conveyor::graph& g) { last_report = conveyor::make_programmatic(g, waiting); };
  conveyor::graphed step(step_body, step_options);
  // Warm-up step, eager, on the stream that graph mode captures on; then capture (graph mode); then reset, so
  // that every mode trains from the same state.
  begin_epoch(0);
  if (mode == execution_mode::graph) {
    step.prepare(s, conveyor::batch_size{static_cast<std::size_t>(options.batch)}); // warm-up + capture
    if (pdl) {
      result.programmatic_changed = last_report.changed.size();
      result.programmatic_left = last_report.left.size();
      result.programmatic_edges_before = last_report.already;
      result.programmatic_lines = last_report.lines();
    }
    conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
      step_body(cs, conveyor::batch_size{static_cast<std::size_t>(options.batch)});
    }); // captured once more, for the export only
    if (pdl) (void)conveyor::make_programmatic(g, waiting);
    result.graph_nodes = g.node_count();
    result.graph_edges = g.edge_count();
    result.graph_dot = conveyor::to_dot(g, "train_step");
    if (options.profiling != nullptr)
      for (const conveyor::graph_exec* e : step.executables()) options.profiling->watch(*e, "train step");
  } else {
    program.enqueue(ctx, options.batch);
  }
  s.synchronize();
  program.reset(init, s.get());

  using clock = std::chrono::steady_clock;
  std::size_t done = 0;
  for (int epoch = 0; epoch < result.epochs; ++epoch) {
    begin_epoch(epoch);
    s.synchronize(); // keep the upload out of the first chunk's time
    const std::size_t in_epoch = std::min(spe, total - done);
    for (std::size_t c = 0; c < in_epoch; c += static_cast<std::size_t>(options.chunk_steps)) {
      const std::size_t n = std::min(static_cast<std::size_t>(options.chunk_steps), in_epoch - c);
      const auto t0 = clock::now();
      for (std::size_t k = 0; k < n; ++k) {
        const int real = rows_in_step(data.train_images.count, options.batch, c + k);
        const auto profiled = scenarios::profile_step(options.profiling, mode); // one training step
        if (mode == execution_mode::graph)
          step(s, conveyor::batch_size{static_cast<std::size_t>(real)});
        else
          program.enqueue(ctx, real);
      }
      s.synchronize();
      const auto t1 = clock::now();
      result.chunk_ms_per_step.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count() /
                                         static_cast<double>(n));
      done += n;
      if (options.on_progress)
        options.on_progress(train_progress{mode, epoch, result.epochs, done, total, spe,
                                           read_loss(program.loss_history, done - 1, s.get())});
    }
  }

  if (mode == execution_mode::graph) {
    if (options.profiling != nullptr)
      if (const auto executables = step.executables(); !executables.empty())
        options.profiling->examine(*executables.front(), "train step", &step.statistics(), &step.reasons());
    result.graphed = step.statistics();
    result.graphed_report = step.report(pdl ? "train step (conveyor::graphed, programmatic edges)"
                                            : "train step (conveyor::graphed)");
  }
  result.ms_per_step = median(result.chunk_ms_per_step);
  result.steps_per_second = result.ms_per_step > 0.0 ? 1000.0 / result.ms_per_step : 0.0;
  result.losses = program.loss_history.download(total, s.get());
  result.final_parameters = program.model.parameters(s.get());
  result.test_accuracy = evaluate(program.model, program.blas, test, data.test_labels, s.get());
  return result;
}

double test_accuracy(const host_parameters& p, const dataset& data) {
  validate(data);
  conveyor::stream s;
  const device_split test = upload_split(data.test_images, data.test_labels, s.get());
  cublas_handle blas(s.get());
  mlp model(optimizer_config{}, s.get());
  model.load(p, s.get());
  return evaluate(model, blas, test, data.test_labels, s.get());
}

step_gradients compute_step_gradients(const host_parameters& p, std::span<const float> x,
                                      std::span<const int> labels, execution_mode mode) {
  const std::size_t rows = labels.size();
  if (rows == 0 || rows > static_cast<std::size_t>(INT_MAX / input_features))
    throw std::invalid_argument("compute_step_gradients: need between 1 and INT_MAX/784 samples");
  if (x.size() != rows * input_features)
    throw std::invalid_argument(fmt::format("compute_step_gradients: x has {} values, expected {} x 784 = {}",
                                            x.size(), rows, rows * input_features));
  for (std::size_t i = 0; i < rows; ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw std::invalid_argument(fmt::format("compute_step_gradients: label {} at index {} outside [0, 10)",
                                              labels[i], i));
  conveyor::stream s;
  const device_split batch = upload_split(x, labels, s.get());
  step_program program(batch, static_cast<int>(rows), optimizer_config{}, 1, s.get());
  program.reset(p, s.get());
  pinned_buffer<int> identity(rows);
  std::iota(identity.data(), identity.data() + rows, 0);
  program.begin_epoch(identity.data(), s.get());
  if (mode == execution_mode::graph) {
    // As in run_training: an eager warm-up step before capture, then back to the initial state.
    program.enqueue(launch_ctx{s.get(), false}, static_cast<int>(rows));
    s.synchronize();
    const conveyor::graph g = conveyor::capture(
        s, [&](const conveyor::stream& cs) { program.enqueue(launch_ctx{cs.get(), false}, static_cast<int>(rows)); });
    const conveyor::graph_exec exec = conveyor::instantiate(g);
    program.reset(p, s.get());
    program.begin_epoch(identity.data(), s.get());
    exec.launch(s);
    s.synchronize();
  } else {
    program.enqueue(launch_ctx{s.get(), mode == execution_mode::sync}, static_cast<int>(rows));
    s.synchronize();
  }
  step_gradients out;
  out.loss = read_loss(program.loss_history, 0, s.get());
  out.gradients = program.model.gradients(s.get());
  return out;
}

} // namespace conveyor::train
