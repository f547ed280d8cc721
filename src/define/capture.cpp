#include "conveyor/define/capture.hpp"

#include "conveyor/error.hpp"
#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "cuda/driver.hpp"
#include "define/capture_checks.hpp"
#include "define/capture_registry.hpp"
#include "define/stream_watch.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace conveyor::detail {

namespace {

// Streams forked into each capture (by capture id) and not yet joined, so that a failing or throwing capture
// can join them back before ending, which releases them from capture mode.
// A stream forked into a capture and the device it belongs to (the join records its event there).
struct forked_stream {
  cudaStream_t stream = nullptr;
  int device = 0;
  friend bool operator==(const forked_stream&, const forked_stream&) = default;
};
struct fork_registry {
  std::mutex mutex;
  std::unordered_map<unsigned long long, std::vector<forked_stream>> open;
};
fork_registry& forks() {
  static fork_registry registry;
  return registry;
}

unsigned long long capture_id(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (capture_info(s, &status, &id, nullptr, nullptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : id;
}

std::vector<forked_stream> take_open_forks(unsigned long long id) {
  std::lock_guard lock(forks().mutex);
  auto it = forks().open.find(id);
  if (it == forks().open.end()) return {};
  auto streams = std::move(it->second);
  forks().open.erase(it);
  return streams;
}

// A new timing-free event of `device`, made with `device` current (the calling thread's device restored). Returns the
// first error.
cudaError_t create_event_on(int device, cudaEvent_t* e) {
  int previous = 0;
  cudaError_t rc = cudaGetDevice(&previous);
  if (rc != cudaSuccess) return rc;
  if (previous != device && (rc = cudaSetDevice(device)) != cudaSuccess) return rc;
  rc = cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  if (previous != device) (void)cudaSetDevice(previous);
  return rc;
}

// One timing-free event per device and thread, reused by every fork and join of that thread: cudaStreamWaitEvent
// waits for the event's most recent record at the time of the call, so the event is free again as soon as the
// wait has been enqueued (or captured). Saves an event creation and destruction per fork/join. Destroyed at thread
// exit (errors ignored: the runtime may already be unloading).
class link_events {
public:
  link_events() = default;
  link_events(const link_events&) = delete;
  link_events& operator=(const link_events&) = delete;
  ~link_events() {
    for (const auto& [device, e] : events_) (void)cudaEventDestroy(e);
  }
  // The event of `device`, created on first use (with `device` current, the calling thread's device restored).
  // Returns the creation error, if any.
  cudaError_t get(int device, cudaEvent_t* out) {
    if (const auto it = find(device); it != events_.end()) {
      *out = it->second;
      return cudaSuccess;
    }
    cudaEvent_t e = nullptr;
    if (const cudaError_t rc = create_event_on(device, &e); rc != cudaSuccess) return rc;
    events_.emplace_back(device, e);
    *out = e;
    return cudaSuccess;
  }
  // Forgets (and destroys) the event of `device`, after CUDA refused it.
  void drop(int device) noexcept {
    const auto it = find(device);
    if (it == events_.end()) return;
    (void)cudaEventDestroy(it->second);
    events_.erase(it);
  }

private:
  using device_events = std::vector<std::pair<int, cudaEvent_t>>;
  device_events::iterator find(int device) noexcept {
    return std::find_if(events_.begin(), events_.end(), [&](const auto& de) { return de.first == device; });
  }

  device_events events_;
};

// Records `e` on `from` and makes `to` wait for it: the driver's calls first (0.4 µs a fork or join less than the
// runtime's), the runtime's where they fail, for the runtime's error (link makes a new event for a stale one).
cudaError_t record_and_wait(cudaEvent_t e, cudaStream_t from, cudaStream_t to) {
  if (driver::event_record(e, from) == CUDA_SUCCESS && driver::stream_wait_event(to, e) == CUDA_SUCCESS)
    return cudaSuccess;
  cudaError_t rc = cudaEventRecord(e, from);
  return rc == cudaSuccess ? cudaStreamWaitEvent(to, e, 0) : rc;
}

// Makes `to` wait for all work enqueued on `from` so far, through the thread's event for `device`, the device `from`
// belongs to (cudaEventRecord needs an event of the stream's device; the waiting stream may be on any device, so a
// fork or join may cross devices: a multi-device capture). Returns the first error.
cudaError_t link(cudaStream_t from, int device, cudaStream_t to) {
  thread_local link_events events;
  cudaError_t rc = cudaSuccess;
  cudaEvent_t e = nullptr;
  if ((rc = events.get(device, &e)) != cudaSuccess) return rc;
  rc = record_and_wait(e, from, to);
  if (rc == cudaErrorInvalidResourceHandle || rc == cudaErrorContextIsDestroyed) {
    // The cached event died with its context (cudaDeviceReset): make a new one and try once more.
    (void)cudaGetLastError();
    events.drop(device);
    if ((rc = events.get(device, &e)) != cudaSuccess) return rc;
    rc = record_and_wait(e, from, to);
  }
  return rc;
}

// The graphs capture_sessions are capturing into now, each with its model.
struct capture_registry {
  std::mutex mutex;
  std::unordered_map<cudaGraph_t, std::shared_ptr<graph_state>> open;
};
capture_registry& captures() {
  static capture_registry registry;
  return registry;
}

} // namespace

void register_capture(cudaGraph_t g, std::shared_ptr<graph_state> state) {
  std::lock_guard lock(captures().mutex);
  captures().open[g] = std::move(state);
}

void unregister_capture(cudaGraph_t g, const graph_state* state) noexcept {
  std::lock_guard lock(captures().mutex);
  const auto it = captures().open.find(g);
  if (it != captures().open.end() && it->second.get() == state) captures().open.erase(it);
}

std::shared_ptr<graph_state> captured_state(cudaGraph_t g) {
  std::lock_guard lock(captures().mutex);
  const auto it = captures().open.find(g);
  return it == captures().open.end() ? nullptr : it->second;
}

// Ends the capture on `s` (CUDA's capture `id`, or 0 to read it) after joining the streams forked into it and not
// joined; returns the graph (null when the capture failed) and CUDA's error; `unjoined_count` (may be null) receives
// how many forked streams were joined here.
std::pair<cudaGraph_t, cudaError_t> end_capture(cudaStream_t s, std::size_t* unjoined_count,
                                                unsigned long long id = 0) {
  auto unjoined = take_open_forks(id != 0 ? id : capture_id(s));
  for (const forked_stream& branch : unjoined) (void)link(branch.stream, branch.device, s);
  if (unjoined_count != nullptr) *unjoined_count = unjoined.size();
  cudaGraph_t g = nullptr;
  const cudaError_t rc = cudaStreamEndCapture(s, &g);
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return {g, rc};
}

std::string capture_where(unsigned long long origin, unsigned long long branch) {
  auto text = [](unsigned long long id) {
    return id == 0 ? std::string("not capturing") : fmt::format("capturing (capture {})", id);
  };
  return fmt::format("origin stream {}, branch stream {}", text(origin), text(branch));
}

//! Records in `state` that stream capture on `s` made (or added to) its graph, and whether `s` is a blocking stream.
void note_capture(graph_state& state, cudaStream_t s) noexcept {
  state.captured = true;
  unsigned flags = 0;
  if (driver::stream_get_flags(s, &flags) == CUDA_SUCCESS || cudaStreamGetFlags(s, &flags) == cudaSuccess) {
    if ((flags & cudaStreamNonBlocking) == 0) state.captured_on_blocking_stream = true;
  } else {
    (void)cudaGetLastError();
  }
}

} // namespace conveyor::detail

namespace conveyor {

namespace {

// Makes `device` current for its lifetime (the previous one restored); never throws (failures leave it as it was).
class current_device {
public:
  explicit current_device(int device) noexcept {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      (void)cudaGetLastError();
      previous_ = -1;
    } else if (previous_ == device || detail::cleared(cudaSetDevice(device)) != cudaSuccess) {
      previous_ = -1;
    }
  }
  current_device(const current_device&) = delete;
  current_device& operator=(const current_device&) = delete;
  ~current_device() {
    if (previous_ >= 0) (void)detail::cleared(cudaSetDevice(previous_));
  }

private:
  int previous_ = -1;
};

// The caller's stack pointer when it called the function whose frame address is `frame`: every address below it
// belongs to frames of functions the caller calls later (the captured code), gone once they return.
std::uintptr_t caller_stack(void* frame) noexcept {
  return reinterpret_cast<std::uintptr_t>(frame) + 2 * sizeof(void*);
}

// Whether `s` is a default stream: the legacy one (null or cudaStreamLegacy) or the per-thread one.
bool default_stream(cudaStream_t s) noexcept {
  return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

// Appends the dependencies of `n` to `todo` (none when they cannot be read).
void push_dependencies(cudaGraphNode_t n, std::vector<cudaGraphNode_t>& todo) {
  std::size_t k = 0;
  if (detail::get_dependencies(n, nullptr, &k) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  std::vector<cudaGraphNode_t> deps(k);
  if (k != 0 && detail::get_dependencies(n, deps.data(), &k) == cudaSuccess)
    todo.insert(todo.end(), deps.begin(), deps.begin() + static_cast<std::ptrdiff_t>(k));
  else (void)cudaGetLastError();
}

// True when every node of `nodes` is one of `frontier` or an ancestor of one (the branch was joined back).
bool joined_into(const cudaGraphNode_t* nodes, std::size_t count, const cudaGraphNode_t* frontier,
                 std::size_t frontier_count) {
  std::vector<cudaGraphNode_t> todo(frontier, frontier + frontier_count);
  std::unordered_set<cudaGraphNode_t> seen;
  while (!todo.empty()) {
    cudaGraphNode_t n = todo.back();
    todo.pop_back();
    if (seen.insert(n).second) push_dependencies(n, todo);
  }
  return std::all_of(nodes, nodes + count, [&](cudaGraphNode_t n) { return seen.contains(n); });
}

// The graph a capture made, `g`, with the model the session kept while capturing (the nodes added to the capture in
// progress, their resources and conditional nodes), or a new one when there is none.
graph adopt_captured(cudaGraph_t g, std::shared_ptr<detail::graph_state> state) {
  if (!state) return graph::adopt(g);
  state->handle = g;
  state->owned = true;
  return detail::access::make_graph(std::move(state));
}

// A branch of a capture with no dependencies of its own ends with the capture, unjoined (seen with CUDA 13.0, driver
// 580, on the H200: cudaStreamEndCapture succeeds and the stream is no longer capturing). Relied on from driver 13.0
// on; older drivers get the join. Read once, before a capture begins.
bool empty_branch_ends_with_capture() noexcept {
  static const bool seen = [] {
    int version = 0;
    const bool known = cudaDriverGetVersion(&version) == cudaSuccess;
    if (!known) (void)cudaGetLastError();
    return known && version >= 13000;
  }();
  return seen;
}

[[noreturn]] void throw_escape(bool legacy, std::size_t nodes) {
  if (legacy) // the hint (hint_for) names the legacy default stream and the fix
    throw cuda_error(cudaErrorStreamCaptureImplicit, "cudaStreamEndCapture", std::source_location::current(),
                     "CUDA refused the launch and invalidated the capture, so no graph was made (work on the legacy "
                     "stream from another thread during a capture fails the same way: "
                     "capture_options::catch_default_streams)");
  throw cuda_error(
      cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture", std::source_location::current(),
      fmt::format("{} node(s) were enqueued on the per-thread default stream (cudaStreamPerThread, which stream 0 "
                  "means in code compiled with --default-stream per-thread: a kernel launched without a stream "
                  "argument) while the capture was open: outside a capture that work would have run once, at "
                  "capture time, and been missing from every replay. Fix: pass the capturing stream to every "
                  "launch, copy and memset of the captured code; to use the per-thread stream as a branch on "
                  "purpose, fork and join it (conveyor::fork, conveyor::join)",
                  nodes));
}

} // namespace

namespace {
// Runs `begin` (the capture's start); when it throws, the stream watch begun for the capture (`ticket`) ends first.
template <class Begin>
void begin_watched(std::uint64_t ticket, Begin&& begin) {
  try {
    begin();
  } catch (...) {
    (void)detail::end_stream_watch(ticket);
    throw;
  }
}

// The stream watch's refusal at the capture's end (stream_watch.hpp).
[[noreturn]] void throw_foreign_work(const std::vector<detail::foreign_work>& found) {
  throw cuda_error(cudaErrorStreamCaptureIsolation, "conveyor::capture (capture_options::watch_streams)",
                   std::source_location::current(), detail::foreign_work_message(found, detail::this_thread_id()));
}

// Refuses to begin a capture (`call`) on the legacy default stream, which CUDA cannot capture.
void refuse_legacy_stream(cudaStream_t s, const char* call) {
  if (s == nullptr)
    throw cuda_error(cudaErrorStreamCaptureUnsupported, call, std::source_location::current(),
                     "the legacy default stream cannot be captured; make a conveyor::stream");
}

// The capture just begun on `s`: CUDA's id of it and the graph it makes (0 and null when CUDA cannot say).
std::pair<unsigned long long, cudaGraph_t> begun_capture(cudaStream_t s) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t g = nullptr;
  unsigned long long id = 0;
  const bool read =
      detail::cleared(detail::capture_point(s, &status, &id, &g, nullptr, nullptr, nullptr)) == cudaSuccess &&
      status == cudaStreamCaptureStatusActive;
  if (!read) return {0, nullptr};
  return {id, g};
}

// The model of the graph `g` a new capture makes; null for no graph, or out of memory (the capture goes on
// unregistered).
std::shared_ptr<detail::graph_state> new_capture_state(cudaGraph_t g, bool body_rules) noexcept {
  if (g == nullptr) return nullptr;
  try {
    auto state = std::make_shared<detail::graph_state>();
    state->handle = g;
    state->owned = false; // CUDA's until finish() takes it over
    state->conditional_body = body_rules;
    return state;
  } catch (...) { // out of memory: the capture goes on unregistered
    return nullptr;
  }
}

// Whether `target` (capture_into's graph; null for a new graph) is a conditional node's body.
bool into_conditional_body(const graph* target) {
  return target != nullptr && detail::access::state(*target)->conditional_body;
}

// Whether the current device's per-thread default stream takes part in no capture (false when CUDA cannot say).
bool per_thread_stream_idle() noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return detail::cleared(detail::capture_info(cudaStreamPerThread, &status, nullptr, nullptr, nullptr)) ==
             cudaSuccess &&
         status == cudaStreamCaptureStatusNone;
}

// Joins the per-thread default stream of `device` to the capture on `origin` as a branch with no dependency (for
// capture_into, `clear_dependencies`: the dependencies capture_into starts from are not the branch's). False when it
// already takes part in a capture, or CUDA refuses.
bool join_per_thread_stream(cudaStream_t origin, int device, bool clear_dependencies) {
  const current_device on(device);
  if (!per_thread_stream_idle()) return false;
  if (detail::cleared(detail::link(origin, device, cudaStreamPerThread)) != cudaSuccess) return false;
  if (clear_dependencies) (void)detail::cleared(detail::set_capture_dependencies(cudaStreamPerThread, nullptr, 0));
  return true;
}

// How many of the per-thread stream branch's `count` dependencies `deps` the capture on `origin` did not join: all of
// them, unless the origin's frontier reaches every one.
std::size_t unjoined_nodes(const cudaGraphNode_t* deps, std::size_t count, cudaStream_t origin) {
  const cudaGraphNode_t* frontier = nullptr;
  std::size_t frontier_count = 0;
  cudaStreamCaptureStatus origin_status = cudaStreamCaptureStatusNone;
  if (detail::cleared(detail::capture_info(origin, &origin_status, nullptr, &frontier, &frontier_count)) !=
          cudaSuccess ||
      !joined_into(deps, count, frontier, frontier_count))
    return count;
  return 0;
}

// The per-thread stream's branch at the capture's end: its capture status, its dependency count, and how many of
// those the capture on `origin` did not join.
struct guard_branch {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  std::size_t count = 0;
  std::size_t unjoined = 0;
};
guard_branch read_guard_branch(cudaStream_t guard, cudaStream_t origin) {
  guard_branch b;
  const cudaGraphNode_t* deps = nullptr;
  if (detail::cleared(detail::capture_info(guard, &b.status, nullptr, &deps, &b.count)) == cudaSuccess &&
      b.status == cudaStreamCaptureStatusActive && b.count != 0)
    b.unjoined = unjoined_nodes(deps, b.count, origin);
  return b;
}

// Whether the branch is joined back to the origin: only when it holds dependencies of its own, where a branch with
// none ends with the capture: two calls fewer a capture.
bool rejoin_needed(const guard_branch& b) noexcept {
  return b.status == cudaStreamCaptureStatusActive && (b.count != 0 || !empty_branch_ends_with_capture());
}

// Ends the stream watch `ticket` of a session going away unfinished.
void drop_stream_watch(std::uint64_t ticket) noexcept {
  try {
    (void)detail::end_stream_watch(ticket);
  } catch (...) { // out of memory: what the watch saw is not needed here
  }
}

// After an unfinished capture ended (graph `g`, CUDA's error `rc`): the graph a new capture made is destroyed; the
// target of a capture_into (`target`) is lost when the capture was invalidated.
void drop_unfinished(cudaGraph_t g, cudaError_t rc, graph* target) {
  if (target != nullptr) {
    if (rc == cudaErrorStreamCaptureInvalidated) detail::lose(*detail::access::state(*target));
    return;
  }
  if (rc == cudaSuccess && g != nullptr) (void)cudaGraphDestroy(g);
}

// Refuses finish() on a session that captures into an existing graph, or whose capture already ended.
void check_finish(bool open, const graph* target) {
  if (open && target == nullptr) return;
  throw std::logic_error(target != nullptr ? "conveyor::capture_session::finish: the session captures into an "
                                             "existing graph; call finish_into"
                                           : "conveyor::capture_session::finish: the capture already ended");
}

// Refuses finish_into() on a session that captures into a new graph, or whose capture already ended.
void check_finish_into(bool open, const graph* target) {
  if (open && target != nullptr) return;
  throw std::logic_error(target == nullptr ? "conveyor::capture_session::finish_into: the session captures into "
                                             "a new graph; call finish"
                                           : "conveyor::capture_session::finish_into: the capture already ended");
}

// Refuses a capture that ended with streams forked into it and not joined.
void check_joined(std::size_t unjoined) {
  if (unjoined != 0)
    throw cuda_error(cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture", std::source_location::current(),
                     fmt::format("{} stream(s) forked into the capture were not joined", unjoined));
}

// Why a capture that ended without escaped work made no graph: unjoined forks, the stream watch's foreign work (CUDA
// ended it), else CUDA's error.
[[noreturn]] void throw_failed_end(cudaError_t rc, std::size_t unjoined,
                                   const std::vector<detail::foreign_work>& foreign) {
  check_joined(unjoined);
  if (rc == cudaSuccess) throw_foreign_work(foreign);
  throw cuda_error(rc, "cudaStreamEndCapture", std::source_location::current(),
                   rc == cudaErrorStreamCaptureInvalidated ? "the capture was invalidated and no graph was made" : "");
}

// The capture on `s` before it ends: its status, and the nodes the next captured node would depend on (copied: CUDA's
// array is valid until the capture ends). \throws cuda_error when CUDA cannot say.
struct capture_frontier {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  std::vector<cudaGraphNode_t> nodes;
};
capture_frontier frontier_of(cudaStream_t s) {
  capture_frontier out;
  const cudaGraphNode_t* deps = nullptr;
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::capture_info(s, &out.status, nullptr, &deps, &count));
  if (out.status == cudaStreamCaptureStatusActive && deps != nullptr) out.nodes.assign(deps, deps + count);
  return out;
}

// Refuses a capture_into whose capture was invalidated, left forked streams unjoined, failed to end, or was seen
// enqueueing work outside every capture.
void check_into_ended(cudaStreamCaptureStatus status, cudaError_t rc, std::size_t unjoined,
                      const std::vector<detail::foreign_work>& foreign) {
  if (status == cudaStreamCaptureStatusInvalidated)
    throw cuda_error(cudaErrorStreamCaptureInvalidated, "capture_into", std::source_location::current(),
                     "the capture was invalidated by an illegal call, and CUDA freed the graph it captured into (and "
                     "the graph holding it, for a conditional body): build or capture it again");
  check_joined(unjoined);
  if (rc != cudaSuccess) throw cuda_error(rc, "cudaStreamEndCapture", std::source_location::current());
  if (!foreign.empty()) throw_foreign_work(foreign);
}

// The nodes of `g` whose handles are `handles`.
std::vector<node> wrap_all(const graph& g, const std::vector<cudaGraphNode_t>& handles) {
  std::vector<node> nodes;
  nodes.reserve(handles.size());
  for (auto* handle : handles) nodes.push_back(g.wrap(handle));
  return nodes;
}
} // namespace

