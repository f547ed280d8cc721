#pragma once
//! \file memory.hpp
//! Move-only owners of device memory (cudaMalloc) and page-locked host memory (cudaMallocHost).

#include <conveyor/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>

namespace conveyor::filter {

//! `count` elements of trivially copyable T, uninitialised, in device memory (Pinned = false, cudaMalloc) or in
//! page-locked host memory (Pinned = true, cudaMallocHost, so that asynchronous copies from and to it are truly
//! asynchronous and graph memcpy nodes may use it). Freed on destruction; the destructor never throws.
template <class T, bool Pinned>
class buffer {
public:
  buffer() = default;
  //! Allocates `count` elements; a zero count allocates nothing.
  //! \throws conveyor::cuda_error when the allocation fails (out of memory, no device).
  explicit buffer(std::size_t count) : count_(count) {
    if (count_ == 0) return;
    void* p = nullptr;
    if constexpr (Pinned)
      CONVEYOR_CHECK(cudaMallocHost(&p, count_ * sizeof(T)));
    else
      CONVEYOR_CHECK(cudaMalloc(&p, count_ * sizeof(T)));
    data_ = static_cast<T*>(p);
  }
  buffer(buffer&& o) noexcept : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { reset(); }

  //! Pointer to the first element (nullptr when empty).
  [[nodiscard]] T* data() const noexcept { return data_; }
  //! Number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  //! Size in bytes.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * sizeof(T); }

private:
  void reset() noexcept {
    if (data_ != nullptr) {
      if constexpr (Pinned)
        (void)cudaFreeHost(data_);
      else
        (void)cudaFree(data_);
    }
    data_ = nullptr;
    count_ = 0;
  }
  T* data_ = nullptr;
  std::size_t count_ = 0;
};

//! Device memory of T.
template <class T>
using device_buffer = buffer<T, false>;
//! Page-locked host memory of T.
template <class T>
using pinned_buffer = buffer<T, true>;

} // namespace conveyor::filter
