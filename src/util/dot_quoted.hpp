#pragma once
// Internal (any layer): a Graphviz DOT quoted string, defined once for the graph export and the profile's DOT.

#include <string>
#include <string_view>

namespace conveyor::detail {

//! `text` as a DOT double-quoted string (Graphviz, "The DOT Language": ID): backslashes and quotes escaped, each
//! newline as DOT's "\n" line break. Never throws but for std::bad_alloc.
[[nodiscard]] inline std::string dot_quoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace conveyor::detail