capture_session::capture_session(const stream& s, capture_options options) : stream_(s.get()) {
  refuse_legacy_stream(stream_, "cudaStreamBeginCapture(legacy default stream)");
  (void)empty_branch_ends_with_capture(); // read before the capture (once a process)
  watch_ = detail::begin_stream_watch(options.watch_streams, stream_);
  begin_watched(watch_, [&] {
    CONVEYOR_CHECK(cudaStreamBeginCapture(stream_, static_cast<cudaStreamCaptureMode>(options.mode)));
  });
  open_ = true;
  const auto [id, g] = begun_capture(stream_);
  capture_id_ = id; // for the end (the forks still open), one query fewer
  if (auto state = new_capture_state(g, options.body_rules)) register_graph(g, std::move(state));
  begin_checks(options, caller_stack(__builtin_frame_address(0)), s.device());
}

capture_session::capture_session(graph& target, const stream& s, const node_list& deps, capture_options options) :
    stream_(s.get()),
    target_(&target) {
  if (!detail::access::all_in(deps, detail::nonempty_state(target, "conveyor::capture_into").get()))
    throw std::invalid_argument("conveyor::capture_into: a dependency belongs to another graph");
  if (deps.typed())
    throw std::invalid_argument("conveyor::capture_into: the dependencies to capture after must be full; to make the "
                                "first captured kernel overlap them, launch it with launch_config::programmatic "
                                "(conveyor::launch), which capture turns into programmatic edges");
  refuse_legacy_stream(stream_, "cudaStreamBeginCaptureToGraph(legacy default stream)");
  detail::check_not_lost(*detail::access::state(target), "conveyor::capture_into");
  nodes_before_ = target.node_count();
  const auto handles = deps.handles();
  (void)empty_branch_ends_with_capture(); // read before the capture (once a process)
  watch_ = detail::begin_stream_watch(options.watch_streams, stream_);
  begin_watched(watch_, [&] {
    CONVEYOR_CHECK(cudaStreamBeginCaptureToGraph(stream_, target.get(), handles.data(), nullptr, handles.size(),
                                                 static_cast<cudaStreamCaptureMode>(options.mode)));
  });
  open_ = true;
  register_graph(target.get(), detail::access::state(target));
  begin_checks(options, caller_stack(__builtin_frame_address(0)), s.device());
}

