#pragma once
//! \file mode_option.hpp
//! The --mode option every workload command has: one of the workload's run modes, spelled by to_string(run_mode),
//! or "all" (the default), which runs them all in order, sync first.

#include "common/execution_mode.hpp"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace conveyor::scenarios {

//! A command's --mode option and the modes it selects. Add it once (add_to), read it after parsing. Must outlive
//! the CLI11 app it is added to (CLI11 writes `text`). Not thread-safe.
struct mode_option {
  std::vector<run_mode> modes{standard_modes.begin(), standard_modes.end()}; //!< the workload's, --mode all order
  std::string text = "all";                                                  //!< the value given

  //! Adds "--mode" to `sub`: one of to_string(m) for m in `modes`, or "all"; the help lists them.
  //! \throws CLI::OptionAlreadyAdded when `sub` has a --mode option already.
  void add_to(CLI::App& sub);
  //! The modes `text` selects: all of `modes` for "all", else the one it names.
  //! \throws std::invalid_argument when `text` names none of them (CLI11 refuses such a value first).
  [[nodiscard]] std::vector<run_mode> selected() const;
  //! True when a selected mode is a graph mode.
  //! \throws as selected().
  [[nodiscard]] bool selects_graph() const;
  //! True when `text` selects the single mode of kind `kind` (e.g. "--mode sync").
  [[nodiscard]] bool is_only(execution_mode kind) const;
  //! How to select a graph mode, for messages: "--mode graph or --mode all", or with several graph modes "--mode
  //! graph-per-iteration, graph-while, graph-relaunch or all". \throws std::bad_alloc only.
  [[nodiscard]] std::string graph_modes() const;
};

} // namespace conveyor::scenarios
