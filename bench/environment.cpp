//! \file environment.cpp
//! GPU properties, CUDA versions and NVML clocks.

#include "bench/environment.hpp"

#include <conveyor/runtime/architecture.hpp>
#include <conveyor/error.hpp>
#include <conveyor/runtime/device.hpp>

#include <fmt/format.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <array>
#include <ctime>
#include <stdexcept>

#ifndef CONVEYOR_VERSION
#define CONVEYOR_VERSION "unknown"
#endif

namespace conveyor::bench {

namespace {

// The few NVML declarations used (nvml.h is not part of the toolkit here); values as in NVML's stable ABI.
using nvml_return = int;
struct nvml_device_st;
using nvml_device = nvml_device_st*;
constexpr nvml_return nvml_success = 0;
constexpr int nvml_clock_sm = 1;        // NVML_CLOCK_SM
constexpr int nvml_clock_memory = 2;    // NVML_CLOCK_MEM
constexpr int nvml_temperature_gpu = 0; // NVML_TEMPERATURE_GPU

template <class F>
F symbol(void* library, const char* name) noexcept {
  return reinterpret_cast<F>(dlsym(library, name));
}

} // namespace

void use_device(int device, std::string_view command, std::string_view hint) {
  if (!conveyor::has_device())
    throw std::runtime_error(fmt::format("no CUDA device: `{}` needs a GPU{}", command, hint));
  if (device >= conveyor::device_count())
    throw std::runtime_error(
        fmt::format("--device {}: only {} CUDA device(s) visible", device, conveyor::device_count()));
  CONVEYOR_CHECK(cudaSetDevice(device));
  conveyor::check_device_architecture(device);
}

struct nvml_probe::api {
  void* library = nullptr;
  bool initialised = false;
  nvml_device device = nullptr;
  nvml_return (*shutdown)() = nullptr;
  nvml_return (*clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*max_clock)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*temperature)(nvml_device, int, unsigned*) = nullptr;
  nvml_return (*reasons)(nvml_device, unsigned long long*) = nullptr;
  nvml_return (*driver)(char*, unsigned) = nullptr;
};

environment query_environment(int ordinal) {
  environment e;
  cudaDeviceProp p{};
  CONVEYOR_CHECK(cudaGetDeviceProperties(&p, ordinal));
  e.gpu_name = p.name;
  e.compute_major = p.major;
  e.compute_minor = p.minor;
  e.sm_count = p.multiProcessorCount;
  e.memory_bytes = p.totalGlobalMem;
  e.l2_bytes = static_cast<std::uint64_t>(p.l2CacheSize);
  int khz = 0;
  CONVEYOR_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, ordinal));
  e.peak_sm_mhz = static_cast<unsigned>(khz / 1000);
  CONVEYOR_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, ordinal));
  e.peak_memory_mhz = static_cast<unsigned>(khz / 1000);
  std::array<char, 64> bus{};
  CONVEYOR_CHECK(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), ordinal));
  e.pci_bus_id = bus.data();
  CONVEYOR_CHECK(cudaDriverGetVersion(&e.driver_version));
  CONVEYOR_CHECK(cudaRuntimeGetVersion(&e.runtime_version));
  e.conveyor_version = CONVEYOR_VERSION;
  e.started_utc = utc_now();
  return e;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  const std::size_t length = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {text.data(), length};
}

nvml_probe::nvml_probe(int cuda_ordinal) noexcept {
  auto a = std::make_unique<api>();
  a->library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (a->library == nullptr) return;
  const auto init = symbol<nvml_return (*)()>(a->library, "nvmlInit_v2");
  a->shutdown = symbol<nvml_return (*)()>(a->library, "nvmlShutdown");
  if (init == nullptr || a->shutdown == nullptr || init() != nvml_success) {
    dlclose(a->library);
    return;
  }
  a->initialised = true;
  api_ = std::move(a); // from here on the destructor shuts NVML down

  std::array<char, 64> bus{};
  const auto by_pci =
      symbol<nvml_return (*)(const char*, nvml_device*)>(api_->library, "nvmlDeviceGetHandleByPciBusId_v2");
  if (by_pci != nullptr &&
      cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), cuda_ordinal) == cudaSuccess &&
      by_pci(bus.data(), &api_->device) != nvml_success)
    api_->device = nullptr;
  (void)cudaGetLastError();
  if (api_->device == nullptr) {
    // Without a PCI match, use the only device if there is exactly one.
    const auto count = symbol<nvml_return (*)(unsigned*)>(api_->library, "nvmlDeviceGetCount_v2");
    const auto by_index =
        symbol<nvml_return (*)(unsigned, nvml_device*)>(api_->library, "nvmlDeviceGetHandleByIndex_v2");
    unsigned devices = 0;
    if (count != nullptr && by_index != nullptr && count(&devices) == nvml_success && devices == 1 &&
        by_index(0, &api_->device) != nvml_success)
      api_->device = nullptr;
  }
  api_->clock = symbol<decltype(api_->clock)>(api_->library, "nvmlDeviceGetClockInfo");
  api_->max_clock = symbol<decltype(api_->max_clock)>(api_->library, "nvmlDeviceGetMaxClockInfo");
  api_->temperature = symbol<decltype(api_->temperature)>(api_->library, "nvmlDeviceGetTemperature");
  api_->reasons = symbol<decltype(api_->reasons)>(api_->library, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api_->reasons == nullptr)
    api_->reasons = symbol<decltype(api_->reasons)>(api_->library, "nvmlDeviceGetCurrentClocksThrottleReasons");
  api_->driver = symbol<decltype(api_->driver)>(api_->library, "nvmlSystemGetDriverVersion");
}

nvml_probe::~nvml_probe() {
  if (!api_) return;
  if (api_->initialised) (void)api_->shutdown();
  dlclose(api_->library);
}

bool nvml_probe::available() const noexcept {
  return api_ && api_->device != nullptr && api_->clock != nullptr && api_->max_clock != nullptr;
}

clock_sample nvml_probe::sample() const noexcept {
  clock_sample s;
  if (!available()) return s;
  const nvml_device d = api_->device;
  s.available = api_->clock(d, nvml_clock_sm, &s.sm_mhz) == nvml_success &&
                api_->clock(d, nvml_clock_memory, &s.memory_mhz) == nvml_success &&
                api_->max_clock(d, nvml_clock_sm, &s.sm_max_mhz) == nvml_success &&
                api_->max_clock(d, nvml_clock_memory, &s.memory_max_mhz) == nvml_success;
  unsigned celsius = 0;
  if (api_->temperature != nullptr && api_->temperature(d, nvml_temperature_gpu, &celsius) == nvml_success)
    s.temperature_c = static_cast<int>(celsius);
  unsigned long long reasons = 0;
  if (api_->reasons != nullptr && api_->reasons(d, &reasons) == nvml_success) s.clock_event_reasons = reasons;
  return s;
}

std::string nvml_probe::driver_release() const {
  if (!api_ || api_->driver == nullptr) return {};
  std::array<char, 96> text{};
  if (api_->driver(text.data(), static_cast<unsigned>(text.size())) != nvml_success) return {};
  return text.data();
}

} // namespace conveyor::bench
