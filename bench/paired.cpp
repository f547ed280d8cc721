//! \file paired.cpp
//! Conveyor against the raw CUDA Runtime, paired: each iteration runs both sides back to back, in alternating
//! order, and the ratio is taken pair by pair. Slow drifts of the machine (clocks, the driver's allocator, other
//! tenants of the host) then fall on both sides of each pair alike, which separate benchmarks cannot ensure.

#include "bench/body_support.hpp"
#include "bench/kernels.hpp"
#include "bench/statistics.hpp"

#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/execute/update_result.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <limits>
#include <utility>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

// Per-side sums and per-pair ratios of one quantity.
struct paired_series {
  double conveyor_s = 0.0;
  double raw_s = 0.0;
  std::vector<double> ratios;
  void add(double conveyor, double raw) {
    conveyor_s += conveyor;
    raw_s += raw;
    if (raw > 0.0) ratios.push_back(conveyor / raw);
  }
};

struct replay_times {
  double host_s = 0.0;
  double wall_s = 0.0;
};

void replay_pairs(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const conveyor::stream& main = ctx.main_stream();
  const std::vector<float> b = b_values(n);
  // Both graphs update the same buffers, so that each side runs on what the other has just touched.
  const conveyor_built built = build_conveyor(ctx, width, n, rot.base, b);
  expect_nodes(built.graph.node_count(), n, "paired replay (Conveyor)");
  conveyor::graph_exec conveyor_exec = conveyor::instantiate(built.graph);
  conveyor_exec.upload(main);
  const raw_built raw = build_raw(ctx, width, n, rot.base, b);
  expect_nodes(raw_node_count(raw.graph.get()), n, "paired replay (raw)");
  const raw_graph_exec raw_exec = instantiate_raw(raw.graph.get());
  CONVEYOR_CHECK(cudaGraphUpload(raw_exec.get(), main.get()));
  main.synchronize();

  auto run_conveyor = [&] {
    const auto start = clock_type::now();
    conveyor_exec.launch(main);
    const auto launched = clock_type::now();
    main.synchronize();
    return replay_times{seconds(start, launched), seconds(start, clock_type::now())};
  };
  auto run_raw = [&] {
    const auto start = clock_type::now();
    const cudaError_t rc = cudaGraphLaunch(raw_exec.get(), main.get());
    const auto launched = clock_type::now();
    CONVEYOR_CHECK(rc);
    main.synchronize();
    return replay_times{seconds(start, launched), seconds(start, clock_type::now())};
  };
  // One pair; Conveyor first on even iterations, raw first on odd ones. Each side runs twice in a row and only the
  // second run counts, so that both are measured right after a launch of their own graph (the host-side state of
  // the graph the driver touched last is warm in the CPU caches).
  auto pair = [&](std::size_t i) {
    replay_times conv;
    replay_times rw;
    if (i % 2 == 0) {
      (void)run_conveyor();
      conv = run_conveyor();
      (void)run_raw();
      rw = run_raw();
    } else {
      (void)run_raw();
      rw = run_raw();
      (void)run_conveyor();
      conv = run_conveyor();
    }
    return std::pair{conv, rw};
  };

  warm_up(c, [&](std::size_t i) { (void)pair(i); });
  paired_series wall;
  paired_series host;
  std::size_t done = 0;
  for (auto _ : state) {
    const auto [conv, rw] = pair(done);
    state.SetIterationTime(conv.wall_s + rw.wall_s);
    wall.add(conv.wall_s, rw.wall_s);
    host.add(conv.host_s, rw.host_s);
    ++done;
  }
  const double per_kernel = us_per_s / static_cast<double>(done) / static_cast<double>(n);
  const double per_call = us_per_s / static_cast<double>(done);
  state.counters["conveyor_wall_us_per_kernel"] = wall.conveyor_s * per_kernel;
  state.counters["raw_wall_us_per_kernel"] = wall.raw_s * per_kernel;
  state.counters["wall_ratio"] = median(wall.ratios);
  state.counters["conveyor_host_us_per_call"] = host.conveyor_s * per_call;
  state.counters["raw_host_us_per_call"] = host.raw_s * per_call;
  state.counters["host_ratio"] = median(host.ratios);
}

