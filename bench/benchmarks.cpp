//! \file benchmarks.cpp
//! The benchmark bodies: launch cost in three modes, build, first launch, update and memory.

#include "bench/benchmarks.hpp"

#include "bench/body_support.hpp"

#include "bench/collect.hpp"
#include "bench/kernels.hpp"
#include "bench/workloads.hpp"

#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::bench {

namespace {

// ---- 1 and 2: launch cost per kernel (sync, stream, graph through Conveyor or raw) ------------------------------

struct launch_times {
  double host_s = 0.0; // time in the launch calls
  double wall_s = 0.0; // first call until the step has finished
};

void launch_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const conveyor::stream& main = ctx.main_stream();
  const std::vector<float> b = b_values(n);
  std::size_t calls = n; // launch calls per step
  std::vector<conveyor::graph_exec> conveyor_execs;
  std::vector<raw_graph_exec> raw_execs;
  std::function<launch_times(std::size_t)> step;

  if (c.id.variant == "sync") {
    step = [&](std::size_t set) {
      double host = 0.0;
      const auto start = clock_type::now();
      for (std::size_t j = 0; j < n; ++j) {
        const cudaStream_t s = ctx.lane(j % width).get();
        const auto t0 = clock_type::now();
        launch_axpb(s, ctx.chunk(set, j, n), axpb_a, axpb_b);
        host += seconds(t0, clock_type::now());
        CONVEYOR_CHECK(cudaStreamSynchronize(s));
      }
      const auto end = clock_type::now();
      conveyor::check_launch("axpb<<<1, 256>>> (sync mode)");
      return launch_times{host, seconds(start, end)};
    };
  } else if (c.id.variant == "stream") {
    step = [&](std::size_t set) {
      const auto start = clock_type::now();
      enqueue_eager(ctx, width, n, set);
      const auto enqueued = clock_type::now();
      conveyor::check_launch("axpb<<<1, 256>>> (stream mode)");
      main.synchronize();
      const auto end = clock_type::now();
      return launch_times{seconds(start, enqueued), seconds(start, end)};
    };
  } else if (c.id.api == "conveyor") {
    calls = 1;
    for (std::size_t k = 0; k < rot.count; ++k) {
      conveyor_built built = build_conveyor(ctx, width, n, rot.base + k, b);
      expect_nodes(built.graph.node_count(), n, "graph mode (Conveyor)");
      conveyor_execs.push_back(conveyor::instantiate(built.graph));
      conveyor_execs.back().upload(main);
    }
    main.synchronize();
    step = [&](std::size_t set) {
      const auto start = clock_type::now();
      conveyor_execs[set - rot.base].launch(main);
      const auto launched = clock_type::now();
      main.synchronize();
      const auto end = clock_type::now();
      return launch_times{seconds(start, launched), seconds(start, end)};
    };
  } else {
    calls = 1;
    for (std::size_t k = 0; k < rot.count; ++k) {
      raw_built built = build_raw(ctx, width, n, rot.base + k, b);
      expect_nodes(raw_node_count(built.graph.get()), n, "graph mode (raw)");
      raw_execs.push_back(instantiate_raw(built.graph.get()));
      CONVEYOR_CHECK(cudaGraphUpload(raw_execs.back().get(), main.get()));
    }
    main.synchronize();
    step = [&](std::size_t set) {
      const auto start = clock_type::now();
      const cudaError_t rc = cudaGraphLaunch(raw_execs[set - rot.base].get(), main.get());
      const auto launched = clock_type::now();
      CONVEYOR_CHECK(rc);
      main.synchronize();
      const auto end = clock_type::now();
      return launch_times{seconds(start, launched), seconds(start, end)};
    };
  }

