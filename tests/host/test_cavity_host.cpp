// Host-only tests of the cavity scenario: argument validation, the Ghia CSV reader, profiles and their comparison,
// the PNG writer, and the CPU reference of the time step (the same per-cell code as the CUDA kernel).
#include "cavity/fields.hpp"
#include "cavity/ghia.hpp"
#include "cavity/image.hpp"
#include "cavity/lattice.hpp"
#include "cavity/output.hpp"
#include "cavity/parameters.hpp"
#include "cavity/reference_cpu.hpp"

#include <gtest/gtest.h>
#include <png.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace conveyor::cavity;
namespace fs = std::filesystem;
constexpr double nan = std::numeric_limits<double>::quiet_NaN();
constexpr double inf = std::numeric_limits<double>::infinity();

//! The message of the std::invalid_argument `f` throws; fails the test when it throws nothing or something else.
std::string invalid_argument_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (...) {
    ADD_FAILURE() << "threw something other than std::invalid_argument";
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

fs::path shared_data() {
  if (const char* env = std::getenv("CONVEYOR_SHARED_DATA"); env != nullptr && *env != '\0') return env;
  return CONVEYOR_DEFAULT_SHARED_DATA;
}

//! A fresh temporary folder, removed at the end of the test.
class temp_dir {
public:
  temp_dir() {
    std::string pattern = (fs::temp_directory_path() / "cavity-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

cavity_options options(double re, int n, double lid = 0.1) {
  cavity_options o;
  o.re = re;
  o.n = n;
  o.lid_speed = lid;
  return o;
}

// ---- validation ----------------------------------------------------------------------------------------------

TEST(CavityValidation, AcceptsDefaultsAndTheGhiaCases) {
  EXPECT_NO_THROW(validate(cavity_options{}));
  for (const double re : {100.0, 400.0, 1000.0}) EXPECT_NO_THROW(validate(options(re, 257))) << re;
  EXPECT_NO_THROW(validate(options(100, 65)));
  EXPECT_NO_THROW(validate(options(1000, 129)));       // Re / n = 7.75
  EXPECT_NO_THROW(validate(options(10.0 * 100, 100))); // exactly the upper end
}

TEST(CavityValidation, DerivedConstants) {
  const lattice_constants c = derive(options(100, 257));
  EXPECT_NEAR(c.nu, 0.257, 1e-12);
  EXPECT_NEAR(c.tau, 1.271, 1e-12);
  EXPECT_NEAR((c.tau - 0.5) * (c.tau_minus - 0.5), trt_magic, 1e-12);
  EXPECT_NEAR(c.mach, 0.1 * std::sqrt(3.0), 1e-12);
  EXPECT_NEAR(c.convective_time, 2570.0, 1e-9);
  const auto [lo, hi] = valid_reynolds_range(257, 0.1);
  EXPECT_NEAR(lo, 51.4, 1e-9);
  EXPECT_NEAR(hi, 2570.0, 1e-9);
  const lattice_params p = make_lattice_params(options(100, 257));
  EXPECT_EQ(p.n, 257);
  EXPECT_NEAR(p.omega_plus, 1.0 / 1.271, 1e-6);
  EXPECT_FLOAT_EQ(p.lid_speed, 0.1F);
}

TEST(CavityValidation, ReynoldsTooHighNamesTauAndTheRange) {
  const std::string m = invalid_argument_message([] { validate(options(1000, 65)); });
  EXPECT_CONTAINS(m, "re 1000");
  EXPECT_CONTAINS(m, "tau = 3 nu + 1/2");
  EXPECT_CONTAINS(m, "too close to 1/2");
  EXPECT_CONTAINS(m, "Re in [13, 650]");
  EXPECT_CONTAINS(m, "use n >= 100");
  // A command names its options: the same check with the command line's names.
  option_names cli;
  cli.re = "--re";
  cli.n = "--n";
  const std::string named = invalid_argument_message([&] { validate(options(1000, 65), cli); });
  EXPECT_CONTAINS(named, "--re 1000");
  EXPECT_CONTAINS(named, "--n >= 100");
}

TEST(CavityValidation, ReynoldsTooLowNamesTheFix) {
  const std::string m = invalid_argument_message([] { validate(options(10, 257)); });
  EXPECT_CONTAINS(m, "too low");
  EXPECT_CONTAINS(m, "Re in [51.4, 2570]");
  EXPECT_CONTAINS(m, "lower lid_speed");
}

TEST(CavityValidation, RejectsNonPositiveOrNonFiniteReynolds) {
  for (const double re : {0.0, -100.0, nan, inf})
    EXPECT_CONTAINS(invalid_argument_message([&] { validate(options(re, 257)); }), "positive finite");
}

TEST(CavityValidation, RejectsLatticeSizesOutsideTheRange) {
  for (const int n : {0, 15, 8193, -5})
    EXPECT_CONTAINS(invalid_argument_message([&] { validate(options(100, n)); }), "outside [16, 8192]");
}

TEST(CavityValidation, RejectsLidSpeedsOutsideTheLowMachRange) {
  for (const double u : {0.0, -0.1, 0.25, nan})
    EXPECT_CONTAINS(invalid_argument_message([&] { validate(options(100, 257, u)); }), "Mach");
}

TEST(CavityValidation, RejectsOddOrOutOfRangeStepsPerGraph) {
  for (const int k : {0, 1, 3, 99, 10002}) {
    cavity_options o;
    o.steps_per_graph = k;
    EXPECT_CONTAINS(invalid_argument_message([&] { validate(o); }), "must be even");
  }
}

TEST(CavityValidation, RejectsStepsNotAMultipleOfK) {
  cavity_options o;
  o.steps = 150;
  o.steps_per_graph = 100;
  EXPECT_CONTAINS(invalid_argument_message([&] { validate(o); }), "multiple of steps_per_graph 100");
  o.steps = -100;
  EXPECT_CONTAINS(invalid_argument_message([&] { validate(o); }), "non-negative");
  o.steps = 300;
  EXPECT_NO_THROW(validate(o));
}

TEST(CavityValidation, RejectsBadTolerances) {
  cavity_options o;
  o.tol = -1e-6;
  EXPECT_CONTAINS(invalid_argument_message([&] { validate(o); }), "tol -1e-06 must be finite");
  o.tol = 0.0;
  EXPECT_CONTAINS(invalid_argument_message([&] { validate(o); }), "needs steps");
  o.steps = 1000;
  EXPECT_NO_THROW(validate(o));
}

TEST(CavityValidation, AutoStepsIsAWholeNumberOfGraphs) {
  cavity_options o = options(1000, 257);
  o.steps_per_graph = 64;
  const std::int64_t s = auto_steps(o);
  EXPECT_EQ(s % 64, 0);
  EXPECT_GE(static_cast<double>(s), default_convective_times * 2570.0);
  EXPECT_EQ(max_steps(o), s);
  o.steps = 640;
  EXPECT_EQ(max_steps(o), 640);
}

// ---- Ghia CSV reader -----------------------------------------------------------------------------------------

TEST(GhiaReader, ParsesHeaderRowsAndColumns) {
  const ghia_table t = parse_ghia_csv("Y,Re100,Re400\r\n0.0000,0.00000,0.00000\r\n\r\n0.5,-0.2,+0.1\n1.0,1,1\n");
  EXPECT_EQ(t.coordinate, "y");
  EXPECT_EQ(t.reynolds, (std::vector<int>{100, 400}));
  EXPECT_EQ(t.position, (std::vector<double>{0.0, 0.5, 1.0}));
  ASSERT_NE(t.column(400), nullptr);
  EXPECT_EQ(*t.column(400), (std::vector<double>{0.0, 0.1, 1.0}));
  EXPECT_EQ(*t.column(100.0), (std::vector<double>{0.0, -0.2, 1.0}));
  EXPECT_EQ(t.column(1000), nullptr);
}

TEST(GhiaReader, RejectsMalformedText) {
  auto message = [](std::string_view text) {
    try {
      (void)parse_ghia_csv(text, "t.csv");
    } catch (const ghia_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(message(""), "empty");
  EXPECT_CONTAINS(message("y,Re100\n"), "no data rows");
  EXPECT_CONTAINS(message("y,Foo100\n0,0\n"), "Re<positive integer>");
  EXPECT_CONTAINS(message("y,Re100\n0,0\n0.5\n"), "t.csv:3: 1 fields, expected 2");
  EXPECT_CONTAINS(message("y,Re100\n0,abc\n"), "'abc' is not a number");
  EXPECT_CONTAINS(message("y,Re100\n0.5,0\n0.4,0\n"), "rows must ascend");
  EXPECT_CONTAINS(message("y,Re100\n1.5,0\n"), "outside [0, 1]");
}

TEST(GhiaReader, ReadsTheSharedTables) {
  const fs::path dir = shared_data() / "ghia1982";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no shared data at " << dir << " (set CONVEYOR_SHARED_DATA)";
  const ghia_reference r = read_ghia_dir(dir);
  EXPECT_EQ(r.u.coordinate, "y");
  EXPECT_EQ(r.v.coordinate, "x");
  EXPECT_EQ(r.u.position.size(), 17U);
  EXPECT_EQ(r.v.position.size(), 17U);
  EXPECT_EQ(r.u.reynolds, (std::vector<int>{100, 400, 1000, 3200, 5000, 7500, 10000}));
  EXPECT_DOUBLE_EQ((*r.u.column(100))[8], -0.20581); // y = 0.5000
  EXPECT_DOUBLE_EQ(r.u.position[8], 0.5);
  EXPECT_DOUBLE_EQ((*r.u.column(1000)).back(), 1.0);   // the lid
  EXPECT_DOUBLE_EQ((*r.v.column(1000))[11], -0.51550); // x = 0.9063, the corrected cell (SOURCES.md)
}

TEST(GhiaReader, MissingFileIsAGhiaError) {
  temp_dir tmp;
  EXPECT_THROW((void)read_ghia_dir(tmp.path()), ghia_error);
}

//! The message of the ghia_error `f` throws, or "no error".
std::string ghia_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const ghia_error& e) {
    return e.what();
  }
  return "no error";
}

TEST(GhiaReader, ANulByteIsNamedAndControlBytesAreEscaped) {
  using namespace std::string_literals;
  EXPECT_EQ(ghia_message([] { (void)parse_ghia_csv("y,Re100\n0.5,1\0\n"s, "t.csv"); }),
            "t.csv:2: a NUL byte at column 6: binary data, not CSV text");
  EXPECT_EQ(ghia_message([] { (void)parse_ghia_csv("\0\0\0\0"s, "t.csv"); }),
            "t.csv:1: a NUL byte at column 1: binary data, not CSV text");
  EXPECT_EQ(ghia_message([] { (void)parse_ghia_csv("y,Re100\n0.5,\x1b[31m\n", "t.csv"); }),
            "t.csv:2: '\\x1b[31m' is not a number");
  EXPECT_EQ(ghia_message([] { (void)parse_ghia_csv("y,Re\x7f\n", "t.csv"); }),
            "t.csv:1: column header 'Re\\x7f' is not Re<positive integer>");
}

TEST(GhiaReader, AcceptsAUtf8ByteOrderMarkAndCrOnlyLineEnds) {
  const ghia_table bom = parse_ghia_csv("\xEF\xBB\xBFy,Re100\n0,0\n1,1\n", "t.csv");
  EXPECT_EQ(bom.coordinate, "y"); // not "\xEF\xBB\xBFy", which read_ghia_dir would refuse as "not y"
  EXPECT_EQ(bom.position, (std::vector<double>{0, 1}));
  const ghia_table cr = parse_ghia_csv("x,Re100,Re400\r0,0,0\r\r0.5,-0.2,0.1\r1,1,1", "t.csv");
  EXPECT_EQ(cr.position, (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(cr.values.at(1), (std::vector<double>{0, 0.1, 1}));
  // Line numbers count CR-only, CRLF and LF line ends alike.
  EXPECT_EQ(ghia_message([] { (void)parse_ghia_csv("y,Re100\r0,0\r\n0.5,x\n", "t.csv"); }),
            "t.csv:3: 'x' is not a number");
}

TEST(GhiaReader, UnboundedOrHugeFilesStopAtTheLimit) {
  if (fs::exists("/dev/zero")) {
    EXPECT_EQ(ghia_message([] { (void)read_ghia_csv("/dev/zero"); }),
              "'/dev/zero' is longer than 1048576 bytes (ghia_max_file_bytes in scenarios/cavity/ghia.hpp; raise it "
              "there and rebuild): not a Ghia table, reading stopped there");
  }
  temp_dir tmp;
  const fs::path big = tmp.path() / "big.csv";
  {
    std::ofstream out(big, std::ios::binary);
    out << "y,Re100\n";
    for (int i = 0; i < 140000; ++i) out << "0.5,0.1\n"; // 1.1 MB of rows
  }
  ASSERT_GT(fs::file_size(big), ghia_max_file_bytes);
  EXPECT_CONTAINS(ghia_message([&] { (void)read_ghia_csv(big); }), "is longer than 1048576 bytes");
  EXPECT_EQ(ghia_message([&] { (void)read_ghia_csv(tmp.path()); }),
            "'" + tmp.path().string() + "' is a folder, not a Ghia CSV file");
}

TEST(GhiaReader, DefaultFolderFollowsTheEnvironment) {
  const char* old = std::getenv("CONVEYOR_SHARED_DATA");
  const std::string saved = old != nullptr ? old : "";
  setenv("CONVEYOR_SHARED_DATA", "/some/where", 1);
  const auto dir = default_ghia_dir();
  ASSERT_TRUE(dir.has_value());
  EXPECT_EQ(*dir, fs::path("/some/where/ghia1982"));
  if (old != nullptr) setenv("CONVEYOR_SHARED_DATA", saved.c_str(), 1);
  else unsetenv("CONVEYOR_SHARED_DATA");
}

// ---- profiles ------------------------------------------------------------------------------------------------

TEST(Profiles, InterpolatesLinearly) {
  const profile p{{0.0, 0.25, 0.5, 1.0}, {0.0, 1.0, 0.0, 2.0}};
  EXPECT_DOUBLE_EQ(interpolate(p, 0.0), 0.0);
  EXPECT_DOUBLE_EQ(interpolate(p, 0.125), 0.5);
  EXPECT_DOUBLE_EQ(interpolate(p, 0.25), 1.0);
  EXPECT_DOUBLE_EQ(interpolate(p, 0.75), 1.0);
  EXPECT_DOUBLE_EQ(interpolate(p, 1.0), 2.0);
  EXPECT_THROW((void)interpolate(p, 1.01), std::invalid_argument);
  EXPECT_THROW((void)interpolate(p, -0.01), std::invalid_argument);
  EXPECT_THROW((void)interpolate(profile{{0.0}, {0.0}}, 0.0), std::invalid_argument);
  EXPECT_THROW((void)interpolate(profile{{0.5, 0.0}, {0.0, 1.0}}, 0.2), std::invalid_argument);
}

TEST(Profiles, ComparesAtReferencePositions) {
  // A synthetic profile u(y) = y^2 sampled finely; the reference is exact except one point off by 0.05.
  profile p;
  for (int k = 0; k <= 1000; ++k) {
    p.position.push_back(k / 1000.0);
    p.value.push_back((k / 1000.0) * (k / 1000.0));
  }
  const std::vector<double> at{0.0, 0.1234, 0.5, 0.8, 1.0};
  std::vector<double> ref;
  for (const double y : at) ref.push_back(y * y);
  ref[3] += 0.05;
  const profile_difference d = compare_profile(p, at, ref);
  EXPECT_EQ(d.compared, 5U);
  EXPECT_NEAR(d.max_abs, 0.05, 1e-6); // linear interpolation of y^2 on a 1e-3 grid errs by < 2.5e-7
  EXPECT_DOUBLE_EQ(d.position, 0.8);
  EXPECT_NEAR(d.ours, 0.64, 1e-6);
  EXPECT_NEAR(d.reference, 0.69, 1e-12);
  const std::vector<double> skip{0.8};
  const profile_difference s = compare_profile(p, at, ref, skip);
  EXPECT_EQ(s.compared, 4U);
  EXPECT_EQ(s.skipped, 1U);
  EXPECT_LT(s.max_abs, 1e-6);
  EXPECT_THROW((void)compare_profile(p, at, std::vector<double>{1.0}), std::invalid_argument);
}

//! A field with ux = U (x_c + y_c), uy = U (x_c - y_c) at cell centres.
flow_field linear_field(int n, double lid) {
  flow_field f;
  f.n = n;
  const std::size_t cells = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  f.rho.assign(cells, 1.0);
  f.ux.resize(cells);
  f.uy.resize(cells);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      const double xc = (x + 0.5) / n;
      const double yc = (y + 0.5) / n;
      f.ux[static_cast<std::size_t>(y * n + x)] = lid * (xc + yc);
      f.uy[static_cast<std::size_t>(y * n + x)] = lid * (xc - yc);
    }
  return f;
}

TEST(Profiles, CentreLinesOfOddAndEvenLattices) {
  for (const int n : {17, 16}) {
    const flow_field f = linear_field(n, 0.05);
    const profile u = u_vertical_centerline(f, 0.05);
    const profile v = v_horizontal_centerline(f, 0.05);
    ASSERT_EQ(u.position.size(), static_cast<std::size_t>(n) + 2);
    EXPECT_EQ(u.position.front(), 0.0);
    EXPECT_EQ(u.value.front(), 0.0);
    EXPECT_EQ(u.position.back(), 1.0);
    EXPECT_EQ(u.value.back(), 1.0); // the lid
    EXPECT_EQ(v.value.back(), 0.0); // the right wall
    for (int j = 0; j < n; ++j) {
      const double c = (j + 0.5) / n;
      EXPECT_NEAR(u.position[static_cast<std::size_t>(j) + 1], c, 1e-15);
      EXPECT_NEAR(u.value[static_cast<std::size_t>(j) + 1], 0.5 + c, 1e-12) << "n " << n << " j " << j;
      EXPECT_NEAR(v.value[static_cast<std::size_t>(j) + 1], c - 0.5, 1e-12) << "n " << n << " j " << j;
    }
  }
  EXPECT_THROW((void)u_vertical_centerline(linear_field(4, 0.1), 0.0), std::invalid_argument);
}

TEST(Profiles, GhiaComparisonOfTheTablesThemselvesIsZero) {
  const fs::path dir = shared_data() / "ghia1982";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no shared data at " << dir << " (set CONVEYOR_SHARED_DATA)";
  const ghia_reference r = read_ghia_dir(dir);
  for (const double re : {100.0, 400.0, 1000.0}) {
    const profile u{r.u.position, *r.u.column(re)};
    const profile v{r.v.position, *r.v.column(re)};
    const auto c = compare_with_ghia(r, re, u, v);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->u.max_abs, 0.0);
    EXPECT_EQ(c->v.max_abs, 0.0);
    EXPECT_EQ(c->u.compared, 17U);
    EXPECT_EQ(c->v_trusted.skipped, re == 400.0 ? 1U : 0U);
  }
  EXPECT_FALSE(
      compare_with_ghia(r, 200.0, profile{r.u.position, *r.u.column(100)}, profile{r.v.position, *r.v.column(100)})
          .has_value());
  temp_dir tmp;
  const profile u{r.u.position, *r.u.column(100)};
  const profile v{r.v.position, *r.v.column(100)};
  write_ghia_csv(tmp.path() / "g.csv", r, 100, u, v);
  std::ifstream in(tmp.path() / "g.csv");
  std::string header;
  std::getline(in, header);
  EXPECT_EQ(header, "profile,position,ghia,ours,difference");
  int rows = 0;
  for (std::string line; std::getline(in, line);) ++rows;
  EXPECT_EQ(rows, 34);
}

TEST(Profiles, StreamFunctionIntegratesU) {
  const int n = 8;
  flow_field f = linear_field(n, 0.1);
  std::fill(f.ux.begin(), f.ux.end(), 0.1); // u = U everywhere: psi = y
  const std::vector<double> psi = stream_function(f, 0.1);
  for (int y = 0; y < n; ++y) EXPECT_NEAR(psi[static_cast<std::size_t>(y * n + 3)], (y + 0.5) / n, 1e-12);
}

TEST(Profiles, WritesProfileCsv) {
  temp_dir tmp;
  write_profile_csv(tmp.path() / "u.csv", profile{{0.0, 0.5, 1.0}, {0.0, -0.25, 1.0}}, "y", "u_over_U");
  std::ifstream in(tmp.path() / "u.csv");
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "y,u_over_U\n0,0\n0.5,-0.25\n1,1\n");
  EXPECT_THROW(write_profile_csv(tmp.path() / "missing" / "u.csv", profile{}, "y", "u"), std::runtime_error);
}

// ---- PNG -----------------------------------------------------------------------------------------------------

//! Reads an RGB PNG with libpng's simplified API.
rgb_image read_png(const fs::path& file) {
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  if (png_image_begin_read_from_file(&png, file.string().c_str()) == 0)
    throw std::runtime_error(std::string("libpng: ") + png.message);
  png.format = PNG_FORMAT_RGB;
  rgb_image img(static_cast<int>(png.width), static_cast<int>(png.height));
  if (png_image_finish_read(&png, nullptr, img.pixels.data(), 0, nullptr) == 0)
    throw std::runtime_error(std::string("libpng: ") + png.message);
  return img;
}

TEST(Png, WritesPixelsLibpngReadsBack) {
  temp_dir tmp;
  rgb_image img(3, 2);
  for (std::size_t k = 0; k < img.pixels.size(); ++k) img.pixels[k] = static_cast<std::uint8_t>(k * 13 + 7);
  const fs::path file = tmp.path() / "small.png";
  write_png(file, img);
  const rgb_image back = read_png(file);
  EXPECT_EQ(back.width, 3);
  EXPECT_EQ(back.height, 2);
  EXPECT_EQ(back.pixels, img.pixels);
}

TEST(Png, RejectsBadImagesAndPaths) {
  temp_dir tmp;
  rgb_image img(2, 2);
  img.pixels.pop_back();
  EXPECT_THROW(write_png(tmp.path() / "bad.png", img), std::invalid_argument);
  EXPECT_THROW(write_png(tmp.path() / "no" / "such" / "dir.png", rgb_image(2, 2)), std::runtime_error);
  EXPECT_THROW(rgb_image(0, 5), std::invalid_argument);
}

TEST(Png, ViridisEnds) {
  EXPECT_EQ(viridis(0.0), (std::array<std::uint8_t, 3>{68, 1, 84}));
  EXPECT_EQ(viridis(1.0), (std::array<std::uint8_t, 3>{253, 231, 37}));
  EXPECT_EQ(viridis(7.0), viridis(1.0));
  EXPECT_EQ(viridis(nan), viridis(0.0));
}

TEST(Png, RendersTheCavityPicture) {
  // A solid-body-like vortex: u = -(y - 1/2), v = x - 1/2 (scaled): closed streamlines around the centre.
  const int n = 32;
  flow_field f = linear_field(n, 0.1);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      f.ux[static_cast<std::size_t>(y * n + x)] = 0.1 * ((y + 0.5) / n - 0.5);
      f.uy[static_cast<std::size_t>(y * n + x)] = -0.1 * ((x + 0.5) / n - 0.5);
    }
  const rgb_image img = render_cavity(f, 0.1, 100);
  EXPECT_EQ(img.width, 128); // 4 pixels per cell
  EXPECT_EQ(img.height, 128);
  std::size_t white = 0;
  for (std::size_t p = 0; p < img.pixels.size(); p += 3)
    white += img.pixels[p] == 255 && img.pixels[p + 1] == 255 && img.pixels[p + 2] == 255 ? 1 : 0;
  EXPECT_GT(white, 100U); // streamlines of the (negative-psi) vortex were drawn
  temp_dir tmp;
  write_png(tmp.path() / "cavity.png", img);
  EXPECT_EQ(read_png(tmp.path() / "cavity.png").pixels, img.pixels);
}

// ---- the lattice and the CPU reference -----------------------------------------------------------------------

TEST(Lattice, D2Q9Moments) {
  double w = 0.0;
  double cx = 0.0;
  double cy = 0.0;
  double cxx = 0.0;
  double cxy = 0.0;
  double cyy = 0.0;
  for (int i = 0; i < q; ++i) {
    const int o = d2q9_opposite(i);
    EXPECT_EQ(d2q9_cx(o), -d2q9_cx(i));
    EXPECT_EQ(d2q9_cy(o), -d2q9_cy(i));
    EXPECT_EQ(d2q9_weight(o), d2q9_weight(i));
    w += d2q9_weight(i);
    cx += d2q9_weight(i) * d2q9_cx(i);
    cy += d2q9_weight(i) * d2q9_cy(i);
    cxx += d2q9_weight(i) * d2q9_cx(i) * d2q9_cx(i);
    cxy += d2q9_weight(i) * d2q9_cx(i) * d2q9_cy(i);
    cyy += d2q9_weight(i) * d2q9_cy(i) * d2q9_cy(i);
  }
  EXPECT_NEAR(w, 1.0, 1e-7);
  EXPECT_NEAR(cx, 0.0, 1e-7);
  EXPECT_NEAR(cy, 0.0, 1e-7);
  EXPECT_NEAR(cxx, 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(cyy, 1.0 / 3.0, 1e-7);
  EXPECT_NEAR(cxy, 0.0, 1e-7);
}

TEST(Lattice, EquilibriumHasTheRightMoments) {
  const float drho = 0.02F;
  const float ux = 0.05F;
  const float uy = -0.03F;
  double m0 = 0.0;
  double mx = 0.0;
  double my = 0.0;
  for (int i = 0; i < q; ++i) {
    const double g = equilibrium_deviation(i, drho, ux, uy);
    m0 += g;
    mx += g * d2q9_cx(i);
    my += g * d2q9_cy(i);
  }
  EXPECT_NEAR(m0, drho, 1e-8);
  EXPECT_NEAR(mx, ux, 1e-8); // incompressible model: momentum = rho0 u, rho0 = 1
  EXPECT_NEAR(my, uy, 1e-8);
}

TEST(Lattice, CollisionConservesMassAndMomentum) {
  // One cell in the middle of a 5 x 5 field of arbitrary deviations: the populations it pulls have some mass and
  // momentum; the collision must keep both.
  const lattice_params p = make_lattice_params(options(100, 16));
  lattice_params small = p;
  small.n = 5;
  std::vector<float> src(5 * 5 * q);
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = 0.01F * static_cast<float>((k * 7919) % 13) - 0.06F;
  std::vector<float> dst(src.size(), 0.0F);
  stream_collide_cell(src.data(), dst.data(), small, 2, 2);
  double m_in = 0.0, x_in = 0.0, y_in = 0.0, m_out = 0.0, x_out = 0.0, y_out = 0.0;
  for (int i = 0; i < q; ++i) {
    const double pulled = src[population_index(5, i, 2 - d2q9_cx(i), 2 - d2q9_cy(i))];
    const double out = dst[population_index(5, i, 2, 2)];
    m_in += pulled;
    x_in += pulled * d2q9_cx(i);
    y_in += pulled * d2q9_cy(i);
    m_out += out;
    x_out += out * d2q9_cx(i);
    y_out += out * d2q9_cy(i);
  }
  EXPECT_NEAR(m_out, m_in, 1e-7);
  EXPECT_NEAR(x_out, x_in, 1e-7);
  EXPECT_NEAR(y_out, y_in, 1e-7);
}

TEST(CpuReference, StartsAtRestWithUnitDensity) {
  const std::vector<float> f = initial_populations(5);
  ASSERT_EQ(f.size(), 5U * 5U * 9U);
  EXPECT_EQ(total_mass(f), 25.0);
  const flow_field field = compute_fields(f, 5);
  for (std::size_t c = 0; c < 25; ++c) {
    EXPECT_EQ(field.rho[c], 1.0);
    EXPECT_EQ(field.ux[c], 0.0);
    EXPECT_EQ(field.uy[c], 0.0);
  }
  EXPECT_THROW((void)compute_fields(f, 4), std::invalid_argument);
}

TEST(CpuReference, RestStaysAtRestWithoutLid) {
  lattice_params p = make_lattice_params(options(100, 16));
  p.lid_speed = 0.0F;
  cpu_lattice lat(p);
  lat.step(20);
  const flow_field f = compute_fields(lat.populations(), p.n);
  for (std::size_t c = 0; c < f.ux.size(); ++c) {
    EXPECT_NEAR(f.ux[c], 0.0, 1e-7);
    EXPECT_NEAR(f.uy[c], 0.0, 1e-7);
    EXPECT_NEAR(f.rho[c], 1.0, 1e-6);
  }
}

TEST(CpuReference, ConservesMass) {
  const lattice_params p = make_lattice_params(options(100, 24));
  cpu_lattice lat(p);
  const double m0 = total_mass(lat.populations());
  lat.step(500);
  const double m1 = total_mass(lat.populations());
  EXPECT_EQ(lat.steps(), 500);
  EXPECT_LT(std::fabs(m1 - m0) / m0, 1e-6) << m0 << " -> " << m1;
  // The lid has set the fluid in motion, in its direction just below it.
  const flow_field f = compute_fields(lat.populations(), p.n);
  EXPECT_GT(f.ux[static_cast<std::size_t>((p.n - 1) * p.n + p.n / 2)], 0.02);
}

TEST(CpuReference, MirrorSymmetry) {
  // Reversing the lid mirrors the flow: f_i(x, y; -U) = f_mirror(i)(n - 1 - x, y; U), mirror flipping c_x.
  const lattice_params p = make_lattice_params(options(100, 20));
  lattice_params reversed = p;
  reversed.lid_speed = -p.lid_speed;
  cpu_lattice a(p);
  cpu_lattice b(reversed);
  a.step(100);
  b.step(100);
  const int n = p.n;
  auto mirror = [](int i) {
    for (int j = 0; j < q; ++j)
      if (d2q9_cx(j) == -d2q9_cx(i) && d2q9_cy(j) == d2q9_cy(i)) return j;
    return -1;
  };
  double worst = 0.0;
  for (int i = 0; i < q; ++i)
    for (int y = 0; y < n; ++y)
      for (int x = 0; x < n; ++x)
        worst = std::max(worst, std::fabs(double{a.populations()[population_index(n, i, x, y)]} -
                                          double{b.populations()[population_index(n, mirror(i), n - 1 - x, y)]}));
  EXPECT_LT(worst, 1e-6);
}

TEST(CpuReference, Re100OnACoarseLatticeIsCloseToGhia) {
  // Physics end to end on the CPU: Re 100 on 33 x 33 cells, 60 convective times (steady: the change per step
  // falls below 1e-7 of U after 5,800 steps). Measured: max difference 0.0119 (u) and 0.0086 (v); the bound leaves
  // a factor two (the GPU test checks 129 x 129 against the 257 x 257 target).
  const fs::path dir = shared_data() / "ghia1982";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no shared data at " << dir << " (set CONVEYOR_SHARED_DATA)";
  const ghia_reference r = read_ghia_dir(dir);
  const cavity_options o = options(100, 33);
  cpu_lattice lat(make_lattice_params(o));
  lat.step(20000);
  const flow_field f = compute_fields(lat.populations(), o.n);
  const auto c =
      compare_with_ghia(r, 100, u_vertical_centerline(f, o.lid_speed), v_horizontal_centerline(f, o.lid_speed));
  ASSERT_TRUE(c.has_value());
  EXPECT_LT(c->u.max_abs, 0.025) << "at y = " << c->u.position;
  EXPECT_LT(c->v.max_abs, 0.025) << "at x = " << c->v.position;
}

} // namespace