void build_pairs(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const std::vector<float> b = b_values(n);
  const bool capture = c.id.variant == "capture";
  // One pair on buffer set `set`; Conveyor first on even iterations, raw first on odd ones.
  auto pair = [&](std::size_t i, std::size_t set, bool verify) {
    build_times conv;
    build_times rw;
    if (i % 2 == 0) {
      conv = build_once(ctx, width, n, set, b, capture, true, verify);
      rw = build_once(ctx, width, n, set, b, capture, false, verify);
    } else {
      rw = build_once(ctx, width, n, set, b, capture, false, verify);
      conv = build_once(ctx, width, n, set, b, capture, true, verify);
    }
    return std::pair{conv, rw};
  };

  for (std::int64_t i = 0; i < c.warmup; ++i) {
    const auto k = static_cast<std::size_t>(i);
    (void)pair(k, rot.set(k), i == 0);
  }
  paired_series total;
  paired_series construction;
  paired_series instantiation;
  std::size_t done = 0;
  for (auto _ : state) {
    const auto [conv, rw] = pair(done, rot.set(done), false);
    state.SetIterationTime(conv.build_s + conv.instantiate_s + rw.build_s + rw.instantiate_s);
    total.add(conv.build_s + conv.instantiate_s, rw.build_s + rw.instantiate_s);
    construction.add(conv.build_s, rw.build_s);
    instantiation.add(conv.instantiate_s, rw.instantiate_s);
    ++done;
  }
  const double per_node = us_per_s / static_cast<double>(done) / static_cast<double>(n);
  state.counters["conveyor_us_per_node"] = total.conveyor_s * per_node;
  state.counters["raw_us_per_node"] = total.raw_s * per_node;
  state.counters["ratio"] = median(total.ratios);
  state.counters["build_ratio"] = median(construction.ratios);
  state.counters["instantiate_ratio"] = median(instantiation.ratios);
}

// One side of a pair, as a replay loop runs it: change to B (`change(to_b)`), launch, wait; then back to A (timed:
// what `change(to_a)` returns, seconds), launch, wait. Timing only the change back measures both sides right after a
// launch of their own graph (the host-side state the driver touched last is warm in the CPU caches), so that neither
// side pays for the other having run last.
template <class Change, class B, class A, class Launch>
double there_and_back(const conveyor::stream& s, Change&& change, const B& to_b, const A& to_a, Launch&& launch) {
  (void)change(to_b);
  launch();
  s.synchronize();
  const double t = change(to_a);
  launch();
  s.synchronize();
  return t;
}

// Runs `conveyor_side` and `raw_side` (each returns the seconds of its timed update) as one pair per iteration,
// Conveyor first on even iterations and raw first on odd ones, after the warm-up; records the per-update means and
// the median ratio as the benchmark's counters conveyor_update_us, raw_update_us and ratio.
template <class ConveyorSide, class RawSide>
void measure_update_pairs(benchmark::State& state, const bench_case& c, ConveyorSide&& conveyor_side,
                          RawSide&& raw_side) {
  auto pair = [&](std::size_t i) {
    double conv = 0.0;
    double rw = 0.0;
    if (i % 2 == 0) {
      conv = conveyor_side();
      rw = raw_side();
    } else {
      rw = raw_side();
      conv = conveyor_side();
    }
    return std::pair{conv, rw};
  };
  warm_up(c, [&](std::size_t i) { (void)pair(i); });
  paired_series update;
  std::size_t done = 0;
  for (auto _ : state) {
    const auto [conv, rw] = pair(done);
    state.SetIterationTime(conv + rw);
    update.add(conv, rw);
    ++done;
  }
  const double per_update = us_per_s / static_cast<double>(done);
  state.counters["conveyor_update_us"] = update.conveyor_s * per_update;
  state.counters["raw_update_us"] = update.raw_s * per_update;
  state.counters["ratio"] = median(update.ratios);
}