namespace detail {
bool is_conditional_body(const graph& g) noexcept {
  const auto& state = access::state(g);
  return state != nullptr && state->conditional_body; // an empty graph: capture_session refuses it
}
} // namespace detail

void capture_session::begin_checks(const capture_options& options, std::uintptr_t frame, int device) {
  frame_ = frame;
  host_memory_ = options.host_memory;
  if (!options.catch_default_streams || default_stream(stream_)) return;
  // Not for a conditional body: the check makes CUDA invalidate the capture of a legacy-stream launch, and an
  // invalidated capture into a conditional body corrupts CUDA 13.0's state (driver 580, H200: destroying the parent
  // graph, or later calls, crash), which no check may risk. capture_into checks a body's callable by a dry run into
  // a graph of its own first.
  if (into_conditional_body(target_)) return;
  // The per-thread default stream of the capture's device joins the capture with no dependency: a launch on it
  // becomes a node of a branch nothing joins, and a launch on the legacy stream (which synchronises with every
  // blocking stream, the per-thread one included) is refused by CUDA. Not when it already takes part in a capture.
  if (!join_per_thread_stream(stream_, device, target_ != nullptr)) return;
  guard_ = cudaStreamPerThread;
  guard_device_ = device;
}

void capture_session::register_graph(cudaGraph_t g, std::shared_ptr<detail::graph_state> state) noexcept {
  try {
    detail::register_capture(g, state);
    registered_ = g;
    state_ = std::move(state);
  } catch (...) { // out of memory: the capture goes on unregistered
  }
}

