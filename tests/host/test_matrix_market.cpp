// Host-only tests of the `solve` scenario's inputs: the strict Matrix Market reader on good and malformed files,
// CSR conversion of symmetric storage, the Poisson generators and the right-hand sides.
#include "solve/csr.hpp"
#include "solve/matrix_market.hpp"
#include "solve/problem.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace conveyor::solve;

//! A fresh temporary folder, removed with its files at the end of the test.
class temp_dir {
public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "conveyor-mm-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  //! Writes `text` to a file `name` in the folder and returns its path.
  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

private:
  fs::path path_;
};

constexpr const char* banner_sym = "%%MatrixMarket matrix coordinate real symmetric\n";
constexpr const char* banner_gen = "%%MatrixMarket matrix coordinate real general\n";

//! Reads `text` from a temporary file and expects a matrix_market_error at `line` whose message contains `part`
//! and names the file.
void expect_error(const std::string& text, std::size_t line, const std::string& part) {
  temp_dir dir;
  const fs::path p = dir.write("bad.mtx", text);
  try {
    (void)read_matrix_market(p);
    ADD_FAILURE() << "no error; expected '" << part << "' at line " << line;
  } catch (const matrix_market_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.line(), line) << what;
    EXPECT_EQ(e.file(), p.string());
    EXPECT_NE(what.find(p.string() + ":" + std::to_string(line) + ": "), std::string::npos) << what;
    EXPECT_NE(what.find(part), std::string::npos) << "message: " << what << "\nexpected to contain: " << part;
  }
}

// ---- good files ------------------------------------------------------------------------------------------------

TEST(MatrixMarket, ReadsSymmetricRealFileAndExpandsBothTriangles) {
  temp_dir dir;
  // 3x3 SPD, lower triangle: [4 -1 0; -1 4 -2; 0 -2 5]
  const auto p = dir.write("a.mtx", std::string(banner_sym) +
                                        "% a comment\n%\n\n3 3 5\n1 1 4.0\n2 1 -1\n2 2 4e0\n3 2 -2.0\n3 3 +5\n");
  const coo_matrix m = read_matrix_market(p);
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 3);
  EXPECT_EQ(m.symmetry, mm_symmetry::symmetric);
  ASSERT_EQ(m.entries.size(), 5U);
  EXPECT_EQ(m.entries[1].row, 1);
  EXPECT_EQ(m.entries[1].col, 0);
  EXPECT_EQ(m.entries[1].value, -1.0);
  EXPECT_EQ(m.entries[1].line, 7U);
  EXPECT_NO_THROW(require_symmetric(m));

  const csr_matrix a = to_csr(m);
  EXPECT_EQ(a.nnz(), 7U); // 2 x 5 stored - 3 diagonal
  EXPECT_EQ(a.row_ptr, (std::vector<int>{0, 2, 5, 7}));
  EXPECT_EQ(a.col_idx, (std::vector<int>{0, 1, 0, 1, 2, 1, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{4, -1, -1, 4, -2, -2, 5}));
  EXPECT_TRUE(is_symmetric(a));
  EXPECT_EQ(diagonal(a), (std::vector<double>{4, 4, 5}));
  EXPECT_NO_THROW(require_positive_diagonal(a));
}

