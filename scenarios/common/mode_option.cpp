//! \file mode_option.cpp
//! The --mode option.

#include "common/mode_option.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace conveyor::scenarios {

void mode_option::add_to(CLI::App& sub) {
  std::vector<std::string> names;
  for (const run_mode& m : modes) names.push_back(to_string(m));
  names.emplace_back("all");
  sub.add_option("--mode", text, "Execution mode")->check(CLI::IsMember(names))->capture_default_str();
}

std::vector<run_mode> mode_option::selected() const {
  if (text == "all") return modes;
  for (const run_mode& m : modes)
    if (to_string(m) == text) return {m};
  std::string names;
  for (const run_mode& m : modes) names += to_string(m) + ", ";
  throw std::invalid_argument(fmt::format("--mode '{}': expected one of {}all", text, names));
}

bool mode_option::selects_graph() const {
  const std::vector<run_mode> chosen = selected();
  return std::any_of(chosen.begin(), chosen.end(), [](const run_mode& m) { return is_graph(m); });
}

bool mode_option::is_only(execution_mode kind) const { return text != "all" && text == to_string(kind); }

std::string mode_option::graph_modes() const {
  std::vector<std::string> graphs;
  for (const run_mode& m : modes)
    if (is_graph(m)) graphs.push_back(to_string(m));
  if (graphs.size() == 1) return fmt::format("--mode {} or --mode all", graphs.front());
  std::string listed;
  for (const std::string& g : graphs) listed += (listed.empty() ? "" : ", ") + g;
  return fmt::format("--mode {} or all", listed);
}

} // namespace conveyor::scenarios
