//! \file report.cpp
//! JSON and Markdown forms of the benchmark results.

#include "bench/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace conveyor::bench {

namespace {

using json = nlohmann::json;

const std::set<std::string, std::less<>> known_groups{"launch", "build", "paired", "first_launch", "update", "memory"};
const std::set<std::string, std::less<>> known_apis{"conveyor", "raw", "cuda", "conveyor_vs_raw"};
const std::set<std::string, std::less<>> known_units{"us", "bytes", "ratio", "count"};

// ---- JSON --------------------------------------------------------------------------------------------------------

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

// ---- schema checks -------------------------------------------------------------------------------------------------

enum class kind {
  string,            // without control characters: it is printed on one line of the Markdown report
  name,              // a word of a benchmark name: letters, digits, '_' and '-' only
  integer,
  unsigned_integer,
  small_count,       // a non-negative integer that fits an int (read into int fields)
  count,             // a non-negative integer that fits an int64 (read into std::int64_t fields)
  mhz,               // a clock frequency in MHz: a non-negative integer up to max_clock_mhz
  temperature,       // degrees Celsius, -1 (unknown) up to max_temperature_c
  number,            // finite
  nonnegative_number,
  positive_number,
  boolean,
  object,
  array,
  string_or_null,
  text_or_null,      // may hold line breaks and tabs (an error message), no other control characters
  object_or_null
};

// Clocks above 100 GHz and temperatures above 200 °C are no GPU's: such a report is corrupt.
constexpr std::uint64_t max_clock_mhz = 100'000;
constexpr std::int64_t max_temperature_c = 200;

// True when `text` holds no control character (U+0000..U+001F, U+007F), except line breaks and tabs when
// `allow_breaks`.
bool printable(std::string_view text, bool allow_breaks) {
  return std::none_of(text.begin(), text.end(), [&](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    if (allow_breaks && (c == '\n' || c == '\r' || c == '\t')) return false;
    return c < 0x20U || c == 0x7FU;
  });
}

bool is_name_word(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
  });
}

// "major.minor", each 1 or 2 decimal digits (e.g. "9.0", "12.1"); nothing else.
bool parse_compute_capability(std::string_view text, int& major, int& minor) {
  const auto dot = text.find('.');
  if (dot == std::string_view::npos) return false;
  auto number = [](std::string_view digits, int& out) {
    if (digits.empty() || digits.size() > 2) return false;
    out = 0;
    for (const char ch : digits) {
      if (ch < '0' || ch > '9') return false;
      out = out * 10 + (ch - '0');
    }
    return true;
  };
  return number(text.substr(0, dot), major) && number(text.substr(dot + 1), minor);
}

bool is(const json& v, kind k) {
  switch (k) {
  case kind::string: return v.is_string() && printable(v.get_ref<const std::string&>(), false);
  case kind::name: return v.is_string() && is_name_word(v.get_ref<const std::string&>());
  case kind::integer: return v.is_number_integer();
  case kind::unsigned_integer: return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  case kind::small_count:
    return is(v, kind::unsigned_integer) && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT_MAX);
  case kind::count:
    return is(v, kind::unsigned_integer) &&
           v.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  case kind::mhz: return is(v, kind::unsigned_integer) && v.get<std::uint64_t>() <= max_clock_mhz;
  case kind::temperature:
    return v.is_number_integer() && (v.is_number_unsigned() ? v.get<std::uint64_t>() <= max_temperature_c
                                                            : v.get<std::int64_t>() >= -1 &&
                                                                  v.get<std::int64_t>() <= max_temperature_c);
  case kind::number: return v.is_number() && std::isfinite(v.get<double>());
  case kind::nonnegative_number: return is(v, kind::number) && v.get<double>() >= 0.0;
  case kind::positive_number: return is(v, kind::number) && v.get<double>() > 0.0;
  case kind::boolean: return v.is_boolean();
  case kind::object: return v.is_object();
  case kind::array: return v.is_array();
  case kind::string_or_null: return v.is_null() || is(v, kind::string);
  case kind::text_or_null: return v.is_null() || (v.is_string() && printable(v.get_ref<const std::string&>(), true));
  case kind::object_or_null: return v.is_object() || v.is_null();
  }
  return false;
}

std::string_view kind_name(kind k) {
  switch (k) {
  case kind::string: return "a string without control characters (line breaks, tabs, ...)";
  case kind::name: return "a word of letters, digits, '_' and '-'";
  case kind::integer: return "an integer";
  case kind::unsigned_integer: return "a non-negative integer";
  case kind::small_count: return "a non-negative integer of at most 2147483647";
  case kind::count: return "a non-negative integer of at most 9223372036854775807";
  case kind::mhz: return "a clock in MHz, an integer in [0, 100000]";
  case kind::temperature: return "a temperature in °C, an integer in [-1, 200] (-1: unknown)";
  case kind::number: return "a finite number";
  case kind::nonnegative_number: return "a finite number >= 0";
  case kind::positive_number: return "a finite number > 0";
  case kind::boolean: return "a boolean";
  case kind::object: return "an object";
  case kind::array: return "an array";
  case kind::string_or_null: return "a string without control characters (line breaks, tabs, ...) or null";
  case kind::text_or_null: return "a string without control characters other than line breaks and tabs, or null";
  case kind::object_or_null: return "an object or null";
  }
  return "?";
}

class checker {
public:
  explicit checker(std::vector<std::string>& problems) : problems_(problems) {}

