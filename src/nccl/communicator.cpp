// conveyor::nccl::communicator: nonblocking NCCL communicators, initialised, waited for and destroyed with polls
// that have a deadline (NCCL user guide: "Creating a communicator with options", "Fault tolerance": a nonblocking
// communicator returns ncclInProgress and is polled with ncclCommGetAsyncError; ncclCommAbort ends it on error).
#include "conveyor/nccl/communicator.hpp"

#include "conveyor/runtime/device.hpp"
#include "nccl/state.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace conveyor::nccl {

namespace detail {

std::string last_error_text(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  if (text == nullptr) return {};
  std::string s(text);
  s.erase(s.find_last_not_of("\n \r") + 1); // npos + 1 == 0: nothing but blanks
  return s;
}

nccl_error make_error(const comm_state* state, ncclResult_t result, std::string_view call, std::string detail,
                      bool with_last_error) {
  nccl_error_info info;
  info.result = result;
  info.call = std::string(call);
  if (state != nullptr) {
    info.rank = state->rank;
    info.device = state->device;
    info.aborted = state->aborted;
  }
  if (with_last_error) info.last_error = last_error_text(state != nullptr ? state->comm : nullptr);
  info.detail = std::move(detail);
  return nccl_error(std::move(info));
}

void abort_state(comm_state& state) noexcept {
  if (state.comm != nullptr) {
    bool started = false;
    if (state.captured) {
      // NCCL >= 2.26: ncclCommAbort sets the abort flag (its kernels stop at once), then waits until every graph
      // that captured the communicator is destroyed; the caller may still hold one, so the wait runs elsewhere.
      try {
        auto signal = std::make_shared<abort_signal>();
        std::thread([comm = state.comm, signal] {
          (void)ncclCommAbort(comm);
          const std::lock_guard lock(signal->mutex);
          signal->done = true;
          signal->done_cv.notify_all();
        }).detach();
        state.pending_abort = std::move(signal);
        started = true;
      } catch (...) {
        // No thread: abort here (it may wait for the graphs).
      }
    }
    if (!started) (void)ncclCommAbort(state.comm);
    state.comm = nullptr;
  }
  state.aborted = true;
}

namespace {
[[noreturn]] void throw_after_abort(comm_state& state, nccl_error_info info) {
  // Read what NCCL says before the abort frees the communicator.
  ncclResult_t async = ncclSuccess;
  if (state.comm != nullptr && ncclCommGetAsyncError(state.comm, &async) == ncclSuccess) info.async_result = async;
  info.last_error = last_error_text(state.comm);
  abort_state(state);
  info.rank = state.rank;
  info.device = state.device;
  info.aborted = true;
  throw nccl_error(std::move(info));
}
} // namespace

void fail(comm_state& state, ncclResult_t result, std::string_view call, std::string detail) {
  nccl_error_info info;
  info.result = result;
  info.call = std::string(call);
  info.detail = std::move(detail);
  throw_after_abort(state, std::move(info));
}

void fail_timeout(comm_state& state, std::string_view call, std::string detail) {
  nccl_error_info info;
  info.result = ncclInProgress;
  info.call = std::string(call);
  info.timed_out = true;
  info.detail = std::move(detail);
  throw_after_abort(state, std::move(info));
}

void check_streams_given(std::size_t comms, std::span<const conveyor::stream* const> streams, std::string_view call) {
  if (comms != streams.size())
    throw std::invalid_argument(fmt::format("{}: {} communicators but {} streams: give one stream per communicator",
                                            call, comms, streams.size()));
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (streams[i] == nullptr) throw std::invalid_argument(fmt::format("{}: stream {} is null", call, i));
}

comm_state& usable(const communicator& comm, std::string_view call) {
  comm_state* state = comm.state();
  if (state == nullptr) {
    nccl_error_info info;
    info.result = ncclInvalidUsage;
    info.call = std::string(call);
    info.detail = "the communicator is empty (default-made or moved from)";
    info.hint = "make it with communicator::init_all, communicator::init_rank or init_with_mpi";
    throw nccl_error(std::move(info));
  }
  if (state->comm == nullptr) {
    nccl_error_info info;
    info.result = ncclInvalidUsage;
    info.call = std::string(call);
    info.rank = state->rank;
    info.device = state->device;
    info.detail = "the communicator was aborted (after an error, a timeout or abort()) and cannot be used again";
    info.hint = "make new communicators on every rank (an aborted one stays unusable)";
    throw nccl_error(std::move(info));
  }
  return *state;
}

void backoff::wait() {
  ++polls_;
  if (polls_ <= 64) {
    std::this_thread::yield();
    return;
  }
  const int micros = std::min(1000, 10 * (polls_ - 64));
  std::this_thread::sleep_for(std::chrono::microseconds(micros));
}

void wait_ready(comm_state& state, std::string_view call, std::string_view what, clock::time_point deadline) {
  backoff pause;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(state.comm, &async);
    if (r != ncclSuccess) fail(state, r, "ncclCommGetAsyncError", fmt::format("while waiting for {}", what));
    if (async == ncclSuccess) return;
    if (async != ncclInProgress) fail(state, async, call, fmt::format("{} failed", what));
    if (clock::now() > deadline)
      fail_timeout(state, call, fmt::format("{} did not finish within {} ms", what, state.options.timeout.count()));
    pause.wait();
  }
}

} // namespace detail

