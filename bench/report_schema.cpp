//! \file report_schema.cpp
//! The checks of a report against schema conveyor-bench/1: every field's presence, type and range, one readable
//! line per problem.

#include "bench/report_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>

namespace conveyor::bench {

namespace {

using json = nlohmann::json;

const std::set<std::string, std::less<>> known_groups{"launch", "build", "paired", "first_launch", "update", "memory"};
const std::set<std::string, std::less<>> known_apis{"conveyor", "raw", "cuda", "conveyor_vs_raw"};
const std::set<std::string, std::less<>> known_units{"us", "bytes", "ratio", "count"};

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

// The kinds of value a field may hold.
enum class kind {
  string, // without control characters: it is printed on one line of the Markdown report
  name,   // a word of a benchmark name: letters, digits, '_' and '-' only
  integer,
  unsigned_integer,
  small_count, // a non-negative integer that fits an int (read into int fields)
  count,       // a non-negative integer that fits an int64 (read into std::int64_t fields)
  mhz,         // a clock frequency in MHz: a non-negative integer up to max_clock_mhz
  temperature, // degrees Celsius, -1 (unknown) up to max_temperature_c
  number,      // finite
  nonnegative_number,
  positive_number,
  boolean,
  object,
  array,
  string_or_null,
  text_or_null, // may hold line breaks and tabs (an error message), no other control characters
  object_or_null
};

bool unsigned_at_most(const json& v, std::uint64_t limit) {
  const bool non_negative = v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  return non_negative && v.get<std::uint64_t>() <= limit;
}

bool temperature(const json& v) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max_temperature_c);
  return v.get<std::int64_t>() >= -1 && v.get<std::int64_t>() <= max_temperature_c;
}

bool finite_number(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

bool plain_string(const json& v) { return v.is_string() && printable(v.get_ref<const std::string&>(), false); }

// What each kind accepts and how a problem names it: one entry per kind, in the order of `kind`.
struct kind_rule {
  kind k;
  bool (*accepts)(const json&);
  std::string_view description;
};
constexpr std::uint64_t any_unsigned = std::numeric_limits<std::uint64_t>::max();
constexpr std::array<kind_rule, static_cast<std::size_t>(kind::object_or_null) + 1> kind_rules{{
    {kind::string, plain_string, "a string without control characters (line breaks, tabs, ...)"},
    {kind::name, [](const json& v) { return v.is_string() && is_name_word(v.get_ref<const std::string&>()); },
     "a word of letters, digits, '_' and '-'"},
    {kind::integer, [](const json& v) { return v.is_number_integer(); }, "an integer"},
    {kind::unsigned_integer, [](const json& v) { return unsigned_at_most(v, any_unsigned); }, "a non-negative integer"},
    {kind::small_count, [](const json& v) { return unsigned_at_most(v, static_cast<std::uint64_t>(INT_MAX)); },
     "a non-negative integer of at most 2147483647"},
    {kind::count,
     [](const json& v) {
       return unsigned_at_most(v, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
     },
     "a non-negative integer of at most 9223372036854775807"},
    {kind::mhz, [](const json& v) { return unsigned_at_most(v, max_clock_mhz); },
     "a clock in MHz, an integer in [0, 100000]"},
    {kind::temperature, temperature, "a temperature in °C, an integer in [-1, 200] (-1: unknown)"},
    {kind::number, finite_number, "a finite number"},
    {kind::nonnegative_number, [](const json& v) { return finite_number(v) && v.get<double>() >= 0.0; },
     "a finite number >= 0"},
    {kind::positive_number, [](const json& v) { return finite_number(v) && v.get<double>() > 0.0; },
     "a finite number > 0"},
    {kind::boolean, [](const json& v) { return v.is_boolean(); }, "a boolean"},
    {kind::object, [](const json& v) { return v.is_object(); }, "an object"},
    {kind::array, [](const json& v) { return v.is_array(); }, "an array"},
    {kind::string_or_null, [](const json& v) { return v.is_null() || plain_string(v); },
     "a string without control characters (line breaks, tabs, ...) or null"},
    {kind::text_or_null,
     [](const json& v) { return v.is_null() || (v.is_string() && printable(v.get_ref<const std::string&>(), true)); },
     "a string without control characters other than line breaks and tabs, or null"},
    {kind::object_or_null, [](const json& v) { return v.is_object() || v.is_null(); }, "an object or null"},
}};

constexpr bool in_kind_order() {
  for (std::size_t i = 0; i < kind_rules.size(); ++i)
    if (static_cast<std::size_t>(kind_rules[i].k) != i) return false;
  return true;
}
static_assert(in_kind_order(), "kind_rules holds one entry per kind, in the order of kind");

const kind_rule& rule_of(kind k) { return kind_rules[static_cast<std::size_t>(k)]; }

bool is(const json& v, kind k) { return rule_of(k).accepts(v); }

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
      problems_.push_back(fmt::format("{}.{}: must be {}", path, key, rule_of(k).description));
      return false;
    }
    return true;
  }
  // field() for each key; true when all of them passed (every key is checked).
  bool fields(const json& parent, const std::string& path, std::initializer_list<const char*> keys, kind k) {
    bool ok = true;
    for (const char* key : keys) ok = field(parent, path, key, k) && ok;
    return ok;
  }
  void problem(std::string text) { problems_.push_back(std::move(text)); }