  // True when `parent[key]` exists and has kind `k`; records a problem otherwise.
  bool field(const json& parent, const std::string& path, const char* key, kind k) {
    if (!parent.is_object() || !parent.contains(key)) {
      problems_.push_back(fmt::format("{}.{}: missing", path, key));
      return false;
    }
    if (!is(parent.at(key), k)) {
      problems_.push_back(fmt::format("{}.{}: must be {}", path, key, kind_name(k)));
      return false;
    }
    return true;
  }
  void problem(std::string text) { problems_.push_back(std::move(text)); }

private:
  std::vector<std::string>& problems_;
};

void check_clock(checker& c, const json& j, const std::string& path) {
  if (j.is_null()) return;
  for (const char* key : {"sm_mhz", "memory_mhz", "sm_max_mhz", "memory_max_mhz"}) c.field(j, path, key, kind::mhz);
  c.field(j, path, "clock_event_reasons", kind::unsigned_integer);
  c.field(j, path, "temperature_c", kind::temperature);
}

void check_result(checker& c, const json& r, const std::string& path, std::set<std::string>& names) {
  if (!r.is_object()) {
    c.problem(fmt::format("{}: must be an object", path));
    return;
  }
  if (c.field(r, path, "name", kind::string) && !names.insert(r.at("name").get<std::string>()).second)
    c.problem(fmt::format("{}.name: duplicate name '{}'", path, r.at("name").get<std::string>()));
  if (c.field(r, path, "group", kind::string) && !known_groups.contains(r.at("group").get<std::string>()))
    c.problem(fmt::format("{}.group: unknown group '{}'", path, r.at("group").get<std::string>()));
  if (c.field(r, path, "api", kind::string) && !known_apis.contains(r.at("api").get<std::string>()))
    c.problem(fmt::format("{}.api: unknown api '{}'", path, r.at("api").get<std::string>()));
  // Topology and variant are words of the name, and appear in headings and table cells: plain words only.
  bool fields_ok = c.field(r, path, "topology", kind::name) & c.field(r, path, "variant", kind::name);
  for (const char* key : {"nodes", "changed"}) fields_ok = c.field(r, path, key, kind::unsigned_integer) && fields_ok;
  for (const char* key : {"iterations", "repetitions"}) fields_ok = c.field(r, path, key, kind::count) && fields_ok;
  auto string_at = [&](const char* key) { return r.contains(key) && r.at(key).is_string(); };
  if (fields_ok && string_at("group") && string_at("api") && string_at("name")) {
    const bench_id id{r.at("group").get<std::string>(), r.at("topology").get<std::string>(),
                      r.at("variant").get<std::string>(), r.at("api").get<std::string>(),
                      r.at("nodes").get<std::size_t>(), r.at("changed").get<std::size_t>()};
    if (r.at("name").get<std::string>() != bench_name(id))
      c.problem(fmt::format("{}.name: '{}' does not match its fields (expected '{}')", path,
                            r.at("name").get<std::string>(), bench_name(id)));
    if (id.changed > id.nodes)
      c.problem(fmt::format("{}.changed: {} nodes changed of {}", path, id.changed, id.nodes));
  }
  const bool has_error = c.field(r, path, "error", kind::text_or_null) && r.at("error").is_string();
  if (!c.field(r, path, "metrics", kind::object)) return;
  const json& metrics = r.at("metrics");
  if (metrics.empty() && !has_error) c.problem(fmt::format("{}.metrics: empty although the result has no error", path));
  for (const auto& [name, m] : metrics.items()) {
    const std::string mpath = fmt::format("{}.metrics.{}", path, name);
    if (!is_name_word(name)) {
      c.problem(fmt::format("{}.metrics: the name '{}' is not a word of letters, digits and '_'", path,
                            printable(name, false) ? name : std::string("(with control characters)")));
      continue;
    }
    if (!m.is_object()) {
      c.problem(fmt::format("{}: must be an object", mpath));
      continue;
    }
    if (c.field(m, mpath, "unit", kind::string)) {
      const auto unit = m.at("unit").get<std::string>();
      if (!known_units.contains(unit))
        c.problem(fmt::format("{}.unit: unknown unit '{}'", mpath, unit));
      else if (unit != metric_unit(name))
        c.problem(fmt::format("{}.unit: '{}' does not match the name's suffix ('{}')", mpath, unit, metric_unit(name)));
    }
    const bool numbers = c.field(m, mpath, "median", kind::number) & c.field(m, mpath, "min", kind::number) &
                         c.field(m, mpath, "max", kind::number);
    if (numbers) {
      const double lo = m.at("min").get<double>();
      const double mid = m.at("median").get<double>();
      const double hi = m.at("max").get<double>();
      if (!(lo <= mid && mid <= hi)) c.problem(fmt::format("{}: min <= median <= max violated", mpath));
      // Times, ratios and counts cannot be negative; bytes can (a memory difference, by measurement noise).
      if (lo < 0.0 && metric_unit(name) != "bytes")
        c.problem(fmt::format("{}.min: {} is negative; a {} cannot be", mpath, lo,
                              metric_unit(name) == "us" ? "time" : metric_unit(name) == "ratio" ? "ratio" : "count"));
    }
  }
}

// ---- Markdown helpers ----------------------------------------------------------------------------------------------

std::size_t display_width(std::string_view text) noexcept {
  std::size_t width = 0;
  for (const char ch : text)
    if ((static_cast<unsigned char>(ch) & 0xC0U) != 0x80U) ++width;
  return width;
}

// A table cell: '|' and '\\' escaped (so that "a\\|" cannot end the cell early), control characters (line breaks,
// tabs, ...) made spaces. Free text from a report goes through markdown_text first.
std::string escape_cell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '|' || ch == '\\')
      out.append(1, '\\').append(1, ch);
    else if (c < 0x20U || c == 0x7FU)
      out += ' ';
    else
      out += ch;
  }
  return out;
}

constexpr std::string_view missing = "—";

