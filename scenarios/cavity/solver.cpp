//! \file solver.cpp
//! The cavity run in three execution modes through the mode runner, on one slab or several (one per listed
//! device): the block plan enqueued on the slabs' streams, or built into one graph with the explicit builder.

#include "cavity/solver.hpp"

#include "cavity/block_plan.hpp"
#include "cavity/kernels.hpp"
#include "common/device_buffer.hpp"
#include "common/launch.hpp"
#include "common/mode_runner.hpp"
#include "common/profiling.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::cavity {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

namespace {

//! One slab's device memory, stream and events, made and released with the slab's device current.
class slab_memory {
public:
  //! Allocates slab `geometry` of the n x n lattice on `device` (two fields with halo rows, u_prev, the check's
  //! state) and its stream; the second field is zeroed once (its halo rows' populations that no copy fills are
  //! never read, but stay defined).
  slab_memory(int device, const slab& geometry, int n) : device_(device), geometry_(geometry) {
    const conveyor::device_guard on(device);
    stream_.emplace();
    block_event_.emplace(cudaEventDisableTiming);
    f_[0] = device_buffer<float>(geometry.plane * q);
    f_[1] = device_buffer<float>(geometry.plane * q);
    u_prev_ = device_buffer<float>(2 * static_cast<std::size_t>(geometry.rows) * static_cast<std::size_t>(n));
    state_ = device_buffer<convergence_state>(1);
    f_[1].zero_async(stream_->get());
    stream_->synchronize();
  }
  slab_memory(const slab_memory&) = delete;
  slab_memory& operator=(const slab_memory&) = delete;
  ~slab_memory() {
    std::optional<conveyor::device_guard> on;
    try {
      on.emplace(device_);
    } catch (...) { // the device was valid at construction; release on the current one regardless
    }
    events_.clear();
    block_event_.reset();
    f_[0] = device_buffer<float>();
    f_[1] = device_buffer<float>();
    u_prev_ = device_buffer<float>();
    state_ = device_buffer<convergence_state>();
    stream_.reset();
  }

