#pragma once
//! \file cublas.hpp
//! cuBLAS inside captures and conditional bodies: a handle bound to the capture stream and a preallocated workspace
//! (`cublasSetStream`, then `cublasSetWorkspace`: setting the stream resets a user workspace to cuBLAS's own pool,
//! from which a captured call would allocate — an allocation node, refused in a conditional node's body). Header-only;
//! link CUDA::cublas. Recipe and caveats: docs/libraries.md.

#include "conveyor/libraries/workspace.hpp"

#include <cublas_v2.h>

#include <cstddef>
#include <string>

namespace conveyor::libraries {

//! The workspace cuBLAS recommends for Hopper and later GPUs (32 MiB; 4 MiB is enough before them).
inline constexpr std::size_t cublas_default_workspace = std::size_t{32} << 20;

//! Throws library_error naming `call` when `status` is not CUBLAS_STATUS_SUCCESS.
//! \throws library_error.
inline void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw library_error("cuBLAS", call, static_cast<int>(status), cublasGetStatusName(status));
}

//! A cuBLAS handle (`cublasCreate`) with a workspace of its own, bound to one stream at a time. Make it before
//! capturing (cublasCreate allocates); bind it to the capturing stream — before the capture or inside it — and call
//! cuBLAS with get(): the captured calls then use the workspace and allocate nothing. Every bind() on a capturing
//! stream ties the workspace to the graph being captured (workspace::keep_with), so it outlives the graph's replays
//! even after the handle is gone. Scalars given by host pointer (CUBLAS_POINTER_MODE_HOST, the default) are read when
//! the call is captured and fixed in the graph; to change them between replays, use CUBLAS_POINTER_MODE_DEVICE and
//! device scalars.
//! Thread safety: one thread at a time (cuBLAS handles are not thread-safe).
class cublas_handle {
public:
  //! Creates the handle and a workspace of `workspace_bytes`, bound to `s`.
  //! \throws library_error when cublasCreate fails; cuda_error when the workspace cannot be allocated.
  explicit cublas_handle(const stream& s, std::size_t workspace_bytes = cublas_default_workspace)
      : workspace_(workspace_bytes) {
    check_cublas(cublasCreate(&handle_), "cublasCreate");
    try {
      bind(s);
    } catch (...) {
      (void)cublasDestroy(handle_);
      throw;
    }
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  //! Destroys the handle (`cublasDestroy`); the workspace stays while a graph holds it. Never throws.
  ~cublas_handle() { (void)cublasDestroy(handle_); }

  //! Makes cuBLAS enqueue on `s` with the workspace (`cublasSetStream`, `cublasSetWorkspace`), keeping the workspace
  //! alive with the graph when `s` is capturing. Call it again after any cublasSetStream of your own.
  //! \throws library_error when cuBLAS refuses; as workspace::keep_with.
  void bind(const stream& s) {
    check_cublas(cublasSetStream(handle_, s.get()), "cublasSetStream");
    check_cublas(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()), "cublasSetWorkspace");
    workspace_.keep_with(s);
  }
  //! The cuBLAS handle, for cuBLAS calls.
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }
  //! The workspace.
  [[nodiscard]] const workspace& scratch() const noexcept { return workspace_; }

private:
  cublasHandle_t handle_ = nullptr;
  workspace workspace_;
};

} // namespace conveyor::libraries
