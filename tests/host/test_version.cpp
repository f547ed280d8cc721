// Host-only tests of the version: the header's numbers, its string and the linked library agree.
#include <conveyor/version.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(Version, HeaderNumbersStringAndLibraryAgree) {
  const std::string numbers = std::to_string(CONVEYOR_VERSION_MAJOR) + "." + std::to_string(CONVEYOR_VERSION_MINOR) +
                              "." + std::to_string(CONVEYOR_VERSION_PATCH);
  EXPECT_EQ(numbers, CONVEYOR_VERSION_STRING);
  EXPECT_EQ(std::string(conveyor::version()), CONVEYOR_VERSION_STRING);
  EXPECT_EQ(CONVEYOR_VERSION_NUMBER,
            CONVEYOR_VERSION_MAJOR * 10000 + CONVEYOR_VERSION_MINOR * 100 + CONVEYOR_VERSION_PATCH);
  EXPECT_GE(CONVEYOR_VERSION_NUMBER, 200); // 0.2.0: rebinding
}

} // namespace