  warm_up(c, [&](std::size_t i) { (void)step(rot.set(i)); });
  double host = 0.0;
  double wall = 0.0;
  std::size_t done = 0;
  for (auto _ : state) {
    const launch_times t = step(rot.set(done));
    state.SetIterationTime(t.wall_s);
    host += t.host_s;
    wall += t.wall_s;
    ++done;
  }
  const double steps = static_cast<double>(done);
  state.counters["wall_us_per_kernel"] = wall / steps / static_cast<double>(n) * us_per_s;
  state.counters["host_us_per_call"] = host / steps / static_cast<double>(calls) * us_per_s;
  state.counters["host_us_per_kernel"] = host / steps / static_cast<double>(n) * us_per_s;
}

// ---- 3: build costs ----------------------------------------------------------------------------------------------

} // namespace

void expect_nodes(std::size_t actual, std::size_t n, const char* what) {
  if (actual != n) throw std::runtime_error(fmt::format("{}: the graph holds {} nodes, expected {}", what, actual, n));
}

std::size_t raw_node_count(cudaGraph_t g) {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  return count;
}

build_times build_once(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                       std::span<const float> b, bool capture, bool conveyor_api, bool verify) {
  build_times t;
  // What is built lives until the function returns, so that no destruction falls in the timed parts.
  if (conveyor_api) {
    std::optional<conveyor::graph> captured;
    std::optional<conveyor_built> built;
    const auto t0 = clock_type::now();
    if (capture) captured.emplace(capture_conveyor(ctx, width, n, set));
    else built.emplace(build_conveyor(ctx, width, n, set, b));
    const auto t1 = clock_type::now();
    const conveyor::graph& g = capture ? *captured : built->graph;
    conveyor::graph_exec exec = conveyor::instantiate(g);
    const auto t2 = clock_type::now();
    t = {seconds(t0, t1), seconds(t1, t2)};
    if (verify) expect_nodes(g.node_count(), n, capture ? "capture (Conveyor)" : "explicit build (Conveyor)");
  } else {
    raw_graph captured;
    raw_built built;
    const auto t0 = clock_type::now();
    if (capture) captured = capture_raw(ctx, width, n, set);
    else built = build_raw(ctx, width, n, set, b);
    const auto t1 = clock_type::now();
    const cudaGraph_t g = capture ? captured.get() : built.graph.get();
    raw_graph_exec exec = instantiate_raw(g);
    const auto t2 = clock_type::now();
    t = {seconds(t0, t1), seconds(t1, t2)};
    if (verify) expect_nodes(raw_node_count(g), n, capture ? "capture (raw)" : "explicit build (raw)");
  }
  return t;
}

namespace {

void build_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const std::vector<float> b = b_values(n);
  const bool capture = c.id.variant == "capture";
  const bool conveyor_api = c.id.api == "conveyor";
  auto step = [&](std::size_t set, bool verify) {
    return build_once(ctx, width, n, set, b, capture, conveyor_api, verify);
  };

  for (std::int64_t i = 0; i < c.warmup; ++i) (void)step(rot.set(static_cast<std::size_t>(i)), i == 0);
  double build = 0.0;
  double instantiate = 0.0;
  std::size_t done = 0;
  for (auto _ : state) {
    const build_times t = step(rot.set(done), false);
    state.SetIterationTime(t.build_s + t.instantiate_s);
    build += t.build_s;
    instantiate += t.instantiate_s;
    ++done;
  }
  const double per_node = us_per_s / static_cast<double>(done) / static_cast<double>(n);
  state.counters["us_per_node"] = (build + instantiate) * per_node;
  state.counters["build_us_per_node"] = build * per_node;
  state.counters["instantiate_us_per_node"] = instantiate * per_node;
}

// ---- 3: first launch, with and without upload --------------------------------------------------------------------

struct first_launch_times {
  double upload_s = 0.0;     // upload until finished (upload variant)
  double first_host_s = 0.0; // the first cudaGraphLaunch call
  double first_wall_s = 0.0; // first launch until finished
  double later_wall_s = 0.0; // the second launch until finished
};