private:
  std::vector<std::string>& problems_;
};

// ---- results -----------------------------------------------------------------------------------------------------

// The fields naming what a result measured: its name unique and matching the other fields, known group and API.
void check_result_identity(checker& c, const json& r, const std::string& path, std::set<std::string>& names) {
  if (c.field(r, path, "name", kind::string) && !names.insert(r.at("name").get<std::string>()).second)
    c.problem(fmt::format("{}.name: duplicate name '{}'", path, r.at("name").get<std::string>()));
  if (c.field(r, path, "group", kind::string) && !known_groups.contains(r.at("group").get<std::string>()))
    c.problem(fmt::format("{}.group: unknown group '{}'", path, r.at("group").get<std::string>()));
  if (c.field(r, path, "api", kind::string) && !known_apis.contains(r.at("api").get<std::string>()))
    c.problem(fmt::format("{}.api: unknown api '{}'", path, r.at("api").get<std::string>()));
  // Topology and variant are words of the name, and appear in headings and table cells: plain words only.
  bool fields_ok = c.fields(r, path, {"topology", "variant"}, kind::name);
  fields_ok = c.fields(r, path, {"nodes", "changed"}, kind::unsigned_integer) && fields_ok;
  fields_ok = c.fields(r, path, {"iterations", "repetitions"}, kind::count) && fields_ok;
  auto string_at = [&](const char* key) { return r.contains(key) && r.at(key).is_string(); };
  if (!fields_ok || !string_at("group") || !string_at("api") || !string_at("name")) return;
  const bench_id id{r.at("group").get<std::string>(),   r.at("topology").get<std::string>(),
                    r.at("variant").get<std::string>(), r.at("api").get<std::string>(),
                    r.at("nodes").get<std::size_t>(),   r.at("changed").get<std::size_t>()};
  if (r.at("name").get<std::string>() != bench_name(id))
    c.problem(fmt::format("{}.name: '{}' does not match its fields (expected '{}')", path,
                          r.at("name").get<std::string>(), bench_name(id)));
  if (id.changed > id.nodes) c.problem(fmt::format("{}.changed: {} nodes changed of {}", path, id.changed, id.nodes));
}

// One metric: an object with a unit that matches its name and min <= median <= max, none negative but bytes.
void check_metric(checker& c, const std::string& name, const json& m, const std::string& mpath) {
  if (!m.is_object()) {
    c.problem(fmt::format("{}: must be an object", mpath));
    return;
  }
  const std::string_view unit_of_name = metric_unit(name);
  if (c.field(m, mpath, "unit", kind::string)) {
    const auto unit = m.at("unit").get<std::string>();
    if (!known_units.contains(unit)) c.problem(fmt::format("{}.unit: unknown unit '{}'", mpath, unit));
    else if (unit != unit_of_name)
      c.problem(fmt::format("{}.unit: '{}' does not match the name's suffix ('{}')", mpath, unit, unit_of_name));
  }
  if (!c.fields(m, mpath, {"median", "min", "max"}, kind::number)) return;
  const double lo = m.at("min").get<double>();
  const double mid = m.at("median").get<double>();
  const double hi = m.at("max").get<double>();
  if (!(lo <= mid && mid <= hi)) c.problem(fmt::format("{}: min <= median <= max violated", mpath));
  // Times, ratios and counts cannot be negative; bytes can (a memory difference, by measurement noise).
  if (lo < 0.0 && unit_of_name != "bytes")
    c.problem(fmt::format("{}.min: {} is negative; a {} cannot be", mpath, lo,
                          unit_of_name == "us"      ? "time"
                          : unit_of_name == "ratio" ? "ratio"
                                                    : "count"));
}

void check_result(checker& c, const json& r, const std::string& path, std::set<std::string>& names) {
  if (!r.is_object()) {
    c.problem(fmt::format("{}: must be an object", path));
    return;
  }
  check_result_identity(c, r, path, names);
  const bool has_error = c.field(r, path, "error", kind::text_or_null) && r.at("error").is_string();
  if (!c.field(r, path, "metrics", kind::object)) return;
  const json& metrics = r.at("metrics");
  if (metrics.empty() && !has_error) c.problem(fmt::format("{}.metrics: empty although the result has no error", path));
  for (const auto& [name, m] : metrics.items()) {
    if (is_name_word(name)) check_metric(c, name, m, fmt::format("{}.metrics.{}", path, name));
    else
      c.problem(fmt::format("{}.metrics: the name '{}' is not a word of letters, digits and '_'", path,
                            printable(name, false) ? name : std::string("(with control characters)")));
  }
}

// ---- environment and settings ------------------------------------------------------------------------------------

