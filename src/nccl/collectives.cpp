// conveyor::nccl collectives, groups and agree_on_capture: checks before NCCL is called (nothing enqueued when they
// fail), the NCCL call, and for nonblocking communicators the poll until the launch is done (NCCL user guide,
// "Nonblocking group operation"; "Using NCCL with CUDA Graphs").
#include "conveyor/nccl/collectives.hpp"

#include "conveyor/runtime/device.hpp"
#include "cuda/compat.hpp"
#include "nccl/state.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace conveyor::nccl {

namespace {

using detail::comm_state;

//! One collective enqueued inside the current group: what end() waits for, and what the uniformity check compares.
struct group_entry {
  comm_state* state = nullptr;
  bool capturing = false;
};

//! The groups open on this thread (NCCL's groups are per thread).
struct group_context {
  int depth = 0;
  std::vector<group_entry> entries;
  bool failed = false;
  std::string failure;
};

thread_local group_context current_group;

//! Marks the open group, if any, as failed by `what` (a refused or failed call inside it).
void mark_group_failed(std::string_view what) {
  if (current_group.depth > 0 && !current_group.failed) {
    current_group.failed = true;
    current_group.failure = std::string(what);
  }
}

//! Throws the refusal `detail` of `call` on `st` (nothing was enqueued; the communicator stays usable, except that
//! an open group fails).
[[noreturn]] void refuse(const comm_state& st, ncclResult_t result, std::string_view call, std::string detail) {
  nccl_error e = detail::make_error(&st, result, call, std::move(detail), false);
  mark_group_failed(e.what());
  throw e;
}

//! The state of `comm` for the checks that follow (usable() first, so that an empty communicator says so); a
//! refusal fails the open group.
comm_state& checked(const communicator& comm, std::string_view call) {
  try {
    return detail::usable(comm, call);
  } catch (const nccl_error& e) {
    mark_group_failed(e.what());
    throw;
  }
}

//! Refuses a stream that is not on the communicator's device (or whose device cannot be read).
void check_stream_device(const comm_state& st, const conveyor::stream& s, std::string_view call) {
  int stream_device = -1;
  try {
    stream_device = s.device();
  } catch (const cuda_error& e) {
    refuse(st, ncclInvalidArgument, call,
           fmt::format("the stream's device cannot be read ({}): is the stream destroyed?", e.what()));
  }
  if (stream_device != st.device)
    refuse(st, ncclInvalidArgument, call,
           fmt::format("the stream belongs to device {}, the communicator to device {}: enqueue rank {}'s work on "
                       "a stream made while device {} was current (conveyor::device_guard)",
                       stream_device, st.device, st.rank, st.device));
}

//! Whether the stream is being captured; refuses a stream whose capture state cannot be read or whose capture was
//! invalidated.
bool read_capturing(const comm_state& st, const conveyor::stream& s, std::string_view call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  const cudaError_t cap = conveyor::detail::capture_info(s.get(), &status, &id, nullptr, nullptr);
  if (cap != cudaSuccess) {
    (void)cudaGetLastError();
    refuse(
        st, ncclInvalidArgument, call,
        fmt::format("the stream's capture state cannot be read (cudaStreamGetCaptureInfo: {})", cudaGetErrorName(cap)));
  }
  if (status == cudaStreamCaptureStatusInvalidated)
    refuse(st, ncclInvalidUsage, call,
           "the stream's capture was already invalidated by an earlier illegal call: NCCL would enqueue into a "
           "broken capture; end it (the capture call throws with the reason) and capture again");
  return status == cudaStreamCaptureStatusActive;
}

//! Refuses `st`'s call (`capturing` or not) after `other`'s entry in the same group was captured the other way.
[[noreturn]] void refuse_mixed_capture(const comm_state& st, bool capturing, const comm_state& other,
                                       std::string_view call) {
  const comm_state& captured = capturing ? st : other;
  const comm_state& eager = capturing ? other : st;
  refuse(st, ncclInvalidUsage, call,
         fmt::format("in one group rank {}'s stream (device {}) is being captured and rank {}'s (device {}) is "
                     "not: NCCL requires that an operation be captured on every rank or on none; capture all "
                     "the ranks' streams (conveyor::fork them into the capture) or none",
                     captured.rank, captured.device, eager.rank, eager.device));
}

//! Inside a group, refuses a call captured differently (`capturing` or not) from an earlier one on a usable
//! communicator.
void check_group_captures_alike(const comm_state& st, bool capturing, std::string_view call) {
  if (current_group.depth == 0) return;
  const auto& entries = current_group.entries;
  const auto mixed = std::find_if(entries.begin(), entries.end(), [&](const group_entry& e) {
    return e.state->comm != nullptr && e.capturing != capturing;
  });
  if (mixed != entries.end()) refuse_mixed_capture(st, capturing, *mixed->state, call);
}

//! What the checks learnt about the stream.
struct stream_facts {
  bool capturing = false;
};

//! The checks every call makes before NCCL: a usable communicator, the stream's device, its capture state, and
//! inside a group that every rank's stream is captured alike.
std::pair<comm_state*, stream_facts> prepare(const communicator& comm, const conveyor::stream& s,
                                             std::string_view call) {
  comm_state& st = checked(comm, call);
  check_stream_device(st, s, call);
  stream_facts facts;
  facts.capturing = read_capturing(st, s, call);
  check_group_captures_alike(st, facts.capturing, call);
  return {&st, facts};
}

//! Calls NCCL through `enqueue(comm_handle, stream_handle)` after prepare(), and for an ungrouped call on the
//! nonblocking communicator polls until the launch is done.
template <class Enqueue>
void run(const communicator& comm, const conveyor::stream& s, std::string_view call, Enqueue&& enqueue) {
  auto [st, facts] = prepare(comm, s, call);
  const ncclResult_t r = enqueue(st->comm, s.get());
  if (facts.capturing) st->captured = true;
  if (detail::is_error(r)) {
    mark_group_failed(fmt::format("{} failed with {}", call, result_name(r)));
    detail::fail(*st, r, call, "NCCL refused the call");
  }
  if (current_group.depth > 0) {
    current_group.entries.push_back({st, facts.capturing});
    return;
  }
  if (r == ncclInProgress)
    detail::wait_ready(*st, call, "the launch of the operation", detail::deadline_after(st->options.timeout));
}

void check_pointer(const comm_state& st, std::string_view call, const void* p, std::size_t count,
                   std::string_view name) {
  if (p == nullptr && count > 0)
    refuse(st, ncclInvalidArgument, call,
           fmt::format("the {} buffer is null with a count of {} elements", name, count));
}

void check_rank(const comm_state& st, std::string_view call, int r, std::string_view name) {
  if (r < 0 || r >= st.size)
    refuse(st, ncclInvalidArgument, call,
           fmt::format("{} {} is out of range: the communicator has {} rank(s), 0..{}", name, r, st.size, st.size - 1));
}

} // namespace