void first_launch_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const std::vector<float> b = b_values(n);
  const bool upload = c.id.variant == "upload";
  const conveyor::stream& main = ctx.main_stream();

  auto step = [&](std::size_t set) {
    conveyor_built built = build_conveyor(ctx, width, n, set, b);
    conveyor::graph_exec exec = conveyor::instantiate(built.graph);
    main.synchronize();
    first_launch_times t;
    if (upload) {
      const auto u0 = clock_type::now();
      exec.upload(main);
      main.synchronize();
      t.upload_s = seconds(u0, clock_type::now());
    }
    const auto f0 = clock_type::now();
    exec.launch(main);
    const auto f1 = clock_type::now();
    main.synchronize();
    const auto f2 = clock_type::now();
    exec.launch(main);
    main.synchronize();
    const auto f3 = clock_type::now();
    t.first_host_s = seconds(f0, f1);
    t.first_wall_s = seconds(f0, f2);
    t.later_wall_s = seconds(f2, f3);
    return t;
  };

  for (std::int64_t i = 0; i < c.warmup; ++i) (void)step(rot.set(static_cast<std::size_t>(i)));
  first_launch_times sum;
  std::size_t done = 0;
  for (auto _ : state) {
    const first_launch_times t = step(rot.set(done));
    state.SetIterationTime(t.first_wall_s);
    sum.upload_s += t.upload_s;
    sum.first_host_s += t.first_host_s;
    sum.first_wall_s += t.first_wall_s;
    sum.later_wall_s += t.later_wall_s;
    ++done;
  }
  const double scale = us_per_s / static_cast<double>(done);
  if (upload) state.counters["upload_us"] = sum.upload_s * scale;
  state.counters["first_launch_host_us"] = sum.first_host_s * scale;
  state.counters["first_launch_wall_us"] = sum.first_wall_s * scale;
  state.counters["later_launch_wall_us"] = sum.later_wall_s * scale;
}

// ---- 4: update costs ---------------------------------------------------------------------------------------------

// The executable graph an update benchmark changes, built through Conveyor or raw, and the two versions of the chain
// it moves between: A (b = axpb_b everywhere) and B (axpb_b_changed at the changed nodes).
class update_subject {
public:
  update_subject(const bench_case& c, bench_context& ctx, const set_rotation& rot, std::vector<std::size_t> changed) :
      ctx_(ctx),
      rot_(rot),
      n_(c.id.nodes),
      changed_(std::move(changed)),
      conveyor_api_(c.id.api == "conveyor"),
      method_(c.id.variant) {
    const std::vector<float> b_a = b_values(n_);
    const std::vector<float> b_b = b_values(n_, changed_);
    const conveyor::stream& main = ctx.main_stream();
    if (conveyor_api_) {
      conveyor_a_.emplace(build_conveyor(ctx, 1, n_, rot.base, b_a));
      conveyor_b_.emplace(build_conveyor(ctx, 1, n_, rot.base, b_b));
      conveyor_exec_.emplace(conveyor::instantiate(conveyor_a_->graph));
      conveyor_exec_->upload(main);
    } else {
      raw_a_ = build_raw(ctx, 1, n_, rot.base, b_a);
      raw_b_ = build_raw(ctx, 1, n_, rot.base, b_b);
      raw_exec_ = instantiate_raw(raw_a_.graph.get());
      CONVEYOR_CHECK(cudaGraphUpload(raw_exec_.get(), main.get()));
    }
    main.synchronize();
  }

  // Applies the change (A -> B or B -> A); returns the seconds the update itself took. Re-instantiation destroys the
  // old executable graph after the timed part.
  double apply() {
    const bool to_b = !at_b_;
    double elapsed = 0.0;
    if (method_ == "setters") elapsed = set_nodes(to_b ? axpb_b_changed : axpb_b);
    else if (method_ == "whole") elapsed = conveyor_api_ ? update_conveyor(to_b) : update_raw(to_b);
    else elapsed = conveyor_api_ ? reinstantiate_conveyor(to_b) : reinstantiate_raw(to_b);
    at_b_ = to_b;
    return elapsed;
  }

