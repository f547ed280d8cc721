#pragma once
//! \file device.hpp
//! Device discovery and selection.

#include <cuda_runtime_api.h>

#include <string>

namespace conveyor {

//! Number of CUDA devices visible to this process (`cudaGetDeviceCount`); 0, not an error, when there is no device
//! or no driver, so that callers (tests above all) can skip cleanly.
[[nodiscard]] int device_count() noexcept;

//! True when at least one CUDA device is visible.
[[nodiscard]] inline bool has_device() noexcept { return device_count() > 0; }

//! Makes `ordinal` the current device for the calling thread, restoring the previous one on destruction
//! (`cudaGetDevice` / `cudaSetDevice`). The destructor never throws. Thread safety: the current device is per
//! thread; a guard acts on the thread that made it and must be destroyed there.
class device_guard {
public:
  //! \throws cuda_error when `ordinal` is not a valid device.
  explicit device_guard(int ordinal);
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;
  ~device_guard();

private:
  int previous_ = 0;
};

//! The current device of the calling thread (`cudaGetDevice`).
//! \throws cuda_error when no device is available.
[[nodiscard]] int current_device();

//! One line describing device `ordinal`: name, compute capability, SM count, memory, driver and runtime versions.
//! \throws cuda_error when the device cannot be queried.
[[nodiscard]] std::string describe_device(int ordinal = 0);

} // namespace conveyor