TEST(MatrixMarket, GeneralStorageThatIsSymmetricGivesTheSameCsr) {
  temp_dir dir;
  const auto p =
      dir.write("g.mtx", std::string(banner_gen) + "3 3 7\n1 1 4\n1 2 -1\n2 1 -1\n2 2 4\n3 2 -2\n2 3 -2\n3 3 5\n");
  const coo_matrix m = read_matrix_market(p);
  EXPECT_EQ(m.symmetry, mm_symmetry::general);
  EXPECT_NO_THROW(require_symmetric(m));
  const csr_matrix a = to_csr(m);
  EXPECT_EQ(a.col_idx, (std::vector<int>{0, 1, 0, 1, 2, 1, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{4, -1, -1, 4, -2, -2, 5}));
}

TEST(MatrixMarket, AcceptsIntegerFieldCrlfBlankLinesAndUppercaseKeywords) {
  temp_dir dir;
  const auto p = dir.write(
      "i.mtx",
      "%%MatrixMarket MATRIX Coordinate INTEGER Symmetric\r\n%c\r\n2 2 3\r\n1 1 2\r\n\r\n2 1 1\r\n2 2 3\r\n\r\n");
  const coo_matrix m = read_matrix_market(p);
  ASSERT_EQ(m.entries.size(), 3U);
  EXPECT_EQ(m.entries[2].value, 3.0);
  EXPECT_EQ(to_csr(m).nnz(), 4U);
}

TEST(MatrixMarket, ReadsFromAStreamWithTheGivenName) {
  std::istringstream in(std::string(banner_sym) + "1 1 1\n1 1 2.5\n");
  const coo_matrix m = parse_matrix_market(in, "memory");
  EXPECT_EQ(m.source, "memory");
  EXPECT_EQ(m.entries.at(0).value, 2.5);
}

// ---- malformed files -------------------------------------------------------------------------------------------

TEST(MatrixMarketErrors, Banner) {
  expect_error("", 1, "the file is empty");
  expect_error("3 3 1\n1 1 1\n", 1, "missing Matrix Market banner");
  expect_error("%MatrixMarket matrix coordinate real symmetric\n1 1 1\n1 1 1\n", 1, "missing Matrix Market banner");
  expect_error("%%MatrixMarket matrix coordinate real\n1 1 1\n1 1 1\n", 1, "the banner has 4 words; expected 5");
  expect_error("%%MatrixMarket vector coordinate real general\n", 1, "object 'vector' is not supported");
  expect_error("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 1, "dense 'array' format");
  expect_error("%%MatrixMarket matrix coordinat real general\n", 1, "unknown format 'coordinat'");
  expect_error("%%MatrixMarket matrix coordinate pattern symmetric\n2 2 1\n1 1\n", 1,
               "'pattern' matrices hold no values");
  expect_error("%%MatrixMarket matrix coordinate complex hermitian\n", 1, "'complex' matrices are not supported");
  expect_error("%%MatrixMarket matrix coordinate real skew-symmetric\n", 1, "'skew-symmetric' storage");
  expect_error("%%MatrixMarket matrix coordinate real hermitian\n", 1, "'hermitian' storage");
  expect_error("%%MatrixMarket matrix coordinate reel general\n", 1, "unknown field 'reel'");
  expect_error("%%MatrixMarket matrix coordinate real symmetrical\n", 1, "unknown symmetry 'symmetrical'");
}

TEST(MatrixMarketErrors, SizeLine) {
  expect_error(std::string(banner_sym) + "% only comments\n\n", 3, "the file ends before the size line");
  expect_error(std::string(banner_sym) + "3 3\n", 2, "the size line has 2 fields; expected 3");
  expect_error(std::string(banner_sym) + "3 x 1\n", 2, "the column count 'x' on the size line is not an integer");
  expect_error(std::string(banner_sym) + "3 4 1\n", 2, "a 'symmetric' matrix must be square");
  expect_error(std::string(banner_gen) + "0 3 0\n", 2, "both sizes must be >= 1");
  expect_error(std::string(banner_sym) + "2 2 4\n", 2, "4 entries cannot fit in the lower triangle");
  expect_error(std::string(banner_gen) + "2 2 -1\n", 2, "the entry count -1 is negative");
  expect_error(std::string(banner_gen) + "3000000000 3 1\n", 2, "32-bit indices");
}

TEST(MatrixMarketErrors, Entries) {
  const std::string head = std::string(banner_sym) + "3 3 3\n";
  expect_error(head + "1 1 1\n4 1 1\n3 3 1\n", 4, "the row index 4 is out of range [1, 3]");
  expect_error(head + "1 1 1\n0 0 1\n3 3 1\n", 4, "the row index 0 is out of range [1, 3]");
  expect_error(std::string(banner_gen) + "3 2 1\n1 3 1\n", 3, "the column index 3 is out of range [1, 2]");
  expect_error(head + "1 1 1.0\n2 2\n3 3 1\n", 4, "an entry line has 2 fields; expected 3"); // 18 bytes: room for 3
  expect_error(head + "1 1 1\n2 2 1 7\n3 3 1\n", 4, "an entry line has 4 fields; expected 3");
  expect_error(head + "1 1 1\n2 2 abc\n3 3 1\n", 4, "the value 'abc' is not a number");
  expect_error(head + "1 1 1\n2 2 1.0.0\n3 3 1\n", 4, "the value '1.0.0' is not a number");
  expect_error(head + "1 1 1\n2 2 1.0D+03\n3 3 1\n", 4, "the value '1.0D+03' is not a number");
  expect_error(head + "1 1 1\n2 2 nan\n3 3 1\n", 4, "the value 'nan' is not finite");
  expect_error(head + "1 1 1\n2 2 inf\n3 3 1\n", 4, "the value 'inf' is not finite");
  expect_error(head + "1 1 1\nx 2 1\n3 3 1\n", 4, "the row index 'x' is not an integer");
  expect_error(head + "1 1 1\n2 2.5 1\n3 3 1\n", 4, "the column index '2.5' is not an integer");
  expect_error("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 2.5\n2 2 1\n", 3,
               "the value '2.5' is not an integer (the banner says 'integer')");
  expect_error(head + "1 1 1\n1 2 1\n3 3 1\n", 4, "entry (1, 2) lies above the diagonal");
  expect_error(head + "1 1 1\n% late comment\n3 3 1\n", 4, "a comment line among the entries");
  expect_error(head + "1 1 1\n2 2 1\n1 1 2\n", 5, "duplicate entry (1, 1); it is also on line 3");
}

TEST(MatrixMarketErrors, EntryCount) {
  // Bytes enough for 3 entry lines, but only 2 of them.
  expect_error(std::string(banner_sym) + "3 3 3\n1 1 1.0000\n2 2 1.0000\n", 4,
               "the file ends after 2 of the 3 entries");
  expect_error(std::string(banner_sym) + "3 3 3\n1 1 1\n2 2 1\n3 3 1\n3 1 1\n", 6,
               "more entries than the 3 the size line announces");
}

// ---- limits: memory follows the file, not the size line ---------------------------------------------------------

TEST(MatrixMarketLimits, FewerEntriesThanRowsCannotHoldTheDiagonal) {
  // The 3-line file: 2,147,483,647 squared with one entry (once ~16 GiB of row pointers in to_csr).
  expect_error(std::string(banner_sym) + "2147483647 2147483647 1\n1 1 1\n", 2,
               "1 entries cannot hold the 2147483647 diagonal entries of a 2147483647 x 2147483647 symmetric "
               "positive definite matrix");
  expect_error(std::string(banner_gen) + "3 3 2\n1 1 1\n2 2 1\n", 2, "2 entries cannot hold the 3 diagonal entries");
  expect_error(std::string(banner_sym) + "3 3 2\n", 2, "2 entries cannot hold the 3 diagonal entries");
  // A rectangular general matrix needs no diagonal: the reader takes it, require_symmetric refuses it.
  std::istringstream rect(std::string(banner_gen) + "2147483647 1 1\n1 1 1\n");
  const coo_matrix m = parse_matrix_market(rect, "rect");
  EXPECT_EQ(m.rows, 2147483647);
  EXPECT_THROW(require_symmetric(m), matrix_market_error);
}

TEST(MatrixMarketLimits, MoreEntriesThanTheFileCanHoldAreRefusedAtTheSizeLine) {
  expect_error(std::string(banner_gen) + "2147483647 2147483647 2147483647\n1 1 1\n", 2,
               "the size line announces 2147483647 entries, but the 6 bytes after it can hold at most 1 (an entry "
               "line 'row column value' takes at least 6 bytes)");
  expect_error(std::string(banner_sym) + "16777216 16777216 16777216\n1 1 1\n", 2,
               "the size line announces 16777216 entries, but the 6 bytes after it can hold at most 1");
  // Exactly enough bytes: the last line may lack its line end.
  temp_dir dir;
  const coo_matrix m = read_matrix_market(dir.write("tight.mtx", std::string(banner_sym) + "2 2 2\n1 1 1\n2 2 1"));
  EXPECT_EQ(m.entries.size(), 2U);
  // A stream that can seek is bounded the same way.
  std::istringstream in(std::string(banner_sym) + "3 3 3\n1 1 1\n2 2 1\n");
  try {
    (void)parse_matrix_market(in, "memory");
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(std::string(e.what()), "memory:2: the size line announces 3 entries, but the 12 bytes after it can hold "
                                     "at most 2 (an entry line 'row column value' takes at least 6 bytes): the file "
                                     "is truncated or the size line wrong");
  }
}

//! A stream that cannot seek (as a pipe): its size is unknown.
class pipe_buf : public std::streambuf {
public:
  explicit pipe_buf(std::string text) : text_(std::move(text)) {
    setg(text_.data(), text_.data(), text_.data() + text_.size());
  }

private:
  std::string text_;
};

TEST(MatrixMarketLimits, AStreamOfUnknownSizeGrowsWithItsEntries) {
  pipe_buf good(std::string(banner_sym) + "3 3 4\n1 1 1\n2 2 1\n3 3 1\n3 1 0.5\n");
  std::istream good_in(&good);
  EXPECT_EQ(parse_matrix_market(good_in, "pipe").entries.size(), 4U);
  pipe_buf cut(std::string(banner_sym) + "3 3 3\n1 1 1\n2 2 1\n");
  std::istream cut_in(&cut);
  try {
    (void)parse_matrix_market(cut_in, "pipe");
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_NE(std::string(e.what()).find("pipe:4: the file ends after 2 of the 3 entries"), std::string::npos)
        << e.what();
  }
}

TEST(MatrixMarketLimits, AnOverlongLineIsRefusedNamingTheLimit) {
  expect_error(std::string(banner_sym) + "% " + std::string(mm_max_line_length, 'x') + "\n1 1 1\n1 1 1\n", 2,
               "the line is longer than 65536 bytes (mm_max_line_length in scenarios/solve/matrix_market.hpp); "
               "reading stopped there");
  // A line of exactly the limit is fine.
  expect_error(std::string(banner_sym) + "%" + std::string(mm_max_line_length - 1, 'x') + "\n1 1 2\n1 1 1\n", 3,
               "2 entries cannot fit in the lower triangle");
}

TEST(MatrixMarketLimits, DevZeroStopsAtTheLineLimit) {
  if (!fs::exists("/dev/zero")) GTEST_SKIP() << "no /dev/zero";
  try {
    (void)read_matrix_market("/dev/zero");
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(e.line(), 1U);
    EXPECT_NE(std::string(e.what()).find("/dev/zero:1: the line is longer than 65536 bytes (mm_max_line_length"),
              std::string::npos)
        << e.what();
  }
}

TEST(MatrixMarketLimits, AFolderIsNamedAsSuch) {
  temp_dir dir;
  const fs::path folder = dir.write("x", "").parent_path();
  try {
    (void)read_matrix_market(folder);
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(std::string(e.what()), folder.string() + ": is a folder, not a Matrix Market file");
  }
}

// ---- message faults --------------------------------------------------------------------------------------------

TEST(MatrixMarketMessages, ANulByteIsEscapedNotCuttingTheMessage) {
  using namespace std::string_literals;
  const std::string head = std::string(banner_sym) + "3 3 3\n1 1 1\n";
  expect_error(head + "2 2 1\0x\n3 3 1\n"s, 4, "the value '1\\x00x' is not a number");
  expect_error(head + "2\0 2 1\n3 3 1\n"s, 4, "the row index '2\\x00' is not an integer");
  expect_error("%%MatrixMarket matrix coordinate re\0al general\n"s, 1, "unknown field 're\\x00al'");
  // The whole message survives what(): it ends with the text after the quoted token.
  std::istringstream in(head + "2 2 1\0x\n3 3 1\n"s);
  try {
    (void)parse_matrix_market(in, "memory");
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(std::string(e.what()), "memory:4: the value '1\\x00x' is not a number");
  }
}

TEST(MatrixMarketMessages, AUtf8ByteOrderMarkIsAccepted) {
  std::istringstream in("\xEF\xBB\xBF" + std::string(banner_sym) + "1 1 1\n1 1 2.5\n");
  const coo_matrix m = parse_matrix_market(in, "bom");
  ASSERT_EQ(m.entries.size(), 1U);
  EXPECT_EQ(m.entries[0].value, 2.5);
  EXPECT_EQ(m.entries[0].line, 3U);
}

TEST(MatrixMarketMessages, Utf16IsNamed) {
  using namespace std::string_literals;
  expect_error("\xFF\xFE%\0%\0M\0"s, 1, "the file is UTF-16 text (it starts with a UTF-16 byte-order mark)");
}

TEST(MatrixMarketMessages, CrOnlyLineEndsAreLineEnds) {
  std::istringstream in("%%MatrixMarket matrix coordinate real symmetric\r% old Mac\r2 2 3\r1 1 4\r2 1 -1\r2 2 4\r");
  const coo_matrix m = parse_matrix_market(in, "cr");
  ASSERT_EQ(m.entries.size(), 3U);
  EXPECT_EQ(m.entries[1].row, 1);
  EXPECT_EQ(m.entries[1].value, -1.0);
  EXPECT_EQ(m.entries[2].line, 6U);
  // Errors name the right line, with a mix of line ends too.
  expect_error("%%MatrixMarket matrix coordinate real symmetric\r2 2 2\r\n1 1 1\n2 2 x\r", 4,
               "the value 'x' is not a number");
}

TEST(MatrixMarketErrors, GeneralStorageMustBeSymmetric) {
  temp_dir dir;
  const auto missing = dir.write("m.mtx", std::string(banner_gen) + "2 2 3\n1 1 1\n2 1 5\n2 2 1\n");
  const coo_matrix m = read_matrix_market(missing);
  try {
    require_symmetric(m);
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(e.line(), 4U);
    EXPECT_NE(std::string(e.what()).find("entry (2, 1) has no partner (1, 2)"), std::string::npos) << e.what();
  }
  const auto differs = dir.write("d.mtx", std::string(banner_gen) + "2 2 4\n1 1 1\n1 2 3\n2 1 5\n2 2 1\n");
  try {
    require_symmetric(read_matrix_market(differs));
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(e.line(), 4U);
    EXPECT_NE(std::string(e.what()).find("entry (1, 2) = 3 differs from (2, 1) = 5 on line 5"), std::string::npos)
        << e.what();
  }
  const auto rect = dir.write("r.mtx", std::string(banner_gen) + "2 3 1\n1 1 1\n");
  EXPECT_THROW(require_symmetric(read_matrix_market(rect)), matrix_market_error);
}

TEST(MatrixMarketErrors, MissingFileNamesTheFile) {
  try {
    (void)read_matrix_market("/nonexistent/conveyor/missing.mtx");
    ADD_FAILURE() << "no error";
  } catch (const matrix_market_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/conveyor/missing.mtx: cannot open the file");
  }
}

TEST(Csr, NonPositiveDiagonalIsRefused) {
  std::istringstream in(std::string(banner_sym) + "2 2 2\n1 1 1\n2 1 1\n");
  const csr_matrix a = to_csr(parse_matrix_market(in, "memory"));
  EXPECT_EQ(diagonal(a), (std::vector<double>{1, 0}));
  try {
    require_positive_diagonal(a);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 2 has diagonal entry 0"), std::string::npos) << e.what();
  }
}

TEST(Csr, MultiplyAndRelativeResidual) {
  const csr_matrix a = poisson_2d(2); // [4 -1 -1 0; -1 4 0 -1; -1 0 4 -1; 0 -1 -1 4]
  const std::vector<double> x{1, 2, 3, 4};
  EXPECT_EQ(multiply(a, x), (std::vector<double>{-1, 3, 7, 11}));
  const std::vector<double> b{-1, 3, 7, 11};
  EXPECT_EQ(relative_residual(a, x, b), 0.0);
  const std::vector<double> b2{-1, 3, 7, 12}; // ‖b2 − Ax‖ = 1, ‖b2‖ = sqrt(203)
  EXPECT_NEAR(relative_residual(a, x, b2), 1.0 / std::sqrt(203.0), 1e-15);
  EXPECT_THROW((void)multiply(a, std::vector<double>{1, 2}), std::invalid_argument);
}

// ---- the real matrices in ../shared/data/matrices --------------------------------------------------------------

fs::path shared_data() {
  if (const char* env = std::getenv("CONVEYOR_SHARED_DATA"); env != nullptr && *env != '\0') return env;
  return CONVEYOR_DEFAULT_SHARED_DATA;
}

TEST(MatrixMarket, ReadsTheSharedSpdMatrices) {
  const fs::path dir = shared_data() / "matrices";
  if (!fs::exists(dir)) GTEST_SKIP() << "no shared matrices at " << dir << " (set CONVEYOR_SHARED_DATA)";
  struct expected {
    const char* file;
    int rows;
    std::size_t stored;
    std::size_t nnz;
  };
  // From ../shared/data/matrices/SOURCES.md.
  for (const expected& e :
       {expected{"gr_30_30.mtx", 900, 4322, 7744}, expected{"1138_bus.mtx", 1138, 2596, 4054},
        expected{"Trefethen_2000.mtx", 2000, 21953, 41906}, expected{"bcsstk13.mtx", 2003, 42943, 83883},
        expected{"bcsstk21.mtx", 3600, 15100, 26600}, expected{"bcsstm25.mtx", 15439, 15439, 15439}}) {
    SCOPED_TRACE(e.file);
    const coo_matrix m = read_matrix_market(dir / e.file);
    EXPECT_EQ(m.rows, e.rows);
    EXPECT_EQ(m.cols, e.rows);
    EXPECT_EQ(m.symmetry, mm_symmetry::symmetric);
    EXPECT_EQ(m.entries.size(), e.stored);
    const csr_matrix a = to_csr(m);
    EXPECT_EQ(a.nnz(), e.nnz);
    EXPECT_TRUE(is_symmetric(a));
    EXPECT_NO_THROW(require_positive_diagonal(a));
  }
}

// ---- Poisson ---------------------------------------------------------------------------------------------------

//! Row sums of `a`.
std::vector<double> row_sums(const csr_matrix& a) {
  std::vector<double> s(static_cast<std::size_t>(a.rows), 0.0);
  for (int i = 0; i < a.rows; ++i)
    for (int k = a.row_ptr[static_cast<std::size_t>(i)]; k < a.row_ptr[static_cast<std::size_t>(i) + 1]; ++k)
      s[static_cast<std::size_t>(i)] += a.values[static_cast<std::size_t>(k)];
  return s;
}

bool columns_sorted(const csr_matrix& a) {
  for (int i = 0; i < a.rows; ++i)
    if (!std::is_sorted(a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(i)],
                        a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(i) + 1],
                        [](int x, int y) { return x <= y; }))
      return false;
  return true;
}