void capture_session::unregister_graph() noexcept {
  if (registered_ != nullptr) detail::unregister_capture(registered_, state_.get());
  registered_ = nullptr;
}

capture_session::escape capture_session::end_guard() noexcept {
  escape out;
  if (guard_ == nullptr) return out;
  const current_device on(guard_device_);
  out.legacy = cudaPeekAtLastError() == cudaErrorStreamCaptureImplicit;
  const guard_branch branch = read_guard_branch(guard_, stream_);
  out.nodes = branch.unjoined;
  if (rejoin_needed(branch)) (void)detail::cleared(detail::link(guard_, guard_device_, stream_));
  guard_ = nullptr;
  return out;
}

void capture_session::check_nodes(cudaGraph_t g, detail::graph_state* owner, std::size_t first) const {
  detail::check_captured_nodes(g, first, owner, owner, detail::frames_below(frame_), host_memory_);
}

capture_session::~capture_session() {
  unregister_graph();
  drop_stream_watch(std::exchange(watch_, 0));
  if (!open_) return;
  if (target_ != nullptr) detail::access::state(*target_)->clusters.reset(); // nodes were added, not read
  (void)end_guard();
  auto [g, rc] = detail::end_capture(stream_, nullptr, capture_id_);
  drop_unfinished(g, rc, target_);
  (void)cudaGetLastError();
}