std::string pretty_topology(std::string_view t) {
  if (t == "chain") return "chain";
  if (t == "fork_join") return "fork/join (width 4)";
  return std::string(t);
}

class result_index {
public:
  explicit result_index(const bench_report& report) {
    for (const auto& r : report.results) {
      by_name_.emplace(r.name, &r);
      variants_.emplace(r.id.group, r.id.variant);
    }
  }
  // True when some result (run or failed) has this group and variant.
  [[nodiscard]] bool has_group_variant(const std::string& group, const std::string& variant) const {
    return variants_.contains({group, variant});
  }
  [[nodiscard]] const result_record* find(const bench_id& id) const {
    auto it = by_name_.find(bench_name(id));
    return it == by_name_.end() ? nullptr : it->second;
  }
  // The metric's summary, or null when the benchmark is absent, failed or lacks the metric.
  [[nodiscard]] const summary* metric(const bench_id& id, const std::string& name) const {
    const result_record* r = find(id);
    if (r == nullptr || !r->error.empty()) return nullptr;
    auto it = r->metrics.find(name);
    return it == r->metrics.end() ? nullptr : &it->second;
  }
  [[nodiscard]] std::string cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    return s == nullptr ? std::string(missing) : format_summary(*s);
  }
  [[nodiscard]] std::string bytes_cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    if (s == nullptr) return std::string(missing);
    return fmt::format("{} [{}–{}]", format_bytes(s->median), format_bytes(s->min), format_bytes(s->max));
  }
  // A ratio metric as "median [min–max]" with 3 decimals, or "—".
  [[nodiscard]] std::string ratio_summary_cell(const bench_id& id, const std::string& name) const {
    const summary* s = metric(id, name);
    if (s == nullptr) return std::string(missing);
    return fmt::format("{:.3f} [{:.3f}–{:.3f}]", s->median, s->min, s->max);
  }
  // median(a) / median(b) with `decimals` decimals and a suffix, or "—".
  [[nodiscard]] std::string ratio_cell(const bench_id& a, const bench_id& b, const std::string& name, int decimals,
                                       std::string_view suffix) const {
    const summary* x = metric(a, name);
    const summary* y = metric(b, name);
    if (x == nullptr || y == nullptr || !(y->median > 0.0) || !std::isfinite(x->median / y->median))
      return std::string(missing);
    return fmt::format("{:.{}f}{}", x->median / y->median, decimals, suffix);
  }

private:
  std::map<std::string, const result_record*> by_name_;
  std::set<std::pair<std::string, std::string>> variants_;
};

// Sorted distinct values of `field` over the results of `group` (optionally one topology).
template <class Field>
auto distinct(const bench_report& report, std::string_view group, std::string_view topology, Field field) {
  std::set<std::invoke_result_t<Field, const result_record&>> values;
  for (const auto& r : report.results)
    if (r.id.group == group && (topology.empty() || r.id.topology == topology)) values.insert(field(r));
  return values;
}

std::vector<std::string> topologies_of(const bench_report& report, std::string_view group) {
  std::vector<std::string> out;
  for (std::string_view t : {"chain", "fork_join"})
    for (const auto& r : report.results)
      if (r.id.group == group && r.id.topology == t) {
        out.emplace_back(t);
        break;
      }
  for (const auto& r : report.results)
    if (r.id.group == group && std::find(out.begin(), out.end(), r.id.topology) == out.end())
      out.push_back(r.id.topology);
  return out;
}

bench_id id_of(std::string group, std::string topology, std::string variant, std::string api, std::size_t n,
               std::size_t changed = 0) {
  return {std::move(group), std::move(topology), std::move(variant), std::move(api), n, changed};
}

std::string changed_label(std::size_t changed, std::size_t nodes) {
  if (changed == nodes) return fmt::format("{} (all)", changed);
  if (changed == 1 || nodes == 0 || changed > nodes) return fmt::format("{}", changed);
  return fmt::format("{} ({:.0f}%)", changed, 100.0 * static_cast<double>(changed) / static_cast<double>(nodes));
}

std::string clock_text(const clock_sample& c) {
  if (!c.available) return "not available (no NVML)";
  std::string text = fmt::format("SM {} MHz, memory {} MHz (max {} / {} MHz)", c.sm_mhz, c.memory_mhz, c.sm_max_mhz,
                                 c.memory_max_mhz);
  if (c.temperature_c >= 0) text += fmt::format(", {} °C", c.temperature_c);
  if (c.clock_event_reasons != 0) text += fmt::format(", clock-event reasons 0x{:x}", c.clock_event_reasons);
  return text;
}

