#pragma once
//! \file cub.cuh
//! CUB and Thrust inside captures and conditional bodies (CUDA C++: include from .cu files). CUB's
//! device-wide algorithms take their temporary storage from the caller: cub_temp queries the size
//! once (the call with a null pointer) and allocates it before capture, so the captured call only
//! runs kernels. Thrust allocates temporary storage itself (cudaMalloc, which a capture refuses, or
//! a stream-ordered allocation, an allocation node in the graph); thrust_workspace_allocator hands
//! it out of a workspace allocated ahead instead, through the execution policy
//! `thrust::cuda::par_nosync(alloc).on(stream)`. docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace conveyor::libraries {

//! Temporary storage for one CUB device-wide call, sized by the call's own query and allocated
//! before capture. The call is given as a callable
//! `cudaError_t call(void* temp, std::size_t& bytes)` that forwards both to the CUB algorithm with
//! the stream, e.g.
//!
//!     auto sum = [&](void* temp, std::size_t& bytes) {
//!       return cub::DeviceReduce::Sum(temp, bytes, in, out, n, s.get());
//!     };
//!     conveyor::libraries::cub_temp temp(sum); // the size query, then cudaMalloc, before capture
//!     ... inside the capture: temp.run(s, sum);
//!
//! Size it for the largest problem it will run (CUB's storage grows with the item count).
//! Thread safety: one thread at a time.
class cub_temp {
public:
  //! Queries the storage `call` needs (call(nullptr, bytes)) and allocates it.
  //! \throws cuda_error when the query or the allocation fails.
  template <class Call>
  explicit cub_temp(Call&& call) {
    std::size_t bytes = 0;
    CONVEYOR_CHECK(call(nullptr, bytes));
    storage_ = workspace(bytes > 0 ? bytes : 1);
  }
  //! Runs `call` on its storage (call(data, bytes)), naming it "CUB" in the capture on `s`
  //! (capture_scope) and keeping the storage alive with the graph when `s` is capturing.
  //! \throws cuda_error when the call fails; std::length_error when it needs more storage
  //!         than was allocated (a larger problem than the one queried); as workspace::keep_with.
  template <class Call>
  void run(const stream& s, Call&& call) const {
    std::size_t bytes = storage_.bytes();
    std::size_t needed = 0;
    CONVEYOR_CHECK(call(nullptr, needed));
    if (needed > bytes)
      throw std::length_error(
          "conveyor::libraries::cub_temp: the call needs " + std::to_string(needed) +
          " bytes of temporary storage, more than the " + std::to_string(bytes) +
          " allocated: make the cub_temp for the largest problem");
    const capture_scope named(s, "CUB");
    CONVEYOR_CHECK(call(storage_.data(), bytes));
    storage_.keep_with(s);
  }
  //! The storage.
  [[nodiscard]] const workspace& scratch() const noexcept { return storage_; }

private:
  workspace storage_;
};

//! A Thrust allocator (value_type char, what Thrust's execution policies take) handing out a
//! workspace allocated ahead, as a stack: each allocation comes after the ones still held, a
//! deallocation of the last one frees it, and reset() frees all. Thrust's temporary storage then
//! never reaches cudaMalloc or a stream-ordered allocation:
//!
//!     conveyor::libraries::thrust_workspace_allocator alloc(std::size_t{64} << 20); // before
//!     capture thrust::sort(thrust::cuda::par_nosync(alloc).on(s.get()), keys.begin(), keys.end());
//!     // inside it
//!
//! Copies share the workspace (Thrust copies the allocator into its policy). Use par_nosync: par
//! synchronises the stream, which a capture refuses. Algorithms that return a value to the host
//! (reduce, count, ...) synchronise too and cannot be captured; use their CUB form (cub_temp) or an
//! output iterator in device memory. Thread safety: one thread at a time.
class thrust_workspace_allocator {
public:
  //! Thrust's allocators hand out bytes.
  using value_type = char;

  //! A workspace of `bytes` (cudaMalloc: before capture). \throws cuda_error when the allocation
  //! fails.
  explicit thrust_workspace_allocator(std::size_t bytes) : state_(std::make_shared<shared>()) {
    state_->memory = workspace(bytes);
  }
  //! The next `n` bytes of the workspace (aligned to 256 bytes).
  //! \throws std::bad_alloc when the workspace has not that many bytes left (make it larger).
  char* allocate(std::ptrdiff_t n) {
    const std::size_t start = (state_->top + 255) / 256 * 256;
    const std::size_t size = static_cast<std::size_t>(n);
    if (n < 0 || start > state_->memory.bytes() || size > state_->memory.bytes() - start)
      throw std::bad_alloc();
    state_->top = start + size;
    return static_cast<char*>(state_->memory.data()) + start;
  }
  //! Gives back `p` (of `n` bytes): the space is reused when `p` was the last allocation still
  //! held. Never throws.
  void deallocate(char* p, std::size_t n) noexcept {
    const auto* base = static_cast<const char*>(state_->memory.data());
    if (p != nullptr && static_cast<std::size_t>(p - base) + n == state_->top)
      state_->top = static_cast<std::size_t>(p - base);
  }
  //! Frees every allocation (for a call that left some held). Never throws.
  void reset() noexcept { state_->top = 0; }
  //! The workspace, e.g. for workspace::keep_with on a capturing stream after the Thrust calls.
  [[nodiscard]] const workspace& scratch() const noexcept { return state_->memory; }

private:
  struct shared {
    workspace memory;
    std::size_t top = 0;
  };
  std::shared_ptr<shared> state_;
};

} // namespace conveyor::libraries
