//! \file matrix_market.cpp
//! The strict Matrix Market reader.

#include "solve/matrix_market.hpp"
#include "common/printable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <optional>

namespace conveyor::solve {

matrix_market_error::matrix_market_error(std::string file, std::size_t line, std::string problem) :
    std::runtime_error(line > 0 ? fmt::format("{}:{}: {}", file, line, problem) : fmt::format("{}: {}", file, problem)),
    file_(std::move(file)),
    line_(line),
    problem_(std::move(problem)) {}

namespace {

using scenarios::printable; // control bytes of quoted text escaped (common/printable.hpp)

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) != 0) ++i;
    const std::size_t start = i;
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i])) == 0) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
}

// A whole token as a decimal integer (an optional sign, then digits only).
bool parse_integer(std::string_view token, long long& out) {
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);
  if (token.empty()) return false;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), out);
  return ec == std::errc{} && end == token.data() + token.size();
}

// A whole token as a floating-point number (C syntax, optional leading '+').
bool parse_real(std::string_view token, double& out) {
  if (!token.empty() && token.front() == '+') token.remove_prefix(1);
  if (token.empty() || token.front() == '+') return false;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), out);
  return ec == std::errc{} && end == token.data() + token.size();
}

// Reads lines ended by LF, CRLF or a lone CR (without the line end), counting lines and bytes; drops a UTF-8
// byte-order mark before the first line. A line longer than mm_max_line_length is an error, so a binary file or an
// endless device (/dev/zero) costs at most that much memory.
class line_reader {
public:
  line_reader(std::istream& in, const std::string& src) : in_(in), src_(src) {}
  bool next(std::string& line) {
    using traits = std::istream::traits_type;
    line.clear();
    std::streambuf* buf = in_.rdbuf();
    if (buf == nullptr) return false;
    auto c = buf->sbumpc();
    if (traits::eq_int_type(c, traits::eof())) return false;
    ++number_;
    for (; !traits::eq_int_type(c, traits::eof()); c = buf->sbumpc()) {
      ++bytes_;
      if (c == '\n') break;
      if (c == '\r') {
        if (traits::eq_int_type(buf->sgetc(), '\n')) {
          buf->sbumpc();
          ++bytes_;
        }
        break;
      }
      if (line.size() == mm_max_line_length)
        throw matrix_market_error(src_, number_,
                                  fmt::format("the line is longer than {} bytes (mm_max_line_length in "
                                              "scenarios/solve/matrix_market.hpp); reading stopped there: not a "
                                              "Matrix Market text file?",
                                              mm_max_line_length));
      line.push_back(traits::to_char_type(c));
    }
    if (number_ == 1 && line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3); // UTF-8 byte-order mark
    return true;
  }
  [[nodiscard]] std::size_t number() const noexcept { return number_; }
  //! Bytes consumed so far, line ends included.
  [[nodiscard]] std::uintmax_t bytes() const noexcept { return bytes_; }

private:
  std::istream& in_;
  const std::string& src_;
  std::size_t number_ = 0;
  std::uintmax_t bytes_ = 0;
};

enum class field_kind { real, integer };

struct header {
  field_kind field = field_kind::real;
  mm_symmetry symmetry = mm_symmetry::general;
};

constexpr std::string_view expected_banner = "'%%MatrixMarket matrix coordinate <real|integer> <general|symmetric>'";