void header_section(std::string& out, const bench_report& report) {
  const environment& e = report.env;
  const run_settings& s = report.settings;
  out += "# Conveyor benchmarks\n\n";
  // Every text that comes from the report (a saved one may come from anywhere) is escaped: one list item each.
  out += fmt::format("- **GPU**: {} (sm_{}{}, {} SMs, {} memory, {} L2, PCI {})\n", markdown_text(e.gpu_name),
                     e.compute_major, e.compute_minor, e.sm_count, format_bytes(static_cast<double>(e.memory_bytes)),
                     format_bytes(static_cast<double>(e.l2_bytes)),
                     e.pci_bus_id.empty() ? "?" : markdown_text(e.pci_bus_id));
  out += fmt::format("- **Driver**: CUDA {}{}; **runtime**: CUDA {}\n", cuda_version_string(e.driver_version),
                     e.driver_release.empty() ? std::string()
                                              : fmt::format(" (release {})", markdown_text(e.driver_release)),
                     cuda_version_string(e.runtime_version));
  out += fmt::format("- **Clocks**: at start {}; at end {}", clock_text(e.clocks_start), clock_text(e.clocks_end));
  if (e.clocks_during.samples > 0)
    out += fmt::format("; SM {}–{} MHz over {} samples during the run", e.clocks_during.sm_min_mhz,
                       e.clocks_during.sm_max_mhz, e.clocks_during.samples);
  out += fmt::format("; peak (cudaDevAttrClockRate) SM {} MHz, memory {} MHz\n", e.peak_sm_mhz, e.peak_memory_mhz);
  out += fmt::format("- **Host**: {}, {} CPUs, CPU frequency scaling {}\n",
                     e.host_name.empty() ? "?" : markdown_text(e.host_name), e.host_cpus,
                     e.cpu_scaling.empty() ? "unknown" : markdown_text(e.cpu_scaling));
  std::string sizes;
  for (std::size_t n : s.sizes) sizes += sizes.empty() ? fmt::format("{}", n) : fmt::format(", {}", n);
  out += fmt::format("- **Run**: {}, {} repetitions{} of ≈ {} ms timed work each, N ∈ {{{}}}, buffer sets per "
                     "repetition: {}{}{}; {:.0f} s; started {}; Conveyor {}\n",
                     s.quick ? "quick" : "full", s.repetitions, s.interleaved ? " (interleaved)" : "",
                     format_number(s.target_ms), sizes, s.rotation_sets,
                     s.min_pairs > 0 ? fmt::format(", at least {} pairs per paired repetition", s.min_pairs)
                                     : std::string(),
                     s.filter.empty() ? std::string() : fmt::format(", filter {}", markdown_code(s.filter)),
                     s.elapsed_s, markdown_text(e.started_utc), markdown_text(e.conveyor_version));
  out += fmt::format("- **Command**: `conveyor bench{}{}`\n", s.quick ? " --quick" : "",
                     s.filter.empty() ? std::string() : fmt::format(" --filter '{}'", s.filter));
  out += "- Cells: **median [min–max]** over the repetitions; — where a benchmark did not run (filtered out or "
         "failed) or did not record that measurement.\n";
}

void launch_section(std::string& out, const bench_report& report, const result_index& index) {
  const auto topologies = topologies_of(report, "launch");
  if (topologies.empty()) return;
  out += "\n## 1. Launch cost per kernel: sync, stream, graph\n\n";
  out += "N tiny kernels (1 block of 256 threads) per step. *sync*: launch, then synchronise, kernel by kernel; "
         "*stream*: all launches asynchronous, one synchronisation at the end; *graph*: one `graph_exec::launch` of "
         "an executable graph holding the N kernels. Wall time runs from the first call until the step has "
         "finished; host time counts only the launch calls (graph: the one cudaGraphLaunch).\n";
  for (const auto& t : topologies) {
    const auto sizes = distinct(report, "launch", t, [](const result_record& r) { return r.id.nodes; });
    std::vector<std::vector<std::string>> wall;
    std::vector<std::vector<std::string>> host;
    for (std::size_t n : sizes) {
      const auto sync = id_of("launch", t, "sync", "cuda", n);
      const auto stream = id_of("launch", t, "stream", "cuda", n);
      const auto graph = id_of("launch", t, "graph", "conveyor", n);
      wall.push_back({fmt::format("{}", n), index.cell(sync, "wall_us_per_kernel"),
                      index.cell(stream, "wall_us_per_kernel"), index.cell(graph, "wall_us_per_kernel"),
                      index.ratio_cell(sync, graph, "wall_us_per_kernel", 1, "x"),
                      index.ratio_cell(stream, graph, "wall_us_per_kernel", 1, "x")});
      host.push_back({fmt::format("{}", n), index.cell(sync, "host_us_per_call"),
                      index.cell(stream, "host_us_per_call"), index.cell(graph, "host_us_per_call")});
    }
    out += fmt::format("\n### {}: wall time per kernel (µs)\n\n", pretty_topology(t));
    out += markdown_table({"N", "sync", "stream", "graph", "sync ÷ graph", "stream ÷ graph"}, wall, "rrrrrr");
    out += fmt::format("\n### {}: host time per launch call (µs)\n\n", pretty_topology(t));
    out += markdown_table({"N", "sync", "stream", "graph"}, host, "rrrr");
  }
}

void paired_replay_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "paired")) {
    for (std::size_t n : distinct(report, "paired", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto id = id_of("paired", t, "replay", "conveyor_vs_raw", n);
      if (index.find(id) == nullptr) continue;
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(id, "conveyor_wall_us_per_kernel"),
                      index.cell(id, "raw_wall_us_per_kernel"), index.ratio_summary_cell(id, "wall_ratio"),
                      index.ratio_summary_cell(id, "host_ratio")});
    }
  }
  if (rows.empty()) return;
  out += "\n### Replay, paired: Conveyor and raw alternating launch by launch\n\n";
  out += "One benchmark launches both executable graphs (same kernels, topology and buffers) back to back, in "
         "alternating order, each twice in a row, timing the second. Ratio = median over the pairs of a repetition "
         "of Conveyor ÷ raw; cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table({"topology", "N", "Conveyor wall µs/kernel", "raw wall µs/kernel", "wall ratio",
                         "host ratio (launch call)"},
                        rows, "lrrrrr");
}

