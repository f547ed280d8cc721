//! \file mode_runner.cpp
//! run_workload in its phases: prepare (reset, warm-up, graph, reset), the rounds, the median.

#include "common/mode_runner.hpp"

#include "common/graph_saving.hpp"
#include "common/profiling.hpp"
#include "common/statistics.hpp"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace conveyor::scenarios {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_between(clock_type::time_point start, clock_type::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

//! Reset, warm-up, the graph (graph modes; its set-up timed into t.setup_ms) and reset again.
std::unique_ptr<graph_step> prepare(workload& w, const run_settings& s, const launch_ctx& ctx, mode_timing& t) {
  w.reset();
  w.warm_up(ctx);
  std::unique_ptr<graph_step> g;
  if (is_graph(s.mode)) {
    const auto start = clock_type::now();
    g = w.make_graph();
    if (!g) throw std::logic_error("run_workload: " + to_string(s.mode) + " mode without a graph (make_graph)");
    w.synchronize();
    t.setup_ms = ms_between(start, clock_type::now());
    if (s.profiling != nullptr) g->watch(*s.profiling);
    if (graph_saving* saving = graph_saving::active(); saving != nullptr && is_graph(s.mode)) g->watch(*saving);
  }
  w.synchronize();
  w.reset();
  w.synchronize();
  return g;
}

//! The steps of one round, after its prologue; returns how many ran.
std::size_t run_steps(workload& w, graph_step* g, const run_settings& s, const launch_ctx& ctx, std::size_t n,
                      const std::string& track) {
  std::size_t done = 0;
  for (std::size_t k = 0; k < n; ++k) {
    {
      const std::optional<profile::step_scope> profiled =
          s.profiling != nullptr ? s.profiling->step(track) : std::nullopt;
      if (g != nullptr) g->launch(k);
      else w.enqueue(ctx, k);
    }
    ++done;
    if (w.after_step(k)) break;
  }
  return done;
}

//! Every round, the timed ones recorded into `t`.
void run_rounds(workload& w, graph_step* g, const run_settings& s, const launch_ctx& ctx, mode_timing& t) {
  const std::string track = s.profiling != nullptr ? to_string(s.mode) : std::string();
  for (std::size_t round = 0;; ++round) {
    const std::size_t n = w.begin_round(round);
    if (n == 0) break;
    const auto start = clock_type::now();
    const bool go = g != nullptr ? g->prologue() : w.prologue(ctx);
    const std::size_t steps = go ? run_steps(w, g, s, ctx, n, track) : 0;
    w.synchronize();
    const double ms = ms_between(start, clock_type::now());
    const std::size_t units = w.end_round(steps);
    if (round < s.warmup_rounds) continue;
    t.ms_per_unit.push_back(units > 0 ? ms / static_cast<double>(units) : 0.0);
    t.seconds += ms / 1000.0;
    t.steps += steps;
    t.units += units;
  }
}

} // namespace

mode_timing run_workload(workload& w, const run_settings& s) {
  mode_timing t;
  t.mode = s.mode;
  t.programmatic = s.programmatic;
  const launch_ctx ctx{w.stream(), s.mode.kind == execution_mode::sync, s.programmatic};
  const std::unique_ptr<graph_step> g = prepare(w, s, ctx, t);
  run_rounds(w, g.get(), s, ctx, t);
  if (g) {
    g->after_rounds();
    if (s.profiling != nullptr) g->examine(*s.profiling);
  }
  t.median_ms_per_unit = median(t.ms_per_unit);
  return t;
}

} // namespace conveyor::scenarios