header parse_banner(std::string_view line, const std::string& src) {
  auto fail = [&](const std::string& problem) { throw matrix_market_error(src, 1, problem); };
  if (line.starts_with("\xFF\xFE") || line.starts_with("\xFE\xFF"))
    fail(fmt::format("the file is UTF-16 text (it starts with a UTF-16 byte-order mark); save it as ASCII or UTF-8 "
                     "with the banner {}",
                     expected_banner));
  const auto words = split(line);
  if (words.empty() || lower(words[0]) != "%%matrixmarket")
    fail(fmt::format("missing Matrix Market banner: the first line must be {}", expected_banner));
  if (words.size() != 5) fail(fmt::format("the banner has {} words; expected 5: {}", words.size(), expected_banner));
  const std::string object = lower(words[1]);
  const std::string format = lower(words[2]);
  const std::string field = lower(words[3]);
  const std::string symmetry = lower(words[4]);
  if (object != "matrix") fail(fmt::format("object '{}' is not supported; expected 'matrix'", printable(words[1])));
  if (format == "array") fail("dense 'array' format is not supported; only sparse 'coordinate' files can be read");
  if (format != "coordinate") fail(fmt::format("unknown format '{}'; expected 'coordinate'", printable(words[2])));
  header h;
  if (field == "real" || field == "double") h.field = field_kind::real;
  else if (field == "integer") h.field = field_kind::integer;
  else if (field == "pattern")
    fail("'pattern' matrices hold no values (structure only); a solve needs a 'real' or 'integer' matrix");
  else if (field == "complex")
    fail("'complex' matrices are not supported; a solve needs a real symmetric positive definite matrix");
  else fail(fmt::format("unknown field '{}'; expected 'real' or 'integer'", printable(words[3])));
  if (symmetry == "general") h.symmetry = mm_symmetry::general;
  else if (symmetry == "symmetric") h.symmetry = mm_symmetry::symmetric;
  else if (symmetry == "skew-symmetric")
    fail("'skew-symmetric' storage is not supported (such a matrix is never positive definite); expected "
         "'general' or 'symmetric'");
  else if (symmetry == "hermitian")
    fail("'hermitian' storage is not supported (complex matrices only); expected 'general' or 'symmetric'");
  else fail(fmt::format("unknown symmetry '{}'; expected 'general' or 'symmetric'", printable(words[4])));
  return h;
}

struct size_line {
  long long rows = 0;
  long long cols = 0;
  long long entries = 0;
};

size_line parse_size(std::string_view line, std::size_t number, mm_symmetry symmetry, const std::string& src) {
  auto fail = [&](const std::string& problem) { throw matrix_market_error(src, number, problem); };
  const auto words = split(line);
  if (words.size() != 3)
    fail(fmt::format("the size line has {} fields; expected 3: 'rows columns entries'", words.size()));
  size_line s;
  const char* names[3] = {"row count", "column count", "entry count"};
  long long* values[3] = {&s.rows, &s.cols, &s.entries};
  for (int k = 0; k < 3; ++k)
    if (!parse_integer(words[k], *values[k]))
      fail(fmt::format("the {} '{}' on the size line is not an integer", names[k], printable(words[k])));
  if (s.rows < 1 || s.cols < 1) fail(fmt::format("the matrix is {} x {}; both sizes must be >= 1", s.rows, s.cols));
  if (s.rows > INT_MAX || s.cols > INT_MAX)
    fail(fmt::format("the matrix is {} x {}; sizes above {} are not supported (32-bit indices)", s.rows, s.cols,
                     INT_MAX));
  if (s.entries < 0) fail(fmt::format("the entry count {} is negative", s.entries));
  if (symmetry == mm_symmetry::symmetric) {
    if (s.rows != s.cols)
      fail(fmt::format("a 'symmetric' matrix must be square; the size line says {} x {}", s.rows, s.cols));
    const auto triangle = static_cast<unsigned long long>(s.rows) * static_cast<unsigned long long>(s.rows + 1) / 2;
    if (static_cast<unsigned long long>(s.entries) > triangle)
      fail(fmt::format("{} entries cannot fit in the lower triangle of a {} x {} matrix ({} places)", s.entries, s.rows,
                       s.cols, triangle));
    if (s.entries > INT_MAX / 2)
      fail(fmt::format("{} stored entries are too many for 32-bit indices once both triangles are stored", s.entries));
  } else {
    const auto places = static_cast<unsigned long long>(s.rows) * static_cast<unsigned long long>(s.cols);
    if (static_cast<unsigned long long>(s.entries) > places)
      fail(fmt::format("{} entries cannot fit in a {} x {} matrix", s.entries, s.rows, s.cols));
    if (s.entries > INT_MAX) fail(fmt::format("{} entries are too many for 32-bit indices", s.entries));
  }
  // The solver needs a symmetric positive definite matrix, whose diagonal is positive: every one of its entries is
  // stored, so a square matrix with fewer entries than rows cannot be one (and would cost memory per row for nothing).
  if (s.rows == s.cols && s.entries < s.rows)
    fail(fmt::format("{} entries cannot hold the {} diagonal entries of a {} x {} symmetric positive definite matrix "
                     "(the solver needs every diagonal entry stored and positive)",
                     s.entries, s.rows, s.rows, s.cols));
  return s;
}