void paired_build_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "paired")) {
    for (const char* method : {"capture", "explicit"}) {
      for (std::size_t n : distinct(report, "paired", t, [](const result_record& r) { return r.id.nodes; })) {
        const auto id = id_of("paired", t, method, "conveyor_vs_raw", n);
        if (index.find(id) == nullptr) continue;
        rows.push_back({pretty_topology(t), method, fmt::format("{}", n), index.cell(id, "conveyor_us_per_node"),
                        index.cell(id, "raw_us_per_node"), index.ratio_summary_cell(id, "ratio"),
                        index.ratio_summary_cell(id, "build_ratio"),
                        index.ratio_summary_cell(id, "instantiate_ratio")});
      }
    }
  }
  if (rows.empty()) return;
  out += "\n### Build + instantiate, paired: Conveyor and raw alternating build by build\n\n";
  out += "One benchmark builds and instantiates the step both ways back to back, in alternating order (µs per "
         "node). Ratios = median over the pairs of a repetition of Conveyor ÷ raw, for the whole and for each part; "
         "cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table({"topology", "method", "N", "Conveyor µs/node", "raw µs/node", "ratio", "construction ratio",
                         "instantiate ratio"},
                        rows, "llrrrrrr");
}

void replay_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "launch")) {
    for (std::size_t n : distinct(report, "launch", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto conv = id_of("launch", t, "graph", "conveyor", n);
      const auto raw = id_of("launch", t, "graph", "raw", n);
      if (index.find(conv) == nullptr && index.find(raw) == nullptr) continue;
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(conv, "wall_us_per_kernel"),
                      index.cell(raw, "wall_us_per_kernel"), index.ratio_cell(conv, raw, "wall_us_per_kernel", 3, ""),
                      index.cell(conv, "host_us_per_call"), index.cell(raw, "host_us_per_call"),
                      index.ratio_cell(conv, raw, "host_us_per_call", 3, "")});
    }
  }
  const bool paired = index.has_group_variant("paired", "replay");
  if (rows.empty() && !paired) return;
  out += "\n## 2. Graph replay: Conveyor against the raw CUDA Runtime API\n\n";
  if (rows.empty()) {
    paired_replay_section(out, report, index);
    return;
  }
  out += "The same kernels and topology, built and launched through Conveyor (`conveyor::graph`, `instantiate`, "
         "`graph_exec::launch`) and through the CUDA Runtime (`cudaGraphAddKernelNode`, `cudaGraphInstantiate`, "
         "`cudaGraphLaunch`), repetitions interleaved. Ratio = Conveyor ÷ raw (medians): Conveyor's overhead.\n\n";
  out += markdown_table({"topology", "N", "Conveyor wall µs/kernel", "raw wall µs/kernel", "ratio",
                         "Conveyor host µs/launch", "raw host µs/launch", "ratio"},
                        rows, "lrrrrrrr");
  paired_replay_section(out, report, index);
}

void build_section(std::string& out, const bench_report& report, const result_index& index) {
  const auto topologies = topologies_of(report, "build");
  const auto first_topologies = topologies_of(report, "first_launch");
  const bool paired = index.has_group_variant("paired", "capture") || index.has_group_variant("paired", "explicit");
  if (topologies.empty() && first_topologies.empty() && !paired) return;
  out += "\n## 3. Build costs\n";
  for (const auto& t : topologies) {
    std::vector<std::vector<std::string>> total;
    std::vector<std::vector<std::string>> construction;
    for (std::size_t n : distinct(report, "build", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto cc = id_of("build", t, "capture", "conveyor", n);
      const auto cr = id_of("build", t, "capture", "raw", n);
      const auto ec = id_of("build", t, "explicit", "conveyor", n);
      const auto er = id_of("build", t, "explicit", "raw", n);
      total.push_back({fmt::format("{}", n), index.cell(cc, "us_per_node"), index.cell(cr, "us_per_node"),
                       index.cell(ec, "us_per_node"), index.cell(er, "us_per_node")});
      construction.push_back({fmt::format("{}", n), index.cell(cc, "build_us_per_node"),
                              index.cell(cr, "build_us_per_node"), index.cell(ec, "build_us_per_node"),
                              index.cell(er, "build_us_per_node")});
    }
    out += fmt::format("\n### {}: build, then instantiate (µs per node)\n\n", pretty_topology(t));
    out += "Stream capture (`conveyor::capture` / `cudaStreamBeginCapture`) or explicit building (the "
           "`conveyor::graph` builder / `cudaGraphAddKernelNode`), then `instantiate` / `cudaGraphInstantiate`.\n\n";
    out += markdown_table({"N", "capture, Conveyor", "capture, raw", "explicit, Conveyor", "explicit, raw"}, total,
                          "rrrrr");
    out += fmt::format("\n### {}: the graph's construction alone (µs per node)\n\n", pretty_topology(t));
    out += markdown_table({"N", "capture, Conveyor", "capture, raw", "explicit, Conveyor", "explicit, raw"},
                          construction, "rrrrr");
  }
  paired_build_section(out, report, index);
  std::vector<std::vector<std::string>> first;
  for (const auto& t : first_topologies) {
    for (std::size_t n : distinct(report, "first_launch", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto plain = id_of("first_launch", t, "no_upload", "conveyor", n);
      const auto uploaded = id_of("first_launch", t, "upload", "conveyor", n);
      first.push_back({pretty_topology(t), fmt::format("{}", n), index.cell(plain, "first_launch_wall_us"),
                       index.cell(uploaded, "upload_us"), index.cell(uploaded, "first_launch_wall_us"),
                       index.cell(plain, "later_launch_wall_us")});
    }
  }
  if (!first.empty()) {
    out += "\n### First launch of a new executable graph (µs, wall, launch until finished)\n\n";
    out += "Without `graph_exec::upload` the first launch uploads the graph itself; with it, the upload "
           "(until finished) is shown apart. A later launch of the same graph for comparison.\n\n";
    out += markdown_table({"topology", "N", "first launch, no upload", "upload", "first launch after upload",
                           "later launch"},
                          first, "lrrrrr");
  }
}

void paired_setters_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : report.results) {
    if (r.id.group != "paired" || r.id.variant != "setters") continue;
    rows.push_back({fmt::format("{}", r.id.nodes), changed_label(r.id.changed, r.id.nodes),
                    index.cell(r.id, "conveyor_update_us"), index.cell(r.id, "raw_update_us"),
                    index.ratio_summary_cell(r.id, "ratio")});
  }
  if (rows.empty()) return;
  out += "\n### Per-node setters, paired: Conveyor and raw alternating update by update\n\n";
  out += "One benchmark changes the same nodes of two executable graphs of the chain, one through "
         "`graph_exec::set_kernel_args`, one through `cudaGraphExecKernelNodeSetParams`, in alternating order. Each "
         "side runs as a replay loop does (change, launch, wait) twice and only its second change is timed (µs per "
         "update, host), so both are measured right after a launch of their own graph. Ratio = median over the "
         "pairs of a repetition of Conveyor ÷ raw; cells show the median [min–max] of that over the "
         "repetitions.\n\n";
  out += markdown_table({"N", "changed", "set_kernel_args", "cudaGraphExecKernelNodeSetParams", "ratio"}, rows,
                        "rrrrr");
}