namespace detail {

void all_reduce(const communicator& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type,
                reduce_op op, const conveyor::stream& s) {
  constexpr std::string_view call = "ncclAllReduce";
  const comm_state& st = checked(comm, call);
  check_pointer(st, call, send, count, "send");
  check_pointer(st, call, recv, count, "recv");
  run(comm, s, call,
      [&](ncclComm_t c, cudaStream_t h) { return ncclAllReduce(send, recv, count, type, to_nccl(op), c, h); });
}

void broadcast(const communicator& comm, const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
               const conveyor::stream& s) {
  constexpr std::string_view call = "ncclBroadcast";
  const comm_state& st = checked(comm, call);
  check_rank(st, call, root, "root");
  if (st.rank == root) check_pointer(st, call, send, count, "send (on the root)");
  check_pointer(st, call, recv, count, "recv");
  run(comm, s, call, [&](ncclComm_t c, cudaStream_t h) { return ncclBroadcast(send, recv, count, type, root, c, h); });
}

void reduce_scatter(const communicator& comm, const void* send, void* recv, std::size_t recv_count, ncclDataType_t type,
                    reduce_op op, const conveyor::stream& s) {
  constexpr std::string_view call = "ncclReduceScatter";
  const comm_state& st = checked(comm, call);
  check_pointer(st, call, send, recv_count, "send");
  check_pointer(st, call, recv, recv_count, "recv");
  run(comm, s, call,
      [&](ncclComm_t c, cudaStream_t h) { return ncclReduceScatter(send, recv, recv_count, type, to_nccl(op), c, h); });
}

void all_gather(const communicator& comm, const void* send, void* recv, std::size_t send_count, ncclDataType_t type,
                const conveyor::stream& s) {
  constexpr std::string_view call = "ncclAllGather";
  const comm_state& st = checked(comm, call);
  check_pointer(st, call, send, send_count, "send");
  check_pointer(st, call, recv, send_count, "recv");
  run(comm, s, call, [&](ncclComm_t c, cudaStream_t h) { return ncclAllGather(send, recv, send_count, type, c, h); });
}

void send(const communicator& comm, const void* data, std::size_t count, ncclDataType_t type, int peer,
          const conveyor::stream& s) {
  constexpr std::string_view call = "ncclSend";
  const comm_state& st = checked(comm, call);
  check_rank(st, call, peer, "peer");
  check_pointer(st, call, data, count, "send");
  run(comm, s, call, [&](ncclComm_t c, cudaStream_t h) { return ncclSend(data, count, type, peer, c, h); });
}

void recv(const communicator& comm, void* data, std::size_t count, ncclDataType_t type, int peer,
          const conveyor::stream& s) {
  constexpr std::string_view call = "ncclRecv";
  const comm_state& st = checked(comm, call);
  check_rank(st, call, peer, "peer");
  check_pointer(st, call, data, count, "recv");
  run(comm, s, call, [&](ncclComm_t c, cudaStream_t h) { return ncclRecv(data, count, type, peer, c, h); });
}

} // namespace detail