// Refuses a size line announcing more entries than the `remaining` bytes after it can hold.
void check_room(const size_line& s, std::uintmax_t remaining, std::size_t number, const std::string& src) {
  const std::uintmax_t room = (remaining + 1) / mm_min_entry_bytes; // the last line may lack its line end
  if (static_cast<std::uintmax_t>(s.entries) > room)
    throw matrix_market_error(
        src, number,
        fmt::format("the size line announces {} entries, but the {} bytes after it can hold at most {} (an entry "
                    "line 'row column value' takes at least {} bytes): the file is truncated or the size line wrong",
                    s.entries, remaining, room, mm_min_entry_bytes));
}

mm_entry parse_entry(std::string_view line, std::size_t number, const size_line& size, const header& h,
                     const std::string& src) {
  auto fail = [&](const std::string& problem) { throw matrix_market_error(src, number, problem); };
  const auto words = split(line);
  if (words.size() != 3)
    fail(fmt::format("an entry line has {} field{}; expected 3: 'row column value'", words.size(),
                     words.size() == 1 ? "" : "s"));
  long long i = 0;
  long long j = 0;
  if (!parse_integer(words[0], i)) fail(fmt::format("the row index '{}' is not an integer", printable(words[0])));
  if (!parse_integer(words[1], j)) fail(fmt::format("the column index '{}' is not an integer", printable(words[1])));
  if (i < 1 || i > size.rows) fail(fmt::format("the row index {} is out of range [1, {}]", i, size.rows));
  if (j < 1 || j > size.cols) fail(fmt::format("the column index {} is out of range [1, {}]", j, size.cols));
  double value = 0.0;
  if (h.field == field_kind::integer) {
    long long v = 0;
    if (!parse_integer(words[2], v))
      fail(fmt::format("the value '{}' is not an integer (the banner says 'integer')", printable(words[2])));
    if (std::llabs(v) > (1LL << 53))
      fail(fmt::format("the integer value {} cannot be represented exactly in double precision", v));
    value = static_cast<double>(v);
  } else {
    if (!parse_real(words[2], value)) fail(fmt::format("the value '{}' is not a number", printable(words[2])));
    if (!std::isfinite(value)) fail(fmt::format("the value '{}' is not finite", printable(words[2])));
  }
  if (h.symmetry == mm_symmetry::symmetric && i < j)
    fail(fmt::format("entry ({}, {}) lies above the diagonal; a 'symmetric' file stores the lower triangle only "
                     "(row >= column)",
                     i, j));
  return {static_cast<int>(i - 1), static_cast<int>(j - 1), value, number};
}

// Entry indices sorted by (row, column).
std::vector<std::size_t> sorted_order(const std::vector<mm_entry>& entries) {
  std::vector<std::size_t> order(entries.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return entries[a].row != entries[b].row ? entries[a].row < entries[b].row : entries[a].col < entries[b].col;
  });
  return order;
}

void reject_duplicates(const coo_matrix& m) {
  const auto order = sorted_order(m.entries);
  for (std::size_t k = 1; k < order.size(); ++k) {
    const mm_entry& a = m.entries[order[k - 1]];
    const mm_entry& b = m.entries[order[k]];
    if (a.row == b.row && a.col == b.col) {
      const mm_entry& later = a.line > b.line ? a : b;
      const mm_entry& earlier = a.line > b.line ? b : a;
      throw matrix_market_error(
          m.source, later.line,
          fmt::format("duplicate entry ({}, {}); it is also on line {}", later.row + 1, later.col + 1, earlier.line));
    }
  }
}

// The bytes from the stream's position to its end, when it can seek (a string stream, a regular file).
std::optional<std::uintmax_t> stream_size(std::istream& in) {
  std::streambuf* buf = in.rdbuf();
  if (buf == nullptr) return std::nullopt;
  const auto here = buf->pubseekoff(0, std::ios::cur, std::ios::in);
  if (here == std::streampos(-1)) return std::nullopt;
  const auto end = buf->pubseekoff(0, std::ios::end, std::ios::in);
  buf->pubseekpos(here, std::ios::in);
  if (end == std::streampos(-1) || end < here) return std::nullopt;
  return static_cast<std::uintmax_t>(end - here);
}

