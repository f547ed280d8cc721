#pragma once
//! \file suite.hpp
//! The Google Benchmark suite of `conveyor bench` (`conveyor bench suite`, `conveyor bench list`): launch, build,
//! update and memory costs of the three execution modes, Conveyor against the raw CUDA Runtime API, for the cases of
//! the plan (plan.hpp), run by Google Benchmark with manual timing into one report (report.hpp).

#include "bench/report.hpp"

#include <string>

namespace conveyor::bench {

//! How to run the suite: the plan's numbers (0: the full or quick plan's own) and what to run.
struct suite_options {
  bool quick = false;     //!< the quick plan (plan.hpp) instead of the full one
  std::string filter;     //!< a POSIX extended regular expression over the benchmarks' full names; empty: all
  int repetitions = 0;    //!< repetitions of every benchmark; 0: the plan's
  double target_ms = 0.0; //!< timed work per repetition, ms; 0: the plan's
  int rotation_sets = 0;  //!< buffer sets the iterations rotate through; 0: the plan's
  int min_pairs = 0;      //!< least pairs per repetition of a paired benchmark; 0: the plan's
  int device = 0;         //!< the CUDA device to measure on
};

//! What a run of the suite produced.
struct suite_run {
  bench_report report;     //!< machine, settings and one record per benchmark, in plan order
  std::string gbench_json; //!< Google Benchmark's own JSON report, when asked for; else empty
};

//! Prints the full names of the benchmarks `o` selects (Google Benchmark's list: "name/iterations:N/manual_time"),
//! one per line on stdout. Needs no GPU.
//! \throws conveyor::scenarios::usage_error when `o.filter` is not a regular expression; std::runtime_error when it
//!         matches no benchmark.
void list_suite(const suite_options& o);

//! Runs the benchmarks `o` selects on `o.device`: the memory benchmarks first, in a batch of their own, then the
//! rest, each benchmark's repetitions interleaved with the others'. Progress (Google Benchmark's console table of
//! medians, min and max) goes to stderr. Every input check comes before the GPU is needed.
//! \param gbench_json also keep Google Benchmark's own JSON report (suite_run::gbench_json)
//! \throws conveyor::scenarios::usage_error when `o.filter` is not a regular expression; std::runtime_error when it
//!         matches no benchmark, when no CUDA device is present or `o.device` is not one;
//!         conveyor::cuda_error when setting up the GPU context fails. A benchmark that fails is reported as failed
//!         in its record (result_record::error), not thrown.
[[nodiscard]] suite_run run_suite(const suite_options& o, bool gbench_json);

} // namespace conveyor::bench
