#include "conveyor/runtime/architecture.hpp"

#include "conveyor/error.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <charconv>
#include <stdexcept>
#include <vector>

#ifndef CONVEYOR_CUDA_ARCHITECTURES
#error "CONVEYOR_CUDA_ARCHITECTURES must name CMAKE_CUDA_ARCHITECTURES (src/CMakeLists.txt defines it)"
#endif

namespace conveyor {

namespace {

// One entry of CMAKE_CUDA_ARCHITECTURES: "90", "90-real", "90-virtual", "90a", "100f-real".
struct arch_entry {
  int version = 0;    // major * 10 + minor
  char suffix = '\0'; // 'a' (architecture-specific), 'f' (family-specific) or none
  bool sass = true;
  bool ptx = true;
};

arch_entry parse_entry(std::string_view e) {
  arch_entry a;
  if (e.ends_with("-real")) a.ptx = false, e.remove_suffix(5);
  else if (e.ends_with("-virtual")) a.sass = false, e.remove_suffix(8);
  if (!e.empty() && (e.back() == 'a' || e.back() == 'f')) a.suffix = e.back(), e.remove_suffix(1);
  const auto [end, ec] = std::from_chars(e.data(), e.data() + e.size(), a.version);
  if (ec != std::errc{} || end != e.data() + e.size() || a.version < 10)
    throw std::invalid_argument("not a CUDA architecture");
  return a;
}

bool sass_runs(const arch_entry& a, int major, int minor) {
  if (a.version / 10 != major) return false;
  return a.suffix == 'a' ? a.version % 10 == minor : a.version % 10 <= minor;
}

bool ptx_runs(const arch_entry& a, int major, int minor) {
  if (a.suffix != '\0') return sass_runs(a, major, minor);
  return a.version <= major * 10 + minor;
}

std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    const auto semi = list.find(';');
    const std::string_view e = list.substr(0, semi);
    if (!e.empty()) out.push_back(e);
    list = semi == std::string_view::npos ? std::string_view{} : list.substr(semi + 1);
  }
  return out;
}

bool fits(std::string_view e, int major, int minor) {
  if (e == "all" || e == "all-major" || e == "native") return true;
  arch_entry a;
  try {
    a = parse_entry(e);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(fmt::format(
        "CUDA architectures '{}': entry '{}' is not a CUDA architecture (expected forms: 90, 90-real, 90-virtual, "
        "90a, 100f, all, all-major, native)",
        e, e));
  }
  return (a.sass && sass_runs(a, major, minor)) || (a.ptx && ptx_runs(a, major, minor));
}

} // namespace

std::string_view built_cuda_architectures() noexcept { return CONVEYOR_CUDA_ARCHITECTURES; }

std::string architecture_mismatch(std::string_view architectures, int major, int minor) {
  const std::vector<std::string_view> entries = split(architectures);
  for (std::string_view e : entries)
    if (fits(e, major, minor)) return {};
  return fmt::format("this build has device code for CUDA architectures '{}' (CMAKE_CUDA_ARCHITECTURES), which a "
                     "GPU of compute capability {}.{} cannot run. Fix: rebuild with "
                     "-DCMAKE_CUDA_ARCHITECTURES={}{} (or -DCMAKE_CUDA_ARCHITECTURES=native to build for the GPUs "
                     "of the building machine)",
                     architectures, major, minor, major, minor);
}

void check_device_architecture(int ordinal) {
  cudaDeviceProp prop{};
  CONVEYOR_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  const std::string why = architecture_mismatch(built_cuda_architectures(), prop.major, prop.minor);
  if (!why.empty()) throw std::runtime_error(fmt::format("device {} ({}): {}", ordinal, prop.name, why));
}

} // namespace conveyor
