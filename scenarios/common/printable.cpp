#include "common/printable.hpp"

#include <fmt/format.h>

namespace conveyor::scenarios {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F) out += fmt::format("\\x{:02x}", u);
    else out += c;
  }
  return out;
}

} // namespace conveyor::scenarios
