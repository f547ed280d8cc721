#pragma once
//! \file instantiate_flags.hpp
//! The flags of `cudaGraphInstantiateWithParams`, as a type-safe bit set.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace conveyor {

//! Flags for instantiate() (`cudaGraphInstantiateFlags`); combine with `|`.
enum class instantiate_flags : unsigned long long {
  none = 0, //!< default instantiation
  //! Free graph allocations not freed by the graph itself when it is launched again.
  auto_free_on_launch = cudaGraphInstantiateFlagAutoFreeOnLaunch,
  //! Upload the executable graph to the device during instantiation (needs an upload stream).
  upload = cudaGraphInstantiateFlagUpload,
  //! Make the graph launchable from the device (cudaGraphLaunch in a kernel).
  device_launch = cudaGraphInstantiateFlagDeviceLaunch,
  //! Honour the per-node priority attribute of kernel nodes instead of the launch stream's
  //! priority.
  use_node_priority = cudaGraphInstantiateFlagUseNodePriority,
};

//! The union of two flag sets.
[[nodiscard]] constexpr instantiate_flags operator|(instantiate_flags a,
                                                    instantiate_flags b) noexcept {
  return static_cast<instantiate_flags>(static_cast<unsigned long long>(a) |
                                        static_cast<unsigned long long>(b));
}
//! True when `set` contains `flag`.
[[nodiscard]] constexpr bool has_flag(instantiate_flags set, instantiate_flags flag) noexcept {
  return (static_cast<unsigned long long>(set) & static_cast<unsigned long long>(flag)) != 0;
}
//! `set` with `flag` removed.
[[nodiscard]] constexpr instantiate_flags without(instantiate_flags set,
                                                  instantiate_flags flag) noexcept {
  return static_cast<instantiate_flags>(static_cast<unsigned long long>(set) &
                                        ~static_cast<unsigned long long>(flag));
}
//! The set's names joined with '|', e.g. "upload|use_node_priority", or "none".
[[nodiscard]] std::string to_string(instantiate_flags flags);

} // namespace conveyor