group::group() {
  const ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) throw detail::make_error(nullptr, r, "ncclGroupStart", "opening a group");
  if (current_group.depth == 0) {
    current_group.entries.clear();
    current_group.failed = false;
    current_group.failure.clear();
  }
  ++current_group.depth;
}

group::~group() {
  if (!open_) return;
  // An exception leaving the group open (user code, bad_alloc, cuda_error ...) may have skipped the calls of other
  // ranks: launching only some ranks' collectives would hang them, so the group fails and end() aborts.
  if (std::uncaught_exceptions() > uncaught_) {
    try {
      mark_group_failed("an exception left the group open");
    } catch (...) { // no memory for the text: fail the group without it
      current_group.failed = true;
    }
  }
  try {
    end();
  } catch (...) {
    // end() aborted the group's communicators; the exception already unwinding is the one to report.
  }
}

namespace {

//! The communicators used in the group's entries, once each, in the order of their first use.
std::vector<comm_state*> distinct_states(const std::vector<group_entry>& entries) {
  std::vector<comm_state*> states;
  for (const group_entry& e : entries)
    if (std::find(states.begin(), states.end(), e.state) == states.end()) states.push_back(e.state);
  return states;
}

//! Why the thread's outermost group failed, taken from it as it is reset for the next group.
struct group_failure {
  bool failed = false;
  std::string text;
};

//! Takes the outermost group's failure and clears its entries.
group_failure take_group_failure() {
  group_failure out{current_group.failed, std::move(current_group.failure)};
  current_group.entries.clear();
  current_group.failed = false;
  current_group.failure.clear();
  return out;
}

//! Every rank (device) of the group, for messages.
std::string describe_ranks(const std::vector<comm_state*>& states) {
  std::string involved;
  for (const comm_state* st : states)
    involved += fmt::format("{}rank {} (device {})", involved.empty() ? "" : ", ", st->rank, st->device);
  return involved;
}

//! Aborts every communicator of the group.
void abort_all(const std::vector<comm_state*>& states) noexcept {
  for (comm_state* st : states) detail::abort_state(*st);
}

//! Names the group's first communicator (when there is one) in `info`.
void name_first(nccl_error_info& info, const std::vector<comm_state*>& states) {
  if (states.empty()) return;
  info.rank = states.front()->rank;
  info.device = states.front()->device;
}

//! A call in the group failed or was refused: aborts the group's communicators and throws.
[[noreturn]] void throw_group_failed(std::string_view call, const std::vector<comm_state*>& states,
                                     const std::string& involved, const std::string& failure) {
  abort_all(states);
  nccl_error_info info;
  info.result = ncclInvalidUsage;
  info.call = std::string(call);
  name_first(info, states);
  info.aborted = !states.empty();
  info.detail = fmt::format("a call in the group failed or was refused, so the group's operations cannot all "
                            "run{}: {}",
                            states.empty() ? ""
                                           : fmt::format(" (its communicators, {}, were aborted, as some operations "
                                                         "may wait for peers that never join)",
                                                         involved),
                            failure);
  throw nccl_error(std::move(info));
}

//! ncclGroupEnd failed with `r`: aborts the group's communicators and throws.
[[noreturn]] void throw_launch_failed(std::string_view call, ncclResult_t r, const std::vector<comm_state*>& states,
                                      const std::string& involved) {
  nccl_error_info info;
  info.result = r;
  info.call = std::string(call);
  info.last_error = detail::last_error_text(states.empty() ? nullptr : states.front()->comm);
  name_first(info, states);
  abort_all(states);
  info.aborted = !states.empty();
  info.detail = states.empty() ? std::string("NCCL could not launch the group")
                               : fmt::format("NCCL could not launch the group of {} (all aborted)", involved);
  throw nccl_error(std::move(info));
}

//! Waits until the launch of the group's operations is done on every communicator; on an error or the deadline
//! aborts them all and throws.
void wait_launched(std::string_view call, const std::vector<comm_state*>& states, const std::string& involved) {
  const auto deadline = detail::deadline_after(detail::longest_timeout(states));
  try {
    for (comm_state* st : states)
      if (st->comm != nullptr) detail::wait_ready(*st, call, "the launch of the group's operations", deadline);
  } catch (const nccl_error& e) {
    abort_all(states);
    if (states.size() < 2) throw;
    nccl_error_info info = e.info();
    info.aborted = true;
    info.detail += fmt::format(" (the group's communicators, {}, were all aborted)", involved);
    throw nccl_error(std::move(info));
  }
}

} // namespace