TEST(Poisson, TwoDimensional) {
  for (int n : {1, 2, 3, 7, 32}) {
    SCOPED_TRACE(n);
    const csr_matrix a = poisson_2d(n);
    EXPECT_EQ(a.rows, n * n);
    EXPECT_EQ(a.nnz(), static_cast<std::size_t>(5 * n * n - 4 * n));
    EXPECT_TRUE(is_symmetric(a));
    EXPECT_TRUE(columns_sorted(a));
    EXPECT_EQ(diagonal(a), std::vector<double>(static_cast<std::size_t>(n * n), 4.0));
    // Row sum = 4 − neighbours = number of missing (boundary) neighbours.
    const auto sums = row_sums(a);
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x) {
        const int missing = (x == 0) + (x == n - 1) + (y == 0) + (y == n - 1);
        EXPECT_EQ(sums[static_cast<std::size_t>(y * n + x)], missing) << "x " << x << " y " << y;
      }
  }
  EXPECT_THROW((void)poisson_2d(0), std::invalid_argument);
  EXPECT_THROW((void)poisson_2d(20001), std::invalid_argument);
}

TEST(Poisson, ThreeDimensional) {
  for (int n : {1, 2, 5, 12}) {
    SCOPED_TRACE(n);
    const csr_matrix a = poisson_3d(n);
    EXPECT_EQ(a.rows, n * n * n);
    EXPECT_EQ(a.nnz(), static_cast<std::size_t>(7 * n * n * n - 6 * n * n));
    EXPECT_TRUE(is_symmetric(a));
    EXPECT_TRUE(columns_sorted(a));
    const auto sums = row_sums(a);
    for (int z = 0; z < n; ++z)
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          const int missing = (x == 0) + (x == n - 1) + (y == 0) + (y == n - 1) + (z == 0) + (z == n - 1);
          EXPECT_EQ(sums[static_cast<std::size_t>((z * n + y) * n + x)], missing);
        }
  }
  EXPECT_THROW((void)poisson_3d(0), std::invalid_argument);
  EXPECT_THROW((void)poisson_3d(601), std::invalid_argument);
}

// ---- right-hand sides ------------------------------------------------------------------------------------------

TEST(Rhs, OnesAndSeededRandom) {
  EXPECT_EQ(make_rhs(3, rhs_kind::ones), (std::vector<double>{1, 1, 1}));
  const auto a = make_rhs(1000, rhs_kind::random, 5);
  const auto b = make_rhs(1000, rhs_kind::random, 5);
  const auto c = make_rhs(1000, rhs_kind::random, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](double v) { return v >= -1.0 && v < 1.0; }));
  const double mean = std::accumulate(a.begin(), a.end(), 0.0) / 1000.0;
  EXPECT_LT(std::fabs(mean), 0.1);
  EXPECT_EQ(parse_rhs_kind("random"), rhs_kind::random);
  EXPECT_THROW((void)parse_rhs_kind("zeros"), std::invalid_argument);
}

} // namespace
