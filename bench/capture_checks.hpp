#pragma once
//! \file capture_checks.hpp
//! The `capture-checks` study of `conveyor bench`: what each check of a capture costs (capture_options). A capture
//! of N tiny kernels, and one of N host-to-device copies from page-locked memory, on one stream (begin, N calls,
//! end, the graph destroyed) is timed with every check off, with the default checks (the default streams guarded,
//! host memory checked: returned frames and pageable memory), and with the defaults and the stream watch, in
//! alternating repetitions of one run. The first watch of the process (libcupti loaded, CUPTI's callback API
//! subscribed and let go) is timed once, first.

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! One shape and size: the median capture time under each set of checks.
struct capture_checks_row {
  std::string calls;      //!< "kernels" or "copies"
  std::size_t count = 0;  //!< calls captured (N)
  double none_us = 0;     //!< µs per capture with every check off (median over repetitions)
  double defaults_us = 0; //!< µs per capture with the default checks
  double watched_us = 0;  //!< µs per capture with the defaults and the stream watch
  //! What `us` adds to the capture with every check off, per call captured, in ns
  [[nodiscard]] double added_ns(double us) const noexcept {
    return count > 0 ? (us - none_us) * 1000.0 / static_cast<double>(count) : 0;
  }
};

//! The study's result.
struct capture_checks_study {
  std::string watch_unavailable; //!< why the stream watch cannot run here (its column is then left out)
  double first_watch_us = 0;     //!< the process's first watch: libcupti loaded, subscribed, let go (µs)
  std::vector<capture_checks_row> rows;
};

//! Measures each N of `sizes`, kernels and copies, with `reps` repetitions alternating the three sets of checks.
//! \throws conveyor::cuda_error; std::invalid_argument for empty sizes, N 0 or reps below 1.
[[nodiscard]] capture_checks_study measure_capture_checks(const std::vector<std::size_t>& sizes, int reps);

//! `conveyor bench capture-checks`: N = 10, 100, 1000 with 41 repetitions, or with `args.quick` N = 10, 1000 with 11.
[[nodiscard]] capture_checks_study measure_capture_checks_study(const study_args& args);

//! The study's Markdown (host-only, tested without a GPU).
[[nodiscard]] std::string format_capture_checks(const capture_checks_study& study);

} // namespace conveyor::bench
