#pragma once
//! \file results_table.hpp
//! The results table every command prints: one row per mode (per frame size in filter), a "speedup vs sync"
//! column computed from the rows' times, and the modes' labels.

#include "common/execution_mode.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::scenarios {

//! The mode's label in tables and check lines: to_string(m), with "+pdl" when its kernels ran with programmatic
//! dependent launch ("graph+pdl"). \throws std::bad_alloc only.
[[nodiscard]] std::string mode_label(const run_mode& m, bool programmatic);

//! The speedup column's cell: `sync_time` / `time` as "2.69x", or "n/a" without a sync time or a positive time.
//! \throws std::bad_alloc only.
[[nodiscard]] std::string speedup_vs_sync(std::optional<double> sync_time, double time);

//! A table of text cells: a header, a rule of dashes, then the rows; cells right-aligned to their column's width
//! (left-aligned where the column says so), separated by " | ", each row optionally followed by a suffix. A column
//! marked `speedup` ("speedup vs sync", 15 wide by speedup_column()) is filled per row by speedup_vs_sync from the
//! row's time and the time of the sync row of its group. Not thread-safe.
class results_table {
public:
  //! A column: its header, width (cells are padded to it, never cut) and alignment.
  struct column {
    std::string header;    //!< header text
    std::size_t width = 0; //!< minimum width in characters
    bool left = false;     //!< left-aligned (else right-aligned)
    bool speedup = false;  //!< filled with the speedup against the group's sync row
  };

  //! The "speedup vs sync" column.
  [[nodiscard]] static column speedup_column() { return {"speedup vs sync", 15, false, true}; }

  //! A table with these columns. \throws std::bad_alloc only.
  explicit results_table(std::vector<column> columns);

  //! Starts a new group of rows: their speedups compare with the sync row of the group (filter: one group per frame
  //! size). The first row starts the first group.
  void new_group();

  //! Adds a row of mode `mode` with time per unit `time` (for the speedup column), `cells` for the other columns in
  //! order, and `suffix` after the last one (e.g. "  NOT CONVERGED").
  //! \throws std::invalid_argument when `cells` does not have one entry per column but the speedup column.
  void add_row(const run_mode& mode, double time, std::vector<std::string> cells, std::string suffix = {});

  //! The table as text, one line per row, each ending in '\n'. \throws std::bad_alloc only.
  [[nodiscard]] std::string text() const;

private:
  struct row {
    std::size_t group = 0;
    bool sync = false;
    double time = 0.0;
    std::vector<std::string> cells;
    std::string suffix;
  };
  [[nodiscard]] std::string line(const std::vector<std::string>& cells) const;
  [[nodiscard]] std::optional<double> sync_time(std::size_t group) const;

  std::vector<column> columns_;
  std::vector<row> rows_;
  std::size_t group_ = 0;
};

} // namespace conveyor::scenarios
