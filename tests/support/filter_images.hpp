#pragma once
// Test support for the `filter` scenario: where the real photographs are, and a skip when they are absent.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace conveyor::test {

//! The shared images folder: $CONVEYOR_SHARED_DATA/images, else CONVEYOR_DEFAULT_SHARED_DATA/images (set by
//! tests/CMakeLists.txt to ../shared/data beside the project).
inline std::filesystem::path shared_images() {
  if (const char* env = std::getenv("CONVEYOR_SHARED_DATA"); env != nullptr && *env != '\0')
    return std::filesystem::path(env) / "images";
  return std::filesystem::path(CONVEYOR_DEFAULT_SHARED_DATA) / "images";
}

//! The five photographs of ../shared/data/images (SOURCES.md), with their sizes.
struct shared_image {
  const char* file;
  int width;
  int height;
};
inline constexpr shared_image shared_image_list[] = {
    {"astronaut.png", 512, 512},          {"camera.png", 512, 512}, {"chelsea.png", 451, 300}, {"coffee.png", 600, 400},
    {"hubble_deep_field.jpg", 1000, 872},
};

} // namespace conveyor::test

//! Skips the current test, with the reason, when the shared images are not present.
#define CONVEYOR_REQUIRE_IMAGES()                                                                                      \
  do {                                                                                                                 \
    if (!std::filesystem::exists(::conveyor::test::shared_images() / "astronaut.png"))                                 \
      GTEST_SKIP() << "shared images not found in " << ::conveyor::test::shared_images()                               \
                   << " (set CONVEYOR_SHARED_DATA to the folder holding images/)";                                     \
  } while (0)