graph capture_session::finish() {
  check_finish(open_, target_);
  open_ = false;
  unregister_graph();
  const escape escaped = end_guard();
  std::size_t unjoined = 0;
  auto [g, rc] = detail::end_capture(stream_, &unjoined, capture_id_);
  const auto foreign = detail::end_stream_watch(std::exchange(watch_, 0));
  if (rc == cudaSuccess && unjoined == 0 && !escaped && foreign.empty()) {
    graph out = adopt_captured(g, std::move(state_));
    detail::note_capture(*detail::access::state(out), stream_);
    check_nodes(out.get(), detail::access::state(out).get(), 0); // throws: `out` destroys the graph
    return out;
  }
  if (g != nullptr) (void)cudaGraphDestroy(g);
  if (escaped) throw_escape(escaped.legacy, escaped.nodes);
  throw_failed_end(rc, unjoined, foreign);
}

std::vector<node> capture_session::finish_into() {
  check_finish_into(open_, target_);
  const capture_frontier frontier = frontier_of(stream_);
  const auto& state = detail::access::state(*target_);
  // Unknown until the walk below reads the added nodes' (a throw before it leaves them to be read at an update).
  auto clusters = std::exchange(state->clusters, std::nullopt);
  open_ = false;
  unregister_graph();
  const escape escaped = end_guard();
  std::size_t unjoined = 0;
  auto [g, rc] = detail::end_capture(stream_, &unjoined, capture_id_);
  const auto foreign = detail::end_stream_watch(std::exchange(watch_, 0));
  (void)g; // the target graph itself
  if (frontier.status == cudaStreamCaptureStatusInvalidated || rc == cudaErrorStreamCaptureInvalidated ||
      escaped.legacy)
    detail::lose(*detail::access::state(*target_)); // CUDA freed the target's definition
  if (escaped) throw_escape(escaped.legacy, escaped.nodes);
  check_into_ended(frontier.status, rc, unjoined, foreign);
  detail::note_capture(*state, stream_);
  state->clusters = std::move(clusters);
  check_nodes(target_->get(), state.get(), nodes_before_);
  return wrap_all(*target_, frontier.nodes);
}