void paired_whole_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : report.results) {
    if (r.id.group != "paired" || r.id.variant != "whole") continue;
    rows.push_back({fmt::format("{}", r.id.nodes), changed_label(r.id.changed, r.id.nodes),
                    index.cell(r.id, "conveyor_update_us"), index.cell(r.id, "raw_update_us"),
                    index.ratio_summary_cell(r.id, "ratio")});
  }
  if (rows.empty()) return;
  out += "\n### Whole-graph update, paired: Conveyor and raw alternating update by update\n\n";
  out += "One benchmark moves two executable graphs of the chain between two graphs that differ in the changed "
         "nodes' kernel argument, one through `graph_exec::update` (graphs from Conveyor's builder), one through "
         "`cudaGraphExecUpdate` (graphs from the Runtime API), in alternating order; each side updates, launches and "
         "waits twice and only its second update is timed (µs per update, host). Ratio = median over the pairs of a "
         "repetition of Conveyor ÷ raw; cells show the median [min–max] of that over the repetitions.\n\n";
  out += markdown_table({"N", "changed", "graph_exec::update", "cudaGraphExecUpdate", "ratio"}, rows, "rrrrr");
}

void update_section(std::string& out, const bench_report& report, const result_index& index) {
  std::set<std::tuple<std::string, std::size_t, std::size_t>> rows_seen;
  for (const auto& r : report.results)
    if (r.id.group == "update") rows_seen.emplace(r.id.topology, r.id.nodes, r.id.changed);
  if (rows_seen.empty()) {
    if (index.has_group_variant("paired", "setters") || index.has_group_variant("paired", "whole")) {
      out += "\n## 4. Update costs\n";
      paired_setters_section(out, report, index);
      paired_whole_section(out, report, index);
    }
    return;
  }
  std::vector<std::vector<std::string>> cost;
  std::vector<std::vector<std::string>> after;
  const bool several_topologies = distinct(report, "update", "", [](const result_record& r) { return r.id.topology; })
                                      .size() > 1;
  for (const auto& [t, n, k] : rows_seen) {
    const auto sc = id_of("update", t, "setters", "conveyor", n, k);
    const auto sr = id_of("update", t, "setters", "raw", n, k);
    const auto wc = id_of("update", t, "whole", "conveyor", n, k);
    const auto wr = id_of("update", t, "whole", "raw", n, k);
    const auto ic = id_of("update", t, "reinstantiate", "conveyor", n, k);
    const auto ir = id_of("update", t, "reinstantiate", "raw", n, k);
    std::vector<std::string> lead{fmt::format("{}", n), changed_label(k, n)};
    if (several_topologies) lead.insert(lead.begin(), pretty_topology(t));
    auto row = lead;
    for (const auto& id : {sc, sr, wc, wr, ic, ir}) row.push_back(index.cell(id, "update_us"));
    cost.push_back(std::move(row));
    row = lead;
    for (const auto& id : {sc, sr, wc, wr, ic, ir}) row.push_back(index.cell(id, "launch_after_wall_us"));
    after.push_back(std::move(row));
  }
  std::vector<std::string> header{"N", "changed", "set_kernel_args", "cudaGraphExecKernelNodeSetParams",
                                  "graph_exec::update", "cudaGraphExecUpdate", "re-instantiate, Conveyor",
                                  "re-instantiate, raw"};
  std::string align = "rrrrrrrr";
  if (several_topologies) {
    header.insert(header.begin(), "topology");
    align.insert(align.begin(), 'l');
  }
  out += "\n## 4. Update costs\n\n";
  out += "A kernel argument changes in 1 node, 10% of the nodes or all nodes of an instantiated chain. Per-node "
         "setters change each node in place; whole-graph update applies a graph built with the new arguments; "
         "re-instantiation instantiates that graph anew (the old executable graph is destroyed untimed).\n";
  out += "\n### Time to apply the change (µs per update, host)\n\n";
  out += markdown_table(header, cost, align);
  out += "\n### The next launch after the change (µs, wall, launch until finished)\n\n";
  out += markdown_table(header, after, align);
  paired_setters_section(out, report, index);
  paired_whole_section(out, report, index);
}

