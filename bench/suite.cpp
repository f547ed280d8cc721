//! \file suite.cpp
//! The Google Benchmark suite: the plan, the filter, the batches, the report's machine and settings.

#include "bench/suite.hpp"

#include "bench/benchmarks.hpp"
#include "bench/collect.hpp"
#include "bench/environment.hpp"
#include "bench/plan.hpp"
#include "bench/workloads.hpp"

#include "common/usage_error.hpp"

#include <conveyor/runtime/device.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor::bench {

namespace {

//! The name Google Benchmark matches --benchmark_filter against.
std::string full_name(const bench_case& c) { return fmt::format("{}/iterations:{}/manual_time", c.name, c.iterations); }

//! Whether `filter` selects `c` as Google Benchmark's filter would (POSIX extended regular expression searched in
//! the full name; a leading '-' negates; empty or "all" selects everything).
bool selected(const std::string& filter, const bench_case& c) {
  if (filter.empty() || filter == "all") return true;
  const bool negative = filter.front() == '-';
  const std::regex re(negative ? filter.substr(1) : filter, std::regex::extended);
  return std::regex_search(full_name(c), re) != negative;
}

std::size_t count_selected(const std::string& filter, const std::vector<bench_case>& cases) {
  return static_cast<std::size_t>(
      std::count_if(cases.begin(), cases.end(), [&](const bench_case& c) { return selected(filter, c); }));
}

//! The full or quick plan with the numbers given in `o`.
plan_options plan_of(const suite_options& o) {
  plan_options plan = o.quick ? quick_plan() : full_plan();
  if (o.repetitions > 0) plan.repetitions = o.repetitions;
  if (o.target_ms > 0.0) plan.target_ms = o.target_ms;
  if (o.rotation_sets > 0) plan.rotation_sets = static_cast<std::size_t>(o.rotation_sets);
  if (o.min_pairs > 0) plan.min_pairs = static_cast<std::size_t>(o.min_pairs);
  return plan;
}

//! The plan's cases, once the filter is known to be a regular expression.
//! \throws conveyor::scenarios::usage_error when it is not one.
std::vector<bench_case> planned_cases(const plan_options& plan, const std::string& filter) {
  std::vector<bench_case> cases = plan_cases(plan);
  try {
    (void)selected(filter, cases.front());
  } catch (const std::regex_error& e) {
    throw conveyor::scenarios::usage_error(
        fmt::format("--filter: '{}' is not a regular expression: {}", filter, e.what()));
  }
  return cases;
}

//! \throws std::runtime_error when `filter` selects none of `cases`.
void check_selects_some(const std::string& filter, const std::vector<bench_case>& cases, std::string_view see) {
  if (count_selected(filter, cases) == 0)
    throw std::runtime_error(fmt::format("--filter '{}' matches no benchmark (see {})", filter, see));
}

//! Passes the arguments (Google Benchmark's command line) to benchmark::Initialize. Google Benchmark keeps argv[0],
//! so the strings live as long as the process.
void initialise_gbench(const std::string& filter, int repetitions, bool list) {
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage = {"conveyor bench", fmt::format("--benchmark_repetitions={}", repetitions),
             "--benchmark_enable_random_interleaving=true"};
  if (!filter.empty()) storage.push_back(fmt::format("--benchmark_filter={}", filter));
  if (list) storage.emplace_back("--benchmark_list_tests=true");
  argv.clear();
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(storage.size());
  benchmark::Initialize(&argc, argv.data());
  if (benchmark::ReportUnrecognizedArguments(argc, argv.data()))
    throw std::logic_error("conveyor bench: Google Benchmark did not recognise an argument");
}

//! Where the benchmark bodies find the GPU context; it outlives the registrations.
context_slot slot;

//! Google Benchmark's registrations while the suite runs: none before, none after (nor a context in the slot).
struct gbench_registrations {
  gbench_registrations() { benchmark::ClearRegisteredBenchmarks(); }
  gbench_registrations(const gbench_registrations&) = delete;
  gbench_registrations& operator=(const gbench_registrations&) = delete;
  ~gbench_registrations() {
    slot.ctx = nullptr;
    benchmark::ClearRegisteredBenchmarks();
  }
};

std::string clock_line(const clock_sample& c) {
  if (!c.available) return "current clocks not available (NVML not found)";
  return fmt::format("current clocks: SM {} MHz (max {}), memory {} MHz (max {}), {} °C", c.sm_mhz, c.sm_max_mhz,
                     c.memory_mhz, c.memory_max_mhz, c.temperature_c);
}

//! The report before the run: the machine (CUDA, NVML) and the settings.
bench_report start_report(const suite_options& o, const plan_options& plan, const nvml_probe& nvml) {
  bench_report report;
  report.env = query_environment(o.device);
  report.env.driver_release = nvml.driver_release();
  report.env.clocks_start = nvml.sample();
  run_settings& s = report.settings;
  s.quick = o.quick;
  s.repetitions = plan.repetitions;
  s.target_ms = plan.target_ms;
  s.sizes = plan.sizes;
  s.rotation_sets = plan.rotation_sets;
  s.min_pairs = plan.min_pairs;
  s.filter = o.filter;
  s.interleaved = true;
  return report;
}

void print_start(const bench_report& report, const std::vector<bench_case>& cases, int repetitions, int device) {
  fmt::print(stderr, "conveyor bench: {}\n", conveyor::describe_device(device));
  fmt::print(stderr, "conveyor bench: driver release {}; {}\n",
             report.env.driver_release.empty() ? "unknown (no NVML)" : report.env.driver_release,
             clock_line(report.env.clocks_start));
  fmt::print(stderr,
             "conveyor bench: {} benchmarks planned, {} repetitions each (interleaved), about {:.0f} s without "
             "--filter (rough estimate)\n",
             cases.size(), repetitions, estimate_run_seconds(cases, repetitions));
}

//! Runs the selected cases: the memory benchmarks first, in a batch of their own, so that no executable graph has
//! been destroyed before they measure (the driver reuses destroyed graphs' memory); the rest in a second batch.
//! Returns the number of benchmarks run.
std::size_t run_batches(const std::vector<bench_case>& cases, const std::string& filter, collecting_reporter& reporter,
                        bench_context& ctx) {
  std::vector<bench_case> memory_cases;
  std::vector<bench_case> other_cases;
  for (const auto& c : cases) (c.id.group == "memory" ? memory_cases : other_cases).push_back(c);
  std::size_t ran = 0;
  for (const auto* batch : {&memory_cases, &other_cases}) {
    if (count_selected(filter, *batch) == 0) continue;
    benchmark::ClearRegisteredBenchmarks();
    register_cases(*batch, slot);
    ran += benchmark::RunSpecifiedBenchmarks(&reporter);
    ctx.release_kept();
  }
  return ran;
}

//! Sorts `results` into the order of `cases` (the memory batch ran first).
void order_as_planned(std::vector<result_record>& results, const std::vector<bench_case>& cases) {
  std::map<std::string, std::size_t> order;
  for (std::size_t i = 0; i < cases.size(); ++i) order.emplace(cases[i].name, i);
  const auto position = [&](const result_record& r) {
    const auto it = order.find(r.name);
    return it == order.end() ? cases.size() : it->second;
  };
  std::stable_sort(results.begin(), results.end(),
                   [&](const result_record& a, const result_record& b) { return position(a) < position(b); });
}

//! Samples the SM clock as each benchmark finishes, into `during`.
void sample_clocks_into(clock_range& during, const nvml_probe& nvml) {
  const clock_sample s = nvml.sample();
  if (!s.available) return;
  during.sm_min_mhz = during.samples == 0 ? s.sm_mhz : std::min(during.sm_min_mhz, s.sm_mhz);
  during.sm_max_mhz = during.samples == 0 ? s.sm_mhz : std::max(during.sm_max_mhz, s.sm_mhz);
  ++during.samples;
}

} // namespace