namespace {

using detail::comm_state;

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  // A library older than the header (2.28.3 on the GPU machine, header 2.28.9) is told the version it knows.
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess && version > 0 && static_cast<unsigned>(version) < config.version)
    config.version = static_cast<unsigned>(version);
  return config;
}

void check_device(int device, std::string_view call, int rank) {
  const int count = device_count();
  if (device < 0 || device >= count) {
    nccl_error_info info;
    info.result = ncclInvalidArgument;
    info.call = std::string(call);
    info.rank = rank;
    info.detail = count == 0 ? fmt::format("device {} does not exist: no CUDA device is visible", device)
                             : fmt::format("device {} does not exist: {} CUDA device(s) are visible (0..{})", device,
                                           count, count - 1);
    throw nccl_error(std::move(info));
  }
}

//! Reports a captured communicator whose finalisation did not end in time, left to the end of the process.
void report_finalize_left(const comm_state& st) noexcept {
  try {
    std::fprintf(stderr,
                 "conveyor::nccl: rank %d (device %d): the communicator's finalisation did not end within "
                 "%lld ms; a graph that captured its operations may still exist (destroy graphs before "
                 "communicators): the communicator is left to the end of the process\n",
                 st.rank, st.device, static_cast<long long>(st.options.timeout.count()));
  } catch (...) {}
}

//! Polls a started finalisation until it ends or options.timeout passes: its result (ncclInProgress past the
//! deadline); `left` is set when a captured communicator must be left alone instead (NCCL's finalisation thread
//! waits for graphs holding it; ncclCommAbort would join it).
ncclResult_t await_finalize(const comm_state& st, bool& left) noexcept {
  const auto deadline = detail::deadline_after(st.options.timeout);
  detail::backoff pause;
  for (;;) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(st.comm, &async) != ncclSuccess) return ncclInternalError;
    if (async != ncclInProgress) return async;
    if (detail::clock::now() > deadline) {
      if (st.captured) {
        left = true;
        report_finalize_left(st);
      }
      return ncclInProgress;
    }
    pause.wait();
  }
}

//! Ends the NCCL communicator: finalise (polled), then destroy; abort when finalisation fails or times out; leave
//! a captured one whose finalisation did not end.
void end_comm(comm_state& st) noexcept {
  ncclResult_t r = ncclCommFinalize(st.comm);
  bool left = false;
  if (!detail::is_error(r)) r = await_finalize(st, left);
  if (!left) {
    if (r == ncclSuccess) (void)ncclCommDestroy(st.comm);
    else (void)ncclCommAbort(st.comm);
  }
  st.comm = nullptr;
}

//! Waits up to options.timeout for an abort on a background thread (abort_state): it ends once the graphs that
//! captured the communicator are destroyed, which they should be by now; one that does not end is reported.
void await_pending_abort(comm_state& st) noexcept {
  const std::shared_ptr<detail::abort_signal> signal = std::move(st.pending_abort);
  try {
    std::unique_lock lock(signal->mutex);
    if (!signal->done_cv.wait_for(lock, st.options.timeout, [&] { return signal->done; }))
      std::fprintf(stderr,
                   "conveyor::nccl: rank %d (device %d): the communicator's abort did not end within %lld ms after "
                   "its release; a graph that captured its operations may still exist (destroy graphs before "
                   "communicators): the abort is left running in the background\n",
                   st.rank, st.device, static_cast<long long>(st.options.timeout.count()));
  } catch (...) {}
}

