#pragma once
//! \file benchmarks.hpp
//! Registration of the planned benchmarks with Google Benchmark, and their bodies.

#include "bench/plan.hpp"

#include <vector>

namespace conveyor::bench {

class bench_context;

//! Where the benchmark bodies find the GPU context: set while benchmarks run, null otherwise (registering and
//! listing benchmarks need no GPU). A body that runs while it is null fails with an error.
struct context_slot {
  bench_context* ctx = nullptr; //!< the context, or null
};

//! Registers every case with Google Benchmark (`RegisterBenchmark`) with its fixed iteration count, manual timing
//! (`UseManualTime`: wall or host time measured by the body, never Google Benchmark's own clock), microseconds,
//! and the extra statistics "min" and "max". `slot` must outlive the registrations.
//!
//! Every body synchronises the lanes, builds what it needs (untimed), runs `warmup` untimed iterations, then the
//! timed ones, and sets counters (µs or bytes, per kernel, node, call or graph as named). A CUDA error or any other
//! exception ends the benchmark with SkipWithError(message): it is reported as failed, never as a time.
void register_cases(const std::vector<bench_case>& cases, const context_slot& slot);

} // namespace conveyor::bench
