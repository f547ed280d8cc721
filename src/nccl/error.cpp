// nccl_error: formatting of the message, result names and hints (plain C++ but for ncclGetErrorString).
#include "conveyor/nccl/error.hpp"

#include <fmt/format.h>

#include <utility>

namespace conveyor::nccl {

namespace {

std::string where_text(const nccl_error_info& info) {
  if (info.rank >= 0 && info.device >= 0) return fmt::format(" on rank {} (device {})", info.rank, info.device);
  if (info.rank >= 0) return fmt::format(" on rank {}", info.rank);
  if (info.device >= 0) return fmt::format(" on device {}", info.device);
  return {};
}

std::string describe(ncclResult_t r) { return fmt::format("{} ({})", result_name(r), ncclGetErrorString(r)); }

std::string format_message(const nccl_error_info& info) {
  std::string m;
  if (info.timed_out) {
    m = fmt::format("conveyor::nccl: {} timed out{}", info.call, where_text(info));
    if (!info.detail.empty()) m += fmt::format(": {}", info.detail);
    m += "; a peer may have failed or not called the same collectives";
  } else {
    m = fmt::format("conveyor::nccl: {} failed{}: {}", info.call, where_text(info), describe(info.result));
    if (!info.detail.empty()) m += fmt::format(": {}", info.detail);
  }
  if (!info.last_error.empty()) m += fmt::format("; NCCL says: {}", info.last_error);
  if (info.async_result != ncclSuccess && info.async_result != ncclInProgress)
    m += fmt::format("; asynchronous error: {}", describe(info.async_result));
  if (info.aborted) m += "; the communicator was aborted";
  const std::string_view hint = info.hint.empty() ? hint_for(info.result, info.timed_out) : info.hint;
  if (!hint.empty()) m += fmt::format(". Hint: {}", hint);
  return m;
}

} // namespace

nccl_error::nccl_error(nccl_error_info info) : std::runtime_error(format_message(info)), info_(std::move(info)) {}

std::string_view result_name(ncclResult_t result) noexcept {
  switch (result) {
  case ncclSuccess: return "ncclSuccess";
  case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
  case ncclSystemError: return "ncclSystemError";
  case ncclInternalError: return "ncclInternalError";
  case ncclInvalidArgument: return "ncclInvalidArgument";
  case ncclInvalidUsage: return "ncclInvalidUsage";
  case ncclRemoteError: return "ncclRemoteError";
  case ncclInProgress: return "ncclInProgress";
  case ncclNumResults: break;
  }
  return "unknown ncclResult_t";
}

std::string_view hint_for(ncclResult_t result, bool timed_out) noexcept {
  if (timed_out)
    return "every rank must call the same collectives in the same order with the same counts and types, and launch "
           "the same graphs (agree_on_capture checks the capture decision); if the work is only slow, raise "
           "comm_options::timeout";
  switch (result) {
  case ncclUnhandledCudaError:
    return "a CUDA call inside NCCL failed: check that the buffers are device memory of the communicator's device "
           "and look for an earlier CUDA error (NCCL_DEBUG=WARN names the call)";
  case ncclSystemError:
    return "a system call inside NCCL failed (sockets, or shared memory: in a container /dev/shm may be too small): "
           "run with NCCL_DEBUG=WARN to see which";
  case ncclInternalError: return "NCCL reports an internal error: run with NCCL_DEBUG=INFO to see where";
  case ncclInvalidArgument:
    return "an argument is invalid: buffers must be device memory of the communicator's device, roots and peers "
           "ranks of the communicator, and counts and types the same on every rank";
  case ncclInvalidUsage:
    return "NCCL's calls were used in a wrong order: e.g. a communicator used again before its previous nonblocking "
           "call finished, a communicator after it was aborted, or blocking and nonblocking communicators in one "
           "group";
  case ncclRemoteError:
    return "a peer (another rank, process or node) failed or disconnected: look at that rank's own error output";
  case ncclSuccess:
  case ncclInProgress:
  case ncclNumResults: break;
  }
  return {};
}

} // namespace conveyor::nccl
