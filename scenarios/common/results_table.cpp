//! \file results_table.cpp
//! The results table, the speedup column and the modes' labels.

#include "common/results_table.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor::scenarios {

std::string mode_label(const run_mode& m, bool programmatic) {
  std::string label = to_string(m);
  if (programmatic) label += "+pdl";
  return label;
}

std::string speedup_vs_sync(std::optional<double> sync_time, double time) {
  if (!sync_time || !(time > 0.0)) return "n/a";
  return fmt::format("{:.2f}x", *sync_time / time);
}

results_table::results_table(std::vector<column> columns) : columns_(std::move(columns)) {}

void results_table::new_group() {
  if (!rows_.empty()) ++group_;
}

void results_table::add_row(const run_mode& mode, double time, std::vector<std::string> cells, std::string suffix) {
  std::size_t plain = 0;
  for (const column& c : columns_) plain += c.speedup ? 0 : 1;
  if (cells.size() != plain)
    throw std::invalid_argument(fmt::format(
        "results_table::add_row: {} cells for a table of {} columns besides the speedup", cells.size(), plain));
  rows_.push_back({group_, mode.kind == execution_mode::sync, time, std::move(cells), std::move(suffix)});
}

std::optional<double> results_table::sync_time(std::size_t group) const {
  for (const row& r : rows_)
    if (r.group == group && r.sync) return r.time;
  return std::nullopt;
}

std::string results_table::line(const std::vector<std::string>& cells) const {
  std::string out;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (i > 0) out += " | ";
    out += columns_[i].left ? fmt::format("{:<{}}", cells[i], columns_[i].width)
                            : fmt::format("{:>{}}", cells[i], columns_[i].width);
  }
  return out;
}

std::string results_table::text() const {
  std::vector<std::string> headers;
  std::string rule;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    headers.push_back(columns_[i].header);
    rule += fmt::format("{}{:-<{}}", i > 0 ? "-+-" : "", "", columns_[i].width);
  }
  std::string out = line(headers) + "\n" + rule + "\n";
  for (const row& r : rows_) {
    std::vector<std::string> cells;
    std::size_t next = 0;
    for (const column& c : columns_)
      cells.push_back(c.speedup ? speedup_vs_sync(sync_time(r.group), r.time) : r.cells[next++]);
    out += line(cells) + r.suffix + "\n";
  }
  return out;
}

} // namespace conveyor::scenarios
