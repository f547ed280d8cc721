//! \file solver.cpp
//! The cavity run in three execution modes.

#include "cavity/solver.hpp"

#include "cavity/kernels.hpp"
#include "common/device_buffer.hpp"
#include "common/profiling.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/export.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace conveyor::cavity {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

namespace {

//! The device state of one run and the block of work on it.
class cavity_program {
public:
  cavity_program(const lattice_params& p, int steps_per_block)
      : params_(p), k_(steps_per_block),
        f_{device_buffer<float>(cells() * q), device_buffer<float>(cells() * q)}, u_prev_(2 * cells()), state_(1),
        slots_(2) {
    slots_.data()[0] = 0.0F;
    slots_.data()[1] = 0.0F;
    // Pinned memory is mapped into the device's address space (unified addressing); ask for the device pointer
    // all the same rather than assume it equals the host pointer.
    CONVEYOR_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slots_device_), slots_.data(), 0));
  }

  [[nodiscard]] std::size_t cells() const noexcept {
    return static_cast<std::size_t>(params_.n) * static_cast<std::size_t>(params_.n);
  }

  //! Back to rest: f = equilibrium at rest, u_prev = 0, the check's state zeroed.
  void reset(const launch_ctx& ctx) {
    launch_initialise(f_[0].data(), u_prev_.data(), state_.data(), params_.n, ctx);
  }

  //! K time steps, then the convergence check. Reads no host memory and writes only the pinned slots: capturable.
  void enqueue_block(const launch_ctx& ctx) {
    for (int k = 0; k < k_; ++k) launch_stream_collide(f_[k % 2].data(), f_[(k + 1) % 2].data(), params_, ctx);
    launch_velocity_change(f_[0].data(), u_prev_.data(), state_.data(), params_.n, ctx);
    launch_publish_change(state_.data(), slots_device_, ctx);
  }

  //! The change published by block `b` (valid once that block has completed and before block b + 2 runs).
  [[nodiscard]] float published(std::int64_t b) noexcept {
    return static_cast<volatile float*>(slots_.data())[b % 2];
  }

  //! The current state (after a whole number of blocks), downloaded after the work on `s`.
  [[nodiscard]] std::vector<float> download(cudaStream_t s) const { return f_[0].download(f_[0].size(), s); }

private:
  lattice_params params_;
  int k_;
  std::array<device_buffer<float>, 2> f_;
  device_buffer<float> u_prev_;
  device_buffer<convergence_state> state_;
  pinned_buffer<float> slots_;
  float* slots_device_ = nullptr;
};

//! Labels the nodes of a captured block, a chain of K steps and the two check kernels, for readable exports:
//! "step 1 (f0 -> f1)", ..., "velocity change", "publish change". Leaves the graph as it is when it is not that
//! chain.
void label_block(const conveyor::graph& g, int k) {
  const std::vector<conveyor::node> roots = g.root_nodes();
  if (roots.size() != 1) return;
  std::vector<conveyor::node> chain{roots.front()};
  while (true) {
    const std::vector<conveyor::node> next = chain.back().dependents();
    if (next.empty()) break;
    if (next.size() != 1 || chain.size() > static_cast<std::size_t>(k) + 2) return;
    chain.push_back(next.front());
  }
  if (chain.size() != static_cast<std::size_t>(k) + 2) return;
  for (int i = 0; i < k; ++i)
    chain[static_cast<std::size_t>(i)].label(fmt::format("step {} (f{} -> f{})", i + 1, i % 2, (i + 1) % 2));
  chain[static_cast<std::size_t>(k)].label("velocity change");
  chain[static_cast<std::size_t>(k) + 1].label("publish change");
}

} // namespace

