#pragma once
//! \file device.hpp
//! Device discovery and selection.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <span>
#include <string>
#include <vector>

namespace conveyor {

//! Number of CUDA devices visible to this process (`cudaGetDeviceCount`); 0, not an error, when
//! there is no device or no driver, so that callers (tests above all) can skip cleanly.
[[nodiscard]] int device_count() noexcept;

//! True when at least one CUDA device is visible.
[[nodiscard]] inline bool has_device() noexcept { return device_count() > 0; }

//! Makes `ordinal` the current device for the calling thread, restoring the previous one on
//! destruction (`cudaGetDevice` / `cudaSetDevice`). The destructor never throws. Thread safety: the
//! current device is per thread; a guard acts on the thread that made it and must be destroyed
//! there.
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

//! One line describing device `ordinal`: name, compute capability, SM count, memory, driver and
//! runtime versions.
//! \throws cuda_error when the device cannot be queried.
[[nodiscard]] std::string describe_device(int ordinal = 0);

//! Whether device `device` can reach the memory of device `peer` directly (over NVLink or PCIe),
//! and whether it does now. A plain value.
struct peer_access {
  int device = 0;        //!< the device whose kernels and copies read or write
  int peer = 0;          //!< the device whose memory they reach
  bool possible = false; //!< the topology allows it (`cudaDeviceCanAccessPeer`)
  bool enabled = false;  //!< access is on: enabled by the call, or before it
  //! readable: "enabled", "already enabled", "same device", or why it is not possible and
  std::string reason;
  // !< what that costs (copies between the two devices are staged through
  // host memory)
};

//! Enables direct access from `device` to the memory of `peer` (`cudaDeviceCanAccessPeer`, then
//! `cudaDeviceEnablePeerAccess` with `device` current; the calling thread's current device is
//! restored). Access that is already on is not an error (cudaErrorPeerAccessAlreadyEnabled is
//! consumed). Where the topology does not allow it the result says so (possible = false, with the
//! reason) instead of throwing: peer copies still work, staged through the host. Access stays on
//! until the device is reset; enabling it is a one-time set-up call, not for loops. Thread safety:
//! any thread (CUDA serialises the calls).
//! \throws cuda_error when an ordinal is not a valid device, or CUDA refuses to enable
//!         access that it says is possible (e.g. out of resources).
[[nodiscard]] peer_access enable_peer_access(int device, int peer);

//! enable_peer_access for every ordered pair of distinct devices in `devices`: one entry per pair,
//! in order.
//! \throws cuda_error as enable_peer_access; std::invalid_argument when a device appears twice.
[[nodiscard]] std::vector<peer_access> enable_peer_access(std::span<const int> devices);

//! The device that owns the memory `ptr` points into (`cudaPointerGetAttributes`), or -1 for host
//! memory (pinned, pageable or unknown to CUDA) and managed memory. Never throws.
[[nodiscard]] int device_of(const void* ptr) noexcept;

//! The first `count` device ordinals, 0..count-1, after checking that so many are visible.
//! \throws std::invalid_argument when count < 1 or count > device_count(), saying how many
//!         devices are visible (e.g. `--gpus 4` on a machine with 2).
[[nodiscard]] std::vector<int> first_devices(int count);

} // namespace conveyor
