#pragma once
//! \file error.hpp
//! The one exception type Conveyor throws for failed CUDA calls, and the macro that checks a call.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor {

//! A public Conveyor call, and where the user made it: what a cuda_error thrown inside it names
//! besides the failing CUDA call (which is inside the library). A plain value.
struct api_call {
  //! e.g. "conveyor::instantiate" (a string literal: valid for the whole program)
  std::string_view name;
  std::source_location where; //!< the user's call site
};

//! A CUDA Runtime call returned an error.
//!
//! Carries the CUDA error code, its name (`cudaGetErrorName`), the API call as written, the source
//! location of the call, and, for errors with a known remedy (stream-capture violations above all),
//! a hint saying how to fix it. `what()` reads
//! `file:line: call failed: cudaErrorName (description). hint`; when the error was made inside a
//! public Conveyor call (instantiate, launch, upload, the updates, capture, synchronize, ...), it
//! starts with the user's call site and that call instead:
//! `app.cpp:42: conveyor::instantiate: call failed: ... (at src/execute/...:190). hint`. Thread
//! safety: an immutable value once thrown.
class cuda_error : public std::runtime_error {
public:
  //! \param code  the error the call returned (not cudaSuccess)
  //! \param call  the call as written, e.g. "cudaMalloc(&p, bytes)"
  //! \param where the source location of the call
  //! \param context optional extra text placed before the hint (e.g. which node or stream)
  cuda_error(cudaError_t code, std::string_view call,
             std::source_location where = std::source_location::current(),
             std::string_view context = {});

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
  //! The outermost public Conveyor call in progress on the throwing thread, with the user's call
  //! site; nullopt when the failing call was not made inside one (a CONVEYOR_CHECK in the user's
  //! own code).
  [[nodiscard]] const std::optional<api_call>& api() const noexcept { return api_; }

private:
  cudaError_t code_;
  std::string call_;
  std::source_location where_;
  std::optional<api_call> api_;
};

namespace detail {
//! Marks a public Conveyor call in progress on this thread: a cuda_error made while it lives names
//! the call and `where`, the user's call site. The outermost scope wins, so public functions the
//! library calls itself keep the user's site. Thread-local; never throws.
class api_scope {
public:
  //! Enters `name` (a string literal) called from `where`.
  api_scope(std::string_view name, std::source_location where) noexcept;
  //! Leaves it.
  ~api_scope();
  api_scope(const api_scope&) = delete;
  api_scope& operator=(const api_scope&) = delete;

private:
  api_call call_;
  bool outermost_;
};
//! The outermost public call in progress on this thread, or null.
[[nodiscard]] const api_call* current_api_call() noexcept;
} // namespace detail

//! A remedy for errors commonly met while capturing or updating graphs, or empty.
//! Follows the CUDA Programming Guide's list of operations that are illegal during stream capture.
[[nodiscard]] std::string_view hint_for(cudaError_t code) noexcept;

//! Throws cuda_error when `code` is not cudaSuccess. Clears the runtime's last-error state first so
//! that a non-sticky error does not resurface at the next unrelated call.
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
inline void check_launch(std::string_view what,
                         std::source_location where = std::source_location::current()) {
  check(cudaGetLastError(), what, where);
}

} // namespace conveyor

//! Checks a CUDA Runtime call: `CONVEYOR_CHECK(cudaMalloc(&p, n));` throws conveyor::cuda_error
//! naming the call.
#define CONVEYOR_CHECK(...) ::conveyor::check((__VA_ARGS__), #__VA_ARGS__)