  // The launch after the change, until finished; seconds.
  double launch_after() {
    const conveyor::stream& main = ctx_.main_stream();
    const auto t0 = clock_type::now();
    if (conveyor_api_) conveyor_exec_->launch(main);
    else CONVEYOR_CHECK(cudaGraphLaunch(raw_exec_.get(), main.get()));
    main.synchronize();
    return seconds(t0, clock_type::now());
  }

private:
  double set_nodes(float value) {
    return conveyor_api_ ? set_b_conveyor(ctx_, *conveyor_exec_, conveyor_a_->nodes, changed_, n_, rot_.base, value)
                         : set_b_raw(ctx_, raw_exec_.get(), raw_a_.nodes, changed_, n_, rot_.base, value);
  }
  double update_conveyor(bool to_b) {
    const auto t0 = clock_type::now();
    const conveyor::update_result r = conveyor_exec_->update(to_b ? conveyor_b_->graph : conveyor_a_->graph);
    const double elapsed = seconds(t0, clock_type::now());
    if (!r) throw std::runtime_error(r.reason());
    return elapsed;
  }
  double update_raw(bool to_b) {
    cudaGraphExecUpdateResultInfo info{};
    const auto t0 = clock_type::now();
    const cudaError_t rc = cudaGraphExecUpdate(raw_exec_.get(), (to_b ? raw_b_ : raw_a_).graph.get(), &info);
    const double elapsed = seconds(t0, clock_type::now());
    conveyor::check(rc, "cudaGraphExecUpdate");
    return elapsed;
  }
  double reinstantiate_conveyor(bool to_b) {
    const auto t0 = clock_type::now();
    conveyor::graph_exec fresh = conveyor::instantiate(to_b ? conveyor_b_->graph : conveyor_a_->graph);
    const double elapsed = seconds(t0, clock_type::now());
    *conveyor_exec_ = std::move(fresh);
    return elapsed;
  }
  double reinstantiate_raw(bool to_b) {
    const auto t0 = clock_type::now();
    raw_graph_exec fresh = instantiate_raw((to_b ? raw_b_ : raw_a_).graph.get());
    const double elapsed = seconds(t0, clock_type::now());
    raw_exec_ = std::move(fresh);
    return elapsed;
  }

  bench_context& ctx_;
  const set_rotation& rot_;
  std::size_t n_;
  std::vector<std::size_t> changed_;
  bool conveyor_api_;
  std::string method_;
  std::optional<conveyor_built> conveyor_a_;
  std::optional<conveyor_built> conveyor_b_;
  std::optional<conveyor::graph_exec> conveyor_exec_;
  raw_built raw_a_;
  raw_built raw_b_;
  raw_graph_exec raw_exec_;
  bool at_b_ = false;
};

void update_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t k = c.id.changed;
  std::vector<std::size_t> changed = changed_indices(n, k);
  if (changed.empty()) throw std::invalid_argument("update benchmark without changed nodes");
  update_subject subject(c, ctx, rot, std::move(changed));
  warm_up(c, [&](std::size_t) {
    (void)subject.apply();
    (void)subject.launch_after();
  });
  double update = 0.0;
  double after = 0.0;
  std::size_t done = 0;
  for (auto _ : state) {
    const double u = subject.apply();
    after += subject.launch_after();
    state.SetIterationTime(u);
    update += u;
    ++done;
  }
  const double update_us = update / static_cast<double>(done) * us_per_s;
  state.counters["update_us"] = update_us;
  state.counters["us_per_changed_node"] = update_us / static_cast<double>(k);
  state.counters["us_per_node"] = update_us / static_cast<double>(n);
  state.counters["launch_after_wall_us"] = after / static_cast<double>(done) * us_per_s;
}

// ---- 5: device memory of an instantiated graph -------------------------------------------------------------------

