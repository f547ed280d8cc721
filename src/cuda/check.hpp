#pragma once
// Internal (CUDA layer): the one error-check helper of the library's CUDA calls that need more than CONVEYOR_CHECK:
// it clears the runtime's last error, and adds a context (which node, which stream) computed only on failure.

#include "conveyor/error.hpp"

#include <cuda_runtime_api.h>

#include <source_location>
#include <string>
#include <string_view>
#include <utility>

namespace conveyor::detail {

//! Throws cuda_error for `rc`, naming `call`, `where` and `context`; clears the last-error state first.
[[noreturn]] inline void throw_cuda(cudaError_t rc, std::string_view call, std::string_view context = {},
                                    std::source_location where = std::source_location::current()) {
  (void)cudaGetLastError();
  throw cuda_error(rc, call, where, context);
}

//! Checks `rc`; on failure throws cuda_error with the text `context()` returns (called only then).
template <class Context>
void check_with(cudaError_t rc, std::string_view call, Context&& context,
                std::source_location where = std::source_location::current()) {
  if (rc != cudaSuccess) [[unlikely]]
    throw_cuda(rc, call, std::forward<Context>(context)(), where);
}

//! The error of `rc`, with the last-error state cleared (for calls whose failure is handled, not thrown).
inline cudaError_t cleared(cudaError_t rc) noexcept {
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return rc;
}

} // namespace conveyor::detail
