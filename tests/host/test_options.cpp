// Host-only tests of the command-line checks the subcommands share (scenarios/common): numeric options validated in
// the type they are used in, with their range in the message; output paths checked for writability before any work.
// The subcommands themselves are run from CTest (tests/CMakeLists.txt, Cli.*), without a GPU.
#include "common/numeric_options.hpp"
#include "common/output_paths.hpp"
#include "train/dataset.hpp"
#include "train/trainer.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace conveyor::scenarios;

#define EXPECT_CONTAINS(text, part)                                                                                    \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "'" << (text) << "' lacks '" << (part) << "'"

// The message of the std::invalid_argument `f` throws, or "" (and a failure) when it throws none.
template <class F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no std::invalid_argument";
  return {};
}

// ---- integers ------------------------------------------------------------------------------------------------------

TEST(NumericOptions, UnsignedOptionRefusesMinusOneInsteadOfWrappingRound) {
  EXPECT_EQ(unsigned_integer_problem("-1", 0, std::numeric_limits<std::uint64_t>::max()),
            "must be an integer in [0, 18446744073709551615], got '-1'");
  EXPECT_EQ(unsigned_integer_problem("-0", 0, 10), "must be an integer in [0, 10], got '-0'");
  EXPECT_EQ(unsigned_integer_problem("18446744073709551615", 0, std::numeric_limits<std::uint64_t>::max()), "");
  EXPECT_EQ(unsigned_integer_problem("18446744073709551616", 0, std::numeric_limits<std::uint64_t>::max()),
            "must be an integer in [0, 18446744073709551615], got '18446744073709551616' (too large for the type it "
            "is used in)");
}

TEST(NumericOptions, IntegerMustFitTheRangeOfItsType) {
  // --max-iter is an int: 3e9 would not fit, and is refused with the int range's bound.
  EXPECT_EQ(signed_integer_problem("3000000000", 0, INT_MAX),
            "must be an integer in [0, 2147483647], got '3000000000'");
  EXPECT_EQ(signed_integer_problem("0", 0, INT_MAX), "");
  EXPECT_EQ(signed_integer_problem("+7", 1, 10), "");
  EXPECT_EQ(signed_integer_problem("-3", -5, 5), "");
  for (const char* bad : {"", "1.5", "1e3", " 1", "1 ", "0x10", "ten", "+-1", "--1"})
    EXPECT_EQ(signed_integer_problem(bad, 0, 100), std::string("must be an integer in [0, 100], got '") + bad + "'")
        << bad;
}

// ---- real numbers --------------------------------------------------------------------------------------------------

TEST(NumericOptions, RealThatBecomesInfiniteAsAFloatIsRefused) {
  // --lr, --amount, --threshold reach the GPU as floats.
  EXPECT_EQ(real_problem("1e308", positive_float()),
            "must be a finite number in (0, 3.40282e+38], got '1e308' (it is inf as a float, the type it is used in)");
  EXPECT_EQ(real_problem("1e300", nonnegative_float()),
            "must be a finite number in [0, 3.40282e+38], got '1e300' (it is inf as a float, the type it is used in)");
  // Within the float range in double, but 0 as a float: a learning rate of 0 would train nothing.
  EXPECT_EQ(real_problem("1e-50", positive_float()),
            "must be a finite number in (0, 3.40282e+38], got '1e-50' (it is 0 as a float, the type it is used in)");
  EXPECT_EQ(real_problem("0.001", positive_float()), "");
  // Momentum below 1 in double, exactly 1 as a float: the velocity would never decay.
  EXPECT_EQ(real_problem("0.99999999999", {0.0, 1.0, false, true, true}),
            "must be a finite number in [0, 1), got '0.99999999999' (it is 1 as a float, the type it is used in)");
  EXPECT_EQ(real_problem("0.9", {0.0, 1.0, false, true, true}), "");
}

TEST(NumericOptions, UnderflowIsNamedNotCalledNotANumber) {
  EXPECT_EQ(real_problem("1e-400", {0.0, 1.0, true, true, false}),
            "must be a finite number in (0, 1), got '1e-400' (below the smallest double, it reads as 0)");
  EXPECT_EQ(real_problem("1e400", {0.0, 1.0, true, true, false}),
            "must be a finite number in (0, 1), got '1e400' (beyond the largest double)");
  EXPECT_EQ(real_problem("1e-8", {0.0, 1.0, true, true, false}), "");
}

TEST(NumericOptions, NanAndInfinityAreRefusedNotReplacedByTheDefault) {
  const real_range target_ms{0.1, 100000.0, false, false, false};
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "0x1p3", "", " 5", "5ms", "1,5"})
    EXPECT_EQ(real_problem(bad, target_ms), std::string("must be a finite number in [0.1, 100000], got '") + bad + "'")
        << bad;
  EXPECT_EQ(real_problem("0.05", target_ms), "must be a finite number in [0.1, 100000], got '0.05'");
  EXPECT_EQ(real_problem("100000", target_ms), "");
  EXPECT_EQ(real_problem("+2.5e1", target_ms), "");
}