  [[nodiscard]] int device() const noexcept { return device_; }
  [[nodiscard]] const slab& geometry() const noexcept { return geometry_; }
  [[nodiscard]] const conveyor::stream& stream() const noexcept { return *stream_; }
  [[nodiscard]] float* field(int a) noexcept { return f_[static_cast<std::size_t>(a)].data(); }
  [[nodiscard]] const float* field(int a) const noexcept { return f_[static_cast<std::size_t>(a)].data(); }
  [[nodiscard]] float* u_prev() noexcept { return u_prev_.data(); }
  [[nodiscard]] convergence_state* state() noexcept { return state_.data(); }
  //! Slab 0: recorded where a block begins (the other slabs' streams wait for it); the others: recorded where
  //! their part of a block ends (slab 0's stream waits for it).
  [[nodiscard]] const conveyor::event& block_event() const noexcept { return *block_event_; }
  //! A new event of this slab's device, for a task that other slabs' tasks wait for; returns its index.
  std::size_t add_event() {
    const conveyor::device_guard on(device_);
    events_.emplace_back(cudaEventDisableTiming);
    return events_.size() - 1;
  }
  [[nodiscard]] const conveyor::event& event(std::size_t i) const noexcept { return events_[i]; }

private:
  int device_;
  slab geometry_;
  std::optional<conveyor::stream> stream_;
  std::optional<conveyor::event> block_event_;
  std::array<device_buffer<float>, 2> f_;
  device_buffer<float> u_prev_;
  device_buffer<convergence_state> state_;
  std::vector<conveyor::event> events_;
};

//! Makes the calling thread's device `d` only when it is not already (cudaSetDevice), and restores the entry device
//! at the end: one slab costs no device call per task.
class device_switch {
public:
  device_switch() : entry_(conveyor::current_device()), current_(entry_) {}
  device_switch(const device_switch&) = delete;
  device_switch& operator=(const device_switch&) = delete;
  ~device_switch() {
    if (current_ != entry_) (void)cudaSetDevice(entry_);
  }
  void to(int d) {
    if (d == current_) return;
    CONVEYOR_CHECK(cudaSetDevice(d));
    current_ = d;
  }

private:
  int entry_;
  int current_;
};

//! The device state of one run (every slab) and the block of work on it, as one list of tasks (block_plan.hpp) that
//! the eager modes enqueue and graph mode builds into one graph.
class cavity_program {
public:
  //! Allocates every slab (slab i of devices.size() on devices[i]) and the first slab's pinned slots, and makes the
  //! block's tasks (K = steps_per_block steps, halo copies "2d" or, with `per_population_halos`, "1d").
  cavity_program(const lattice_params& p, int steps_per_block, const std::vector<int>& devices,
                 bool per_population_halos) :
      params_(p) {
    const int count = static_cast<int>(devices.size());
    for (int s = 0; s < count; ++s)
      slabs_.push_back(std::make_unique<slab_memory>(devices[static_cast<std::size_t>(s)],
                                                     count == 1 ? whole_lattice(p.n) : make_slab(p.n, count, s), p.n));
    {
      const conveyor::device_guard on(devices.front());
      if (count > 1) peer_maxima_ = device_buffer<unsigned>(static_cast<std::size_t>(count - 1));
      slots_ = pinned_buffer<float>(2);
      slots_.data()[0] = 0.0F;
      slots_.data()[1] = 0.0F;
      // Pinned memory is mapped into the device's address space (unified addressing); ask for the device pointer
      // all the same rather than assume it equals the host pointer.
      CONVEYOR_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slots_device_), slots_.data(), 0));
    }
    std::vector<slab_fields> fields;
    for (auto& sl : slabs_)
      fields.push_back(slab_fields{sl->geometry(), {sl->field(0), sl->field(1)}, sl->u_prev(), sl->state()});
    plan_ = make_block_plan(p, steps_per_block, fields, per_population_halos, peer_maxima_.data(), slots_device_);
    events_.assign(plan_.size(), -1);
    for (std::size_t i = 0; i < plan_.size(); ++i)
      if (plan_[i].waited_across)
        events_[i] = static_cast<std::ptrdiff_t>(slabs_[static_cast<std::size_t>(plan_[i].slab)]->add_event());
  }

  [[nodiscard]] std::size_t cells() const noexcept {
    return static_cast<std::size_t>(params_.n) * static_cast<std::size_t>(params_.n);
  }
  //! The first slab's stream: graph launches, the host's check events.
  [[nodiscard]] const conveyor::stream& main_stream() const noexcept { return slabs_.front()->stream(); }
  //! Memcpy tasks of a block (halo rows and the slabs' maxima).
  [[nodiscard]] std::size_t copies() const noexcept {
    return static_cast<std::size_t>(
        std::count_if(plan_.begin(), plan_.end(), [](const task& t) { return t.kind == task_kind::copy; }));
  }

  //! Back to rest on every slab (f = equilibrium at rest, u_prev = 0, the check's state zeroed), enqueued on each
  //! slab's stream; synchronize() waits for it.
  void reset() {
    device_switch dev;
    for (auto& sl : slabs_) {
      dev.to(sl->device());
      launch(initialise_call(sl->field(0), sl->u_prev(), sl->state(), params_.n, sl->geometry()),
             launch_ctx{sl->stream().get(), false, false});
    }
  }

  //! Waits for the work on every slab's stream.
  //! \throws conveyor::cuda_error with an error the work raised.
  void synchronize() const {
    for (const auto& sl : slabs_) sl->stream().synchronize();
  }
  //! Waits for the work on every slab's stream, ignoring errors (before an exception is thrown).
  void drain() const noexcept {
    for (const auto& sl : slabs_) (void)cudaStreamSynchronize(sl->stream().get());
  }

  //! Enqueues one block (K time steps, then the convergence check) on the slabs' streams: each task on its slab's
  //! stream, after waiting for the events of the tasks of other slabs it depends on; `sync_each` waits after every
  //! task (sync mode), `programmatic` launches the kernels programmatic (--pdl). With several slabs the block
  //! begins, on every stream, after everything enqueued on the first slab's stream, and the first slab's stream
  //! then waits for every other stream: as a graph launch, which runs after the previous one as a whole.
  //! Reads no host memory and writes only the pinned slots.
  void enqueue_block(bool sync_each, bool programmatic) {
    device_switch dev;
    const conveyor::stream& main = main_stream();
    if (slabs_.size() > 1) {
      slabs_.front()->block_event().record(main);
      for (std::size_t s = 1; s < slabs_.size(); ++s) slabs_[s]->stream().wait(slabs_.front()->block_event());
    }
    for (std::size_t i = 0; i < plan_.size(); ++i) {
      const task& t = plan_[i];
      slab_memory& sl = *slabs_[static_cast<std::size_t>(t.slab)];
      dev.to(sl.device());
      for (const int d : t.deps) {
        const auto before = static_cast<std::size_t>(d);
        if (plan_[before].slab != t.slab && events_[before] >= 0)
          sl.stream().wait(
              slabs_[static_cast<std::size_t>(plan_[before].slab)]->event(static_cast<std::size_t>(events_[before])));
      }
      const launch_ctx ctx{sl.stream().get(), sync_each, programmatic};
      switch (t.kind) {
      case task_kind::kernel: launch(t.call, ctx); break;
      case task_kind::copy:
        if (t.height == 1) CONVEYOR_CHECK(cudaMemcpyAsync(t.dst, t.src, t.width, cudaMemcpyDefault, ctx.stream));
        else
          CONVEYOR_CHECK(cudaMemcpy2DAsync(t.dst, t.dst_pitch, t.src, t.src_pitch, t.width, t.height, cudaMemcpyDefault,
                                           ctx.stream));
        ctx.after("a halo or check copy");
        break;
      case task_kind::zero_word:
        CONVEYOR_CHECK(cudaMemsetAsync(t.dst, 0, sizeof(unsigned), ctx.stream));
        ctx.after("the check's reset");
        break;
      }
      if (events_[i] >= 0) sl.event(static_cast<std::size_t>(events_[i])).record(sl.stream());
    }
    if (slabs_.size() > 1)
      for (std::size_t s = 1; s < slabs_.size(); ++s) {
        slabs_[s]->block_event().record(slabs_[s]->stream());
        main.wait(slabs_[s]->block_event());
      }
  }

  //! The block as one graph: every task a node added on its slab's device (kernel nodes bind to the current
  //! device's context), with its dependencies as edges; with `programmatic`, the edges between kernels (always of
  //! one slab) are programmatic. Labels: "step k (f0 -> f1)", "velocity change", "publish change" on one slab;
  //! with several "step k slab s (...)", "halo after step k: row y slab s -> t", "gather change slab s", ...
  [[nodiscard]] conveyor::graph build_block(bool programmatic) const {
    conveyor::graph g;
    std::vector<conveyor::node> nodes;
    nodes.reserve(plan_.size());
    for (const task& t : plan_) {
      const conveyor::device_guard on(slabs_[static_cast<std::size_t>(t.slab)]->device());
      std::vector<conveyor::node> deps;
      deps.reserve(t.deps.size());
      for (const int d : t.deps) deps.push_back(nodes[static_cast<std::size_t>(d)]);
      const conveyor::node_list after(deps);
      conveyor::node n;
      switch (t.kind) {
      case task_kind::kernel:
        n = g.add_kernel(after,
                         scenarios::launch_shape(launch_ctx{nullptr, false, programmatic}, t.call.grid, t.call.block),
                         t.call.function, t.call.arguments);
        break;
      case task_kind::copy:
        n = t.height == 1 ? g.memcpy(after, t.dst, t.src, t.width)
                          : g.memcpy_2d(after, t.dst, t.dst_pitch, t.src, t.src_pitch, t.width, t.height);
        break;
      case task_kind::zero_word: n = g.memset(after, static_cast<unsigned*>(t.dst), 0U, 1); break;
      }
      n.label(t.label);
      nodes.push_back(n);
    }
    return g;
  }

  //! The change published by block `b` (valid once that block has completed and before block b + 2 runs).
  [[nodiscard]] float published(std::int64_t b) noexcept { return static_cast<volatile float*>(slots_.data())[b % 2]; }

  //! The current state (after a whole number of blocks) of the whole lattice, every slab's rows downloaded after
  //! the work on its stream: n * n * 9 floats, population_index's layout.
  [[nodiscard]] std::vector<float> download() const {
    const int n = params_.n;
    std::vector<float> out(cells() * q);
    for (const auto& sl : slabs_) {
      const conveyor::device_guard on(sl->device());
      const slab& g = sl->geometry();
      const float* first = std::as_const(*sl).field(0) + slab_index(n, g, 0, 0, g.row_begin);
      CONVEYOR_CHECK(cudaMemcpy2DAsync(out.data() + static_cast<std::size_t>(g.row_begin) * static_cast<std::size_t>(n),
                                       cells() * sizeof(float), first, g.plane * sizeof(float),
                                       static_cast<std::size_t>(g.rows) * static_cast<std::size_t>(n) * sizeof(float),
                                       q, cudaMemcpyDefault, sl->stream().get()));
    }
    synchronize();
    return out;
  }

