//! \file trainer.cpp
//! The training run as a workload of the mode runner (common/mode_runner.hpp); graph mode through
//! conveyor::graphed.

#include "train/trainer.hpp"

#include "common/device_buffer.hpp"
#include "common/mode_runner.hpp"
#include "common/profiling.hpp"
#include "train/device_data.hpp"
#include "train/fused_passes.hpp"
#include "train/kernels.hpp"

#include <conveyor/assembly/graphed.hpp>
#include <conveyor/keep/load.hpp>
#include <conveyor/keep/save.hpp>
#include <conveyor/define/capture.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>

namespace conveyor::train {

using detail::device_split;
using detail::evaluate;
using detail::read_loss;
using detail::upload_split;

std::string_view to_string(step_kind k) noexcept { return k == step_kind::fused ? "fused" : "unfused"; }

step_kind parse_step_kind(std::string_view name) {
  if (name == "fused") return step_kind::fused;
  if (name == "unfused") return step_kind::unfused;
  throw std::invalid_argument(fmt::format("step kind '{}': expected fused or unfused", name));
}

std::size_t steps_per_epoch(std::size_t train_count, int batch) {
  if (batch < 1) throw std::invalid_argument("batch size must be at least 1");
  const auto b = static_cast<std::size_t>(batch);
  return (train_count + b - 1) / b;
}

int rows_in_step(std::size_t train_count, int batch, std::size_t step_in_epoch) {
  const std::size_t first = step_in_epoch * static_cast<std::size_t>(batch);
  if (first >= train_count)
    throw std::invalid_argument(
        fmt::format("step {} of an epoch starts past the {} training samples", step_in_epoch, train_count));
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

void check_options(const train_options& o, const dataset& data, const option_names& names) {
  validate(data);
  if (o.epochs < 1) throw std::invalid_argument("epochs must be at least 1");
  if (o.batch < 1 || static_cast<std::size_t>(o.batch) > data.train_images.count)
    throw std::invalid_argument(
        fmt::format("batch size {} outside [1, {}] (the training set size)", o.batch, data.train_images.count));
  if (o.chunk_steps < 1) throw std::invalid_argument("chunk_steps must be at least 1");
  if (data.train_images.count > static_cast<std::size_t>(INT_MAX) ||
      data.test_images.count > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument("data set too large for int indices");
  std::size_t total = steps_per_epoch(data.train_images.count, o.batch) * static_cast<std::size_t>(o.epochs);
  if (o.max_steps > 0) total = std::min(total, o.max_steps);
  if (total > static_cast<std::size_t>(INT_MAX))
    throw std::invalid_argument(fmt::format("{} steps in all ({} epoch(s) of {}-sample batches) are more than the {} a "
                                            "run holds; fewer {}, a larger {} or {}",
                                            total, o.epochs, o.batch, INT_MAX, names.epochs, names.batch,
                                            names.max_steps));
}

namespace {

//! Everything one training step touches, and the step itself.
class step_program {
public:
  step_program(const device_split& train, int batch, const optimizer_config& opt, std::size_t history_len,
               cudaStream_t s, step_kind kind) :
      train_(train),
      batch_(batch),
      history_len_(static_cast<int>(history_len)),
      blas(conveyor::stream::adopt(s)),
      model(opt, s),
      act(batch),
      x(static_cast<std::size_t>(batch) * input_features),
      y(static_cast<std::size_t>(batch)),
      perm(static_cast<std::size_t>(train.count)),
      counters(2),
      loss_history(history_len) {
    if (history_len < 1 || history_len > static_cast<std::size_t>(INT_MAX))
      throw std::invalid_argument("step count outside [1, INT_MAX]");
    if (kind == step_kind::fused) passes = std::make_unique<fused_passes>(model, act, batch);
  }

  //! Enqueues one step over `real` samples (the batch size, or fewer for the last batch of an epoch, whose padding
  //! rows the gather zeroes and the loss masks): gather the batch, forward, softmax cross-entropy (loss into
  //! loss_history[step]), backward, optimizer update, and the counters' increment (after the loss in the fused
  //! step, last in the unfused one). Reads no host memory: capturable.
  void enqueue(const launch_ctx& ctx, int real) {
    kernels::gather_batch(train_.x.data(), train_.y.data(), train_.count, input_features, perm.data(), train_.count,
                          counters.data(), batch_, x.data(), y.data(), ctx);
    if (passes) enqueue_fused(ctx, real);
    else enqueue_unfused(ctx, real);
  }

  //! step_kind::fused after the gather: 3 cuBLASLt calls, the loss (which advances the counters), 5 cuBLASLt calls,
  //! the optimizer.
  void enqueue_fused(const launch_ctx& ctx, int real) {
    passes->forward(x.data(), ctx);
    kernels::loss_and_advance(act.logits.data(), y.data(), batch_, real, num_classes, act.d_logits.data(),
                              act.row_loss.data(), counters.data(), loss_history.data(), history_len_, ctx);
    passes->backward(x.data(), ctx);
    model.update_after_advance(counters.data() + 1, ctx);
  }

  //! step_kind::unfused after the gather: 6 + 2 + 10 + 2 launches.
  void enqueue_unfused(const launch_ctx& ctx, int real) {
    model.forward(blas, x.data(), batch_, act, ctx);
    kernels::softmax_cross_entropy(act.logits.data(), y.data(), batch_, real, num_classes, act.d_logits.data(),
                                   act.row_loss.data(), ctx);
    kernels::mean_loss(act.row_loss.data(), real, counters.data() + 1, loss_history.data(), history_len_, ctx);
    model.backward(blas, x.data(), batch_, act, ctx);
    model.update(counters.data() + 1, ctx);
    kernels::advance_step(counters.data(), ctx);
  }

  //! The buffers --debug-nonfinite watches, the loss first: a NaN reaches the loss last, so the report names the
  //! node where the first non-finite value of any of them appeared.
  [[nodiscard]] std::vector<conveyor::watched_buffer> watched_buffers() {
    const auto f32 = conveyor::element_type::f32;
    const auto rows = static_cast<std::size_t>(batch_);
    return {{"loss history", loss_history.data(), f32, loss_history.size()},
            {"row losses", act.row_loss.data(), f32, rows},
            {"logits", act.logits.data(), f32, rows * num_classes},
            {"layer 1 activations", act.a1.data(), f32, rows * 256},
            {"layer 2 activations", act.a2.data(), f32, rows * 128},
            {"dLoss/dlogits", act.d_logits.data(), f32, rows * num_classes},
            {"gradients", model.gradient_buffer(), f32, mlp::layout.total},
            {"parameters", model.parameter_buffer(), f32, mlp::layout.total}};
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
  device_buffer<float> x;               // batch x 784
  device_buffer<int> y;                 // batch
  device_buffer<int> perm;              // training-set size
  device_buffer<int> counters;          // [0] batch within the epoch, [1] global step
  device_buffer<float> loss_history;    // one loss per step
  std::unique_ptr<fused_passes> passes; // step_kind::fused: the planned cuBLASLt products; null: unfused
};

//! The step graphed: one call enqueues the step over `rows.real` samples on the capture stream.
struct graphed_body {
  step_program* program;
  void operator()(const conveyor::stream& cs, conveyor::batch_size rows) const {
    program->enqueue(launch_ctx{cs.get(), false}, static_cast<int>(rows.real));
  }
};

class training_run;

//! Graph mode: the step through conveyor::graphed, one executable graph for the batch-size bucket, replayed per
//! batch; the partial last batch of an epoch (fewer real rows, a kernel argument) patches the few nodes that embed
//! the row count, and the next full batch patches them back.
class graphed_step final : public scenarios::graph_step {
public:
  explicit graphed_step(training_run& run);
  void launch(std::size_t step) override;
  void watch(scenarios::graph_sink& p) override {
    for (const conveyor::graph_exec* e : step_.executables()) p.watch(*e, "train step");
  }
  void after_rounds() override;
  void examine(scenarios::profiling& p) override {
    if (const auto executables = step_.executables(); !executables.empty())
      p.examine(*executables.front(), "train step", &step_.statistics(), &step_.reasons());
  }

private:
  [[nodiscard]] conveyor::graphed_options options();
  void describe_step();

  training_run& run_;
  conveyor::waiting_kernels waiting_;
  conveyor::programmatic_report last_report_;
  conveyor::graphed<graphed_body> step_;
};

//! One training run (run_training) as a workload of the mode runner: a round is a timed chunk of steps; each epoch
//! begins (its order uploaded) before its first chunk, untimed; the eager warm-up step runs on the stream graph mode
//! captures on (graph mode: graphed's own warm-up call).
class training_run final : public scenarios::workload {
public:
  training_run(const train_options& o, const dataset& data, execution_mode mode, train_result& result) :
      options_(o),
      data_(data),
      mode_(mode),
      result_(result),
      length_(detail::length_of(o, data.train_images.count)),
      train_(upload_split(data.train_images, data.train_labels, stream_.get())),
      test_(upload_split(data.test_images, data.test_labels, stream_.get())),
      init_(he_init(o.seed)),
      program_(train_, o.batch, o.optimizer, length_.steps, stream_.get(), o.step),
      order_(data.train_images.count),
      chunks_(length_, o.chunk_steps) {
    result_.mode = mode;
    result_.step = o.step;
    result_.steps_per_epoch = length_.steps_per_epoch;
    result_.steps = length_.steps;
    result_.epochs = length_.epochs;
  }

  [[nodiscard]] cudaStream_t stream() const override { return stream_.get(); }
  void reset() override { program_.reset(init_, stream_.get()); }
  void warm_up(const launch_ctx& ctx) override {
    begin_epoch(0);
    if (mode_ != execution_mode::graph) program_.enqueue(ctx, options_.batch);
  }
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override {
    return std::make_unique<graphed_step>(*this);
  }
  void synchronize() override { stream_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t) override {
    return chunks_.next([&](int epoch) {
      begin_epoch(epoch);
      stream_.synchronize(); // keep the upload out of the first chunk's time
    });
  }
  void enqueue(const launch_ctx& ctx, std::size_t step) override { program_.enqueue(ctx, rows(step)); }
  [[nodiscard]] std::size_t end_round(std::size_t steps) override {
    chunks_.finish_chunk();
    if (options_.on_progress)
      options_.on_progress(train_progress{mode_, chunks_.epoch(), length_.epochs, chunks_.done(), length_.steps,
                                          length_.steps_per_epoch,
                                          read_loss(program_.loss_history, chunks_.done() - 1, stream_.get())});
    return steps;
  }

  //! The real rows of step `step` of the current chunk.
  [[nodiscard]] int rows(std::size_t step) const {
    return rows_in_step(data_.train_images.count, options_.batch, chunks_.step_in_epoch(step));
  }
  //! The results after the run: losses, parameters, test accuracy.
  void collect() {
    result_.losses = program_.loss_history.download(length_.steps, stream_.get());
    result_.final_parameters = program_.model.parameters(stream_.get());
    result_.test_accuracy = evaluate(program_.model, program_.blas, test_, data_.test_labels, stream_.get());
  }

  [[nodiscard]] const train_options& options() const noexcept { return options_; }
  [[nodiscard]] const conveyor::stream& graph_stream() const noexcept { return stream_; }
  [[nodiscard]] step_program& program() noexcept { return program_; }
  [[nodiscard]] train_result& result() noexcept { return result_; }

private:
  void begin_epoch(int epoch) {
    stream_.synchronize(); // the previous upload from the pinned order has completed
    program_.begin_epoch(order_.fill(options_.seed, epoch), stream_.get());
  }

  const train_options& options_;
  const dataset& data_;
  execution_mode mode_;
  train_result& result_;
  detail::run_length length_;
  conveyor::stream stream_;
  device_split train_;
  device_split test_;
  host_parameters init_;
  step_program program_;
  detail::epoch_order order_;
  detail::chunk_schedule chunks_;
};

graphed_step::graphed_step(training_run& run) : run_(run), step_(graphed_body{&run.program()}, options()) {
  // Warm-up call (eager, on the stream graph mode captures on) and capture of the full batch.
  step_.prepare(run_.graph_stream(), conveyor::batch_size{static_cast<std::size_t>(run_.options().batch)});
  describe_step();
}

conveyor::graphed_options graphed_step::options() {
  conveyor::graphed_options o;
  o.warmup_calls = 1;
  o.buckets = {static_cast<std::size_t>(run_.options().batch)};
  // The real row count only flows into kernel arguments (the loss mask and mean): declared, so the partial batch
  // patches those fields instead of re-capturing the step (after one verifying re-capture).
  o.rebind_arguments = {{0, conveyor::rebind_policy::learn}};
  // --pdl: every capture of the step goes through the programmatic pass before graphed instantiates or updates with
  // it (graphed_options::transform), so replay, rebinding and in-place updates work as without it.
  if (run_.options().programmatic) {
    for (const void* f : kernels::waiting_kernel_functions()) waiting_.add_function(f);
    o.transform = [this](conveyor::graph& g) { last_report_ = conveyor::make_programmatic(g, waiting_); };
  }
  // --debug-nonfinite: every call steps through its capture, the step's buffers watched after each node.
  if (run_.options().debug_nonfinite) {
    o.step_through = true;
    o.step.nonfinite = run_.program().watched_buffers();
  }
  return o;
}

//! The captured step's shape, DOT and programmatic report into the result, from the executable graph graphed made.
void graphed_step::describe_step() {
  train_result& r = run_.result();
  r.programmatic = run_.options().programmatic;
  if (r.programmatic) {
    r.programmatic_changed = last_report_.changed.size();
    r.programmatic_left = last_report_.left.size();
    r.programmatic_edges_before = last_report_.already;
    r.programmatic_lines = last_report_.lines();
  }
  const auto executables = step_.executables();
  if (executables.empty()) throw std::logic_error("train: graphed made no executable graph at prepare");
  const conveyor::graph_description d = conveyor::describe(*executables.front());
  r.graph_nodes = d.nodes.size();
  r.graph_edges = d.edges.size();
  r.graph_dot = conveyor::to_dot(d, "train_step");
}

void graphed_step::launch(std::size_t step) {
  step_(run_.graph_stream(), conveyor::batch_size{static_cast<std::size_t>(run_.rows(step))});
}

void graphed_step::after_rounds() {
  train_result& r = run_.result();
  r.graphed = step_.statistics();
  r.graphed_report = step_.report(r.programmatic ? "train step (conveyor::graphed, programmatic edges)"
                                                 : "train step (conveyor::graphed)");
}

//! One step on exactly the given samples (compute_step_gradients) as a workload of the mode runner: one round of
//! one step; reset() loads `p` and the identity order; graph mode captures the step (after an eager warm-up step)
//! and instantiates it.
class gradient_step final : public scenarios::workload {
public:
  gradient_step(const host_parameters& p, std::span<const float> x, std::span<const int> labels, execution_mode mode,
                step_kind kind) :
      p_(p),
      mode_(mode),
      rows_(static_cast<int>(labels.size())),
      batch_(upload_split(x, labels, stream_.get())),
      program_(batch_, rows_, optimizer_config{}, 1, stream_.get(), kind),
      identity_(labels.size()) {
    std::iota(identity_.data(), identity_.data() + labels.size(), 0);
  }

  [[nodiscard]] cudaStream_t stream() const override { return stream_.get(); }
  void reset() override {
    program_.reset(p_, stream_.get());
    program_.begin_epoch(identity_.data(), stream_.get());
  }
  void warm_up(const launch_ctx& ctx) override {
    if (mode_ == execution_mode::graph) program_.enqueue(launch_ctx{ctx.stream, false}, rows_);
  }
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override;
  void synchronize() override { stream_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t round) override { return round == 0 ? 1 : 0; }
  void enqueue(const launch_ctx& ctx, std::size_t) override { program_.enqueue(ctx, rows_); }

  //! The step's loss and gradients, after the run.
  [[nodiscard]] step_gradients collect() {
    step_gradients out;
    out.loss = read_loss(program_.loss_history, 0, stream_.get());
    out.gradients = program_.model.gradients(stream_.get());
    return out;
  }

private:
  const host_parameters& p_;
  execution_mode mode_;
  int rows_;
  conveyor::stream stream_;
  device_split batch_;
  step_program program_;
  pinned_buffer<int> identity_;
};

//! A captured and instantiated step, launched on `stream`.
class captured_step final : public scenarios::graph_step {
public:
  captured_step(const conveyor::graph& g, const conveyor::stream& s) : exec_(conveyor::instantiate(g)), stream_(s) {}
  void launch(std::size_t) override { exec_.launch(stream_); }

private:
  conveyor::graph_exec exec_;
  const conveyor::stream& stream_;
};

std::unique_ptr<scenarios::graph_step> gradient_step::make_graph() {
  const conveyor::graph g = conveyor::capture(stream_, [&](const conveyor::stream& cs) {
    program_.enqueue(launch_ctx{cs.get(), false}, rows_);
  });
  return std::make_unique<captured_step>(g, stream_);
}

} // namespace

train_result run_training(const train_options& options, const dataset& data, execution_mode mode) {
  check_options(options, data);
  train_result result;
  training_run run(options, data, mode, result);
  scenarios::run_settings settings;
  settings.mode = mode;
  settings.programmatic = mode == execution_mode::graph && options.programmatic;
  settings.profiling = options.profiling;
  const scenarios::mode_timing timing = scenarios::run_workload(run, settings);
  result.chunk_ms_per_step = timing.ms_per_unit;
  result.ms_per_step = timing.median_ms_per_unit;
  result.steps_per_second = result.ms_per_step > 0.0 ? 1000.0 / result.ms_per_step : 0.0;
  run.collect();
  return result;
}

double test_accuracy(const host_parameters& p, const dataset& data) {
  validate(data);
  conveyor::stream s;
  const device_split test = upload_split(data.test_images, data.test_labels, s.get());
  cublas_handle blas(s);
  mlp model(optimizer_config{}, s.get());
  model.load(p, s.get());
  return evaluate(model, blas, test, data.test_labels, s.get());
}

step_gradients compute_step_gradients(const host_parameters& p, std::span<const float> x, std::span<const int> labels,
                                      execution_mode mode, step_kind kind) {
  const std::size_t rows = labels.size();
  if (rows == 0 || rows > static_cast<std::size_t>(INT_MAX / input_features))
    throw std::invalid_argument("compute_step_gradients: need between 1 and INT_MAX/784 samples");
  if (x.size() != rows * input_features)
    throw std::invalid_argument(fmt::format("compute_step_gradients: x has {} values, expected {} x 784 = {}", x.size(),
                                            rows, rows * input_features));
  for (std::size_t i = 0; i < rows; ++i)
    if (labels[i] < 0 || labels[i] >= num_classes)
      throw std::invalid_argument(
          fmt::format("compute_step_gradients: label {} at index {} outside [0, 10)", labels[i], i));
  gradient_step step(p, x, labels, mode, kind);
  scenarios::run_settings settings;
  settings.mode = mode;
  (void)scenarios::run_workload(step, settings);
  return step.collect();
}

namespace {
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
} // namespace

step_file_costs measure_step_file_costs(const train_options& options, const dataset& data,
                                        const conveyor::image_source* images, int repeats) {
  check_options(options, data);
  const conveyor::stream s;
  const device_split train = upload_split(data.train_images, data.train_labels, s.get());
  step_program program(train, options.batch, options.optimizer, 1, s.get(), options.step);
  program.enqueue(launch_ctx{s.get(), false}, options.batch); // loads the kernels (and their images)
  s.synchronize();
  conveyor::save_options so;
  if (images != nullptr) so.images = {images};
  std::vector<double> capture_ms;
  std::vector<double> save_ms;
  std::vector<double> load_ms;
  std::vector<double> parse_ms, kernels_ms, buffers_ms, graphs_ms;
  step_file_costs out;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
      program.enqueue(launch_ctx{cs.get(), false}, options.batch);
    });
    {
      const conveyor::graph_exec e = conveyor::instantiate(g);
      capture_ms.push_back(ms_since(t0));
    }
    t0 = std::chrono::steady_clock::now();
    const conveyor::graph_file file = conveyor::to_graph_file({{"train step", &g, nullptr}}, so);
    const std::vector<unsigned char> bytes = conveyor::to_bytes(file);
    save_ms.push_back(ms_since(t0));
    t0 = std::chrono::steady_clock::now();
    {
      conveyor::graph_file f = conveyor::from_bytes(bytes);
      parse_ms.push_back(ms_since(t0));
      conveyor::loaded_graphs l = conveyor::load(std::move(f));
      kernels_ms.push_back(l.spent().kernels * 1000.0);
      buffers_ms.push_back(l.spent().buffers * 1000.0);
      graphs_ms.push_back(l.spent().graphs * 1000.0);
      const conveyor::graph_exec e = conveyor::instantiate(l.at("train step"));
      load_ms.push_back(ms_since(t0));
    }
    out.file_bytes = bytes.size();
    out.nodes = file.graphs.front().graph.nodes.size();
    out.kernels = file.kernels.size();
    out.images = file.images.size();
  }
  out.capture_instantiate_ms = median_of(capture_ms);
  out.save_ms = median_of(save_ms);
  out.load_instantiate_ms = median_of(load_ms);
  out.parse_ms = median_of(parse_ms);
  out.kernels_ms = median_of(kernels_ms);
  out.buffers_ms = median_of(buffers_ms);
  out.graphs_ms = median_of(graphs_ms);
  return out;
}

} // namespace conveyor::train
