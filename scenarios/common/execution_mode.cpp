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

} // namespace conveyor::scenarios