private:
  lattice_params params_;
  std::vector<std::unique_ptr<slab_memory>> slabs_;
  device_buffer<unsigned> peer_maxima_; // on the first slab's device: the other slabs' maxima, one word each
  pinned_buffer<float> slots_;
  float* slots_device_ = nullptr;
  std::vector<task> plan_;
  std::vector<std::ptrdiff_t> events_; // per task: its event in its slab (slab_memory::event), or -1
};

//! Graph mode's step: the block built once into one graph with the explicit builder (cavity_program::build_block),
//! instantiated and uploaded, launched once per block on the first slab's stream.
class block_graph final : public scenarios::graph_step {
public:
  block_graph(const cavity_program& program, bool programmatic, int k, run_result& result) :
      program_(program),
      k_(k),
      result_(result),
      graph_(program.build_block(programmatic)),
      exec_(conveyor::instantiate(graph_)),
      name_(fmt::format("cavity {} steps", k)) {
    exec_.upload(program.main_stream());
  }
  void launch(std::size_t) override { exec_.launch(program_.main_stream()); }
  void watch(scenarios::graph_sink& p) override { p.watch(exec_, name_); }
  //! The graph's shape and DOT into the result (after the timed set-up and rounds).
  void after_rounds() override {
    result_.graph_nodes = graph_.node_count();
    result_.graph_edges = graph_.edge_count();
    result_.graph_copies = program_.copies();
    for (const auto& [from, to] : graph_.edges())
      if (graph_.edge_type_between(from, to) == conveyor::edge_type::programmatic) ++result_.programmatic_edges;
    result_.graph_dot = conveyor::to_dot(graph_, fmt::format("cavity_{}_steps", k_));
  }
  void examine(scenarios::profiling& p) override { p.examine(exec_, name_); }

private:
  const cavity_program& program_;
  int k_;
  run_result& result_;
  conveyor::graph graph_;
  conveyor::graph_exec exec_;
  std::string name_;
};