void group::end() {
  constexpr std::string_view call = "ncclGroupEnd";
  if (!open_) throw std::logic_error("conveyor::nccl::group::end: the group was already ended");
  open_ = false;
  --current_group.depth;
  const ncclResult_t r = ncclGroupEnd();
  if (current_group.depth > 0) {
    if (detail::is_error(r)) mark_group_failed(fmt::format("a nested ncclGroupEnd failed with {}", result_name(r)));
    return;
  }
  // The outermost group: every communicator used in it, once each.
  const std::vector<comm_state*> states = distinct_states(current_group.entries);
  const group_failure failure = take_group_failure();
  const std::string involved = describe_ranks(states);
  if (failure.failed) throw_group_failed(call, states, involved, failure.text);
  if (detail::is_error(r)) throw_launch_failed(call, r, states, involved);
  wait_launched(call, states, involved);
}

namespace {

std::string describe_tag(std::uint64_t tag) {
  return tag == 0 ? std::string("0 (run eagerly)") : fmt::format("{:#x} (capture)", tag);
}

void ensure_agree_buffers(comm_state& st) {
  if (st.agree_device != nullptr) return;
  const device_guard on(st.device);
  CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&st.agree_device), 2 * sizeof(std::uint64_t)));
  CONVEYOR_CHECK(cudaMallocHost(reinterpret_cast<void**>(&st.agree_host), 2 * sizeof(std::uint64_t)));
}

