#pragma once
//! \file device_memory.hpp
//! Move-only owners of device memory (cudaMalloc) and page-locked host memory (cudaMallocHost) for the solver.

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace conveyor::solve {

//! `count` elements of trivially copyable T in device memory, uninitialised, freed on destruction.
template <class T>
class device_buffer {
public:
  device_buffer() = default;
  //! Allocates `count` elements (none for 0).
  //! \throws conveyor::cuda_error when cudaMalloc fails.
  explicit device_buffer(std::size_t count) : count_(count) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  //! Allocates host.size() elements and copies `host` into them (synchronous cudaMemcpy).
  //! \throws conveyor::cuda_error when allocation or copy fails.
  explicit device_buffer(std::span<const T> host) : device_buffer(host.size()) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  }
  device_buffer(device_buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { reset(); }

  //! Device pointer to the first element (nullptr when empty).
  [[nodiscard]] T* data() const noexcept { return data_; }
  //! Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  //! Size in bytes.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  //! Copies all elements to a new host vector (synchronous cudaMemcpy, after all work on the device that
  //! precedes it in the legacy stream's order; synchronise the solver's stream first).
  //! \throws conveyor::cuda_error when the copy fails.
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> out(count_);
    if (count_ > 0) CONVEYOR_CHECK(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return out;
  }

private:
  void reset() noexcept {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

//! One T in page-locked host memory (cudaMallocHost), the target of per-iteration asynchronous read-backs.
template <class T>
class pinned_value {
public:
  //! \throws conveyor::cuda_error when cudaMallocHost fails.
  pinned_value() { CONVEYOR_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), sizeof(T))); }
  pinned_value(const pinned_value&) = delete;
  pinned_value& operator=(const pinned_value&) = delete;
  ~pinned_value() { (void)cudaFreeHost(data_); }
  //! The host pointer.
  [[nodiscard]] T* get() const noexcept { return data_; }
  //! The value (read it only after the copy into it has completed).
  [[nodiscard]] const T& operator*() const noexcept { return *data_; }

private:
  T* data_ = nullptr;
};

} // namespace conveyor::solve
