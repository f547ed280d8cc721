#pragma once
//! \file report_json.hpp
//! The JSON form of a `conveyor bench` report (schema "conveyor-bench/1"): writing, reading and checking it.

#include "bench/report.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace conveyor::bench {

//! The JSON schema identifier written as "schema" at the top of every report.
inline constexpr std::string_view schema_id = "conveyor-bench/1";

//! The report as JSON (schema "conveyor-bench/1"): {"schema", "environment": {"gpu", "driver", "runtime",
//! "clocks", "host", "conveyor_version", "started_utc"}, "settings": {...}, "results": [{"name", "group",
//! "topology", "variant", "api", "nodes", "changed", "iterations", "repetitions", "metrics": {name: {"unit",
//! "median", "min", "max"}}, "error"}]}. Metrics whose values are not finite are left out.
[[nodiscard]] nlohmann::json to_json(const bench_report& report);

//! Reads a report written by to_json.
//! \throws std::invalid_argument naming the first problem when `j` does not follow the schema.
[[nodiscard]] bench_report report_from_json(const nlohmann::json& j);

//! Every way in which `j` departs from the schema, one readable line each (empty when it conforms): missing or
//! mistyped fields, unknown groups or APIs, units that do not match metric names, min <= median <= max violated,
//! a result without error and without metrics, duplicate names; strings with control characters (line breaks,
//! tabs, ...; only an error message may hold line breaks and tabs), topologies, variants and metric names that are
//! not plain words (letters, digits, '_', '-'), a compute capability other than "major.minor" of 1 or 2 digits
//! each, clocks above 100000 MHz, temperatures outside [-1, 200] °C, counts beyond the integer type they are read
//! into, negative times, ratios, counts, target_ms <= 0 or elapsed_s < 0 (bytes may be negative: a memory
//! difference).
[[nodiscard]] std::vector<std::string> schema_problems(const nlohmann::json& j);

} // namespace conveyor::bench
