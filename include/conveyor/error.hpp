#pragma once
//! \file error.hpp
//! The one exception type Conveyor throws for failed CUDA calls, and the macro that checks a call.

#include <cuda_runtime_api.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor {

//! A CUDA Runtime call returned an error.
//!
//! Carries the CUDA error code, its name (`cudaGetErrorName`), the API call as written, the source location of
//! the call, and, for errors with a known remedy (stream-capture violations above all), a hint saying how to fix it.
//! `what()` reads: `file:line: call failed: cudaErrorName (description). hint`.
//! Thread safety: an immutable value once thrown.
class cuda_error : public std::runtime_error {
public:
  //! \param code  the error the call returned (not cudaSuccess)
  //! \param call  the call as written, e.g. "cudaMalloc(&p, bytes)"
  //! \param where the source location of the call
  //! \param context optional extra text placed before the hint (e.g. which node or stream)
  cuda_error(cudaError_t code, std::string_view call,
             std::source_location where = std::source_location::current(), std::string_view context = {});

  //! The CUDA error code.
  [[nodiscard]] cudaError_t code() const noexcept { return code_; }
  //! The error's enumerator name, e.g. "cudaErrorStreamCaptureUnsupported".
  [[nodiscard]] std::string_view name() const noexcept;
  //! The failing call as written at the call site.
  [[nodiscard]] const std::string& call() const noexcept { return call_; }
  //! Where the failing call was made.
  [[nodiscard]] const std::source_location& where() const noexcept { return where_; }
  //! How to fix it, or empty when no remedy is known for this code.
  [[nodiscard]] std::string_view hint() const noexcept;

private:
  cudaError_t code_;
  std::string call_;
  std::source_location where_;
};

//! A remedy for errors commonly met while capturing or updating graphs, or empty.
//! Follows the CUDA Programming Guide's list of operations that are illegal during stream capture.
[[nodiscard]] std::string_view hint_for(cudaError_t code) noexcept;

//! Throws cuda_error when `code` is not cudaSuccess. Clears the runtime's last-error state first so that a
//! non-sticky error does not resurface at the next unrelated call.
//! \throws cuda_error naming `call` and `where`.
inline void check(cudaError_t code, std::string_view call,
                  std::source_location where = std::source_location::current()) {
  if (code != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(code, call, where);
  }
}

//! Checks the last launch error (`cudaGetLastError`) after a kernel launch.
//! \throws cuda_error naming `what` when the launch failed.
inline void check_launch(std::string_view what, std::source_location where = std::source_location::current()) {
  check(cudaGetLastError(), what, where);
}

} // namespace conveyor

//! Checks a CUDA Runtime call: `CONVEYOR_CHECK(cudaMalloc(&p, n));` throws conveyor::cuda_error naming the call.
#define CONVEYOR_CHECK(...) ::conveyor::check((__VA_ARGS__), #__VA_ARGS__)