//! One cavity run as a workload of the mode runner: one round of up to max_steps / K blocks. After launching block
//! b the host records an event and reads block b - 1's published change (it waits only for that block), so the check
//! never stalls the GPU; the last block's change is read after the round.
class cavity_run final : public scenarios::workload {
public:
  cavity_run(const cavity_options& o, const lattice_params& p, bool programmatic, run_result& result,
             const std::function<void(const run_progress&)>& on_progress) :
      o_(o),
      result_(result),
      on_progress_(on_progress),
      programmatic_(programmatic),
      k_(o.steps_per_graph),
      cap_(max_steps(o)),
      per_step_(1.0 / (static_cast<double>(k_) * o.lid_speed)),
      program_(p, k_, o.devices, o.halo_copy == "1d") {}

  [[nodiscard]] cudaStream_t stream() const override { return program_.main_stream().get(); }
  void reset() override { program_.reset(); }
  //! One eager block (loads the kernels), neither synchronised per kernel nor programmatic, in every mode.
  void warm_up(const launch_ctx&) override {
    program_.enqueue_block(false, false);
    program_.synchronize();
  }
  [[nodiscard]] std::unique_ptr<scenarios::graph_step> make_graph() override {
    return std::make_unique<block_graph>(program_, programmatic_, k_, result_);
  }
  void synchronize() override { program_.synchronize(); }
  [[nodiscard]] std::size_t begin_round(std::size_t round) override {
    return round == 0 ? static_cast<std::size_t>(cap_ / k_) : 0;
  }
  void enqueue(const launch_ctx& ctx, std::size_t) override { program_.enqueue_block(ctx.sync_each, ctx.programmatic); }
  //! Records block `b`'s end and reads block b - 1's change (waiting for it); true when the run should stop.
  bool after_step(std::size_t b) override {
    done_[b % 2].record(program_.main_stream());
    return b >= 1 && check(static_cast<std::int64_t>(b) - 1);
  }
  //! Reads the last block's change (keeping the first convergence); the units are time steps.
  [[nodiscard]] std::size_t end_round(std::size_t blocks) override {
    if (blocks > 0) {
      const bool was_converged = result_.converged;
      const std::int64_t at = result_.converged_at;
      (void)check(static_cast<std::int64_t>(blocks) - 1);
      if (was_converged) { // keep the first convergence, report the last block's change
        result_.converged = true;
        result_.converged_at = at;
      }
    }
    return blocks * static_cast<std::size_t>(k_);
  }

