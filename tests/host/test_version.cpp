// Host-only tests of the version (the header's numbers, its string and the linked library agree) and of the device
// architecture check's rules.
#include <conveyor/runtime/architecture.hpp>
#include <conveyor/version.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace {

TEST(Version, HeaderNumbersStringAndLibraryAgree) {
  const std::string numbers = std::to_string(CONVEYOR_VERSION_MAJOR) + "." + std::to_string(CONVEYOR_VERSION_MINOR) +
                              "." + std::to_string(CONVEYOR_VERSION_PATCH);
  EXPECT_EQ(numbers, CONVEYOR_VERSION_STRING);
  EXPECT_EQ(std::string(conveyor::version()), CONVEYOR_VERSION_STRING);
  EXPECT_EQ(CONVEYOR_VERSION_NUMBER,
            CONVEYOR_VERSION_MAJOR * 10000 + CONVEYOR_VERSION_MINOR * 100 + CONVEYOR_VERSION_PATCH);
  EXPECT_GE(CONVEYOR_VERSION_NUMBER, 300); // 0.3.0: graph files
}

} // namespace

// The architecture check's rules (CUDA's binary and PTX compatibility), without a GPU.
namespace arch {

bool runs(std::string_view built, int major, int minor) {
  return conveyor::architecture_mismatch(built, major, minor).empty();
}

TEST(Architecture, MachineCodeRunsOnItsMajorAtAnEqualOrHigherMinor) {
  EXPECT_TRUE(runs("90-real", 9, 0));
  EXPECT_TRUE(runs("80-real", 8, 6));  // sm_80 machine code on an 8.6 GPU
  EXPECT_FALSE(runs("86-real", 8, 0)); // not on a lower minor
  EXPECT_FALSE(runs("80-real", 9, 0)); // not on another major
  EXPECT_FALSE(runs("90-real", 10, 0));
}

TEST(Architecture, PtxRunsOnEveryLaterGpu) {
  EXPECT_TRUE(runs("90", 10, 0)); // a plain entry carries PTX: the driver compiles it for 10.0
  EXPECT_TRUE(runs("80-virtual", 9, 0));
  EXPECT_FALSE(runs("90-virtual", 8, 9));
  EXPECT_FALSE(runs("90", 8, 0)); // the case the check exists for: an sm_90 build on an A100
}

TEST(Architecture, ArchitectureAndFamilySpecificCode) {
  EXPECT_TRUE(runs("90a", 9, 0));
  EXPECT_FALSE(runs("90a", 10, 0)); // 90a's PTX too runs only on 9.0
  EXPECT_TRUE(runs("100f", 10, 3));
  EXPECT_FALSE(runs("103a-real", 10, 0));
  EXPECT_FALSE(runs("100f", 12, 0));
}

TEST(Architecture, ListsFitWhenOneEntryFitsAndKeywordsAlwaysFit) {
  EXPECT_TRUE(runs("70-real;80-real;90-real", 8, 0));
  EXPECT_FALSE(runs("70-real;90-real", 8, 0));
  EXPECT_TRUE(runs("native", 7, 5));
  EXPECT_TRUE(runs("all-major", 12, 0));
}

TEST(Architecture, TheMessageNamesTheCapabilityTheBuildAndTheFix) {
  const std::string m = conveyor::architecture_mismatch("90", 8, 0);
  EXPECT_NE(m.find("architectures '90'"), std::string::npos) << m;
  EXPECT_NE(m.find("compute capability 8.0"), std::string::npos) << m;
  EXPECT_NE(m.find("-DCMAKE_CUDA_ARCHITECTURES=80"), std::string::npos) << m;
}

TEST(Architecture, AnEntryOfNoKnownFormIsNamed) {
  for (const char* bad : {"sm_90", "90-fake", "9", "x90", "90b"}) {
    try {
      (void)conveyor::architecture_mismatch(std::string("80-real;") + bad, 9, 0);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("entry '") + bad + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Architecture, TheBuildsListIsCMakes) {
  // This test program links the library built by the same CMake run (CMAKE_CUDA_ARCHITECTURES given to both).
  EXPECT_EQ(conveyor::built_cuda_architectures(), CONVEYOR_TEST_CUDA_ARCHITECTURES);
  EXPECT_TRUE(runs(conveyor::built_cuda_architectures(), 9, 0)); // the project's default (sm_90) runs on the H200
}

} // namespace arch
