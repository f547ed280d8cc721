#pragma once
//! \file profile_overhead.hpp
//! The `profile` study of `conveyor bench` (the `profile/` group): what the profiler (conveyor/profile/profiler.hpp)
//! costs. The same executable graph (a chain, or four parallel chains, of N tiny kernels) and the same eager stream of
//! N kernels are timed with no profiler and with one recording, in alternating blocks of one run: wall µs per step
//! (launches and the stream synchronisation), the ratio on/off, the same with one step in 10 recorded
//! (profiler::pause/resume), and what the profile found (records per step, utilisation).

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One measured case.
struct profile_overhead_row {
  std::string shape;           //!< "graph chain", "graph 4 branches" or "eager stream"
  std::size_t nodes = 0;       //!< kernels per step (N)
  double off_us = 0;           //!< wall µs per step without a profiler (median over blocks)
  double on_us = 0;            //!< wall µs per step while a profiler records (median over blocks)
  double sampled_us = 0;       //!< wall µs per step while a profiler records one step in 10 (pause/resume around it)
  double records_per_step = 0; //!< activity records collected per step
  double sampled_records_per_step = 0; //!< records per recorded step when sampling (N when pause() keeps the other
                                       //!< steps out and loses nothing of the recorded one)
  double attributed = 0;               //!< share of records attributed to a node (0..1)
  double utilisation = 0;              //!< the profile's median busy / wall of the steps (0..1)
  [[nodiscard]] double ratio() const noexcept { return off_us > 0 ? on_us / off_us : 0; } //!< on / off
  //! sampled / off
  [[nodiscard]] double sampled_ratio() const noexcept { return off_us > 0 ? sampled_us / off_us : 0; }
};

//! Measures every shape at each N of `sizes`: `blocks` alternating off/on blocks of `steps` steps each (median per
//! step over the blocks). Checks that every record of the profiled graph steps was attributed.
//! \throws conveyor::cuda_error; conveyor::profile::profiler_error when CUPTI is unavailable;
//!         std::invalid_argument for empty sizes, N 0, blocks or steps below 1; std::runtime_error when attribution
//!         is incomplete.
[[nodiscard]] std::vector<profile_overhead_row> measure_profile_overhead(const std::vector<std::size_t>& sizes,
                                                                         int blocks = 6, int steps = 50);

//! `conveyor bench profile`: measure_profile_overhead at N = 10, 100, 1000, 10000 with 8 blocks of 50 steps, or
//! with `args.quick` at N = 100, 10000 with 4.
[[nodiscard]] std::vector<profile_overhead_row> measure_profile_overhead_study(const study_args& args);

//! A Markdown table of the rows (host-only, tested without a GPU).
[[nodiscard]] std::string format_profile_overhead(const std::vector<profile_overhead_row>& rows);

} // namespace conveyor::bench
