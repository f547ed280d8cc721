//! \file saved_report.cpp
//! A saved report: read, checked and rendered.

#include "bench/saved_report.hpp"

#include "bench/report_json.hpp"
#include "bench/report_markdown.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace conveyor::bench {

namespace {

// A report is a regular file of a few hundred KiB: devices and pipes (/dev/zero would be read for ever) and anything
// above this are refused before reading.
constexpr std::uintmax_t max_report_bytes = 64ULL << 20;

//! The text of the file at `path`, once it is known to be a regular file of a report's size.
std::string read_report_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw std::runtime_error(fmt::format("report '{}': is a folder, not a JSON file", path));
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw std::runtime_error(fmt::format("report '{}': not a regular file (a device or a pipe)", path));
  if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_report_bytes)
    throw std::runtime_error(
        fmt::format("report '{}': {} bytes, above the {} MiB a report can have", path, size, max_report_bytes >> 20));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("report: cannot read '{}'", path));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

} // namespace

std::string render_saved_report(const std::string& path) {
  const std::string text = read_report_text(path);
  // nlohmann_json takes a NUL byte for the end of the input.
  if (const auto nul = text.find('\0'); nul != std::string::npos)
    throw std::runtime_error(fmt::format("report '{}': not JSON: a NUL byte at offset {}", path, nul));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Said in our words (the library's own text names its internals: exception ids, "last read").
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::size_t line =
        1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
    const std::size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const std::size_t column = at - (line_start == std::string::npos || at == 0 ? 0 : line_start + 1) + 1;
    throw std::runtime_error(
        fmt::format("report '{}': not JSON: a syntax error at line {}, column {}", path, line, column));
  }
  if (const auto problems = schema_problems(j); !problems.empty())
    throw std::runtime_error(fmt::format("report '{}': does not follow the schema: {}", path, problems.front()));
  try {
    return to_markdown(report_from_json(j));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("report '{}': {}", path, e.what()));
  }
}

} // namespace conveyor::bench