run_result run_cavity(const cavity_options& o, execution_mode mode,
                      const std::function<void(const run_progress&)>& on_progress, scenarios::profiling* profiling) {
  const lattice_params p = make_lattice_params(o); // validates
  const int k = o.steps_per_graph;
  const std::int64_t cap = max_steps(o);
  const std::int64_t blocks_max = cap / k;
  // Change per step, relative to the lid speed, from a block's published max |u - u_prev|.
  const double per_step = 1.0 / (static_cast<double>(k) * o.lid_speed);

  run_result result;
  result.mode = mode;
  conveyor::stream s;
  const launch_ctx eager{s.get(), false};
  // --pdl: programmatic launches in stream and graph modes (the sync mode waits for every kernel anyway).
  const bool programmatic = o.programmatic && mode != execution_mode::sync;
  result.programmatic = programmatic;
  const launch_ctx ctx{s.get(), mode == execution_mode::sync, programmatic};
  cavity_program program(p, k);

  // Warm-up block, eager (loads the kernels), then capture (graph mode), then back to rest.
  program.reset(eager);
  program.enqueue_block(eager);
  s.synchronize();
  std::optional<conveyor::graph_exec> exec;
  if (mode == execution_mode::graph) {
    const auto t0 = std::chrono::steady_clock::now();
    const conveyor::graph g =
        conveyor::capture(s, [&](const conveyor::stream& cs) {
          program.enqueue_block(launch_ctx{cs.get(), false, programmatic});
        });
    exec.emplace(conveyor::instantiate(g));
    exec->upload(s);
    s.synchronize();
    result.setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    label_block(g, k);
    result.graph_nodes = g.node_count();
    result.graph_edges = g.edge_count();
    for (const auto& [from, to] : g.edges())
      if (g.edge_type_between(from, to) == conveyor::edge_type::programmatic) ++result.programmatic_edges;
    result.graph_dot = conveyor::to_dot(g, fmt::format("cavity_{}_steps", k));
    if (profiling != nullptr) profiling->watch(*exec, fmt::format("cavity {} steps", k));
  }
  program.reset(eager);
  s.synchronize();

  std::array<conveyor::event, 2> done{conveyor::event(cudaEventDisableTiming),
                                      conveyor::event(cudaEventDisableTiming)};
  // Reads block b's change (waiting for it); true when the run should stop after the blocks already enqueued.
  auto check = [&](std::int64_t b) {
    done[static_cast<std::size_t>(b % 2)].synchronize();
    const double change = static_cast<double>(program.published(b)) * per_step;
    result.final_change = change;
    if (on_progress) on_progress(run_progress{mode, (b + 1) * k, cap, change});
    if (!std::isfinite(change)) {
      (void)cudaStreamSynchronize(s.get());
      throw std::runtime_error(fmt::format(
          "the run diverged by step {} (velocity change {}): {}; try a lower --lid-speed, a lower --re or a larger "
          "--n",
          (b + 1) * k, change, describe(o)));
    }
    if (o.tol > 0.0 && change < o.tol) {
      result.converged = true;
      result.converged_at = (b + 1) * k;
      return true;
    }
    return false;
  };

  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t blocks = 0;
  bool stop = false;
  while (blocks < blocks_max && !stop) {
    {
      const auto profiled = scenarios::profile_step(profiling, mode); // one block of K steps
      if (exec)
        exec->launch(s);
      else
        program.enqueue_block(ctx);
    }
    done[static_cast<std::size_t>(blocks % 2)].record(s);
    ++blocks;
    if (blocks >= 2) stop = check(blocks - 2); // block b-1's value, while block b runs
  }
  s.synchronize();
  const auto t1 = std::chrono::steady_clock::now();
  // The last block's value was not read in the loop.
  const std::int64_t last = blocks - 1;
  if (last >= 0) {
    const bool was_converged = result.converged;
    const std::int64_t at = result.converged_at;
    (void)check(last);
    if (was_converged) { // keep the first convergence, report the last block's change
      result.converged = true;
      result.converged_at = at;
    }
  }

  if (exec && profiling != nullptr) profiling->examine(*exec, fmt::format("cavity {} steps", k));
  result.steps = blocks * k;
  result.seconds = std::chrono::duration<double>(t1 - t0).count();
  if (result.steps > 0 && result.seconds > 0.0) {
    result.ms_per_step = result.seconds * 1000.0 / static_cast<double>(result.steps);
    result.mlups = static_cast<double>(program.cells()) * static_cast<double>(result.steps) / result.seconds / 1e6;
  }
  result.populations = program.download(s.get());
  return result;
}

} // namespace conveyor::cavity