void memory_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot) {
  const std::size_t n = c.id.nodes;
  const std::size_t width = topology_width(c.id.topology, n);
  const std::size_t copies = memory_copies(n);
  const conveyor::stream& main = ctx.main_stream();
  const conveyor_built built = build_conveyor(ctx, width, n, rot.base, b_values(n));
  // Executable graphs measured here are never destroyed before the memory benchmarks end (bench_context::keep):
  // the driver keeps the device memory of destroyed executable graphs for later ones, which would hide them.
  {
    // Warm-up: the first instantiation and upload may set up per-context state that later ones reuse.
    conveyor::graph_exec warm = conveyor::instantiate(built.graph);
    warm.upload(main);
    main.synchronize();
    ctx.keep(std::move(warm));
  }
  // Free device memory now, after everything queued has finished.
  auto free_bytes = [] {
    CONVEYOR_CHECK(cudaDeviceSynchronize());
    std::size_t free = 0;
    std::size_t total = 0;
    CONVEYOR_CHECK(cudaMemGetInfo(&free, &total));
    return static_cast<double>(free);
  };
  double held = 0.0;
  double time = 0.0;
  std::size_t done = 0;
  for (auto _ : state) {
    std::vector<conveyor::graph_exec> execs;
    execs.reserve(copies);
    const double before = free_bytes();
    const auto t0 = clock_type::now();
    for (std::size_t i = 0; i < copies; ++i) {
      execs.push_back(conveyor::instantiate(built.graph));
      execs.back().upload(main);
    }
    main.synchronize();
    const auto t1 = clock_type::now();
    const double uploaded = free_bytes();
    for (auto& e : execs) ctx.keep(std::move(e));
    state.SetIterationTime(seconds(t0, t1));
    held += before - uploaded;
    time += seconds(t0, t1);
    ++done;
  }
  const double graphs = static_cast<double>(done) * static_cast<double>(copies);
  state.counters["bytes_per_graph"] = held / graphs;
  state.counters["bytes_per_node"] = held / graphs / static_cast<double>(n);
  state.counters["copies"] = static_cast<double>(copies);
  state.counters["instantiate_upload_us_per_graph"] =
      time / static_cast<double>(done) / static_cast<double>(copies) * us_per_s;
}

void run_case(benchmark::State& state, const bench_case& c, const context_slot& slot, std::size_t repetition) {
  try {
    if (slot.ctx == nullptr) throw std::logic_error("benchmark body run without a GPU context");
    bench_context& ctx = *slot.ctx;
    ctx.synchronize();
    const set_rotation rot{repetition * ctx.rotation_sets(), ctx.rotation_sets()};
    if (c.id.group == "launch") launch_body(state, c, ctx, rot);
    else if (c.id.group == "build") build_body(state, c, ctx, rot);
    else if (c.id.group == "first_launch") first_launch_body(state, c, ctx, rot);
    else if (c.id.group == "update") update_body(state, c, ctx, rot);
    else if (c.id.group == "memory") memory_body(state, c, ctx, rot);
    else if (c.id.group == "paired") paired_body(state, c, ctx, rot);
    else throw std::logic_error(fmt::format("unknown benchmark group '{}'", c.id.group));
    ctx.synchronize();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  } catch (...) {
    state.SkipWithError("unknown exception");
  }
}

} // namespace

void register_cases(const std::vector<bench_case>& cases, const context_slot& slot) {
  for (const auto& c : cases) {
    // Google Benchmark calls the body once per repetition (iterations are fixed): count them for the buffer sets.
    auto calls = std::make_shared<std::size_t>(0);
    benchmark::RegisterBenchmark(c.name.c_str(),
                                 [c, &slot, calls](benchmark::State& state) { run_case(state, c, slot, (*calls)++); })
        ->Iterations(c.iterations)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", &statistic_min)
        ->ComputeStatistics("max", &statistic_max);
  }
}

} // namespace conveyor::bench