void memory_section(std::string& out, const bench_report& report, const result_index& index) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& t : topologies_of(report, "memory")) {
    for (std::size_t n : distinct(report, "memory", t, [](const result_record& r) { return r.id.nodes; })) {
      const auto id = id_of("memory", t, "instantiate_upload", "conveyor", n);
      const summary* copies = index.metric(id, "copies");
      rows.push_back({pretty_topology(t), fmt::format("{}", n), index.bytes_cell(id, "bytes_per_graph"),
                      index.cell(id, "bytes_per_node"),
                      copies == nullptr ? std::string(missing) : fmt::format("{:.0f}", copies->median)});
    }
  }
  if (rows.empty()) return;
  out += "\n## 5. Device memory held by an instantiated graph\n\n";
  out += "`cudaMemGetInfo` before and after instantiating and uploading several copies of the graph (about 20000 "
         "nodes in all, at most 500 copies, so that the allocation granularity does not hide small graphs), divided "
         "by the number of copies. These benchmarks run first and destroy nothing until they all have run: the driver "
         "reuses the memory of destroyed executable graphs, which would hide new ones.\n\n";
  out += markdown_table({"topology", "N", "bytes per graph", "bytes per node", "copies"}, rows, "lrrrr");
}

void failures_section(std::string& out, const bench_report& report) {
  std::string list;
  for (const auto& r : report.results)
    if (!r.error.empty()) list += fmt::format("- {}: {}\n", markdown_code(r.name), markdown_text(r.error));
  if (list.empty()) return;
  out += "\n## Failures\n\n" + list;
}

} // namespace

std::string bench_name(const bench_id& id) {
  std::string name = fmt::format("{}/{}/{}/{}/{}", id.group, id.topology, id.variant, id.api, id.nodes);
  if (id.group == "update" || id.changed != 0) name += fmt::format("/{}", id.changed);
  return name;
}

std::string_view metric_unit(std::string_view metric) noexcept {
  bool us = false;
  bool bytes = false;
  bool ratio = false;
  std::size_t begin = 0;
  while (begin <= metric.size()) {
    const std::size_t end = std::min(metric.find('_', begin), metric.size());
    const std::string_view token = metric.substr(begin, end - begin);
    us = us || token == "us";
    bytes = bytes || token == "bytes";
    ratio = ratio || token == "ratio";
    begin = end + 1;
  }
  if (us) return "us";
  if (bytes) return "bytes";
  if (ratio) return "ratio";
  return "count";
}

std::string cuda_version_string(int version) { return fmt::format("{}.{}", version / 1000, (version % 1000) / 10); }

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
  const json& env = j.at("environment");
  environment& e = report.env;
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

  const json& set = j.at("settings");
  run_settings& s = report.settings;
  s.quick = set.at("quick").get<bool>();
  s.repetitions = set.at("repetitions").get<int>();
  s.target_ms = set.at("target_ms").get<double>();
  s.sizes = set.at("sizes").get<std::vector<std::size_t>>();
  s.rotation_sets = set.at("rotation_sets").get<std::size_t>();
  s.min_pairs = set.value("min_pairs", std::size_t{0}); // absent in reports written before paired benchmarks
  s.filter = set.at("filter").get<std::string>();
  s.interleaved = set.at("interleaved").get<bool>();
  s.elapsed_s = set.at("elapsed_s").get<double>();

  for (const json& r : j.at("results")) {
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
    report.results.push_back(std::move(rec));
  }
  return report;
}

std::vector<std::string> schema_problems(const nlohmann::json& j) {
  std::vector<std::string> problems;
  checker c(problems);
  if (!j.is_object()) return {"the report must be a JSON object"};
  if (c.field(j, "$", "schema", kind::string) && j.at("schema").get<std::string>() != schema_id)
    c.problem(fmt::format("$.schema: '{}', expected '{}'", j.at("schema").get<std::string>(), schema_id));

  if (c.field(j, "$", "environment", kind::object)) {
    const json& env = j.at("environment");
    const std::string path = "$.environment";
    if (c.field(env, path, "gpu", kind::object)) {
      const json& gpu = env.at("gpu");
      c.field(gpu, path + ".gpu", "name", kind::string);
      if (c.field(gpu, path + ".gpu", "compute_capability", kind::string)) {
        int major = 0;
        int minor = 0;
        const auto cc = gpu.at("compute_capability").get<std::string>();
        if (!parse_compute_capability(cc, major, minor))
          c.problem(fmt::format("{}.gpu.compute_capability: '{}' is not major.minor (each 1 or 2 digits, e.g. 9.0)",
                                path, cc));
      }
      c.field(gpu, path + ".gpu", "pci_bus_id", kind::string);
      c.field(gpu, path + ".gpu", "sm_count", kind::small_count);
      for (const char* key : {"memory_bytes", "l2_bytes"}) c.field(gpu, path + ".gpu", key, kind::unsigned_integer);
    }
    if (c.field(env, path, "driver", kind::object)) {
      c.field(env.at("driver"), path + ".driver", "cuda_version", kind::string);
      c.field(env.at("driver"), path + ".driver", "cuda_version_code", kind::small_count);
      c.field(env.at("driver"), path + ".driver", "release", kind::string_or_null);
    }
    if (c.field(env, path, "runtime", kind::object)) {
      c.field(env.at("runtime"), path + ".runtime", "cuda_version", kind::string);
      c.field(env.at("runtime"), path + ".runtime", "cuda_version_code", kind::small_count);
    }
    if (c.field(env, path, "clocks", kind::object)) {
      const json& clocks = env.at("clocks");
      c.field(clocks, path + ".clocks", "peak_sm_mhz", kind::mhz);
      c.field(clocks, path + ".clocks", "peak_memory_mhz", kind::mhz);
      for (const char* key : {"start", "end"})
        if (c.field(clocks, path + ".clocks", key, kind::object_or_null))
          check_clock(c, clocks.at(key), fmt::format("{}.clocks.{}", path, key));
      if (c.field(clocks, path + ".clocks", "during", kind::object)) {
        const json& during = clocks.at("during");
        c.field(during, path + ".clocks.during", "samples", kind::unsigned_integer);
        if (c.field(during, path + ".clocks.during", "sm_min_mhz", kind::mhz) &
                c.field(during, path + ".clocks.during", "sm_max_mhz", kind::mhz) &&
            during.at("sm_min_mhz").get<std::uint64_t>() > during.at("sm_max_mhz").get<std::uint64_t>())
          c.problem(fmt::format("{}.clocks.during: sm_min_mhz {} is above sm_max_mhz {}", path,
                                during.at("sm_min_mhz").get<std::uint64_t>(),
                                during.at("sm_max_mhz").get<std::uint64_t>()));
      }
    }
    if (c.field(env, path, "host", kind::object)) {
      c.field(env.at("host"), path + ".host", "name", kind::string);
      c.field(env.at("host"), path + ".host", "cpus", kind::small_count);
      c.field(env.at("host"), path + ".host", "cpu_scaling", kind::string);
    }
    c.field(env, path, "conveyor_version", kind::string);
    c.field(env, path, "started_utc", kind::string);
  }

  if (c.field(j, "$", "settings", kind::object)) {
    const json& s = j.at("settings");
    const std::string path = "$.settings";
    c.field(s, path, "quick", kind::boolean);
    c.field(s, path, "interleaved", kind::boolean);
    c.field(s, path, "repetitions", kind::small_count);
    c.field(s, path, "rotation_sets", kind::unsigned_integer);
    if (s.is_object() && s.contains("min_pairs")) c.field(s, path, "min_pairs", kind::unsigned_integer);
    c.field(s, path, "target_ms", kind::positive_number);
    c.field(s, path, "elapsed_s", kind::nonnegative_number);
    c.field(s, path, "filter", kind::string);
    if (c.field(s, path, "sizes", kind::array))
      for (const json& n : s.at("sizes"))
        if (!is(n, kind::unsigned_integer)) c.problem(path + ".sizes: every size must be a non-negative integer");
  }

  if (c.field(j, "$", "results", kind::array)) {
    std::set<std::string> names;
    std::size_t i = 0;
    for (const json& r : j.at("results")) check_result(c, r, fmt::format("$.results[{}]", i++), names);
  }
  return problems;
}

