#pragma once
//! \file error.hpp
//! conveyor::nccl::nccl_error, the exception every call of the NCCL layer (CMake target
//! conveyor::nccl) throws for a failed, refused or timed-out NCCL operation.

#include "conveyor/cxx20.hpp"

#include <nccl.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace conveyor::nccl {

//! What an nccl_error is made of: a plain value, filled by the library (or by a test) and formatted
//! by nccl_error.
struct nccl_error_info {
  //! the failing call's result; ncclInProgress for a timeout
  ncclResult_t result = ncclInternalError;
  //! the NCCL call or Conveyor operation, e.g. "ncclAllReduce"
  std::string call;
  //! the communicator's rank, -1 when unknown (before init)
  int rank = -1;
  int device = -1;        //!< the communicator's CUDA device, -1 when unknown
  std::string last_error; //!< `ncclGetLastError` text at the time, empty when none
  //! `ncclCommGetAsyncError`'s result, ncclSuccess when none
  ncclResult_t async_result = ncclSuccess;
  //! the operation did not finish within the communicator's timeout
  bool timed_out = false;
  //! the communicator was aborted (`ncclCommAbort`) because of it
  bool aborted = false;
  //! what happened, in words (e.g. "root 3 is out of range [0, 2)")
  std::string detail;
  std::string hint; //!< how to fix it; empty: hint_for(result, timed_out)
};

//! A failed, refused or timed-out NCCL operation.
//!
//! `what()` reads, in parts:
//! `conveyor::nccl: <call> failed on rank R (device D): ncclX (NCCL's description): <detail>;`
//! `NCCL says: <ncclGetLastError>;` `asynchronous error: ncclY (...);`
//! `the communicator was aborted.` `Hint: <hint>`;
//! parts that do not apply are left out. A timeout reads
//! `... <call> timed out on rank R (device D): <detail> ...` and has result() == ncclInProgress and
//! timed_out() == true. Errors found by Conveyor's own checks before anything was enqueued (a
//! stream of another device, a root out of range, a null buffer) have result() ncclInvalidArgument
//! or ncclInvalidUsage and leave the communicator usable. Thread safety: an immutable value once
//! thrown.
class nccl_error : public std::runtime_error {
public:
  //! Formats `info` into the message (see the class comment).
  explicit nccl_error(nccl_error_info info);

  //! The NCCL result: the failing call's, the asynchronous error's when that is what failed,
  //! ncclInProgress for a timeout.
  [[nodiscard]] ncclResult_t result() const noexcept { return info_.result; }
  //! The NCCL call or Conveyor operation that failed, e.g. "ncclAllReduce" or
  //! "conveyor::nccl::synchronize".
  [[nodiscard]] std::string_view call() const noexcept { return info_.call; }
  //! The communicator's rank, -1 when unknown.
  [[nodiscard]] int rank() const noexcept { return info_.rank; }
  //! The communicator's CUDA device, -1 when unknown.
  [[nodiscard]] int device() const noexcept { return info_.device; }
  //! True when the operation did not finish within comm_options::timeout.
  [[nodiscard]] bool timed_out() const noexcept { return info_.timed_out; }
  //! True when the communicator was aborted (`ncclCommAbort`) because of this error: it cannot be
  //! used again.
  [[nodiscard]] bool aborted() const noexcept { return info_.aborted; }
  //! The asynchronous error `ncclCommGetAsyncError` reported, ncclSuccess when none.
  [[nodiscard]] ncclResult_t async_result() const noexcept { return info_.async_result; }
  //! NCCL's last error text (`ncclGetLastError`) when the error was made, empty when none.
  [[nodiscard]] std::string_view last_error() const noexcept { return info_.last_error; }
  //! Conveyor's description of what happened.
  [[nodiscard]] std::string_view detail() const noexcept { return info_.detail; }
  //! Everything the error carries.
  [[nodiscard]] const nccl_error_info& info() const noexcept { return info_; }

private:
  nccl_error_info info_;
};

//! The enumerator's name of `result`, e.g. "ncclRemoteError"; "ncclResult_t(N)" style text is not
//! returned: an unknown value gives "unknown ncclResult_t". Needs no GPU and no NCCL call.
[[nodiscard]] std::string_view result_name(ncclResult_t result) noexcept;

//! What usually causes `result` and how to fix it, or empty when nothing general can be said.
//! `timed_out` selects the hint for a timeout (a peer that failed or did not call the same
//! collectives).
[[nodiscard]] std::string_view hint_for(ncclResult_t result, bool timed_out = false) noexcept;

} // namespace conveyor::nccl
