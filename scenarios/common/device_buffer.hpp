#pragma once
//! \file device_buffer.hpp
//! Move-only owners of device memory (cudaMalloc) and pinned host memory (cudaMallocHost), shared by the scenarios.

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

namespace conveyor::scenarios {

//! `count` elements of trivially copyable `T` in device global memory, uninitialised, freed on destruction.
template <class T>
class device_buffer {
public:
  device_buffer() = default;
  //! Allocates `count` elements (`cudaMalloc`; 256-byte aligned). A zero count allocates nothing.
  //! \throws conveyor::cuda_error when the allocation fails (out of memory, no device).
  explicit device_buffer(std::size_t count) : count_(count) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  //! Allocates host.size() elements and copies `host` into them (`cudaMemcpy`: returns once the data left `host`).
  //! \throws conveyor::cuda_error when the allocation or the copy fails.
  explicit device_buffer(std::span<const T> host) : device_buffer(host.size()) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMemcpy(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice));
  }
  device_buffer(device_buffer&& o) noexcept :
      data_(std::exchange(o.data_, nullptr)),
      count_(std::exchange(o.count_, 0)) {}
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
  [[nodiscard]] T* data() noexcept { return data_; }
  //! Device pointer to the first element (nullptr when empty).
  [[nodiscard]] const T* data() const noexcept { return data_; }
  //! Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  //! Size in bytes.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  //! Enqueues `cudaMemsetAsync(0)` of the whole buffer on `s`.
  //! \throws conveyor::cuda_error when the call fails.
  void zero_async(cudaStream_t s) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMemsetAsync(data_, 0, bytes(), s));
  }

  //! Copies `host` into the first host.size() elements and waits for the copy (`cudaMemcpyAsync` on `s`, then
  //! `cudaStreamSynchronize(s)`), so `host` may be pageable and may change right after the call.
  //! \throws std::length_error when `host` is larger than the buffer; conveyor::cuda_error when a call fails.
  void upload(std::span<const T> host, cudaStream_t s) {
    if (host.size() > count_) throw std::length_error("device_buffer::upload: source larger than the buffer");
    if (host.empty()) return;
    CONVEYOR_CHECK(cudaMemcpyAsync(data_, host.data(), host.size_bytes(), cudaMemcpyHostToDevice, s));
    CONVEYOR_CHECK(cudaStreamSynchronize(s));
  }

  //! Copies every element to a new host vector (`cudaMemcpy`, ordered after the work of the legacy default stream
  //! only: synchronise the streams that wrote the buffer first).
  //! \throws conveyor::cuda_error when the copy fails.
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> out(count_);
    if (count_ > 0) CONVEYOR_CHECK(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost));
    return out;
  }
  //! Copies the first `n` elements to a new host vector after the work on `s` (`cudaMemcpyAsync`, then
  //! `cudaStreamSynchronize(s)`).
  //! \throws std::length_error when `n` exceeds size(); conveyor::cuda_error when a call fails.
  [[nodiscard]] std::vector<T> download(std::size_t n, cudaStream_t s) const {
    if (n > count_) throw std::length_error("device_buffer::download: more elements than the buffer holds");
    std::vector<T> out(n);
    if (n == 0) return out;
    CONVEYOR_CHECK(cudaMemcpyAsync(out.data(), data_, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    CONVEYOR_CHECK(cudaStreamSynchronize(s));
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

//! `count` elements of `T` in page-locked host memory (`cudaMallocHost`), so that `cudaMemcpyAsync` from it is
//! truly asynchronous; the caller must keep it unchanged until such a copy has completed.
template <class T>
class pinned_buffer {
public:
  pinned_buffer() = default;
  //! Allocates `count` elements; a zero count allocates nothing.
  //! \throws conveyor::cuda_error when the allocation fails.
  explicit pinned_buffer(std::size_t count) : count_(count) {
    if (count_ > 0) CONVEYOR_CHECK(cudaMallocHost(reinterpret_cast<void**>(&data_), count_ * sizeof(T)));
  }
  pinned_buffer(pinned_buffer&& o) noexcept :
      data_(std::exchange(o.data_, nullptr)),
      count_(std::exchange(o.count_, 0)) {}
  pinned_buffer& operator=(pinned_buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  ~pinned_buffer() { reset(); }

  //! Host pointer to the first element (nullptr when empty).
  [[nodiscard]] T* data() const noexcept { return data_; }
  //! Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  //! Size in bytes.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }
  //! The elements as a span.
  [[nodiscard]] std::span<T> span() const noexcept { return {data_, count_}; }

private:
  void reset() noexcept {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

} // namespace conveyor::scenarios