std::string markdown_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20U || c == 0x7FU)
      out += ' ';
    else if (std::string_view("\\`*_[]<>|~&").find(ch) != std::string_view::npos)
      out.append(1, '\\').append(1, ch);
    else
      out += ch;
  }
  return out;
}

std::string markdown_code(std::string_view text) {
  std::string body;
  std::size_t run = 0;
  std::size_t longest = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    body += c < 0x20U || c == 0x7FU ? ' ' : ch;
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = !body.empty() && (body.front() == '`' || body.back() == '`' ||
                                     (body.front() == ' ' && body.back() == ' '));
  return pad ? fence + ' ' + body + ' ' + fence : fence + body + fence;
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return std::string(missing);
  if (value == 0.0) return "0";
  const double a = std::fabs(value);
  if (a >= 100.0) return fmt::format("{:.0f}", value);
  if (a >= 10.0) return fmt::format("{:.1f}", value);
  if (a >= 1.0) return fmt::format("{:.2f}", value);
  return fmt::format("{:.3f}", value);
}

std::string format_summary(const summary& s) {
  return fmt::format("{} [{}–{}]", format_number(s.median), format_number(s.min), format_number(s.max));
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return std::string(missing);
  const double a = std::fabs(bytes);
  constexpr double kib = 1024.0;
  if (a < 0.5) return "0 B";
  if (a < kib) return fmt::format("{:.0f} B", bytes);
  if (a < kib * kib) return fmt::format("{:.1f} KiB", bytes / kib);
  if (a < kib * kib * kib) return fmt::format("{:.1f} MiB", bytes / (kib * kib));
  return fmt::format("{:.1f} GiB", bytes / (kib * kib * kib));
}

std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                           std::string_view align) {
  const std::size_t columns = header.size();
  if (columns == 0) throw std::invalid_argument("markdown_table: no columns");
  if (align.size() != columns)
    throw std::invalid_argument(
        fmt::format("markdown_table: {} alignment characters for {} columns", align.size(), columns));
  for (const char a : align)
    if (a != 'l' && a != 'r')
      throw std::invalid_argument(fmt::format("markdown_table: alignment '{}' (use 'l' or 'r')", a));
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size() + 1);
  cells.emplace_back();
  for (const auto& h : header) cells.back().push_back(escape_cell(h));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != columns)
      throw std::invalid_argument(
          fmt::format("markdown_table: row {} has {} cells, the header {}", r, rows[r].size(), columns));
    cells.emplace_back();
    for (const auto& text : rows[r]) cells.back().push_back(escape_cell(text));
  }
  std::vector<std::size_t> width(columns, 3);
  for (const auto& row : cells)
    for (std::size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], display_width(row[c]));

  auto line = [&](const std::vector<std::string>& row) {
    std::string out = "|";
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string pad(width[c] - display_width(row[c]), ' ');
      out += ' ';
      out += align[c] == 'r' ? pad + row[c] : row[c] + pad;
      out += " |";
    }
    return out + '\n';
  };
  std::string out = line(cells.front());
  out += '|';
  for (std::size_t c = 0; c < columns; ++c)
    out += align[c] == 'r' ? fmt::format(" {}: |", std::string(width[c] - 1, '-'))
                           : fmt::format(" :{} |", std::string(width[c] - 1, '-'));
  out += '\n';
  for (std::size_t r = 1; r < cells.size(); ++r) out += line(cells[r]);
  return out;
}

std::string to_markdown(const bench_report& report) {
  const result_index index(report);
  std::string out;
  header_section(out, report);
  launch_section(out, report, index);
  replay_section(out, report, index);
  build_section(out, report, index);
  update_section(out, report, index);
  memory_section(out, report, index);
  failures_section(out, report);
  return out;
}

} // namespace conveyor::bench