//! Ends a communicator: finalise (polled), destroy; or abort. Never throws.
void release(std::unique_ptr<comm_state>& state) noexcept {
  if (!state) return;
  comm_state& st = *state;
  if (st.comm != nullptr) end_comm(st);
  if (st.pending_abort) await_pending_abort(st);
  if (st.agree_device != nullptr) (void)cudaFree(st.agree_device);
  if (st.agree_host != nullptr) (void)cudaFreeHost(st.agree_host);
  (void)cudaGetLastError();
  state.reset();
}

} // namespace

unique_id unique_id::create() {
  unique_id out;
  const ncclResult_t r = ncclGetUniqueId(&out.id);
  if (r != ncclSuccess)
    throw detail::make_error(nullptr, r, "ncclGetUniqueId",
                             "no unique id (NCCL needs a usable network interface for its bootstrap: see "
                             "NCCL_SOCKET_IFNAME)");
  return out;
}

communicator::communicator() noexcept = default;
communicator::communicator(std::unique_ptr<detail::comm_state> state) noexcept : state_(std::move(state)) {}
communicator::communicator(communicator&& other) noexcept = default;

communicator& communicator::operator=(communicator&& other) noexcept {
  if (this != &other) {
    release(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

communicator::~communicator() { release(state_); }

communicator communicator::init_rank(int nranks, int rank, const unique_id& id, int device,
                                     const comm_options& options) {
  constexpr std::string_view call = "conveyor::nccl::communicator::init_rank";
  if (nranks < 1)
    throw detail::make_error(nullptr, ncclInvalidArgument, call,
                             fmt::format("{} ranks: a communicator has at least one", nranks), false);
  if (rank < 0 || rank >= nranks)
    throw detail::make_error(
        nullptr, ncclInvalidArgument, call,
        fmt::format("rank {} is outside [0, {}) for a communicator of {} ranks", rank, nranks, nranks), false);
  check_device(device, call, rank);
  auto state = std::make_unique<comm_state>();
  state->rank = rank;
  state->size = nranks;
  state->device = device;
  state->options = options;
  ncclResult_t r = ncclSuccess;
  {
    const device_guard on(device);
    ncclConfig_t config = nonblocking_config();
    r = ncclCommInitRankConfig(&state->comm, nranks, id.id, rank, &config);
  }
  if (detail::is_error(r))
    detail::fail(*state, r, "ncclCommInitRankConfig", fmt::format("rank {} of {} could not start", rank, nranks));
  detail::wait_ready(*state, "ncclCommInitRankConfig",
                     fmt::format("the initialisation of rank {} of {} (every rank must call it with the same unique "
                                 "id and number of ranks)",
                                 rank, nranks),
                     detail::deadline_after(options.timeout));
  return communicator(std::move(state));
}

namespace {

using comm_states = std::vector<std::unique_ptr<comm_state>>;

// init_all's checks before NCCL is called: devices given, none twice, each one usable.
void check_init_devices(std::span<const int> devices, std::string_view call) {
  if (devices.empty())
    throw detail::make_error(nullptr, ncclInvalidArgument, call, "no devices given: name at least one", false);
  for (std::size_t i = 0; i < devices.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        throw detail::make_error(nullptr, ncclInvalidArgument, call,
                                 fmt::format("device {} is listed twice (ranks {} and {}): NCCL does not support "
                                             "one device as two ranks of a communicator",
                                             devices[i], j, i),
                                 false);
  for (std::size_t i = 0; i < devices.size(); ++i) check_device(devices[i], call, static_cast<int>(i));
}

void abort_all(comm_states& states) noexcept {
  for (auto& s : states) detail::abort_state(*s);
}

// Aborts every communicator and throws `info` (rank and device from `st`, marked aborted).
[[noreturn]] void fail_init(comm_states& states, const comm_state& st, nccl_error_info info) {
  info.rank = st.rank;
  info.device = st.device;
  abort_all(states);
  info.aborted = true;
  throw nccl_error(std::move(info));
}

// Starts the initialisation of communicator `st` as rank `rank` of `n` (ncclCommInitRankConfig, nonblocking): its
// result, ncclUnhandledCudaError when its device cannot be made current.
ncclResult_t start_rank(comm_state& st, int n, const unique_id& id, int rank) {
  if (cudaSetDevice(st.device) != cudaSuccess) {
    (void)cudaGetLastError();
    return ncclUnhandledCudaError;
  }
  ncclConfig_t config = nonblocking_config();
  return ncclCommInitRankConfig(&st.comm, n, id.id, rank, &config);
}

// The first error of the initialisations started in one group (ncclSuccess when none) and the rank it names.
struct init_refusal {
  ncclResult_t result = ncclSuccess;
  int rank = -1;
};

// Starts each rank's initialisation in the open group, up to the first that NCCL refuses.
init_refusal start_ranks(comm_states& states, const unique_id& id) {
  const int n = static_cast<int>(states.size());
  init_refusal refusal;
  for (int i = 0; i < n && refusal.result == ncclSuccess; ++i) {
    const ncclResult_t r = start_rank(*states[static_cast<std::size_t>(i)], n, id, i);
    if (detail::is_error(r)) refusal = {r, i};
  }
  return refusal;
}

// Starts every rank's initialisation in one group, the current device restored after: the first refusal, or
// ncclGroupEnd's error (naming rank 0).
init_refusal start_in_group(comm_states& states, std::span<const int> devices, const unique_id& id) {
  const device_guard restore(devices[0]);
  const ncclResult_t start = ncclGroupStart();
  if (start != ncclSuccess)
    throw detail::make_error(nullptr, start, "ncclGroupStart", "before initialising the communicators");
  init_refusal refusal = start_ranks(states, id);
  const ncclResult_t end = ncclGroupEnd();
  if (refusal.result == ncclSuccess && detail::is_error(end)) refusal = {end, 0};
  return refusal;
}

// Starts every rank's initialisation in one group (ncclCommInitRankConfig, nonblocking); on a refusal, aborts all.
void start_init(comm_states& states, std::span<const int> devices, const unique_id& id) {
  const init_refusal refusal = start_in_group(states, devices, id);
  if (refusal.result == ncclSuccess) return;
  nccl_error_info info;
  info.result = refusal.result;
  info.call = "ncclCommInitRankConfig";
  info.last_error = detail::last_error_text(nullptr);
  info.detail = fmt::format("initialising {} communicators in one group", states.size());
  fail_init(states, *states[static_cast<std::size_t>(refusal.rank)], std::move(info));
}

// True once communicator `st` is ready; false while it initialises; aborts all and throws when it failed.
bool init_finished(comm_states& states, const comm_state& st) {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(st.comm, &async);
  const ncclResult_t bad = r != ncclSuccess ? r : async;
  if (bad == ncclSuccess) return true;
  if (bad == ncclInProgress) return false;
  nccl_error_info info;
  info.result = bad;
  info.call = "ncclCommInitRankConfig";
  info.async_result = async;
  info.last_error = detail::last_error_text(st.comm);
  info.detail = fmt::format("the initialisation of {} communicators in one process failed", states.size());
  fail_init(states, st, std::move(info));
}

// The deadline passed with the communicators not `ready` still initialising: aborts all and throws, naming them.
[[noreturn]] void init_timed_out(comm_states& states, const std::vector<bool>& ready, const comm_options& options,
                                 std::string_view call) {
  std::string waiting;
  const comm_state* first_waiting = nullptr;
  for (std::size_t i = 0; i < states.size(); ++i)
    if (!ready[i]) {
      if (first_waiting == nullptr) first_waiting = states[i].get();
      waiting += fmt::format("{}rank {} (device {})", waiting.empty() ? "" : ", ", states[i]->rank, states[i]->device);
    }
  nccl_error_info info;
  info.result = ncclInProgress;
  info.call = std::string(call);
  info.timed_out = true;
  info.detail = fmt::format("the initialisation of {} communicators did not finish within {} ms (still "
                            "initialising: {})",
                            states.size(), options.timeout.count(), waiting);
  fail_init(states, *first_waiting, std::move(info)); // the first rank still initialising; the detail names each
}

// Polls every communicator until all are ready (or one fails, or the deadline passes: then all are aborted).
void wait_for_init(comm_states& states, const comm_options& options, std::string_view call) {
  const auto deadline = detail::deadline_after(options.timeout);
  std::vector<bool> ready(states.size(), false);
  detail::backoff pause;
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (!ready[i]) ready[i] = init_finished(states, *states[i]);
      all = all && ready[i];
    }
    if (all) return;
    if (detail::clock::now() > deadline) init_timed_out(states, ready, options, call);
    pause.wait();
  }
}

} // namespace

std::vector<communicator> communicator::init_all(std::span<const int> devices, const comm_options& options) {
  constexpr std::string_view call = "conveyor::nccl::communicator::init_all";
  check_init_devices(devices, call);
  const int n = static_cast<int>(devices.size());
  const unique_id id = unique_id::create();
  comm_states states;
  for (int i = 0; i < n; ++i) {
    auto state = std::make_unique<comm_state>();
    state->rank = i;
    state->size = n;
    state->device = devices[static_cast<std::size_t>(i)];
    state->options = options;
    states.push_back(std::move(state));
  }
  start_init(states, devices, id);
  wait_for_init(states, options, call);
  std::vector<communicator> out;
  out.reserve(states.size());
  for (auto& s : states) out.push_back(communicator(std::move(s)));
  return out;
}

int communicator::rank() const {
  if (!state_)
    throw detail::make_error(nullptr, ncclInvalidUsage, "conveyor::nccl::communicator::rank",
                             "the communicator is empty (default-made or moved from)", false);
  return state_->rank;
}

int communicator::size() const {
  if (!state_)
    throw detail::make_error(nullptr, ncclInvalidUsage, "conveyor::nccl::communicator::size",
                             "the communicator is empty (default-made or moved from)", false);
  return state_->size;
}

int communicator::device() const {
  if (!state_)
    throw detail::make_error(nullptr, ncclInvalidUsage, "conveyor::nccl::communicator::device",
                             "the communicator is empty (default-made or moved from)", false);
  return state_->device;
}

ncclComm_t communicator::get() const noexcept { return state_ ? state_->comm : nullptr; }

const comm_options& communicator::options() const noexcept {
  static const comm_options defaults{};
  return state_ ? state_->options : defaults;
}

bool communicator::valid() const noexcept { return state_ && state_->comm != nullptr; }

bool communicator::aborted() const noexcept { return state_ && state_->aborted; }

void communicator::check() const {
  constexpr std::string_view call = "conveyor::nccl::communicator::check";
  comm_state& st = detail::usable(*this, call);
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(st.comm, &async);
  if (r != ncclSuccess) detail::fail(st, r, "ncclCommGetAsyncError", "while checking for an asynchronous error");
  if (detail::is_error(async)) detail::fail(st, async, call, "NCCL reports an asynchronous error");
}

void communicator::abort() noexcept {
  if (state_) detail::abort_state(*state_);
}

namespace {

//! After an abort, gives the streams' remaining work (NCCL kernels now stopping) a bounded time to drain, so that
//! the caller may free the buffers; errors are consumed.
void drain(std::span<const conveyor::stream* const> streams, std::chrono::milliseconds limit) noexcept {
  const auto deadline = detail::deadline_after(std::min(limit, std::chrono::milliseconds(5000)));
  detail::backoff pause;
  for (const conveyor::stream* s : streams) {
    if (s == nullptr) continue;
    while (cudaStreamQuery(s->get()) == cudaErrorNotReady && detail::clock::now() < deadline) pause.wait();
  }
  (void)cudaGetLastError();
}

void refuse_capturing(const comm_state& st, const conveyor::stream& s, std::string_view call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(s.get(), &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return; // an invalid stream: cudaStreamQuery reports it
  }
  if (status != cudaStreamCaptureStatusNone)
    throw detail::make_error(&st, ncclInvalidUsage, call,
                             "the stream is being captured: waiting for it would invalidate the capture; wait after "
                             "the capture ends (for the launches of the graph)",
                             false);
}

//! One wait for the streams of several communicators (one per communicator): the call that waits, and the longest
//! of the communicators' timeouts.
struct stream_wait {
  std::span<comm_state* const> states;
  std::span<const conveyor::stream* const> streams;
  std::string_view call;
  std::chrono::milliseconds timeout{0};

  //! Completes `info` with communicator `who`'s asynchronous result and last error, aborts every communicator,
  //! drains the streams and throws.
  [[noreturn]] void abort_all_and_throw(std::size_t who, nccl_error_info info) const;
  //! Polls communicator `i` for an asynchronous error (which fails the wait): its asynchronous result.
  ncclResult_t check_async(std::size_t i) const;
  //! Polls communicator `i` and its stream: true once the stream's work is done; an error fails the wait.
  bool poll(std::size_t i) const;
  //! Fails the wait past its deadline, naming the communicators whose streams are still running (not `done`).
  [[noreturn]] void fail_timeout(const std::vector<bool>& done) const;
};

void stream_wait::abort_all_and_throw(std::size_t who, nccl_error_info info) const {
  comm_state& st = *states[who];
  ncclResult_t async = ncclSuccess;
  if (st.comm != nullptr && ncclCommGetAsyncError(st.comm, &async) == ncclSuccess && info.async_result == ncclSuccess)
    info.async_result = async;
  if (info.last_error.empty()) info.last_error = detail::last_error_text(st.comm);
  for (comm_state* s : states) detail::abort_state(*s);
  info.rank = st.rank;
  info.device = st.device;
  info.aborted = true;
  drain(streams, timeout);
  throw nccl_error(std::move(info));
}

ncclResult_t stream_wait::check_async(std::size_t i) const {
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(states[i]->comm, &async);
  if (r != ncclSuccess || detail::is_error(async)) {
    nccl_error_info info;
    info.result = r != ncclSuccess ? r : async;
    info.call = std::string(call);
    info.async_result = async;
    info.detail = "NCCL reported an asynchronous error while the stream's work was running";
    abort_all_and_throw(i, std::move(info));
  }
  return async;
}

bool stream_wait::poll(std::size_t i) const {
  const ncclResult_t async = check_async(i);
  const cudaError_t q = cudaStreamQuery(streams[i]->get());
  if (q == cudaSuccess && async == ncclSuccess) return true;
  if (q != cudaSuccess && q != cudaErrorNotReady) {
    (void)cudaGetLastError();
    nccl_error_info info;
    info.result = ncclUnhandledCudaError;
    info.call = std::string(call);
    info.detail = fmt::format("the stream reported a CUDA error: {} ({})", cudaGetErrorName(q), cudaGetErrorString(q));
    abort_all_and_throw(i, std::move(info));
  }
  return false;
}

void stream_wait::fail_timeout(const std::vector<bool>& done) const {
  std::size_t first = 0;
  std::string waiting;
  for (std::size_t i = 0; i < states.size(); ++i)
    if (!done[i]) {
      if (waiting.empty()) first = i;
      waiting += fmt::format("{}rank {} (device {})", waiting.empty() ? "" : ", ", states[i]->rank, states[i]->device);
    }
  nccl_error_info info;
  info.result = ncclInProgress;
  info.call = std::string(call);
  info.timed_out = true;
  info.detail = states.size() == 1
                    ? fmt::format("all work on the stream did not finish within {} ms", timeout.count())
                    : fmt::format("all work on the streams did not finish within {} ms (still running on {})",
                                  timeout.count(), waiting);
  abort_all_and_throw(first, std::move(info));
}

//! Waits for the streams of several communicators (one or more); on failure aborts all of them, drains, throws.
void wait_streams(std::span<comm_state* const> states, std::span<const conveyor::stream* const> streams,
                  std::string_view call) {
  const stream_wait poller{states, streams, call, detail::longest_timeout(states)};
  const auto deadline = detail::deadline_after(poller.timeout);
  std::vector<bool> done(states.size(), false);
  detail::backoff pause;
  for (;;) {
    bool all = true;
    for (std::size_t i = 0; i < states.size(); ++i) {
      if (done[i]) continue;
      if (poller.poll(i)) done[i] = true;
      else all = false;
    }
    if (all) return;
    if (detail::clock::now() > deadline) poller.fail_timeout(done);
    pause.wait();
  }
}

} // namespace

void communicator::synchronize(const conveyor::stream& s) const {
  constexpr std::string_view call = "conveyor::nccl::communicator::synchronize";
  comm_state& st = detail::usable(*this, call);
  refuse_capturing(st, s, call);
  comm_state* states[] = {&st};
  const conveyor::stream* streams[] = {&s};
  wait_streams(states, streams, call);
}

void synchronize(std::span<const communicator> comms, std::span<const conveyor::stream* const> streams) {
  constexpr std::string_view call = "conveyor::nccl::synchronize";
  detail::check_streams_given(comms.size(), streams, call);
  std::vector<comm_state*> states;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    comm_state& st = detail::usable(comms[i], call);
    refuse_capturing(st, *streams[i], call);
    states.push_back(&st);
  }
  if (states.empty()) return;
  wait_streams(states, streams, call);
}

} // namespace conveyor::nccl
