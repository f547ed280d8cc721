// The graph allocator's accounting and trim (conveyor/runtime/graph_memory.hpp).
#include "conveyor/runtime/graph_memory.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace conveyor {

namespace {

std::size_t attribute(int device, cudaGraphMemAttributeType which, const char* name) {
  std::uint64_t value = 0; // cuuint64_t, as CUDA documents for every graph-memory attribute
  detail::check_with(cudaDeviceGetGraphMemAttribute(device, which, &value), "cudaDeviceGetGraphMemAttribute",
                     [&] { return fmt::format("{} of device {}", name, device); });
  return static_cast<std::size_t>(value);
}

} // namespace

graph_memory_usage graph_memory(int device) {
  graph_memory_usage out;
  out.used = attribute(device, cudaGraphMemAttrUsedMemCurrent, "cudaGraphMemAttrUsedMemCurrent");
  out.used_high = attribute(device, cudaGraphMemAttrUsedMemHigh, "cudaGraphMemAttrUsedMemHigh");
  out.reserved = attribute(device, cudaGraphMemAttrReservedMemCurrent, "cudaGraphMemAttrReservedMemCurrent");
  out.reserved_high = attribute(device, cudaGraphMemAttrReservedMemHigh, "cudaGraphMemAttrReservedMemHigh");
  return out;
}

void reset_graph_memory_high_water(int device) {
  for (auto which : {cudaGraphMemAttrUsedMemHigh, cudaGraphMemAttrReservedMemHigh}) {
    std::uint64_t zero = 0; // the high-water marks can only be reset to zero
    detail::check_with(cudaDeviceSetGraphMemAttribute(device, which, &zero), "cudaDeviceSetGraphMemAttribute",
                       [&] { return fmt::format("resetting a high-water mark of device {}", device); });
  }
}

void trim_graph_memory(int device) {
  detail::check_with(cudaDeviceGraphMemTrim(device), "cudaDeviceGraphMemTrim",
                     [&] { return fmt::format("device {}", device); });
}

} // namespace conveyor