void check_gpu(checker& c, const json& gpu, const std::string& path) {
  c.field(gpu, path, "name", kind::string);
  if (c.field(gpu, path, "compute_capability", kind::string)) {
    int major = 0;
    int minor = 0;
    const auto cc = gpu.at("compute_capability").get<std::string>();
    if (!parse_compute_capability(cc, major, minor))
      c.problem(fmt::format("{}.compute_capability: '{}' is not major.minor (each 1 or 2 digits, e.g. 9.0)", path, cc));
  }
  c.field(gpu, path, "pci_bus_id", kind::string);
  c.field(gpu, path, "sm_count", kind::small_count);
  c.fields(gpu, path, {"memory_bytes", "l2_bytes"}, kind::unsigned_integer);
}

void check_clock(checker& c, const json& j, const std::string& path) {
  if (j.is_null()) return;
  c.fields(j, path, {"sm_mhz", "memory_mhz", "sm_max_mhz", "memory_max_mhz"}, kind::mhz);
  c.field(j, path, "clock_event_reasons", kind::unsigned_integer);
  c.field(j, path, "temperature_c", kind::temperature);
}

void check_clocks(checker& c, const json& clocks, const std::string& path) {
  c.fields(clocks, path, {"peak_sm_mhz", "peak_memory_mhz"}, kind::mhz);
  for (const char* key : {"start", "end"})
    if (c.field(clocks, path, key, kind::object_or_null))
      check_clock(c, clocks.at(key), fmt::format("{}.{}", path, key));
  if (!c.field(clocks, path, "during", kind::object)) return;
  const json& during = clocks.at("during");
  const std::string during_path = path + ".during";
  c.field(during, during_path, "samples", kind::unsigned_integer);
  if (c.fields(during, during_path, {"sm_min_mhz", "sm_max_mhz"}, kind::mhz) &&
      during.at("sm_min_mhz").get<std::uint64_t>() > during.at("sm_max_mhz").get<std::uint64_t>())
    c.problem(fmt::format("{}: sm_min_mhz {} is above sm_max_mhz {}", during_path,
                          during.at("sm_min_mhz").get<std::uint64_t>(), during.at("sm_max_mhz").get<std::uint64_t>()));
}

void check_environment(checker& c, const json& env, const std::string& path) {
  if (c.field(env, path, "gpu", kind::object)) check_gpu(c, env.at("gpu"), path + ".gpu");
  if (c.field(env, path, "driver", kind::object)) {
    c.field(env.at("driver"), path + ".driver", "cuda_version", kind::string);
    c.field(env.at("driver"), path + ".driver", "cuda_version_code", kind::small_count);
    c.field(env.at("driver"), path + ".driver", "release", kind::string_or_null);
  }
  if (c.field(env, path, "runtime", kind::object)) {
    c.field(env.at("runtime"), path + ".runtime", "cuda_version", kind::string);
    c.field(env.at("runtime"), path + ".runtime", "cuda_version_code", kind::small_count);
  }
  if (c.field(env, path, "clocks", kind::object)) check_clocks(c, env.at("clocks"), path + ".clocks");
  if (c.field(env, path, "host", kind::object)) {
    c.field(env.at("host"), path + ".host", "name", kind::string);
    c.field(env.at("host"), path + ".host", "cpus", kind::small_count);
    c.field(env.at("host"), path + ".host", "cpu_scaling", kind::string);
  }
  c.fields(env, path, {"conveyor_version", "started_utc"}, kind::string);
}

void check_settings(checker& c, const json& s, const std::string& path) {
  c.fields(s, path, {"quick", "interleaved"}, kind::boolean);
  c.field(s, path, "repetitions", kind::small_count);
  c.field(s, path, "rotation_sets", kind::unsigned_integer);
  if (s.contains("min_pairs")) c.field(s, path, "min_pairs", kind::unsigned_integer);
  c.field(s, path, "target_ms", kind::positive_number);
  c.field(s, path, "elapsed_s", kind::nonnegative_number);
  c.field(s, path, "filter", kind::string);
  if (c.field(s, path, "sizes", kind::array))
    for (const json& n : s.at("sizes"))
      if (!is(n, kind::unsigned_integer)) c.problem(path + ".sizes: every size must be a non-negative integer");
}

} // namespace

std::vector<std::string> schema_problems(const nlohmann::json& j) {
  if (!j.is_object()) return {"the report must be a JSON object"};
  std::vector<std::string> problems;
  checker c(problems);
  if (c.field(j, "$", "schema", kind::string) && j.at("schema").get<std::string>() != schema_id)
    c.problem(fmt::format("$.schema: '{}', expected '{}'", j.at("schema").get<std::string>(), schema_id));
  if (c.field(j, "$", "environment", kind::object)) check_environment(c, j.at("environment"), "$.environment");
  if (c.field(j, "$", "settings", kind::object)) check_settings(c, j.at("settings"), "$.settings");
  if (c.field(j, "$", "results", kind::array)) {
    std::set<std::string> names;
    std::size_t i = 0;
    for (const json& r : j.at("results")) check_result(c, r, fmt::format("$.results[{}]", i++), names);
  }
  return problems;
}

} // namespace conveyor::bench
