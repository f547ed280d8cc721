#pragma once
//! \file architecture.hpp
//! Does this build's device code run on this GPU? A build for sm_90 started on another GPU stops
//! with the fix (-DCMAKE_CUDA_ARCHITECTURES=...) instead of CUDA's bare "no kernel image is
//! available for execution on the device".

#include "conveyor/cxx20.hpp"

#include <string>
#include <string_view>

namespace conveyor {

//! The CUDA architectures Conveyor's own device code was built for: CMake's
//! CMAKE_CUDA_ARCHITECTURES as given at configure time ("90", "80;90", "90-real", "all", ...).
//! Thread safety: a constant.
[[nodiscard]] std::string_view built_cuda_architectures() noexcept;

//! Why a device of compute capability `major`.`minor` cannot run code built for `architectures`
//! (CMake's CMAKE_CUDA_ARCHITECTURES form: entries such as "90", "90-real", "90-virtual", "90a",
//! "100f" separated by ';'), or "" when it can. The rules are CUDA's (CUDA C++ Programming Guide,
//! "Binary Compatibility" and "PTX Compatibility"): machine code (sm_XY, "XY-real") runs on devices
//! of major X and minor ≥ Y; an architecture-specific one ("XYa") only on X.Y; a family-specific
//! one ("XYf") on major X, minor ≥ Y; PTX ("XY-virtual") is compiled by the driver for any device
//! of compute capability ≥ X.Y ("XYa"/"XYf" PTX: as their machine code). A plain "XY" carries both.
//! "all", "all-major" and "native" are taken to fit. The message names the device's compute
//! capability, what the build has, and the fix. Needs no GPU. Thread safety: pure.
//! \throws std::invalid_argument for an entry that is none of these forms, naming it.
[[nodiscard]] std::string architecture_mismatch(std::string_view architectures, int major,
                                                int minor);

//! Throws when device `ordinal` (cudaGetDeviceProperties: its compute capability) cannot run this
//! build's device code (architecture_mismatch over built_cuda_architectures()), naming the device
//! and the fix. Call it at start-up, before the first kernel; every `conveyor` command that needs a
//! GPU does.
//! \throws std::runtime_error for a device this build has no code for; cuda_error when
//!         `ordinal` is not a device.
void check_device_architecture(int ordinal);

} // namespace conveyor
