#pragma once
// Helpers shared by the GPU tests (tests/gpu/*.cu): pinned host buffers, pitched device buffers, seeded random data,
// launch shapes and element-by-element comparisons against a host computation. Kernels live in each test file.

#include "support/gpu.hpp"

#include <conveyor/define/kernel_args.hpp>
#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace conveyor::test {

//! `count` elements of T in page-locked host memory (cudaMallocHost / cudaFreeHost), as memcpy nodes want it.
template <class T>
class pinned_array {
public:
  explicit pinned_array(std::size_t count) : count_(count) {
    CONVEYOR_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), count * sizeof(T)));
  }
  pinned_array(const pinned_array&) = delete;
  pinned_array& operator=(const pinned_array&) = delete;
  ~pinned_array() { (void)cudaFreeHost(data_); }

  [[nodiscard]] T* get() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  T& operator[](std::size_t i) noexcept { return data_[i]; }
  const T& operator[](std::size_t i) const noexcept { return data_[i]; }
  void assign(const std::vector<T>& values) { std::copy(values.begin(), values.end(), data_); }
  [[nodiscard]] std::vector<T> to_vector() const { return std::vector<T>(data_, data_ + count_); }

private:
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

//! A pitched 2D device buffer (cudaMallocPitch) of `height` rows of `width` elements of T.
template <class T>
class pitched_array {
public:
  pitched_array(std::size_t width, std::size_t height) : width_(width), height_(height) {
    CONVEYOR_CHECK(cudaMallocPitch(&data_, &pitch_, width * sizeof(T), height));
  }
  pitched_array(const pitched_array&) = delete;
  pitched_array& operator=(const pitched_array&) = delete;
  ~pitched_array() { (void)cudaFree(data_); }

  [[nodiscard]] T* get() const noexcept { return static_cast<T*>(data_); }
  //! Address of element (row, col).
  [[nodiscard]] T* at(std::size_t row, std::size_t col) const noexcept {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + row * pitch_) + col;
  }
  [[nodiscard]] std::size_t pitch() const noexcept { return pitch_; } //!< bytes between rows
  [[nodiscard]] std::size_t width() const noexcept { return width_; }
  [[nodiscard]] std::size_t height() const noexcept { return height_; }
  //! Uploads a dense row-major host matrix (width x height) and waits for the copy.
  void upload(const std::vector<T>& host) {
    CONVEYOR_CHECK(cudaMemcpy2D(data_, pitch_, host.data(), width_ * sizeof(T), width_ * sizeof(T), height_,
                                cudaMemcpyHostToDevice));
    CONVEYOR_CHECK(cudaDeviceSynchronize());
  }
  //! Downloads into a dense row-major host matrix.
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(width_ * height_);
    CONVEYOR_CHECK(cudaMemcpy2D(host.data(), width_ * sizeof(T), data_, pitch_, width_ * sizeof(T), height_,
                                cudaMemcpyDeviceToHost));
    return host;
  }

private:
  void* data_ = nullptr;
  std::size_t pitch_ = 0;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
};

//! Waits for all device work, including pageable cudaMemcpy uploads whose DMA may still be in flight when
//! cudaMemcpy returns: the tests' streams are non-blocking and would not wait for them.
inline void sync_device() { CONVEYOR_CHECK(cudaDeviceSynchronize()); }

//! `n` floats uniform in [lo, hi) from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.0F, float hi = 1.0F) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

//! `n` integers of type T uniform in [lo, hi] from a fixed seed.
template <class T>
std::vector<T> random_ints(std::size_t n, unsigned seed, long long lo, long long hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<long long> dist(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

//! One random float from a fixed seed, in [lo, hi).
inline float random_scalar(unsigned seed, float lo, float hi) { return random_floats(1, seed, lo, hi)[0]; }

//! One thread per element, 256 a block.
inline launch_config cover(std::size_t n, unsigned block = 256) {
  return {dim3(static_cast<unsigned>((n + block - 1) / block)), dim3(block), 0};
}

namespace detail {
template <class T>
auto printable(T v) {
  if constexpr (std::is_integral_v<T>) return static_cast<long long>(v);
  else return v;
}
} // namespace detail

//! Every element equal (bitwise for integers; exact == for floats). Reports the count and the first mismatches.
template <class T>
::testing::AssertionResult all_equal(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  std::size_t bad = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i])) {
      if (bad < 5)
        first << " [" << i << "] got " << detail::printable(got[i]) << " want " << detail::printable(want[i]) << ";";
      ++bad;
    }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << first.str();
}

//! Every float bitwise equal (memcmp: -0 differs from 0, NaNs of the same bits match), against an eager run of the
//! same calls. Reports the first difference.
inline ::testing::AssertionResult same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << got[i] << " vs eager " << want[i];
  return ::testing::AssertionSuccess();
}

//! A graphed callable's reasons, one a line.
template <class Step>
std::string reasons_of(const Step& step) {
  std::string out;
  for (const auto& r : step.reasons()) out += r + "\n";
  return out;
}

//! Every element within `rel` relative (and absolute, near zero) tolerance of the expected value.
inline ::testing::AssertionResult all_near(const std::vector<float>& got, const std::vector<float>& want,
                                           float rel = 1e-5F) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  std::size_t bad = 0;
  std::ostringstream first;
  first.precision(9);
  for (std::size_t i = 0; i < got.size(); ++i) {
    const float tol = rel * std::max(1.0F, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol)) { // written so that NaN fails
      if (bad < 5) first << " [" << i << "] got " << got[i] << " want " << want[i] << ";";
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << first.str();
}

//! True when `text` contains `part`.
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

} // namespace conveyor::test

//! Makes `name` a T (a CUPTI subscriber: profile::profiler, profile::module_images) from `args`, or skips the test
//! with CUPTI's reason where another CUPTI tool holds the process (compute-sanitizer is one: its refusal names
//! "another CUPTI tool", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). Any other failure is thrown on.
#define CONVEYOR_START_CUPTI_SUBSCRIBER(T, name, ...)                                                                  \
  std::optional<T> name##_holder;                                                                                      \
  try {                                                                                                                \
    name##_holder.emplace(__VA_ARGS__);                                                                                \
  } catch (const std::exception& e) {                                                                                  \
    if (std::string(e.what()).find("another CUPTI tool") != std::string::npos) GTEST_SKIP() << e.what();               \
    throw;                                                                                                             \
  }                                                                                                                    \
  T& name = *name##_holder
