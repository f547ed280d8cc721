#pragma once
// Test support: skip a GPU test where no device is present, and a small RAII device buffer for test data.

#include <conveyor/error.hpp>
#include <conveyor/runtime/device.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <utility>
#include <vector>

//! Skips the current test with the reason when no CUDA device is visible.
#define CONVEYOR_REQUIRE_GPU()                                                                                         \
  do {                                                                                                                 \
    if (!::conveyor::has_device()) GTEST_SKIP() << "no CUDA device";                                                   \
  } while (0)

//! Skips the current test with the reason when fewer than `n` CUDA devices are visible (multi-GPU tests).
#define CONVEYOR_REQUIRE_GPUS(n)                                                                                       \
  do {                                                                                                                 \
    const int conveyor_visible_devices_ = ::conveyor::device_count();                                                  \
    if (conveyor_visible_devices_ < (n))                                                                               \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices, " << conveyor_visible_devices_ << " visible";                 \
  } while (0)

namespace conveyor::test {

//! `count` elements of T in device memory (cudaMalloc / cudaFree), with checked copies to and from the host.
template <class T>
class device_array {
public:
  explicit device_array(std::size_t count) : count_(count) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  explicit device_array(const std::vector<T>& host) : device_array(host.size()) { upload(host); }
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { (void)cudaFree(data_); }

  [[nodiscard]] T* get() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  //! Copies `host` in and waits for the copy to land (a pageable cudaMemcpy may return before the DMA is done, and
  //! non-blocking streams do not wait for the legacy stream).
  void upload(const std::vector<T>& host) {
    CONVEYOR_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
  }
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(count_);
    CONVEYOR_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

} // namespace conveyor::test