  [[nodiscard]] cavity_program& program() noexcept { return program_; }

private:
  //! Reads block `b`'s change (waiting for it); true when it fell below the tolerance.
  //! \throws diverged when it is not finite (after letting the queued work finish).
  bool check(std::int64_t b) {
    done_[static_cast<std::size_t>(b % 2)].synchronize();
    const double change = static_cast<double>(program_.published(b)) * per_step_;
    result_.final_change = change;
    if (on_progress_) on_progress_(run_progress{result_.mode, (b + 1) * k_, cap_, change});
    if (!std::isfinite(change)) {
      program_.drain(); // let the queued work finish before the memory goes
      throw diverged((b + 1) * k_, change, describe(o_));
    }
    if (o_.tol > 0.0 && change < o_.tol) {
      result_.converged = true;
      result_.converged_at = (b + 1) * k_;
      return true;
    }
    return false;
  }

  const cavity_options& o_;
  run_result& result_;
  const std::function<void(const run_progress&)>& on_progress_;
  bool programmatic_;
  int k_;
  std::int64_t cap_;
  double per_step_; // change per step, relative to the lid speed, from a block's published max |u - u_prev|
  cavity_program program_;
  std::array<conveyor::event, 2> done_{conveyor::event(cudaEventDisableTiming),
                                       conveyor::event(cudaEventDisableTiming)};
};

//! The run's devices: each visible; profiling with one slab only; peer access between the distinct devices enabled
//! (what it found into result.peer_access).
void prepare_devices(const cavity_options& o, scenarios::profiling* profiling, run_result& result) {
  const int visible = conveyor::device_count(); // none: the first CUDA call of the run says so (cuda_error)
  for (const int d : o.devices)
    if (visible > 0 && d >= visible)
      throw std::invalid_argument(
          fmt::format("devices: device {} asked for, but {} CUDA device(s) are visible", d, visible));
  if (profiling != nullptr && o.devices.size() > 1)
    throw std::invalid_argument("profiling: with one slab only (one device)");
  result.devices = o.devices;
  const std::vector<int> distinct = distinct_devices(o.devices);
  if (distinct.size() > 1)
    for (const conveyor::peer_access& a : conveyor::enable_peer_access(std::span<const int>(distinct)))
      result.peer_access.push_back(fmt::format("device {} -> {}: {}", a.device, a.peer, a.reason));
}

} // namespace

diverged::diverged(std::int64_t step, double change, const std::string& run) :
    std::runtime_error(fmt::format("the run diverged by step {} (velocity change {}): {}; try a lower lid speed, a "
                                   "lower Reynolds number or a larger lattice",
                                   step, change, run)),
    step_(step),
    change_(change),
    run_(run) {}

run_result run_cavity(const checked_options& checked, execution_mode mode,
                      const std::function<void(const run_progress&)>& on_progress, scenarios::profiling* profiling) {
  const cavity_options& o = *checked;
  const lattice_params p = make_lattice_params(checked);
  run_result result;
  result.mode = mode;
  prepare_devices(o, profiling, result);
  // Everything of the run's own (its check events, the graph's instantiation and launches) on the first slab's
  // device; the slabs switch to theirs where they need to.
  const conveyor::device_guard on_first(o.devices.front());
  // --pdl: programmatic launches in stream and graph modes (the sync mode waits for every kernel anyway).
  result.programmatic = o.programmatic && mode != execution_mode::sync;
  cavity_run run(o, p, result.programmatic, result, on_progress);
  scenarios::run_settings settings;
  settings.mode = mode;
  settings.programmatic = result.programmatic;
  settings.profiling = profiling;
  const scenarios::mode_timing timing = scenarios::run_workload(run, settings);
  result.setup_ms = timing.setup_ms;
  result.steps = static_cast<std::int64_t>(timing.units);
  result.seconds = timing.seconds;
  if (result.steps > 0 && result.seconds > 0.0) {
    result.ms_per_step = result.seconds * 1000.0 / static_cast<double>(result.steps);
    result.mlups =
        static_cast<double>(run.program().cells()) * static_cast<double>(result.steps) / result.seconds / 1e6;
  }
  result.populations = run.program().download();
  return result;
}

} // namespace conveyor::cavity