void fork(const stream& origin, const stream& branch) {
  const unsigned long long id = detail::capture_id(origin.get());
  const unsigned long long branch_id = detail::capture_id(branch.get());
  if (branch_id != 0 && branch_id != id)
    throw cuda_error(cudaErrorStreamCaptureMerge, "conveyor::fork", std::source_location::current(),
                     fmt::format("{}: the branch stream is already capturing {}, and forking onto it would merge two "
                                 "captures (CUDA invalidates both). Nothing was enqueued; both streams are as before. "
                                 "Fork onto a stream that is not capturing",
                                 detail::capture_where(id, branch_id),
                                 id == 0 ? "while the origin is not" : "another graph"));
  const int branch_device = branch.device();
  CONVEYOR_CHECK(detail::link(origin.get(), origin.device(), branch.get()));
  if (id == 0) return; // not capturing: an ordinary cross-stream dependency
  std::lock_guard lock(detail::forks().mutex);
  detail::forks().open[id].push_back({branch.get(), branch_device});
}

void join(const stream& origin, const stream& branch) {
  const unsigned long long id = detail::capture_id(origin.get());
  const unsigned long long branch_id = detail::capture_id(branch.get());
  if (branch_id != id)
    throw cuda_error(cudaErrorStreamCaptureIsolation, "conveyor::join", std::source_location::current(),
                     fmt::format("{}: join needs both streams in the same capture (fork the branch from the origin "
                                 "first) or both outside captures. Nothing was enqueued; both streams are as before",
                                 detail::capture_where(id, branch_id)));
  CONVEYOR_CHECK(detail::link(branch.get(), branch.device(), origin.get()));
  if (id == 0) return;
  std::lock_guard lock(detail::forks().mutex);
  auto it = detail::forks().open.find(id);
  if (it == detail::forks().open.end()) return;
  auto& streams = it->second;
  streams.erase(std::remove_if(streams.begin(), streams.end(),
                               [&](const detail::forked_stream& f) { return f.stream == branch.get(); }),
                streams.end());
}

} // namespace conveyor