TEST(NumericOptions, ValidatorsRefuseAtParseTimeNamingTheOption) {
  std::uint64_t seed = 42;
  double lr = 1e-3;
  auto parse = [&](std::vector<std::string> args) -> std::string {
    CLI::App app;
    app.add_option("--seed", seed)->check(integer_in(std::uint64_t{0}, std::numeric_limits<std::uint64_t>::max()));
    app.add_option("--lr", lr)->check(real_in(positive_float()));
    std::vector<std::string> reversed(args.rbegin(), args.rend()); // CLI11 takes them last first
    try {
      app.parse(reversed);
    } catch (const CLI::ValidationError& e) {
      return e.what();
    }
    return {};
  };
  EXPECT_CONTAINS(parse({"--seed", "-1"}), "--seed: must be an integer in [0, 18446744073709551615], got '-1'");
  EXPECT_EQ(seed, 42U); // not wrapped round to 2^64 - 1
  EXPECT_CONTAINS(parse({"--lr", "1e308"}), "--lr: must be a finite number in (0, 3.40282e+38]");
  EXPECT_EQ(parse({"--seed", "7", "--lr", "0.01"}), "");
  EXPECT_EQ(seed, 7U);
  EXPECT_DOUBLE_EQ(lr, 0.01);
}

// ---- output paths --------------------------------------------------------------------------------------------------

class OutputPaths : public ::testing::Test {
protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("conveyor-options-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  [[nodiscard]] std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

TEST_F(OutputPaths, FolderThatTakesNoNewFilesIsRefusedBeforeAnyWork) {
  const fs::path locked = dir_ / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(locked.c_str(), W_OK) == 0) GTEST_SKIP() << "running as root: permissions do not stop writes";
  const std::string file = (locked / "graph.dot").string();
  EXPECT_EQ(invalid_argument_message([&] { check_output_file("--dot", file); }),
            "--dot '" + file + "': cannot create a file in the folder '" + locked.string() + "': Permission denied");
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_folder("--csv", locked.string()); }),
                  "--csv '" + locked.string() + "': cannot create a file in it: Permission denied");
  const std::string sub = (locked / "profiles").string();
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_folder("--out", sub); }),
                  "--out '" + sub + "': cannot create it in the folder '" + locked.string() + "'");
}

TEST_F(OutputPaths, FolderOfTheKernelIsRefusedEvenForRoot) {
  // /sys takes no new files, whoever asks (the unwritable folder the Cli.* tests use as well).
  if (!fs::is_directory("/sys")) GTEST_SKIP() << "no /sys";
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_file("--json", "/sys/conveyor-test.json"); }),
                  "--json '/sys/conveyor-test.json': cannot create a file in the folder '/sys': ");
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_folder("--out", "/sys/conveyor-test"); }),
                  "--out '/sys/conveyor-test': cannot create it in the folder '/sys': ");
}

TEST_F(OutputPaths, WritableFolderPassesAndKeepsNothing) {
  EXPECT_NO_THROW(check_output_file("--dot", (dir_ / "graph.dot").string()));
  EXPECT_NO_THROW(check_output_folder("--csv", (dir_ / "new").string()));
  EXPECT_NO_THROW(check_output_folder("--csv", dir_.string()));
  EXPECT_TRUE(entries().empty()) << entries().front(); // the probe files are gone, nothing was created
  EXPECT_NO_THROW(check_output_file("--dot", ""));     // not given: nothing to check
}

TEST_F(OutputPaths, SpecialFilesAndFoldersAreNoOutputFiles) {
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_file("--json", "/dev/null"); }),
                  "--json '/dev/null': exists and is not a regular file");
  EXPECT_EQ(invalid_argument_message([&] { check_output_file("--png", dir_.string()); }),
            "--png '" + dir_.string() + "': is a folder; give a file name");
  const std::string missing = (dir_ / "no" / "x.dot").string();
  EXPECT_EQ(invalid_argument_message([&] { check_output_file("--dot", missing); }),
            "--dot '" + missing + "': the folder '" + (dir_ / "no").string() + "' does not exist");
  std::ofstream(dir_ / "file") << "x";
  EXPECT_CONTAINS(invalid_argument_message([&] { check_output_folder("--out", (dir_ / "file").string()); }),
                  "exists and is not a folder");
}

TEST_F(OutputPaths, TwoOptionsNamingOneFileAreRefused) {
  const std::string a = (dir_ / "report.md").string();
  const std::string b = (dir_ / "." / "report.md").string();
  EXPECT_EQ(invalid_argument_message([&] {
              check_distinct_outputs({{"--json", a}, {"--markdown", b}});
            }),
            "--json and --markdown name the same file '" + b + "': the second would replace the first");
  EXPECT_NO_THROW(check_distinct_outputs({{"--json", a}, {"--markdown", ""}, {"--gbench-json", a + ".g"}}));
}

// ---- input checks before the GPU -------------------------------------------------------------------------------

TEST(TrainOptions, EveryCheckOfTheRunIsMadeBeforeTheGpu) {
  // `conveyor train` calls check_options before it looks for a GPU; run_training made these checks only on one.
  const auto data = conveyor::train::make_random_dataset(3000, 10, 1);
  conveyor::train::train_options o;
  o.batch = 1;
  o.epochs = 1000000; // 3000 steps per epoch: 3e9 steps would not fit the int step counter
  EXPECT_EQ(invalid_argument_message([&] { conveyor::train::check_options(o, data); }),
            "3000000000 steps in all (1000000 epoch(s) of 1-sample batches) are more than the 2147483647 a run holds; "
            "fewer epochs, a larger batch or max_steps");
  // A command names its options.
  EXPECT_EQ(invalid_argument_message([&] {
              conveyor::train::check_options(o, data, {"--epochs", "--batch", "--max-steps"});
            }),
            "3000000000 steps in all (1000000 epoch(s) of 1-sample batches) are more than the 2147483647 a run holds; "
            "fewer --epochs, a larger --batch or --max-steps");
  o.max_steps = 1000; // capped: fine
  EXPECT_NO_THROW(conveyor::train::check_options(o, data));
  o.batch = 3001;
  EXPECT_EQ(invalid_argument_message([&] { conveyor::train::check_options(o, data); }),
            "batch size 3001 outside [1, 3000] (the training set size)");
}

} // namespace
