#pragma once
//! \file workspace.hpp
//! What every library adapter of conveyor/libraries shares: a preallocated device workspace with
//! the lifetime of the graphs that use it, and the error type of the libraries' status codes.
//! Header-only; needs only the CUDA runtime. The pattern of every adapter (docs/libraries.md): size
//! the library's scratch memory and allocate it *before* capturing, bind it and the capture stream
//! to the library's handle, then call the library inside the capture — so that the capture holds
//! only the library's kernels, copies and memsets (what a conditional node's body allows), no
//! allocation node (which a body refuses and which every replay would map from the graph memory
//! pool).

#include "conveyor/define/capture_nodes.hpp"
#include "conveyor/error.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

namespace conveyor::libraries {

//! A library call returned an error status. what() names the library, the call, the status (its
//! name where the library gives one) and the fix when one is known.
class library_error : public std::runtime_error {
public:
  //! \param library "cuBLAS", "cuBLASLt", "cuSPARSE", "cuFFT", "CUB"
  //! \param call    the library call, e.g. "cublasSgemm"
  //! \param status  the status code the call returned
  //! \param name    the status' name, e.g. "CUBLAS_STATUS_NOT_INITIALIZED" (may be empty)
  library_error(std::string library, std::string call, int status, const std::string& name) :
      std::runtime_error(library + ": " + call + " failed: " + (name.empty() ? "status" : name) +
                         " (" + std::to_string(status) + ")"),
      library_(std::move(library)),
      call_(std::move(call)),
      status_(status) {}
  //! The library's name.
  [[nodiscard]] const std::string& library() const noexcept { return library_; }
  //! The call that failed.
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  //! Its status code.
  [[nodiscard]] int status() const noexcept { return status_; }

private:
  std::string library_;
  std::string call_;
  int status_;
};

//! A device buffer allocated once, before any capture (`cudaMalloc`), and freed (`cudaFree`) when
//! the last owner lets go: the adapter that made it, and every graph given it with keep_with
//! (graph::keep_alive, or capture_keep_alive inside a capture), whose executable graphs keep it
//! until their last queued launch has finished. A workspace serves one stream at a time: two graphs
//! using one workspace must not run at once (their launches would share the scratch memory), which
//! graphs launched on one stream never do. Thread safety: the object is not thread-safe; the memory
//! is the caller's to order.
class workspace {
public:
  //! No memory.
  workspace() = default;
  //! Allocates `bytes` of device memory on the current device (`cudaMalloc`; none for 0 bytes).
  //! \throws cuda_error when the allocation fails, or when called while the thread captures
  //!         a stream in a mode that refuses cudaMalloc (allocate workspaces before capturing).
  explicit workspace(std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = nullptr;
    CONVEYOR_CHECK(cudaMalloc(&p, bytes));
    memory_ = std::shared_ptr<void>(p, [](void* q) { (void)cudaFree(q); });
  }
  //! The device address (null for 0 bytes).
  [[nodiscard]] void* data() const noexcept { return memory_.get(); }
  //! The size in bytes.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  //! An owner of the memory, for graph::keep_alive: the memory stays until every owner has let go.
  [[nodiscard]] std::shared_ptr<void> share() const noexcept { return memory_; }
  //! When `s` is capturing, keeps the memory alive with the graph being captured
  //! (capture_keep_alive); else nothing. The adapters call it each time they enqueue work that uses
  //! the workspace.
  //! \throws as capture_keep_alive.
  void keep_with(const stream& s) const {
    if (memory_ && s.is_capturing()) capture_keep_alive(s, memory_);
  }

private:
  std::size_t bytes_ = 0;
  std::shared_ptr<void> memory_;
};

} // namespace conveyor::libraries
