// nccl_error: formatting of the message, result names and hints (plain C++ but for ncclGetErrorString).
#include "conveyor/nccl/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
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

//! The first sentence: what timed out or failed, where, and the caller's detail.
std::string headline(const nccl_error_info& info) {
  const std::string detail = info.detail.empty() ? std::string() : fmt::format(": {}", info.detail);
  if (info.timed_out)
    return fmt::format("conveyor::nccl: {} timed out{}{}; a peer may have failed or not called the same collectives",
                       info.call, where_text(info), detail);
  return fmt::format("conveyor::nccl: {} failed{}: {}{}", info.call, where_text(info), describe(info.result), detail);
}

//! What NCCL adds: its last error text, an asynchronous error, the abort.
std::string aftermath(const nccl_error_info& info) {
  std::string m;
  if (!info.last_error.empty()) m += fmt::format("; NCCL says: {}", info.last_error);
  if (info.async_result != ncclSuccess && info.async_result != ncclInProgress)
    m += fmt::format("; asynchronous error: {}", describe(info.async_result));
  if (info.aborted) m += "; the communicator was aborted";
  return m;
}

//! The hint sentence: the caller's hint, else the one for the result; empty when there is none.
std::string hint_sentence(const nccl_error_info& info) {
  const std::string_view hint = info.hint.empty() ? hint_for(info.result, info.timed_out) : info.hint;
  return hint.empty() ? std::string() : fmt::format(". Hint: {}", hint);
}

std::string format_message(const nccl_error_info& info) {
  return headline(info) + aftermath(info) + hint_sentence(info);
}

using result_text = std::pair<ncclResult_t, std::string_view>;

//! The text `table` gives `result`, or `otherwise` when it has none.
template <std::size_t N>
std::string_view text_of(const std::array<result_text, N>& table, ncclResult_t result,
                         std::string_view otherwise) noexcept {
  const auto it = std::find_if(table.begin(), table.end(), [&](const result_text& e) { return e.first == result; });
  return it == table.end() ? otherwise : it->second;
}

constexpr std::array<result_text, 8> result_names{{
    {ncclSuccess, "ncclSuccess"},
    {ncclUnhandledCudaError, "ncclUnhandledCudaError"},
    {ncclSystemError, "ncclSystemError"},
    {ncclInternalError, "ncclInternalError"},
    {ncclInvalidArgument, "ncclInvalidArgument"},
    {ncclInvalidUsage, "ncclInvalidUsage"},
    {ncclRemoteError, "ncclRemoteError"},
    {ncclInProgress, "ncclInProgress"},
}};

//! The hints of the failures (ncclSuccess, ncclInProgress and ncclNumResults have none).
constexpr std::array<result_text, 6> result_hints{{
    {ncclUnhandledCudaError,
     "a CUDA call inside NCCL failed: check that the buffers are device memory of the communicator's device "
     "and look for an earlier CUDA error (NCCL_DEBUG=WARN names the call)"},
    {ncclSystemError, "a system call inside NCCL failed (sockets, or shared memory: in a container /dev/shm may be too "
                      "small): run with NCCL_DEBUG=WARN to see which"},
    {ncclInternalError, "NCCL reports an internal error: run with NCCL_DEBUG=INFO to see where"},
    {ncclInvalidArgument,
     "an argument is invalid: buffers must be device memory of the communicator's device, roots and peers "
     "ranks of the communicator, and counts and types the same on every rank"},
    {ncclInvalidUsage,
     "NCCL's calls were used in a wrong order: e.g. a communicator used again before its previous nonblocking "
     "call finished, a communicator after it was aborted, or blocking and nonblocking communicators in one "
     "group"},
    {ncclRemoteError,
     "a peer (another rank, process or node) failed or disconnected: look at that rank's own error output"},
}};

} // namespace

nccl_error::nccl_error(nccl_error_info info) : std::runtime_error(format_message(info)), info_(std::move(info)) {}

std::string_view result_name(ncclResult_t result) noexcept {
  return text_of(result_names, result, "unknown ncclResult_t");
}

std::string_view hint_for(ncclResult_t result, bool timed_out) noexcept {
  if (timed_out)
    return "every rank must call the same collectives in the same order with the same counts and types, and launch "
           "the same graphs (agree_on_capture checks the capture decision); if the work is only slow, raise "
           "comm_options::timeout";
  return text_of(result_hints, result, {});
}

} // namespace conveyor::nccl
