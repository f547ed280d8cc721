#include "conveyor/runtime/device.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

namespace conveyor {

int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

device_guard::device_guard(int ordinal) {
  CONVEYOR_CHECK(cudaGetDevice(&previous_));
  CONVEYOR_CHECK(cudaSetDevice(ordinal));
}

device_guard::~device_guard() { (void)cudaSetDevice(previous_); }

int current_device() {
  int ordinal = 0;
  CONVEYOR_CHECK(cudaGetDevice(&ordinal));
  return ordinal;
}

std::string describe_device(int ordinal) {
  cudaDeviceProp prop{};
  CONVEYOR_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  int driver = 0;
  int runtime = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  CONVEYOR_CHECK(cudaRuntimeGetVersion(&runtime));
  return fmt::format("{} (sm_{}{}, {} SMs, {:.1f} GiB), driver CUDA {}.{}, runtime {}.{}", prop.name, prop.major,
                     prop.minor, prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1ULL << 30),
                     driver / 1000, (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10);
}

} // namespace conveyor
