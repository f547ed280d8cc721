#pragma once
//! \file body_support.hpp
//! What the benchmark bodies share: the clock, buffer-set rotation, warm-up, node-count checks and one build +
//! instantiate of the step (through Conveyor or the raw API). Internal to `conveyor bench`; needs a GPU at run time.

#include "bench/plan.hpp"
#include "bench/workloads.hpp"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

namespace conveyor::bench {

//! The clock of every manual timing.
using clock_type = std::chrono::steady_clock;
//! Microseconds per second.
inline constexpr double us_per_s = 1e6;

//! Seconds from `from` to `to`.
[[nodiscard]] inline double seconds(clock_type::time_point from, clock_type::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

//! The buffer sets of one repetition: iteration i uses set base + i % count. `base` advances with every repetition,
//! so that repetitions run on different memory; `count` is the rotation within a repetition (graph modes: one
//! executable graph per set).
struct set_rotation {
  std::size_t base = 0;  //!< first set of this repetition
  std::size_t count = 1; //!< sets the iterations rotate through
  //! The set of iteration `iteration`.
  [[nodiscard]] std::size_t set(std::size_t iteration) const noexcept { return base + iteration % count; }
};

//! Runs `iteration(i)` untimed for i = 0, 1, ...: at least c.warmup times and for at least c.warmup_ms, so that
//! the GPU is busy (clocks and power state up) when the timed iterations start, whatever ran before.
template <class Iteration>
void warm_up(const bench_case& c, Iteration&& iteration) {
  const auto until = clock_type::now() + std::chrono::duration<double, std::milli>(c.warmup_ms);
  for (std::size_t i = 0; static_cast<std::int64_t>(i) < c.warmup || clock_type::now() < until; ++i) iteration(i);
}

//! Throws std::runtime_error unless a graph built for an n-kernel step holds exactly n nodes.
void expect_nodes(std::size_t actual, std::size_t n, const char* what);

//! Number of nodes of a raw graph (`cudaGraphGetNodes`).
//! \throws cuda_error when CUDA refuses the handle.
[[nodiscard]] std::size_t raw_node_count(cudaGraph_t g);

//! Seconds one build took, split into its two parts.
struct build_times {
  double build_s = 0.0;       //!< capture or explicit construction
  double instantiate_s = 0.0; //!< instantiate
};

//! Builds the n-kernel step of `width` parallel chains on buffer set `set` — by stream capture (`capture`) or
//! explicitly, through Conveyor (`conveyor_api`) or the raw CUDA Runtime — and instantiates it; times both parts.
//! Graph and executable graph are destroyed, untimed, before returning. With `verify`, checks the node count.
//! \throws cuda_error when CUDA refuses a call; std::runtime_error when `verify` finds a wrong node count.
[[nodiscard]] build_times build_once(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                                     std::span<const float> b, bool capture, bool conveyor_api, bool verify);

//! The body of the paired benchmarks (group "paired"): variant "replay" launches a Conveyor-built and a raw-built
//! executable graph of the same step, "capture" and "explicit" build and instantiate the step both ways — one of
//! each per iteration, and "setters" changes `changed` nodes' kernel argument through graph_exec::set_kernel_args
//! and cudaGraphExecKernelNodeSetParams — in alternating order, so that both halves of a pair see the same machine
//! state. Counters: each side's time (µs per kernel, node or update) and the median over the repetition's pairs of
//! Conveyor ÷ raw.
//! \throws cuda_error when CUDA refuses a call.
void paired_body(benchmark::State& state, const bench_case& c, bench_context& ctx, const set_rotation& rot);

} // namespace conveyor::bench
