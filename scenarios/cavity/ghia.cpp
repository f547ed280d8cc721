//! \file ghia.cpp
//! Reading Ghia et al.'s tables and comparing profiles with them.

#include "cavity/ghia.hpp"
#include "common/printable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>

namespace conveyor::cavity {

const std::vector<double>* ghia_table::column(double re) const noexcept {
  for (std::size_t k = 0; k < reynolds.size() && k < values.size(); ++k)
    if (std::fabs(static_cast<double>(reynolds[k]) - re) < 1e-9) return &values[k];
  return nullptr;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

using scenarios::printable; // control bytes of quoted text escaped (common/printable.hpp)

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

template <class T>
bool parse_number(std::string_view text, T& out) {
  if (text.empty()) return false;
  if (text.front() == '+') text.remove_prefix(1);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && end == text.data() + text.size();
}

//! The next line of `text` from `pos` (a line ends at LF, CRLF or a lone CR); `pos` moves past its end, past the
//! text's end (text.size() + 1) after the last line.
std::string_view next_line(std::string_view text, std::size_t& pos) {
  const std::size_t eol = text.find_first_of("\r\n", pos);
  const std::string_view raw = text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
  if (eol == std::string_view::npos) pos = text.size() + 1;
  else pos = eol + (text[eol] == '\r' && eol + 1 < text.size() && text[eol + 1] == '\n' ? 2 : 1);
  return raw;
}

//! The header's fields into `t`: the coordinate's name (lower case) and one Reynolds number per column.
//! \throws ghia_error naming the source and line.
void parse_header(const std::vector<std::string_view>& fields, ghia_table& t, std::string_view source,
                  std::size_t line_no) {
  if (fields.size() < 2)
    throw ghia_error(fmt::format("{}:{}: header needs a coordinate and at least one Re column", source, line_no));
  t.coordinate.clear();
  for (const char c : fields[0]) t.coordinate.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (std::size_t k = 1; k < fields.size(); ++k) {
    const std::string_view f = fields[k];
    int re = 0;
    if (f.size() < 3 || (f[0] != 'R' && f[0] != 'r') || (f[1] != 'e' && f[1] != 'E') ||
        !parse_number(f.substr(2), re) || re <= 0)
      throw ghia_error(
          fmt::format("{}:{}: column header '{}' is not Re<positive integer>", source, line_no, printable(f)));
    t.reynolds.push_back(re);
  }
  t.values.resize(t.reynolds.size());
}

//! A data row's fields into `t`: its coordinate (in [0, 1], above the previous row's) and one value per column.
//! \throws ghia_error naming the source and line.
void parse_row(const std::vector<std::string_view>& fields, ghia_table& t, std::string_view source,
               std::size_t line_no) {
  if (fields.size() != t.reynolds.size() + 1)
    throw ghia_error(
        fmt::format("{}:{}: {} fields, expected {}", source, line_no, fields.size(), t.reynolds.size() + 1));
  double coordinate = 0.0;
  if (!parse_number(fields[0], coordinate))
    throw ghia_error(fmt::format("{}:{}: '{}' is not a number", source, line_no, printable(fields[0])));
  if (!(coordinate >= 0.0 && coordinate <= 1.0))
    throw ghia_error(fmt::format("{}:{}: coordinate {} outside [0, 1]", source, line_no, coordinate));
  if (!t.position.empty() && !(coordinate > t.position.back()))
    throw ghia_error(fmt::format("{}:{}: coordinate {} not above the previous row's {} (rows must ascend)", source,
                                 line_no, coordinate, t.position.back()));
  t.position.push_back(coordinate);
  for (std::size_t k = 1; k < fields.size(); ++k) {
    double v = 0.0;
    if (!parse_number(fields[k], v) || !std::isfinite(v))
      throw ghia_error(fmt::format("{}:{}: '{}' is not a number", source, line_no, printable(fields[k])));
    t.values[k - 1].push_back(v);
  }
}

} // namespace

ghia_table parse_ghia_csv(std::string_view text, std::string_view source) {
  ghia_table t;
  std::size_t line_no = 0;
  bool header = true;
  std::size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0; // a UTF-8 byte-order mark
  while (pos <= text.size()) {
    const std::string_view raw = next_line(text, pos);
    ++line_no;
    if (const std::size_t nul = raw.find('\0'); nul != std::string_view::npos)
      throw ghia_error(
          fmt::format("{}:{}: a NUL byte at column {}: binary data, not CSV text", source, line_no, nul + 1));
    const std::string_view line = trim(raw);
    if (line.empty()) continue;
    if (header) {
      parse_header(split(line), t, source, line_no);
      header = false;
    } else {
      parse_row(split(line), t, source, line_no);
    }
  }
  if (header) throw ghia_error(fmt::format("{}: empty (no header)", source));
  if (t.position.empty()) throw ghia_error(fmt::format("{}: no data rows", source));
  return t;
}

ghia_table read_ghia_csv(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (std::filesystem::is_directory(status))
    throw ghia_error(fmt::format("'{}' is a folder, not a Ghia CSV file", file.string()));
  const auto too_long = [&] {
    return ghia_error(fmt::format("'{}' is longer than {} bytes (ghia_max_file_bytes in scenarios/cavity/ghia.hpp; "
                                  "raise it there and rebuild): not a Ghia table, reading stopped there",
                                  file.string(), ghia_max_file_bytes));
  };
  // A regular file's size is checked first; a device or a pipe is read at most one byte past the limit.
  std::uintmax_t expected = ghia_max_file_bytes;
  if (std::filesystem::is_regular_file(status)) {
    const std::uintmax_t size = std::filesystem::file_size(file, ec);
    if (!ec && size > ghia_max_file_bytes) throw too_long();
    if (!ec) expected = size;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ghia_error(fmt::format("cannot open '{}'", file.string()));
  std::string text(static_cast<std::size_t>(expected) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw ghia_error(fmt::format("cannot read '{}'", file.string()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > ghia_max_file_bytes) throw too_long();
  return parse_ghia_csv(text, file.string());
}

ghia_reference read_ghia_dir(const std::filesystem::path& dir) {
  ghia_reference r{read_ghia_csv(dir / "u_vertical_centerline.csv"),
                   read_ghia_csv(dir / "v_horizontal_centerline.csv")};
  if (r.u.coordinate != "y")
    throw ghia_error(fmt::format("{}: first column is '{}', expected y", (dir / "u_vertical_centerline.csv").string(),
                                 r.u.coordinate));
  if (r.v.coordinate != "x")
    throw ghia_error(fmt::format("{}: first column is '{}', expected x", (dir / "v_horizontal_centerline.csv").string(),
                                 r.v.coordinate));
  return r;
}

std::optional<std::filesystem::path> default_ghia_dir() {
  if (const char* shared = std::getenv("CONVEYOR_SHARED_DATA"); shared != nullptr && *shared != '\0')
    return std::filesystem::path(shared) / "ghia1982";
  std::error_code ec;
  const std::filesystem::path local = std::filesystem::path("..") / "shared" / "data" / "ghia1982";
  if (std::filesystem::is_directory(local, ec)) return local;
  return std::nullopt;
}

std::vector<double> doubtful_positions(char component, double re) {
  if (component == 'v' && std::fabs(re - 400.0) < 1e-9) return {0.9063};
  return {};
}

std::optional<ghia_comparison> compare_with_ghia(const ghia_reference& ref, double re, const profile& u,
                                                 const profile& v) {
  const std::vector<double>* u_ref = ref.u.column(re);
  const std::vector<double>* v_ref = ref.v.column(re);
  if (u_ref == nullptr || v_ref == nullptr) return std::nullopt;
  ghia_comparison c;
  c.re = re;
  c.u = compare_profile(u, ref.u.position, *u_ref);
  c.v = compare_profile(v, ref.v.position, *v_ref);
  const std::vector<double> u_skip = doubtful_positions('u', re);
  const std::vector<double> v_skip = doubtful_positions('v', re);
  c.u_trusted = compare_profile(u, ref.u.position, *u_ref, u_skip);
  c.v_trusted = compare_profile(v, ref.v.position, *v_ref, v_skip);
  return c;
}

} // namespace conveyor::cavity