//! The communicators' states, each usable and its stream not capturing.
std::vector<comm_state*> usable_outside_capture(std::span<const communicator> comms,
                                                std::span<const conveyor::stream* const> streams,
                                                std::string_view call) {
  std::vector<comm_state*> states;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    comm_state& st = detail::usable(comms[i], call);
    if (streams[i]->is_capturing())
      throw detail::make_error(&st, ncclInvalidUsage, call,
                               "called inside a capture: it waits for an eager all-reduce, so call it before the "
                               "capture begins",
                               false);
    states.push_back(&st);
  }
  return states;
}

//! Copies `tag` and its complement to every communicator's device buffer (one all-reduce with max gives the
//! largest tag and the complement of the smallest).
void upload_tags(const std::vector<comm_state*>& states, std::span<const conveyor::stream* const> streams,
                 std::uint64_t tag) {
  for (std::size_t i = 0; i < states.size(); ++i) {
    comm_state& st = *states[i];
    ensure_agree_buffers(st);
    st.agree_host[0] = tag;
    st.agree_host[1] = ~tag;
    const device_guard on(st.device);
    CONVEYOR_CHECK(cudaMemcpyAsync(st.agree_device, st.agree_host, 2 * sizeof(std::uint64_t), cudaMemcpyHostToDevice,
                                   streams[i]->get()));
  }
}

//! All-reduces (max) the device buffers of every communicator in one group.
void reduce_tags(std::span<const communicator> comms, const std::vector<comm_state*>& states,
                 std::span<const conveyor::stream* const> streams) {
  group g;
  for (std::size_t i = 0; i < states.size(); ++i)
    detail::all_reduce(comms[i], states[i]->agree_device, states[i]->agree_device, 2, ncclUint64, reduce_op::max,
                       *streams[i]);
  g.end();
}

//! Copies the reduced words back to every communicator's host buffer.
void download_tags(const std::vector<comm_state*>& states, std::span<const conveyor::stream* const> streams) {
  for (std::size_t i = 0; i < states.size(); ++i) {
    comm_state& st = *states[i];
    const device_guard on(st.device);
    CONVEYOR_CHECK(cudaMemcpyAsync(st.agree_host, st.agree_device, 2 * sizeof(std::uint64_t), cudaMemcpyDeviceToHost,
                                   streams[i]->get()));
  }
}

//! Throws when the reduced words in `st` show that the ranks' tags differ (this rank gave `tag`).
void check_tags_agree(const comm_state& st, std::uint64_t tag, std::string_view call) {
  const std::uint64_t largest = st.agree_host[0];
  const std::uint64_t smallest = ~st.agree_host[1];
  if (largest == smallest) return;
  nccl_error_info info;
  info.result = ncclInvalidUsage;
  info.call = std::string(call);
  info.rank = st.rank;
  info.device = st.device;
  info.detail = fmt::format("capture decision differs between ranks: this rank gave tag {}, the ranks' tags range "
                            "from {} to {}; every rank must decide alike (all capture the same operations, or all "
                            "run them eagerly); the communicator is still usable",
                            describe_tag(tag), describe_tag(smallest), describe_tag(largest));
  info.hint = "derive the decision and the tag from inputs every rank shares (the same step, shapes and options); "
              "NCCL requires that an operation be captured on every rank or on none, and that every rank launch "
              "the graph made by that capture";
  throw nccl_error(std::move(info));
}

} // namespace

void agree_on_capture(std::span<const communicator> comms, std::span<const conveyor::stream* const> streams,
                      std::uint64_t tag) {
  constexpr std::string_view call = "conveyor::nccl::agree_on_capture";
  detail::check_streams_given(comms.size(), streams, call);
  if (comms.empty()) return;
  const std::vector<comm_state*> states = usable_outside_capture(comms, streams, call);
  upload_tags(states, streams, tag);
  reduce_tags(comms, states, streams);
  download_tags(states, streams);
  synchronize(comms, streams);
  check_tags_agree(*states.front(), tag, call);
}

void agree_on_capture(const communicator& comm, const conveyor::stream& s, std::uint64_t tag) {
  const conveyor::stream* streams[] = {&s};
  agree_on_capture(std::span<const communicator>(&comm, 1), streams, tag);
}

} // namespace conveyor::nccl
