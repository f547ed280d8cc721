#pragma once
//! \file report.hpp
//! The result records of `conveyor bench`: what each benchmark measured, on which machine, with which settings.
//! Their written forms: JSON (report_json.hpp) and the Markdown report (report_markdown.hpp). Host-only (no CUDA).

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::bench {

//! One metric over the repetitions of a benchmark: median and range, in the metric's unit (see metric_unit).
struct summary {
  double median = 0.0; //!< median over the repetitions
  double min = 0.0;    //!< smallest repetition
  double max = 0.0;    //!< largest repetition

  friend bool operator==(const summary&, const summary&) = default;
};

//! What one benchmark measures. Every field is part of the benchmark's name (see bench_name).
struct bench_id {
  std::string group;       //!< "launch", "build", "paired", "first_launch", "update" or "memory"
  std::string topology;    //!< "chain" (each kernel after the previous) or "fork_join" (4 parallel chains)
  std::string variant;     //!< launch: "sync", "stream", "graph"; build: "capture", "explicit"; first_launch:
                           //!< "no_upload", "upload"; update: "setters", "whole", "reinstantiate"; memory:
                           //!< "instantiate_upload"; paired: "replay", "capture", "explicit", "setters"
  std::string api;         //!< "conveyor" (Conveyor's API), "raw" (CUDA Runtime graph API), "cuda" (eager
                           //!< launches, no graph API involved) or "conveyor_vs_raw" (paired: both, alternating)
  std::size_t nodes = 0;   //!< N: kernels per step, nodes per graph
  std::size_t changed = 0; //!< update and paired setters: nodes whose kernel argument changes per update; else 0

  friend bool operator==(const bench_id&, const bench_id&) = default;
};

//! The benchmark's name as registered with Google Benchmark: "group/topology/variant/api/N", plus "/changed" in
//! the update group and wherever `changed` is not 0, e.g. "launch/chain/graph/conveyor/1000",
//! "update/chain/setters/raw/1000/100" or "paired/chain/setters/conveyor_vs_raw/1000/1".
[[nodiscard]] std::string bench_name(const bench_id& id);

//! The result of one benchmark.
struct result_record {
  std::string name;             //!< bench_name(id)
  bench_id id;                  //!< what was measured
  std::int64_t iterations = 0;  //!< timed iterations per repetition
  std::int64_t repetitions = 0; //!< repetitions that completed without error
  //! Metrics by name. A word of the name (words are separated by '_') gives the unit: "us" microseconds (e.g.
  //! "wall_us_per_kernel"), "bytes" bytes ("bytes_per_graph"), "ratio" a ratio; otherwise a count ("copies").
  //! "iteration_us" is Google Benchmark's (manual) time per iteration. Paired benchmarks hold both sides
  //! ("conveyor_us_per_node", "raw_us_per_node", ...) and ratios ("ratio", "wall_ratio", ...): per repetition, the
  //! median over its pairs of Conveyor ÷ raw.
  std::map<std::string, summary> metrics;
  std::string error; //!< empty when the benchmark ran; otherwise why it failed

  friend bool operator==(const result_record&, const result_record&) = default;
};

//! Unit of a metric, from the words of its name (separated by '_'): "us" when one word is "us", else "bytes" when
//! one is "bytes", else "ratio" when one is "ratio", else "count".
[[nodiscard]] std::string_view metric_unit(std::string_view metric) noexcept;

//! Clocks and state of the GPU at one moment, read through NVML (optional: `available` is false without it).
struct clock_sample {
  bool available = false;                //!< false when NVML could not be loaded or queried
  unsigned sm_mhz = 0;                   //!< current SM clock, MHz
  unsigned memory_mhz = 0;               //!< current memory clock, MHz
  unsigned sm_max_mhz = 0;               //!< highest SM clock the GPU may run at, MHz
  unsigned memory_max_mhz = 0;           //!< highest memory clock, MHz
  int temperature_c = -1;                //!< GPU temperature, degrees Celsius; -1 when unknown
  std::uint64_t clock_event_reasons = 0; //!< NVML's bit set of reasons the clocks are held down (0: none)

  friend bool operator==(const clock_sample&, const clock_sample&) = default;
};

//! Range of the SM clock over the samples taken as each benchmark finished (NVML; samples == 0 without it).
struct clock_range {
  std::size_t samples = 0; //!< number of samples taken
  unsigned sm_min_mhz = 0; //!< lowest SM clock seen, MHz
  unsigned sm_max_mhz = 0; //!< highest SM clock seen, MHz

  friend bool operator==(const clock_range&, const clock_range&) = default;
};

//! The machine a report was measured on.
struct environment {
  std::string gpu_name;           //!< cudaDeviceProp::name
  int compute_major = 0;          //!< compute capability, major
  int compute_minor = 0;          //!< compute capability, minor
  int sm_count = 0;               //!< streaming multiprocessors
  std::uint64_t memory_bytes = 0; //!< global memory, bytes
  std::uint64_t l2_bytes = 0;     //!< L2 cache, bytes
  std::string pci_bus_id;         //!< e.g. "0000:19:00.0"
  int driver_version = 0;         //!< cudaDriverGetVersion, e.g. 13000 for CUDA 13.0
  int runtime_version = 0;        //!< cudaRuntimeGetVersion
  std::string driver_release;     //!< NVML's driver version, e.g. "580.159.04"; empty without NVML
  unsigned peak_sm_mhz = 0;       //!< cudaDevAttrClockRate, MHz
  unsigned peak_memory_mhz = 0;   //!< cudaDevAttrMemoryClockRate, MHz
  clock_sample clocks_start;      //!< before the first benchmark
  clock_sample clocks_end;        //!< after the last benchmark
  clock_range clocks_during;      //!< SM clock range while the benchmarks ran
  std::string host_name;          //!< host name (Google Benchmark's system information)
  int host_cpus = 0;              //!< CPUs of the host
  std::string cpu_scaling;        //!< "enabled", "disabled" or "unknown" (CPU frequency scaling)
  std::string conveyor_version;   //!< Conveyor's version
  std::string started_utc;        //!< when the run started, ISO 8601 UTC

  friend bool operator==(const environment&, const environment&) = default;
};

//! How a report was produced.
struct run_settings {
  bool quick = false;             //!< `--quick`: fewer sizes, repetitions and shorter repetitions
  int repetitions = 0;            //!< Google Benchmark repetitions of every benchmark
  double target_ms = 0.0;         //!< timed work aimed at per repetition, milliseconds
  std::vector<std::size_t> sizes; //!< the values of N
  std::size_t rotation_sets = 0;  //!< disjoint buffer sets the iterations rotate through
  std::size_t min_pairs = 0;      //!< least pairs per repetition of a paired benchmark (0: not recorded)
  std::string filter;             //!< `--filter` regular expression, empty for all
  bool interleaved = true;        //!< repetitions of all benchmarks run in random interleaved order
  double elapsed_s = 0.0;         //!< wall time of the whole run, seconds

  friend bool operator==(const run_settings&, const run_settings&) = default;
};

//! A whole report: machine, settings and one record per benchmark.
struct bench_report {
  environment env;                    //!< the machine
  run_settings settings;              //!< how it was run
  std::vector<result_record> results; //!< one per benchmark, in registration order

  friend bool operator==(const bench_report&, const bench_report&) = default;
};

//! "13.0" for 13000: a CUDA version number (1000 * major + 10 * minor) as text.
[[nodiscard]] std::string cuda_version_string(int version);

//! Reads a compute capability written "major.minor", each 1 or 2 decimal digits (e.g. "9.0", "12.1"), into `major`
//! and `minor`; false (the outputs unspecified) for anything else.
[[nodiscard]] bool parse_compute_capability(std::string_view text, int& major, int& minor);

} // namespace conveyor::bench
