//! \file cublas.cpp
//! cuBLAS error type and handle.

#include "train/cublas.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <utility>

namespace conveyor::train {

cublas_error::cublas_error(cublasStatus_t status, std::string_view call, std::source_location where)
    : std::runtime_error(fmt::format("{}:{}: {} failed: {} ({})", where.file_name(), where.line(), call,
                                     cublasGetStatusName(status), cublasGetStatusString(status))),
      status_(status) {}

cublas_handle::cublas_handle(cudaStream_t stream) : workspace_(workspace_bytes) {
  TRAIN_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    TRAIN_CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
    TRAIN_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
    TRAIN_CUBLAS_CHECK(cublasSetAtomicsMode(handle_, CUBLAS_ATOMICS_NOT_ALLOWED));
    stream_ = reinterpret_cast<cudaStream_t>(~std::uintptr_t{0}); // force the first bind
    bind(stream);
  } catch (...) {
    (void)cublasDestroy(handle_);
    throw;
  }
}

cublas_handle::cublas_handle(cublas_handle&& o) noexcept
    : handle_(std::exchange(o.handle_, nullptr)), stream_(std::exchange(o.stream_, nullptr)),
      workspace_(std::move(o.workspace_)) {}

cublas_handle::~cublas_handle() {
  if (handle_ != nullptr) (void)cublasDestroy(handle_);
}

void cublas_handle::bind(cudaStream_t stream) {
  if (stream == stream_) return;
  // cublasSetStream resets the workspace to cuBLAS's default pool, so the fixed workspace goes in afterwards.
  TRAIN_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  TRAIN_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  stream_ = stream;
}

} // namespace conveyor::train
