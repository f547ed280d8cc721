#pragma once
//! \file graphed_overhead.hpp
//! The `graphed-overhead` study of `conveyor bench`: the per-call host cost of conveyor::graphed on its replay path,
//! against a bare graph_exec::launch of the same executable graph (the aim: under 1 µs of host time per call).

#include "bench/study.hpp"

#include <string>

namespace conveyor::bench {

//! Host microseconds per call, median and range over the repetitions, for both ways of replaying.
struct graphed_overhead_result {
  int calls = 0;          //!< calls timed per repetition
  int repetitions = 0;    //!< repetitions (interleaved: bare, graphed, bare, graphed, ...)
  double bare_us = 0;     //!< graph_exec::launch, median µs per call
  double bare_min_us = 0; //!< ... minimum over repetitions
  double bare_max_us = 0; //!< ... maximum over repetitions
  double graphed_us = 0;  //!< graphed::operator() (key, lookup, launch), median µs per call
  double graphed_min_us = 0;
  double graphed_max_us = 0;
  //! graphed_us - bare_us: what graphed adds per call, µs.
  [[nodiscard]] double overhead_us() const noexcept { return graphed_us - bare_us; }
};

//! Measures on the current device: a one-kernel graph (1 block of 256 threads) launched `calls` times per
//! repetition through each API, the host clock read around the calls only (the stream is synchronised outside the
//! timing), after warm-up.
//! \throws conveyor::cuda_error when a CUDA call fails; std::invalid_argument for calls or repetitions below 1.
[[nodiscard]] graphed_overhead_result measure_graphed_overhead(int calls = 1000, int repetitions = 21);

//! `conveyor bench graphed-overhead`: measure_graphed_overhead with its defaults (1000 calls, 21 repetitions).
[[nodiscard]] graphed_overhead_result measure_graphed_overhead_study(const study_args& args);

//! A Markdown table of the result (host-only, tested without a GPU).
[[nodiscard]] std::string format_graphed_overhead(const graphed_overhead_result& r);

} // namespace conveyor::bench
