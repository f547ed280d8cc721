#pragma once
// Internal (NCCL layer): the state behind a conveyor::nccl::communicator, errors made from it, and the polls with a
// deadline that every wait of the layer is built on.

#include "conveyor/nccl/communicator.hpp"
#include "conveyor/nccl/error.hpp"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

namespace conveyor::nccl::detail {

using clock = std::chrono::steady_clock;

//! An `ncclCommAbort` running on a background thread (see comm_state::pending_abort): set when it has returned.
struct abort_signal {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
};

//! What a communicator holds. `comm` is null after an abort; rank, size and device stay for messages.
struct comm_state {
  ncclComm_t comm = nullptr;
  int rank = -1;
  int size = 0;
  int device = -1;
  comm_options options;
  bool aborted = false;
  //! Some operation was enqueued while its stream was capturing: a graph may hold the communicator, so a
  //! finalisation that does not end is left alone instead of aborted (NCCL waits for such graphs in a thread that
  //! ncclCommAbort would join).
  bool captured = false;
  //! An abort of a communicator with captured work runs on a detached thread (NCCL 2.26 and later: ncclCommAbort
  //! sets the abort flag, so its kernels stop at once, then waits until every graph that captured the communicator
  //! is destroyed); release() waits for this signal up to options.timeout. Null when no such abort was started.
  std::shared_ptr<abort_signal> pending_abort;
  //! agree_on_capture's buffers, made on first use: two 64-bit words on the device and in pinned host memory.
  std::uint64_t* agree_device = nullptr;
  std::uint64_t* agree_host = nullptr;
};

//! True for a result that is an error: neither ncclSuccess nor ncclInProgress (a nonblocking call still running).
[[nodiscard]] constexpr bool is_error(ncclResult_t r) noexcept { return r != ncclSuccess && r != ncclInProgress; }

//! Throws std::invalid_argument unless there is one stream per communicator (`comms` of them), none null.
void check_streams_given(std::size_t comms, std::span<const conveyor::stream* const> streams, std::string_view call);

//! The last error text NCCL keeps (`ncclGetLastError`), trimmed; empty when none.
[[nodiscard]] std::string last_error_text(ncclComm_t comm);

//! An nccl_error for `state` (may be null: rank and device unknown).
[[nodiscard]] nccl_error make_error(const comm_state* state, ncclResult_t result, std::string_view call,
                                    std::string detail, bool with_last_error = true);

//! Aborts the communicator (`ncclCommAbort`) unless already done; never throws, never waits for graphs: when the
//! communicator has captured work (`captured`) the abort runs on a detached thread (`pending_abort`), as NCCL's abort
//! would otherwise wait until the caller destroys the graphs that captured it.
void abort_state(comm_state& state) noexcept;

//! Aborts `state` and throws the error of `result` from `call`, with NCCL's last error and async error.
[[noreturn]] void fail(comm_state& state, ncclResult_t result, std::string_view call, std::string detail);

//! Aborts `state` and throws the timeout error of `call`: `detail` says what did not finish.
[[noreturn]] void fail_timeout(comm_state& state, std::string_view call, std::string detail);

//! Throws nccl_error (ncclInvalidUsage) when `state` is null (an empty communicator) or aborted.
comm_state& usable(const communicator& comm, std::string_view call);

//! Waits between polls: a few yields, then sleeps growing to 1 ms.
class backoff {
public:
  void wait();

private:
  int polls_ = 0;
};

//! Polls `ncclCommGetAsyncError` until it is no longer ncclInProgress, up to `deadline`. On an error or the deadline
//! it aborts the communicator and throws, naming `call` and `what` (what was being waited for).
void wait_ready(comm_state& state, std::string_view call, std::string_view what, clock::time_point deadline);

//! The deadline `timeout` from now.
[[nodiscard]] inline clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  return clock::now() + timeout;
}

//! The longest of the communicators' timeouts (0 when there are none).
[[nodiscard]] inline std::chrono::milliseconds longest_timeout(std::span<comm_state* const> states) {
  std::chrono::milliseconds timeout{0};
  for (const comm_state* st : states) timeout = std::max(timeout, st->options.timeout);
  return timeout;
}

} // namespace conveyor::nccl::detail
