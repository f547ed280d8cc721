#pragma once
//! \file collect.hpp
//! From Google Benchmark's runs to result records: a reporter that keeps every run, and the summary of the runs
//! of each benchmark (median, min, max over the repetitions). Host-only.

#include "bench/report.hpp"

#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace conveyor::bench {

//! Google Benchmark's run record.
using gbench_run = benchmark::BenchmarkReporter::Run;

//! Extra statistics registered on every benchmark (`ComputeStatistics`): the smallest and largest repetition.
[[nodiscard]] double statistic_min(const std::vector<double>& values);
[[nodiscard]] double statistic_max(const std::vector<double>& values);

//! The metrics of one run: "iteration_us" (the run's time per iteration, converted to microseconds) and every user
//! counter under its own name. Values that are not finite are left out.
[[nodiscard]] std::map<std::string, double> run_metrics(const gbench_run& run);

//! Summarises the runs of each benchmark, in the order benchmarks first appear in `runs`. Benchmarks are told
//! apart by `run_name.function_name` (the registered name); `ids` gives what each measured (a name missing from
//! it gets an id holding only the name's first segment as group). Metrics come from the "median", "min" and "max"
//! aggregates when Google Benchmark produced them (2 or more successful repetitions), else from the successful
//! repetitions themselves. The first error message of a failed repetition becomes the record's error.
[[nodiscard]] std::vector<result_record> summarise_runs(const std::vector<gbench_run>& runs,
                                                        const std::map<std::string, bench_id>& ids);

//! A console reporter (to the stream given with SetOutputStream) that also keeps every run it is given. It
//! shows only what a reader needs: the median, min and max aggregates, runs of benchmarks without repetitions, and
//! failed runs, and the context only once when benchmarks run in several batches. `on_report`, when set, is called
//! after each group of runs (to sample the GPU's clocks); `tee`, when set, receives the first context and every run
//! (a benchmark::JSONReporter writes Google Benchmark's own JSON; call its Finalize after the last batch).
class collecting_reporter : public benchmark::ConsoleReporter {
public:
  //! \param options console output options (colour, tabular counters)
  explicit collecting_reporter(OutputOptions options = OO_Tabular) : benchmark::ConsoleReporter(options) {}

  //! Keeps the host description, then prints the context as the console reporter does.
  bool ReportContext(const Context& context) override;
  //! Keeps `runs` and prints the selected ones.
  void ReportRuns(const std::vector<Run>& runs) override;

  //! Every run received so far.
  [[nodiscard]] const std::vector<Run>& runs() const noexcept { return runs_; }
  //! Host name, CPU count and CPU frequency scaling ("enabled", "disabled", "unknown") from the context.
  [[nodiscard]] const std::string& host_name() const noexcept { return host_name_; }
  [[nodiscard]] int host_cpus() const noexcept { return host_cpus_; }
  [[nodiscard]] const std::string& cpu_scaling() const noexcept { return cpu_scaling_; }

  //! Called after each ReportRuns.
  std::function<void()> on_report;
  //! Another reporter given the first context and every run, or null.
  benchmark::BenchmarkReporter* tee = nullptr;

private:
  std::vector<Run> runs_;
  bool context_reported_ = false;
  std::string host_name_;
  int host_cpus_ = 0;
  std::string cpu_scaling_ = "unknown";
};

} // namespace conveyor::bench
