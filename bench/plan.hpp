#pragma once
//! \file plan.hpp
//! Which benchmarks `conveyor bench` runs, with how many iterations: a pure function of the options, host-only.

#include "bench/report.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::bench {

//! Width of the fork/join topology: the kernels form this many parallel chains.
inline constexpr std::size_t fork_join_width = 4;

//! What to plan.
struct plan_options {
  std::vector<std::size_t> sizes; //!< the values of N
  double target_ms = 50.0;        //!< timed work aimed at per repetition, milliseconds
  std::size_t rotation_sets = 1;  //!< buffer sets the iterations of one repetition rotate through (graph modes:
                                  //!< one executable graph per set); every repetition starts at new sets
  int repetitions = 10;           //!< Google Benchmark repetitions of every benchmark
  double warmup_ms = 20.0;        //!< least untimed warm-up per repetition of launch and update benchmarks, ms
  std::size_t min_pairs = 8;      //!< least Conveyor/raw pairs per repetition of a paired benchmark
};

//! The full run: N = 1, 10, 100, 1000, 10000; 10 repetitions of about 50 ms timed work after 20 ms warm-up; at
//! least 8 pairs per repetition of a paired benchmark.
[[nodiscard]] plan_options full_plan();
//! `--quick`: N = 1, 100, 10000; 3 repetitions of about 10 ms after 10 ms warm-up; at least 4 pairs.
[[nodiscard]] plan_options quick_plan();

//! One benchmark to register.
struct bench_case {
  bench_id id;                       //!< what it measures
  std::string name;                  //!< bench_name(id)
  std::int64_t iterations = 1;       //!< timed iterations per repetition (fixed, so repetitions are comparable)
  std::int64_t warmup = 1;           //!< untimed iterations before them, in every repetition (at least)
  double warmup_ms = 0.0;            //!< ... and for at least this long, milliseconds (launch and update groups:
                                     //!< the GPU may have idled through host-only benchmarks before)
  double estimated_iteration_us = 0; //!< rough cost of one iteration including its untimed work, microseconds
  double estimated_setup_us = 0;     //!< rough cost of the per-repetition set-up (building graphs), microseconds
};

//! Number of kernels whose parallel chain the fork/join topology spreads them over: 1 for a chain, else
//! min(fork_join_width, n).
[[nodiscard]] std::size_t topology_width(const std::string& topology, std::size_t n) noexcept;

//! The numbers of changed nodes measured for an update of an N-node graph: 1, 10% (at least 1) and N, without
//! duplicates, ascending.
[[nodiscard]] std::vector<std::size_t> changed_counts(std::size_t n);

//! The `changed` nodes (of `n`) whose argument an update changes: spread evenly, i * n / changed.
[[nodiscard]] std::vector<std::size_t> changed_indices(std::size_t n, std::size_t changed);

//! Executable graphs instantiated together by the memory benchmark for an N-node graph, so that about 20000 nodes
//! are measured at once (between 2 and 500): cudaMemGetInfo moves in steps of about 2 MiB.
[[nodiscard]] std::size_t memory_copies(std::size_t n) noexcept;

//! A rough cost of one iteration of `id` including its untimed work, microseconds: about 1.3 times what an H200
//! measured.
[[nodiscard]] double estimate_iteration_us(const bench_id& id);

//! Every benchmark of the plan in registration order: launch (sync, stream, graph through Conveyor and raw; chain
//! and fork/join), build (capture and explicit, Conveyor and raw; both topologies), paired (replay, capture and
//! explicit, Conveyor and raw alternating in one benchmark; both topologies; and per-node setters on the chain for
//! changed_counts), first_launch (no upload,
//! upload; both topologies), update (setters, whole, reinstantiate, Conveyor and raw; chain; changed_counts) and
//! memory (both topologies). Iterations aim at options.target_ms of timed work per repetition.
//! Paired benchmarks run an even number of pairs, at least options.min_pairs.
//! \throws std::invalid_argument when sizes is empty or holds 0, or target_ms, rotation_sets, repetitions or
//!         min_pairs is not positive.
[[nodiscard]] std::vector<bench_case> plan_cases(const plan_options& options);

//! A rough estimate of the wall time of running `cases` with `repetitions` repetitions each, seconds.
[[nodiscard]] double estimate_run_seconds(const std::vector<bench_case>& cases, int repetitions);

} // namespace conveyor::bench