void setter_pairs(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::vector<std::size_t> changed = changed_indices(n, c.id.changed);
  if (changed.empty()) throw std::invalid_argument("paired setters benchmark without changed nodes");
  const conveyor::stream& main = ctx.main_stream();
  const std::vector<float> b = b_values(n);
  // Two executable graphs of the chain, on the same buffers.
  const conveyor_built built = build_conveyor(ctx, 1, n, rot.base, b);
  conveyor::graph_exec conveyor_exec = conveyor::instantiate(built.graph);
  conveyor_exec.upload(main);
  const raw_built raw = build_raw(ctx, 1, n, rot.base, b);
  const raw_graph_exec raw_exec = instantiate_raw(raw.graph.get());
  CONVEYOR_CHECK(cudaGraphUpload(raw_exec.get(), main.get()));
  main.synchronize();
  auto set_conveyor = [&](float value) {
    return set_b_conveyor(ctx, conveyor_exec, built.nodes, changed, n, rot.base, value);
  };
  auto set_raw = [&](float value) { return set_b_raw(ctx, raw_exec.get(), raw.nodes, changed, n, rot.base, value); };
  auto launch_conveyor = [&] { conveyor_exec.launch(main); };
  auto launch_raw = [&] { CONVEYOR_CHECK(cudaGraphLaunch(raw_exec.get(), main.get())); };
  measure_update_pairs(
      state, c, [&] { return there_and_back(main, set_conveyor, axpb_b_changed, axpb_b, launch_conveyor); },
      [&] { return there_and_back(main, set_raw, axpb_b_changed, axpb_b, launch_raw); });
}

// Whole-graph update, paired: two executable graphs of the chain (Conveyor's from the builder, raw from the Runtime
// API), each moved between a graph A and a graph B whose `changed` nodes have another kernel argument, through
// graph_exec::update and cudaGraphExecUpdate, alternating which side goes first. Each side, as a replay loop that
// updates runs: update to B, launch, wait, then update back to A (timed), launch, wait.
void whole_pairs(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::vector<std::size_t> changed = changed_indices(n, c.id.changed);
  if (changed.empty()) throw std::invalid_argument("paired whole-graph update benchmark without changed nodes");
  const conveyor::stream& main = ctx.main_stream();
  const std::vector<float> b_a = b_values(n);
  const std::vector<float> b_b = b_values(n, changed);
  const conveyor_built conveyor_a = build_conveyor(ctx, 1, n, rot.base, b_a);
  const conveyor_built conveyor_b = build_conveyor(ctx, 1, n, rot.base, b_b);
  conveyor::graph_exec conveyor_exec = conveyor::instantiate(conveyor_a.graph);
  conveyor_exec.upload(main);
  const raw_built raw_a = build_raw(ctx, 1, n, rot.base, b_a);
  const raw_built raw_b = build_raw(ctx, 1, n, rot.base, b_b);
  const raw_graph_exec raw_exec = instantiate_raw(raw_a.graph.get());
  CONVEYOR_CHECK(cudaGraphUpload(raw_exec.get(), main.get()));
  main.synchronize();
  auto update_conveyor = [&](const conveyor::graph& g) {
    const auto t0 = clock_type::now();
    const conveyor::update_result r = conveyor_exec.update(g);
    const double t = seconds(t0, clock_type::now());
    if (r.method != conveyor::update_method::whole_graph) throw std::runtime_error(r.reason());
    return t;
  };
  auto update_raw = [&](cudaGraph_t g) {
    cudaGraphExecUpdateResultInfo info{};
    const auto t0 = clock_type::now();
    const cudaError_t rc = cudaGraphExecUpdate(raw_exec.get(), g, &info);
    const double t = seconds(t0, clock_type::now());
    CONVEYOR_CHECK(rc);
    return t;
  };
  auto launch_conveyor = [&] { conveyor_exec.launch(main); };
  auto launch_raw = [&] { CONVEYOR_CHECK(cudaGraphLaunch(raw_exec.get(), main.get())); };
  measure_update_pairs(
      state, c,
      [&] { return there_and_back(main, update_conveyor, conveyor_b.graph, conveyor_a.graph, launch_conveyor); },
      [&] { return there_and_back(main, update_raw, raw_b.graph.get(), raw_a.graph.get(), launch_raw); });
}

} // namespace

void paired_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  if (c.id.variant == "replay") replay_pairs(state, c, ctx, rot);
  else if (c.id.variant == "capture" || c.id.variant == "explicit") build_pairs(state, c, ctx, rot);
  else if (c.id.variant == "setters") setter_pairs(state, c, ctx, rot);
  else if (c.id.variant == "whole") whole_pairs(state, c, ctx, rot);
  else throw std::logic_error(fmt::format("paired benchmark with unknown variant '{}'", c.id.variant));
}

} // namespace conveyor::bench