coo_matrix parse(std::istream& in, const std::string& src, std::optional<std::uintmax_t> total_bytes) {
  line_reader lines(in, src);
  std::string line;
  if (!lines.next(line))
    throw matrix_market_error(src, 1, fmt::format("the file is empty; expected the banner {}", expected_banner));
  const header h = parse_banner(line, src);

  // Comments and blank lines, then the size line.
  bool have_size = false;
  while (lines.next(line)) {
    if (is_blank(line) || line.front() == '%') continue;
    have_size = true;
    break;
  }
  if (!have_size)
    throw matrix_market_error(src, lines.number(), "the file ends before the size line 'rows columns entries'");
  const size_line size = parse_size(line, lines.number(), h.symmetry, src);
  // Entries are kept in proportion to the bytes present: the file's size bounds the count up front; without it
  // (a pipe) the vector grows with the entries actually read.
  auto reserve = static_cast<std::size_t>(std::min<long long>(size.entries, 1LL << 12));
  if (total_bytes) {
    const std::uintmax_t remaining = *total_bytes > lines.bytes() ? *total_bytes - lines.bytes() : 0;
    check_room(size, remaining, lines.number(), src);
    reserve = static_cast<std::size_t>(size.entries);
  }

  coo_matrix m;
  m.source = src;
  m.rows = static_cast<int>(size.rows);
  m.cols = static_cast<int>(size.cols);
  m.symmetry = h.symmetry;
  m.entries.reserve(reserve);
  while (lines.next(line)) {
    if (is_blank(line)) continue;
    if (line.front() == '%')
      throw matrix_market_error(src, lines.number(),
                                "a comment line among the entries; comments belong before the size line");
    if (static_cast<long long>(m.entries.size()) == size.entries)
      throw matrix_market_error(src, lines.number(),
                                fmt::format("more entries than the {} the size line announces", size.entries));
    m.entries.push_back(parse_entry(line, lines.number(), size, h, src));
  }
  if (static_cast<long long>(m.entries.size()) != size.entries)
    throw matrix_market_error(src, lines.number(),
                              fmt::format("the file ends after {} of the {} entries the size line announces "
                                          "(truncated data?)",
                                          m.entries.size(), size.entries));
  reject_duplicates(m);
  return m;
}

} // namespace

coo_matrix parse_matrix_market(std::istream& in, std::string_view source) {
  return parse(in, std::string(source), stream_size(in));
}

coo_matrix read_matrix_market(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_directory(status))
    throw matrix_market_error(path.string(), 0, "is a folder, not a Matrix Market file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw matrix_market_error(path.string(), 0, "cannot open the file");
  // Only a regular file's size is known; a device or a pipe is read line by line within mm_max_line_length.
  std::optional<std::uintmax_t> size;
  if (std::filesystem::is_regular_file(status)) size = std::filesystem::file_size(path, ec);
  return parse(in, path.string(), ec ? std::nullopt : size);
}

void require_symmetric(const coo_matrix& m) {
  if (m.rows != m.cols)
    throw matrix_market_error(m.source, 0,
                              fmt::format("the matrix is {} x {}; a symmetric matrix must be square", m.rows, m.cols));
  if (m.symmetry == mm_symmetry::symmetric) return;
  const auto order = sorted_order(m.entries);
  auto find = [&](int row, int col) -> const mm_entry* {
    auto it =
        std::lower_bound(order.begin(), order.end(), std::pair{row, col}, [&](std::size_t k, std::pair<int, int> key) {
          const mm_entry& e = m.entries[k];
          return e.row != key.first ? e.row < key.first : e.col < key.second;
        });
    if (it == order.end()) return nullptr;
    const mm_entry& e = m.entries[*it];
    return e.row == row && e.col == col ? &e : nullptr;
  };
  for (const mm_entry& e : m.entries) {
    if (e.row == e.col) continue;
    const mm_entry* partner = find(e.col, e.row);
    if (partner == nullptr)
      throw matrix_market_error(m.source, e.line,
                                fmt::format("entry ({}, {}) has no partner ({}, {}): the 'general' matrix is not "
                                            "symmetric, and the solver needs a symmetric matrix",
                                            e.row + 1, e.col + 1, e.col + 1, e.row + 1));
    if (partner->value != e.value)
      throw matrix_market_error(
          m.source, e.line,
          fmt::format("entry ({}, {}) = {:.17g} differs from ({}, {}) = {:.17g} on line {}: the "
                      "'general' matrix is not symmetric, and the solver needs a symmetric matrix",
                      e.row + 1, e.col + 1, e.value, e.col + 1, e.row + 1, partner->value, partner->line));
  }
}

} // namespace conveyor::solve