void list_suite(const suite_options& o) {
  const plan_options plan = plan_of(o);
  const std::vector<bench_case> cases = planned_cases(plan, o.filter);
  const gbench_registrations registered;
  initialise_gbench(o.filter, plan.repetitions, true);
  check_selects_some(o.filter, cases, "`conveyor bench list` without --filter");
  // The names as --filter matches them (group/topology/variant/api/N[/changed]), without Google Benchmark's own
  // suffixes (iterations, manual_time).
  const std::regex selected(o.filter.empty() ? std::string(".") : o.filter);
  for (const bench_case& c : cases)
    if (std::regex_search(c.name, selected)) std::cout << c.name << '\n';
}

suite_run run_suite(const suite_options& o, bool gbench_json) {
  const plan_options plan = plan_of(o);
  const std::vector<bench_case> cases = planned_cases(plan, o.filter);
  const gbench_registrations registered;
  initialise_gbench(o.filter, plan.repetitions, false);
  // Every input check before the GPU is needed.
  check_selects_some(o.filter, cases, "`conveyor bench list`");
  use_device(o.device, "conveyor bench suite", " (`conveyor bench list` shows what it would run)");

  const nvml_probe nvml(o.device);
  suite_run run;
  bench_report& report = run.report;
  report = start_report(o, plan, nvml);
  print_start(report, cases, plan.repetitions, o.device);
  bench_context ctx(plan.rotation_sets, *std::max_element(plan.sizes.begin(), plan.sizes.end()), report.env.l2_bytes);
  slot.ctx = &ctx;

  collecting_reporter reporter(isatty(fileno(stderr)) != 0 ? benchmark::ConsoleReporter::OO_ColorTabular
                                                           : benchmark::ConsoleReporter::OO_Tabular);
  reporter.SetOutputStream(&std::cerr);
  reporter.SetErrorStream(&std::cerr);
  std::ostringstream gbench_text;
  benchmark::JSONReporter gbench_reporter;
  if (gbench_json) {
    gbench_reporter.SetOutputStream(&gbench_text);
    gbench_reporter.SetErrorStream(&std::cerr);
    reporter.tee = &gbench_reporter;
  }
  reporter.on_report = [&] { sample_clocks_into(report.env.clocks_during, nvml); };

  const auto start = std::chrono::steady_clock::now();
  const std::size_t ran = run_batches(cases, o.filter, reporter, ctx);
  if (reporter.tee != nullptr) gbench_reporter.Finalize();
  report.settings.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  slot.ctx = nullptr;
  report.env.clocks_end = nvml.sample();
  report.env.host_name = reporter.host_name();
  report.env.host_cpus = reporter.host_cpus();
  report.env.cpu_scaling = reporter.cpu_scaling();
  if (ran == 0)
    throw std::runtime_error(fmt::format("--filter '{}' matches no benchmark (see `conveyor bench list`)", o.filter));
  std::map<std::string, bench_id> ids;
  for (const auto& c : cases) ids.emplace(c.name, c.id);
  report.results = summarise_runs(reporter.runs(), ids);
  order_as_planned(report.results, cases);
  run.gbench_json = gbench_text.str();
  return run;
}

} // namespace conveyor::bench
