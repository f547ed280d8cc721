#pragma once
//! \file cublas.hpp
//! cuBLAS status checking and a handle configured for deterministic, capture-safe use.

#include "common/device_buffer.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor::train {

using scenarios::device_buffer;
using scenarios::pinned_buffer;

//! A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS.
//! `what()` reads `file:line: call failed: CUBLAS_STATUS_NAME (description)`.
class cublas_error : public std::runtime_error {
public:
  //! \param status the status the call returned
  //! \param call   the call as written
  //! \param where  the call site
  cublas_error(cublasStatus_t status, std::string_view call, std::source_location where);
  //! The cuBLAS status.
  [[nodiscard]] cublasStatus_t status() const noexcept { return status_; }

private:
  cublasStatus_t status_;
};

//! Throws cublas_error when `status` is not CUBLAS_STATUS_SUCCESS.
//! \throws cublas_error naming `call` and `where`.
inline void check_cublas(cublasStatus_t status, std::string_view call,
                         std::source_location where = std::source_location::current()) {
  if (status != CUBLAS_STATUS_SUCCESS) throw cublas_error(status, call, where);
}

//! A cuBLAS handle (move-only) set up so that the same calls give bitwise-identical results whether run eagerly
//! or replayed from a captured graph: a fixed user workspace (cublasSetWorkspace, re-applied on every bind, since
//! cublasSetStream resets it), CUBLAS_POINTER_MODE_HOST, CUBLAS_DEFAULT_MATH (no TF32) and
//! CUBLAS_ATOMICS_NOT_ALLOWED.
class cublas_handle {
public:
  //! Workspace size: 32 MiB, what NVIDIA recommends for Hopper.
  static constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

  //! Creates the handle, allocates the workspace and binds both to `stream`.
  //! \throws cublas_error when cublasCreate or a setting fails; conveyor::cuda_error when the workspace
  //!         allocation fails.
  explicit cublas_handle(cudaStream_t stream);
  cublas_handle(cublas_handle&& o) noexcept;
  cublas_handle& operator=(cublas_handle&&) = delete;
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  ~cublas_handle();

  //! Makes later calls run on `stream` (cublasSetStream) with the fixed workspace (cublasSetWorkspace).
  //! Host-side settings only, nothing is enqueued. No-op when already bound to `stream`.
  //! \throws cublas_error when a setting fails.
  void bind(cudaStream_t stream);
  //! The raw handle.
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }
  //! The stream calls currently run on.
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }

private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  device_buffer<std::byte> workspace_;
};

} // namespace conveyor::train

//! Checks a cuBLAS call: `TRAIN_CUBLAS_CHECK(cublasSgemm(...));` throws conveyor::train::cublas_error.
#define TRAIN_CUBLAS_CHECK(...) ::conveyor::train::check_cublas((__VA_ARGS__), #__VA_ARGS__)
