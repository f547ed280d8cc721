//! \file collect.cpp
//! Google Benchmark runs to result records.

#include "bench/collect.hpp"
#include "bench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace conveyor::bench {

namespace {

double to_microseconds(double value, benchmark::TimeUnit unit) {
  switch (unit) {
  case benchmark::kNanosecond: return value * 1e-3;
  case benchmark::kMicrosecond: return value;
  case benchmark::kMillisecond: return value * 1e3;
  case benchmark::kSecond: return value * 1e6;
  }
  return value;
}

bool shown(const gbench_run& run) {
  if (run.run_type == gbench_run::RT_Aggregate)
    return run.aggregate_name == "median" || run.aggregate_name == "min" || run.aggregate_name == "max";
  return run.error_occurred || run.repetitions <= 1;
}

} // namespace

double statistic_min(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

double statistic_max(const std::vector<double>& values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

std::map<std::string, double> run_metrics(const gbench_run& run) {
  std::map<std::string, double> metrics;
  const double time = to_microseconds(run.GetAdjustedRealTime(), run.time_unit);
  if (std::isfinite(time)) metrics["iteration_us"] = time;
  for (const auto& [name, counter] : run.counters)
    if (std::isfinite(counter.value)) metrics[name] = counter.value;
  return metrics;
}

namespace {

//! The runs of each benchmark, by registered name, and the names in the order they first appear.
struct runs_by_name {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const gbench_run*>> runs;
};

//! Groups `runs` by benchmark.
runs_by_name group_runs(const std::vector<gbench_run>& runs) {
  runs_by_name out;
  for (const auto& run : runs) {
    const std::string& name = run.run_name.function_name;
    auto [it, inserted] = out.runs.try_emplace(name);
    if (inserted) out.order.push_back(name);
    it->second.push_back(&run);
  }
  return out;
}

//! What `ids` says benchmark `name` measured, else an id holding only the name's first segment as group.
bench_id id_of(const std::string& name, const std::map<std::string, bench_id>& ids) {
  if (auto it = ids.find(name); it != ids.end()) return it->second;
  bench_id id;
  id.group = name.substr(0, name.find('/'));
  return id;
}

//! One benchmark's runs sorted: its time aggregates by name, its successful repetitions, and the first error message
//! of a failed repetition.
struct sorted_runs {
  std::map<std::string, const gbench_run*> aggregates;
  std::vector<const gbench_run*> good;
  std::string error;
};

//! Sorts one benchmark's runs.
sorted_runs sort_runs(const std::vector<const gbench_run*>& runs) {
  sorted_runs out;
  for (const gbench_run* run : runs) {
    if (run->run_type == gbench_run::RT_Aggregate) {
      if (run->aggregate_unit == benchmark::kTime) out.aggregates[run->aggregate_name] = run;
      continue;
    }
    if (run->error_occurred) {
      if (out.error.empty()) out.error = run->error_message.empty() ? "failed" : run->error_message;
      continue;
    }
    out.good.push_back(run);
  }
  return out;
}

//! Metrics from the "median", "min" and "max" aggregates into `metrics`; false (nothing added) when one is missing.
bool metrics_from_aggregates(const std::map<std::string, const gbench_run*>& aggregates,
                             std::map<std::string, summary>& metrics) {
  const auto median = aggregates.find("median");
  const auto lo = aggregates.find("min");
  const auto hi = aggregates.find("max");
  if (median == aggregates.end() || lo == aggregates.end() || hi == aggregates.end()) return false;
  const auto mid_values = run_metrics(*median->second);
  const auto lo_values = run_metrics(*lo->second);
  const auto hi_values = run_metrics(*hi->second);
  for (const auto& [metric, value] : mid_values) {
    auto l = lo_values.find(metric);
    auto h = hi_values.find(metric);
    if (l == lo_values.end() || h == hi_values.end()) continue;
    // The time aggregates are rescaled by Google Benchmark; guard the order against rounding.
    metrics[metric] = {value, std::min(l->second, value), std::max(h->second, value)};
  }
  return true;
}

//! Metrics summarised over the successful repetitions into `metrics`, leaving out those some repetitions lack.
void metrics_from_repetitions(const std::vector<const gbench_run*>& good, std::map<std::string, summary>& metrics) {
  std::map<std::string, std::vector<double>> samples;
  for (const gbench_run* run : good)
    for (const auto& [metric, value] : run_metrics(*run)) samples[metric].push_back(value);
  for (const auto& [metric, values] : samples) {
    if (values.size() != good.size()) continue; // a metric some repetitions lack
    metrics[metric] = summarise(values);
  }
}

//! The record of benchmark `name` from its runs.
result_record summarise_benchmark(const std::string& name, const std::vector<const gbench_run*>& runs,
                                  const std::map<std::string, bench_id>& ids) {
  result_record rec;
  rec.name = name;
  rec.id = id_of(name, ids);
  sorted_runs sorted = sort_runs(runs);
  rec.error = std::move(sorted.error);
  rec.repetitions = static_cast<std::int64_t>(sorted.good.size());
  if (!sorted.good.empty()) rec.iterations = sorted.good.front()->iterations;
  if (!metrics_from_aggregates(sorted.aggregates, rec.metrics) && !sorted.good.empty())
    metrics_from_repetitions(sorted.good, rec.metrics);
  if (rec.metrics.empty() && rec.error.empty()) rec.error = "no measurement was reported";
  return rec;
}

} // namespace

std::vector<result_record> summarise_runs(const std::vector<gbench_run>& runs,
                                          const std::map<std::string, bench_id>& ids) {
  const runs_by_name grouped = group_runs(runs);
  std::vector<result_record> records;
  records.reserve(grouped.order.size());
  for (const auto& name : grouped.order) records.push_back(summarise_benchmark(name, grouped.runs.at(name), ids));
  return records;
}

bool collecting_reporter::ReportContext(const Context& context) {
  if (context_reported_) return true;
  context_reported_ = true;
  if (tee != nullptr && !tee->ReportContext(context)) return false;
  host_name_ = context.sys_info.name;
  host_cpus_ = context.cpu_info.num_cpus;
  switch (context.cpu_info.scaling) {
  case benchmark::CPUInfo::ENABLED: cpu_scaling_ = "enabled"; break;
  case benchmark::CPUInfo::DISABLED: cpu_scaling_ = "disabled"; break;
  default: cpu_scaling_ = "unknown"; break;
  }
  return benchmark::ConsoleReporter::ReportContext(context);
}

void collecting_reporter::ReportRuns(const std::vector<Run>& runs) {
  runs_.insert(runs_.end(), runs.begin(), runs.end());
  if (tee != nullptr) tee->ReportRuns(runs);
  std::vector<Run> selected;
  std::copy_if(runs.begin(), runs.end(), std::back_inserter(selected), shown);
  if (!selected.empty()) benchmark::ConsoleReporter::ReportRuns(selected);
  if (on_report) on_report();
}

} // namespace conveyor::bench
