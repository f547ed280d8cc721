#include "conveyor/runtime/device.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

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

peer_access enable_peer_access(int device, int peer) {
  peer_access out;
  out.device = device;
  out.peer = peer;
  const int count = device_count();
  if (device < 0 || device >= count || peer < 0 || peer >= count)
    throw cuda_error(
        cudaErrorInvalidDevice, "conveyor::enable_peer_access", std::source_location::current(),
        fmt::format("device {} -> peer {}: {} device(s) are visible (ordinals 0..{})", device, peer, count, count - 1));
  if (device == peer) {
    out.possible = out.enabled = true;
    out.reason = "same device";
    return out;
  }
  int can = 0;
  CONVEYOR_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
  if (can == 0) {
    out.reason = fmt::format("device {} cannot access device {}'s memory directly (cudaDeviceCanAccessPeer: no, e.g. "
                             "no NVLink and no common PCIe switch); copies between them are staged through host "
                             "memory, at a fraction of the bandwidth",
                             device, peer);
    return out;
  }
  out.possible = true;
  const device_guard on(device);
  const cudaError_t rc = cudaDeviceEnablePeerAccess(peer, 0);
  if (rc == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();
    out.enabled = true;
    out.reason = "already enabled";
    return out;
  }
  if (rc != cudaSuccess)
    throw cuda_error(
        rc, "cudaDeviceEnablePeerAccess", std::source_location::current(),
        fmt::format("device {} -> peer {}: CUDA says access is possible but refused to enable it", device, peer));
  out.enabled = true;
  out.reason = "enabled";
  return out;
}

std::vector<peer_access> enable_peer_access(std::span<const int> devices) {
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (std::count(devices.begin(), devices.end(), devices[i]) > 1)
      throw std::invalid_argument(
          fmt::format("conveyor::enable_peer_access: device {} is listed more than once", devices[i]));
  std::vector<peer_access> out;
  for (const int d : devices)
    for (const int p : devices)
      if (d != p) out.push_back(enable_peer_access(d, p));
  return out;
}

int device_of(const void* ptr) noexcept {
  if (ptr == nullptr) return -1;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return a.type == cudaMemoryTypeDevice ? a.device : -1;
}

std::vector<int> first_devices(int count) {
  const int visible = device_count();
  if (count < 1 || count > visible)
    throw std::invalid_argument(
        fmt::format("{} GPU(s) asked for, but {} CUDA device(s) are visible{}", count, visible,
                    count < 1 ? ": ask for at least 1" : " (CUDA_VISIBLE_DEVICES and the machine decide how many)"));
  std::vector<int> out(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) out[static_cast<std::size_t>(i)] = i;
  return out;
}

} // namespace conveyor
