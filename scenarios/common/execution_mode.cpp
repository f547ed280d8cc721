#include "common/execution_mode.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor::scenarios {

std::string_view to_string(execution_mode m) noexcept {
  switch (m) {
  case execution_mode::sync: return "sync";
  case execution_mode::stream: return "stream";
  case execution_mode::graph: return "graph";
  }
  return "?";
}

execution_mode parse_execution_mode(std::string_view text) {
  for (const auto m : all_execution_modes)
    if (to_string(m) == text) return m;
  throw std::invalid_argument(fmt::format("unknown execution mode '{}' (expected sync, stream or graph)", text));
}

std::string to_string(const run_mode& m) {
  std::string name(to_string(m.kind));
  if (!m.graph.empty()) name.append("-").append(m.graph);
  return name;
}

} // namespace conveyor::scenarios
