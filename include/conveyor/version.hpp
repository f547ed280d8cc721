#pragma once
//! \file version.hpp
//! The library's version (semantic versioning: major.minor.patch). This header is the one place it
//! is written: the build reads it for CMake's project version, the package's version file
//! (find_package(conveyor 0.3)) and `conveyor --version`.

#include "conveyor/cxx20.hpp"

//! Major version: incompatible API changes (in 0.x, docs/stability.md says what a minor version may
//! change).
#define CONVEYOR_VERSION_MAJOR 0
//! Minor version: added functionality.
#define CONVEYOR_VERSION_MINOR 4
//! Patch version: fixes.
#define CONVEYOR_VERSION_PATCH 0
//! The version as one number, major * 10000 + minor * 100 + patch, for preprocessor comparisons
//! (`#if CONVEYOR_VERSION_NUMBER >= 300`).
#define CONVEYOR_VERSION_NUMBER                                                                    \
  (CONVEYOR_VERSION_MAJOR * 10000 + CONVEYOR_VERSION_MINOR * 100 + CONVEYOR_VERSION_PATCH)
//! The version as a string literal, e.g. "0.3.0".
#define CONVEYOR_VERSION_STRING "0.4.0"

namespace conveyor {

//! The version of the library that was linked, e.g. "0.3.0" (CONVEYOR_VERSION_STRING is that of the
//! headers compiled against: a mismatch means headers and library come from different installs).
//! Thread-safe; never throws.
[[nodiscard]] const char* version() noexcept;

} // namespace conveyor
