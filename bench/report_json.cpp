//! \file report_json.cpp
//! The JSON form of a report: written by to_json, read back by report_from_json (after schema_problems).

#include "bench/report_json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <utility>

namespace conveyor::bench {

namespace {

using json = nlohmann::json;

json clock_json(const clock_sample& c) {
  if (!c.available) return nullptr;
  return {{"sm_mhz", c.sm_mhz},
          {"memory_mhz", c.memory_mhz},
          {"sm_max_mhz", c.sm_max_mhz},
          {"memory_max_mhz", c.memory_max_mhz},
          {"temperature_c", c.temperature_c},
          {"clock_event_reasons", c.clock_event_reasons}};
}

clock_sample clock_from_json(const json& j) {
  clock_sample c;
  if (j.is_null()) return c;
  c.available = true;
  c.sm_mhz = j.at("sm_mhz").get<unsigned>();
  c.memory_mhz = j.at("memory_mhz").get<unsigned>();
  c.sm_max_mhz = j.at("sm_max_mhz").get<unsigned>();
  c.memory_max_mhz = j.at("memory_max_mhz").get<unsigned>();
  c.temperature_c = j.at("temperature_c").get<int>();
  c.clock_event_reasons = j.at("clock_event_reasons").get<std::uint64_t>();
  return c;
}

json result_json(const result_record& r) {
  json metrics = json::object();
  for (const auto& [name, s] : r.metrics) {
    if (!std::isfinite(s.median) || !std::isfinite(s.min) || !std::isfinite(s.max)) continue;
    metrics[name] = {{"unit", std::string(metric_unit(name))}, {"median", s.median}, {"min", s.min}, {"max", s.max}};
  }
  return {{"name", r.name},
          {"group", r.id.group},
          {"topology", r.id.topology},
          {"variant", r.id.variant},
          {"api", r.id.api},
          {"nodes", r.id.nodes},
          {"changed", r.id.changed},
          {"iterations", r.iterations},
          {"repetitions", r.repetitions},
          {"metrics", std::move(metrics)},
          {"error", r.error.empty() ? json(nullptr) : json(r.error)}};
}

environment environment_from_json(const json& env) {
  environment e;
  const json& gpu = env.at("gpu");
  e.gpu_name = gpu.at("name").get<std::string>();
  const auto cc = gpu.at("compute_capability").get<std::string>();
  if (!parse_compute_capability(cc, e.compute_major, e.compute_minor))
    throw std::invalid_argument(fmt::format("environment.gpu.compute_capability: '{}' is not major.minor", cc));
  e.sm_count = gpu.at("sm_count").get<int>();
  e.memory_bytes = gpu.at("memory_bytes").get<std::uint64_t>();
  e.l2_bytes = gpu.at("l2_bytes").get<std::uint64_t>();
  e.pci_bus_id = gpu.at("pci_bus_id").get<std::string>();
  e.driver_version = env.at("driver").at("cuda_version_code").get<int>();
  const json& release = env.at("driver").at("release");
  e.driver_release = release.is_null() ? std::string() : release.get<std::string>();
  e.runtime_version = env.at("runtime").at("cuda_version_code").get<int>();
  const json& clocks = env.at("clocks");
  e.peak_sm_mhz = clocks.at("peak_sm_mhz").get<unsigned>();
  e.peak_memory_mhz = clocks.at("peak_memory_mhz").get<unsigned>();
  e.clocks_start = clock_from_json(clocks.at("start"));
  e.clocks_end = clock_from_json(clocks.at("end"));
  e.clocks_during.samples = clocks.at("during").at("samples").get<std::size_t>();
  e.clocks_during.sm_min_mhz = clocks.at("during").at("sm_min_mhz").get<unsigned>();
  e.clocks_during.sm_max_mhz = clocks.at("during").at("sm_max_mhz").get<unsigned>();
  e.host_name = env.at("host").at("name").get<std::string>();
  e.host_cpus = env.at("host").at("cpus").get<int>();
  e.cpu_scaling = env.at("host").at("cpu_scaling").get<std::string>();
  e.conveyor_version = env.at("conveyor_version").get<std::string>();
  e.started_utc = env.at("started_utc").get<std::string>();
  return e;
}

run_settings settings_from_json(const json& set) {
  run_settings s;
  s.quick = set.at("quick").get<bool>();
  s.repetitions = set.at("repetitions").get<int>();
  s.target_ms = set.at("target_ms").get<double>();
  s.sizes = set.at("sizes").get<std::vector<std::size_t>>();
  s.rotation_sets = set.at("rotation_sets").get<std::size_t>();
  s.min_pairs = set.value("min_pairs", std::size_t{0}); // optional: 0 when the report does not record it
  s.filter = set.at("filter").get<std::string>();
  s.interleaved = set.at("interleaved").get<bool>();
  s.elapsed_s = set.at("elapsed_s").get<double>();
  return s;
}

result_record result_from_json(const json& r) {
  result_record rec;
  rec.name = r.at("name").get<std::string>();
  rec.id.group = r.at("group").get<std::string>();
  rec.id.topology = r.at("topology").get<std::string>();
  rec.id.variant = r.at("variant").get<std::string>();
  rec.id.api = r.at("api").get<std::string>();
  rec.id.nodes = r.at("nodes").get<std::size_t>();
  rec.id.changed = r.at("changed").get<std::size_t>();
  rec.iterations = r.at("iterations").get<std::int64_t>();
  rec.repetitions = r.at("repetitions").get<std::int64_t>();
  for (const auto& [name, m] : r.at("metrics").items())
    rec.metrics[name] = {m.at("median").get<double>(), m.at("min").get<double>(), m.at("max").get<double>()};
  if (r.at("error").is_string()) rec.error = r.at("error").get<std::string>();
  return rec;
}

} // namespace

nlohmann::json to_json(const bench_report& report) {
  const environment& e = report.env;
  const run_settings& s = report.settings;
  json results = json::array();
  for (const auto& r : report.results) results.push_back(result_json(r));
  return {
      {"schema", std::string(schema_id)},
      {"environment",
       {{"gpu",
         {{"name", e.gpu_name},
          {"compute_capability", fmt::format("{}.{}", e.compute_major, e.compute_minor)},
          {"sm_count", e.sm_count},
          {"memory_bytes", e.memory_bytes},
          {"l2_bytes", e.l2_bytes},
          {"pci_bus_id", e.pci_bus_id}}},
        {"driver",
         {{"cuda_version", cuda_version_string(e.driver_version)},
          {"cuda_version_code", e.driver_version},
          {"release", e.driver_release.empty() ? json(nullptr) : json(e.driver_release)}}},
        {"runtime",
         {{"cuda_version", cuda_version_string(e.runtime_version)}, {"cuda_version_code", e.runtime_version}}},
        {"clocks",
         {{"peak_sm_mhz", e.peak_sm_mhz},
          {"peak_memory_mhz", e.peak_memory_mhz},
          {"start", clock_json(e.clocks_start)},
          {"end", clock_json(e.clocks_end)},
          {"during",
           {{"samples", e.clocks_during.samples},
            {"sm_min_mhz", e.clocks_during.sm_min_mhz},
            {"sm_max_mhz", e.clocks_during.sm_max_mhz}}}}},
        {"host", {{"name", e.host_name}, {"cpus", e.host_cpus}, {"cpu_scaling", e.cpu_scaling}}},
        {"conveyor_version", e.conveyor_version},
        {"started_utc", e.started_utc}}},
      {"settings",
       {{"quick", s.quick},
        {"repetitions", s.repetitions},
        {"target_ms", s.target_ms},
        {"sizes", s.sizes},
        {"rotation_sets", s.rotation_sets},
        {"min_pairs", s.min_pairs},
        {"filter", s.filter},
        {"interleaved", s.interleaved},
        {"elapsed_s", s.elapsed_s},
        {"statistics", "median, min and max over the repetitions (Google Benchmark aggregates)"}}},
      {"results", std::move(results)},
  };
}

bench_report report_from_json(const nlohmann::json& j) {
  if (auto problems = schema_problems(j); !problems.empty())
    throw std::invalid_argument(fmt::format("not a conveyor-bench/1 report: {}", problems.front()));
  bench_report report;
  report.env = environment_from_json(j.at("environment"));
  report.settings = settings_from_json(j.at("settings"));
  for (const json& r : j.at("results")) report.results.push_back(result_from_json(r));
  return report;
}

} // namespace conveyor::bench
