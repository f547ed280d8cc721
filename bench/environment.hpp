#pragma once
//! \file environment.hpp
//! The machine a benchmark runs on: GPU properties and CUDA versions (CUDA Runtime), current clocks (NVML, loaded
//! at run time when present; the program never changes clocks).

#include "bench/report.hpp"

#include <memory>
#include <string>
#include <string_view>

namespace conveyor::bench {

//! Reads device `ordinal`'s name, compute capability, SM count, memory and L2 sizes, PCI bus id and peak clocks
//! (cudaGetDeviceProperties, cudaDeviceGetAttribute), the driver and runtime CUDA versions (cudaDriverGetVersion,
//! cudaRuntimeGetVersion), Conveyor's version and the current UTC time. Clocks, driver release and host fields are
//! left for nvml_probe and the benchmark reporter to fill in.
//! \throws cuda_error when the device cannot be queried.
[[nodiscard]] environment query_environment(int ordinal);

//! Makes CUDA device `device` current for a measurement run by `command` (e.g. "conveyor bench pdl").
//! \throws std::runtime_error "no CUDA device: `command` needs a GPU" followed by `hint` where there is none, or
//!         naming how many are visible when `device` is not one of them; conveyor::cuda_error when
//!         cudaSetDevice fails.
void use_device(int device, std::string_view command, std::string_view hint = {});

//! The current time, ISO 8601 UTC ("2026-11-30T12:34:56Z").
[[nodiscard]] std::string utc_now();

//! Read-only access to NVML for one CUDA device: libnvidia-ml.so.1 is opened with dlopen, so that the program
//! starts (and fails cleanly) where the driver is absent. Reads clocks, temperature and the driver release; never
//! sets anything.
class nvml_probe {
public:
  //! Opens NVML and finds the device by the PCI bus id of CUDA device `cuda_ordinal` (or the only device).
  //! Never throws: available() is false when any step fails.
  explicit nvml_probe(int cuda_ordinal) noexcept;
  nvml_probe(const nvml_probe&) = delete;
  nvml_probe& operator=(const nvml_probe&) = delete;
  //! Shuts NVML down and closes the library; never throws.
  ~nvml_probe();

  //! True when NVML was loaded and the device found.
  [[nodiscard]] bool available() const noexcept;
  //! Current and maximum SM and memory clocks (MHz), temperature (°C) and clock-event reasons, now. Unavailable
  //! (available == false) without NVML.
  [[nodiscard]] clock_sample sample() const noexcept;
  //! The driver release, e.g. "580.159.04"; empty without NVML.
  [[nodiscard]] std::string driver_release() const;

private:
  struct api;
  std::unique_ptr<api> api_;
};

} // namespace conveyor::bench
