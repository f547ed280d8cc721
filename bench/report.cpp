//! \file report.cpp
//! The result records: benchmark names, metric units, version and compute-capability text.

#include "bench/report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace conveyor::bench {

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

} // namespace conveyor::bench
