//! \file markdown.cpp
//! Markdown text, numbers, byte counts and tables for the reports.

#include "bench/markdown.hpp"

#include "util/byte_size.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace conveyor::bench {

namespace {

std::size_t display_width(std::string_view text) noexcept {
  std::size_t width = 0;
  for (const char ch : text)
    if ((static_cast<unsigned char>(ch) & 0xC0U) != 0x80U) ++width;
  return width;
}

// A table cell: '|' and '\\' escaped (so that "a\\|" cannot end the cell early), control characters (line breaks,
// tabs, ...) made spaces. Free text from a report goes through markdown_text first.
std::string escape_cell(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '|' || ch == '\\') out.append(1, '\\').append(1, ch);
    else if (c < 0x20U || c == 0x7FU) out += ' ';
    else out += ch;
  }
  return out;
}

} // namespace

std::string markdown_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20U || c == 0x7FU) out += ' ';
    else if (std::string_view("\\`*_[]<>|~&").find(ch) != std::string_view::npos) out.append(1, '\\').append(1, ch);
    else out += ch;
  }
  return out;
}

std::string markdown_code(std::string_view text) {
  std::string body;
  std::size_t run = 0;
  std::size_t longest = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    body += c < 0x20U || c == 0x7FU ? ' ' : ch;
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad =
      !body.empty() && (body.front() == '`' || body.back() == '`' || (body.front() == ' ' && body.back() == ' '));
  return pad ? fence + ' ' + body + ' ' + fence : fence + body + fence;
}

std::string format_number(double value) {
  if (!std::isfinite(value)) return std::string(missing);
  if (value == 0.0) return "0";
  const double a = std::fabs(value);
  if (a >= 100.0) return fmt::format("{:.0f}", value);
  if (a >= 10.0) return fmt::format("{:.1f}", value);
  if (a >= 1.0) return fmt::format("{:.2f}", value);
  return fmt::format("{:.3f}", value);
}

std::string format_summary(const summary& s) {
  return fmt::format("{} [{}–{}]", format_number(s.median), format_number(s.min), format_number(s.max));
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return std::string(missing);
  if (std::fabs(bytes) < 0.5) return "0 B";
  return conveyor::detail::byte_size(bytes); // the project's one byte formatter (src/util/byte_size.hpp)
}

std::string markdown_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                           std::string_view align) {
  const std::size_t columns = header.size();
  if (columns == 0) throw std::invalid_argument("markdown_table: no columns");
  if (align.size() != columns)
    throw std::invalid_argument(
        fmt::format("markdown_table: {} alignment characters for {} columns", align.size(), columns));
  for (const char a : align)
    if (a != 'l' && a != 'r')
      throw std::invalid_argument(fmt::format("markdown_table: alignment '{}' (use 'l' or 'r')", a));
  std::vector<std::vector<std::string>> cells;
  cells.reserve(rows.size() + 1);
  cells.emplace_back();
  for (const auto& h : header) cells.back().push_back(escape_cell(h));
  for (std::size_t r = 0; r < rows.size(); ++r) {
    if (rows[r].size() != columns)
      throw std::invalid_argument(
          fmt::format("markdown_table: row {} has {} cells, the header {}", r, rows[r].size(), columns));
    cells.emplace_back();
    for (const auto& text : rows[r]) cells.back().push_back(escape_cell(text));
  }
  std::vector<std::size_t> width(columns, 3);
  for (const auto& row : cells)
    for (std::size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], display_width(row[c]));

  auto line = [&](const std::vector<std::string>& row) {
    std::string out = "|";
    for (std::size_t c = 0; c < columns; ++c) {
      const std::string pad(width[c] - display_width(row[c]), ' ');
      out += ' ';
      out += align[c] == 'r' ? pad + row[c] : row[c] + pad;
      out += " |";
    }
    return out + '\n';
  };
  std::string out = line(cells.front());
  out += '|';
  for (std::size_t c = 0; c < columns; ++c)
    out += align[c] == 'r' ? fmt::format(" {}: |", std::string(width[c] - 1, '-'))
                           : fmt::format(" :{} |", std::string(width[c] - 1, '-'));
  out += '\n';
  for (std::size_t r = 1; r < cells.size(); ++r) out += line(cells[r]);
  return out;
}

} // namespace conveyor::bench
