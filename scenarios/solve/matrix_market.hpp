#pragma once
//! \file matrix_market.hpp
//! A small, strict reader of sparse Matrix Market files (`%%MatrixMarket matrix coordinate real|integer
//! general|symmetric`), host-only. Every error names the file, the line and the problem; text quoted from the file
//! has its control bytes escaped (a NUL reads `\x00`). Memory grows with the data present, never with what a
//! header merely claims: a size line that the rest of the file cannot hold is refused before anything is allocated.

#include <cstddef>
#include <filesystem>
#include <istream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::solve {

//! A Matrix Market file is malformed or unsupported. `what()` reads `file:line: problem` (line 0 when the problem
//! is not tied to a line, e.g. the file cannot be opened).
class matrix_market_error : public std::runtime_error {
public:
  //! \param file    the file (or stream) name as given by the caller
  //! \param line    1-based line number, or 0
  //! \param problem what is wrong, in words
  matrix_market_error(std::string file, std::size_t line, std::string problem);
  //! The file name as given.
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  //! The 1-based line of the problem, or 0.
  [[nodiscard]] std::size_t line() const noexcept { return line_; }
  //! The problem alone, without file and line.
  [[nodiscard]] const std::string& problem() const noexcept { return problem_; }

private:
  std::string file_;
  std::size_t line_;
  std::string problem_;
};

//! The longest line the reader accepts, in bytes (a Matrix Market line holds a few numbers or a comment). A longer
//! line (a binary file, /dev/zero) is refused after this many bytes, naming this limit; raise it here and rebuild.
inline constexpr std::size_t mm_max_line_length = std::size_t{1} << 16;

//! The fewest bytes one entry line takes: `i j v` and a line end.
inline constexpr std::size_t mm_min_entry_bytes = 6;

//! How a Matrix Market file stores a matrix: every entry, or (symmetric) the lower triangle only.
enum class mm_symmetry { general, symmetric };

//! One stored entry: 0-based row and column, its value, and the 1-based line of the file it came from.
struct mm_entry {
  int row = 0;          //!< 0-based row index
  int col = 0;          //!< 0-based column index
  double value = 0.0;   //!< the value (integer fields converted exactly where representable)
  std::size_t line = 0; //!< the line in the file, for error messages
};

//! A sparse matrix exactly as a coordinate Matrix Market file stores it (no expansion of symmetric storage).
struct coo_matrix {
  std::string source;                          //!< the file (or stream) name, for error messages
  int rows = 0;                                //!< number of rows (M of the size line)
  int cols = 0;                                //!< number of columns (N of the size line)
  mm_symmetry symmetry = mm_symmetry::general; //!< storage scheme of the banner
  std::vector<mm_entry> entries;               //!< stored entries in file order (NNZ of the size line)
};

//! Parses a Matrix Market stream named `source` (used in messages only).
//! Accepts: banner `%%MatrixMarket matrix coordinate <field> <symmetry>` (keywords case-insensitive), field
//! `real`, `double` or `integer`, symmetry `general` or `symmetric`; `%` comment lines and blank lines before the
//! size line `M N NNZ`; blank lines among the entries; LF, CRLF or CR-only line ends; a UTF-8 byte-order mark
//! before the banner. Each entry line is `i j value` with 1-based indices. When the stream can seek, its size
//! bounds what the size line may announce (see the \throws); otherwise memory still grows only with the entries
//! actually read.
//! \throws matrix_market_error naming `source`, the line and the problem for: a missing or wrong banner (a UTF-16
//!         file named as such), `array` format, `pattern` or `complex` fields, `skew-symmetric` or `hermitian`
//!         storage, a missing or malformed size line (non-square symmetric, sizes out of the 32-bit range; a square
//!         matrix with fewer entries than rows, which cannot hold the diagonal a symmetric positive definite matrix
//!         needs; more entries than the rest of the file can hold at mm_min_entry_bytes each), a line longer than
//!         mm_max_line_length, entry lines with the wrong number of fields, non-numeric or non-finite values,
//!         non-integer values in an `integer` file, indices out of range, entries above the diagonal in a
//!         `symmetric` file, duplicate entries (both lines named), fewer entries than NNZ (truncated data) or more.
[[nodiscard]] coo_matrix parse_matrix_market(std::istream& in, std::string_view source);

//! Reads the Matrix Market file at `path` (see parse_matrix_market); a regular file's size bounds the size line.
//! \throws matrix_market_error when the file cannot be opened, is a folder, or is malformed.
[[nodiscard]] coo_matrix read_matrix_market(const std::filesystem::path& path);

//! Checks that `m` is square and symmetric: trivially for symmetric storage; for general storage every entry
//! (i, j) must have a partner (j, i) with exactly the same value.
//! \throws matrix_market_error naming the source and the line of the first offending entry (and of its partner).
void require_symmetric(const coo_matrix& m);

} // namespace conveyor::solve
