#pragma once
//! \file ghia.hpp
//! The reference data of Ghia, Ghia & Shin (1982), Tables I and II (centre-line velocities of the lid-driven
//! cavity), read from the CSV files of ../shared/data/ghia1982 (see its SOURCES.md), and the comparison of a
//! computed profile with them. Host-only.

#include "cavity/fields.hpp"

#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::cavity {

//! A Ghia CSV file that cannot be read or parsed; what() names the file and line.
class ghia_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

//! The largest Ghia CSV file read, in bytes (the tables are about 1 KB). A larger file, or a device such as
//! /dev/zero, is refused once this many bytes were read, naming this limit; raise it here and rebuild.
inline constexpr std::size_t ghia_max_file_bytes = std::size_t{1} << 20;

//! One table: a coordinate column and one velocity column per Reynolds number.
struct ghia_table {
  std::string coordinate;                  //!< the first header field, lower-cased: "y" (Table I) or "x" (Table II)
  std::vector<double> position;            //!< ascending coordinates in [0, 1]
  std::vector<int> reynolds;               //!< the Reynolds number of each velocity column ("Re100" -> 100)
  std::vector<std::vector<double>> values; //!< values[k][row]: column of reynolds[k], velocity / lid speed

  //! The column of Reynolds number `re`, or nullptr when the table has none.
  [[nodiscard]] const std::vector<double>* column(double re) const noexcept;
};

//! Parses a table from CSV text: a header `coordinate,Re<int>,...`, then rows of numbers, comma-separated; blank
//! lines, LF, CRLF or CR-only line ends and a UTF-8 byte-order mark are tolerated. `source` names the text in
//! errors; text quoted from it has its control bytes escaped (`\x1b`).
//! \throws ghia_error when the header or a row is malformed (wrong field count, not a number, a Reynolds column
//!         without "Re<number>"), a line holds a NUL byte (binary data), or the coordinates are not ascending within
//!         [0, 1].
[[nodiscard]] ghia_table parse_ghia_csv(std::string_view text, std::string_view source = "<text>");

//! Reads and parses a table file.
//! \throws ghia_error when the file cannot be read, is a folder, is longer than ghia_max_file_bytes (a device or a
//!         pipe is read up to that limit, then refused), or as parse_ghia_csv().
[[nodiscard]] ghia_table read_ghia_csv(const std::filesystem::path& file);

//! Both tables: u on the vertical centre line (Table I) and v on the horizontal centre line (Table II).
struct ghia_reference {
  ghia_table u; //!< u_vertical_centerline.csv
  ghia_table v; //!< v_horizontal_centerline.csv
};

//! Reads `dir`/u_vertical_centerline.csv and `dir`/v_horizontal_centerline.csv.
//! \throws ghia_error as read_ghia_csv(), or when the coordinates are not "y" and "x" respectively.
[[nodiscard]] ghia_reference read_ghia_dir(const std::filesystem::path& dir);

//! The default data folder: $CONVEYOR_SHARED_DATA/ghia1982 when the variable is set, else ../shared/data/ghia1982
//! relative to the current directory when that folder exists, else nothing.
[[nodiscard]] std::optional<std::filesystem::path> default_ghia_dir();

//! Tabulated positions that SOURCES.md flags as doubtful for `component` ('u' or 'v') at `re`: Table II,
//! Re = 400, x = 0.9063 (-0.23827, annotated "probably wrong" in the primary source: it breaks the smooth
//! profile between -0.22847 and -0.44993).
[[nodiscard]] std::vector<double> doubtful_positions(char component, double re);

//! The comparison of computed centre-line profiles with Ghia et al. at one Reynolds number.
struct ghia_comparison {
  double re = 0.0;              //!< Reynolds number compared
  profile_difference u;         //!< u / U on x = 1/2, all 17 tabulated points
  profile_difference v;         //!< v / U on y = 1/2, all 17 tabulated points
  profile_difference u_trusted; //!< as u, leaving out doubtful_positions('u', re)
  profile_difference v_trusted; //!< as v, leaving out doubtful_positions('v', re)
};

//! Compares the profiles with the tables' columns for `re`; nothing when a table has no such column.
//! \throws std::invalid_argument as compare_profile().
[[nodiscard]] std::optional<ghia_comparison> compare_with_ghia(const ghia_reference& ref, double re, const profile& u,
                                                               const profile& v);

} // namespace conveyor::cavity
