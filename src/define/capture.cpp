#include "conveyor/define/capture.hpp"

#include "conveyor/error.hpp"
#include "detail/compat.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace conveyor::detail {

namespace {

// Streams forked into each capture (by capture id) and not yet joined, so that a failing or throwing capture
// can join them back before ending, which releases them from capture mode.
struct fork_registry {
  std::mutex mutex;
  std::unordered_map<unsigned long long, std::vector<cudaStream_t>> open;
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

std::vector<cudaStream_t> take_open_forks(unsigned long long id) {
  std::lock_guard lock(forks().mutex);
  auto it = forks().open.find(id);
  if (it == forks().open.end()) return {};
  auto streams = std::move(it->second);
  forks().open.erase(it);
  return streams;
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
  // The event of `device`, the current device, created on first use. Returns the creation error, if any.
  cudaError_t get(int device, cudaEvent_t* out) {
    for (const auto& [d, e] : events_)
      if (d == device) {
        *out = e;
        return cudaSuccess;
      }
    cudaEvent_t e = nullptr;
    const cudaError_t rc = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (rc != cudaSuccess) return rc;
    events_.emplace_back(device, e);
    *out = e;
    return cudaSuccess;
  }
  // Forgets (and destroys) the event of `device`, after CUDA refused it.
  void drop(int device) noexcept {
    for (auto it = events_.begin(); it != events_.end(); ++it)
      if (it->first == device) {
        (void)cudaEventDestroy(it->second);
        events_.erase(it);
        return;
      }
  }

private:
  std::vector<std::pair<int, cudaEvent_t>> events_;
};

cudaError_t record_and_wait(cudaEvent_t e, cudaStream_t from, cudaStream_t to) {
  cudaError_t rc = cudaEventRecord(e, from);
  return rc == cudaSuccess ? cudaStreamWaitEvent(to, e, 0) : rc;
}

// Makes `to` wait for all work enqueued on `from` so far, through the thread's event for the current device (the
// streams must belong to it, as they must for cudaEventRecord with an event made there; cudaStreamGetDevice would
// say which device a stream belongs to, but CUDA refuses it on a capturing stream). Returns the first error.
cudaError_t link(cudaStream_t from, cudaStream_t to) {
  thread_local link_events events;
  int device = 0;
  cudaError_t rc = cudaGetDevice(&device);
  if (rc != cudaSuccess) return rc;
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

} // namespace

void begin_capture(const stream& s, capture_mode mode) {
  if (s.get() == nullptr)
    throw cuda_error(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture(legacy default stream)",
                     std::source_location::current(),
                     "the legacy default stream cannot be captured; make a conveyor::stream");
  CONVEYOR_CHECK(cudaStreamBeginCapture(s.get(), static_cast<cudaStreamCaptureMode>(mode)));
}

void begin_capture_to_graph(const stream& s, const graph& g, const node_list& deps, capture_mode mode) {
  if (!deps.all_in(g.state().get()))
    throw std::invalid_argument("conveyor::capture_into: a dependency belongs to another graph");
  const auto handles = deps.handles();
  CONVEYOR_CHECK(cudaStreamBeginCaptureToGraph(s.get(), g.get(), handles.data(), nullptr, handles.size(),
                                               static_cast<cudaStreamCaptureMode>(mode)));
}

std::vector<cudaGraphNode_t> capture_frontier(const stream& s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  std::size_t count = 0;
  CONVEYOR_CHECK(capture_info(s.get(), &status, nullptr, &deps, &count));
  if (status == cudaStreamCaptureStatusInvalidated)
    throw cuda_error(cudaErrorStreamCaptureInvalidated, "capture_into", std::source_location::current());
  return {deps, deps + count};
}

cudaGraph_t end_capture(const stream& s, bool owns_graph) {
  auto unjoined = take_open_forks(capture_id(s.get()));
  for (cudaStream_t branch : unjoined) (void)link(branch, s.get());
  cudaGraph_t g = nullptr;
  cudaError_t rc = cudaStreamEndCapture(s.get(), &g);
  if (rc == cudaSuccess && unjoined.empty()) return g;
  if (g != nullptr && owns_graph) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
  if (!unjoined.empty())
    throw cuda_error(cudaErrorStreamCaptureUnjoined, "cudaStreamEndCapture", std::source_location::current(),
                     fmt::format("{} stream(s) forked into the capture were not joined", unjoined.size()));
  throw cuda_error(rc, "cudaStreamEndCapture", std::source_location::current(),
                   rc == cudaErrorStreamCaptureInvalidated ? "the capture was invalidated and no graph was made"
                                                           : "");
}

void abort_capture(const stream& s, bool owns_graph) noexcept {
  for (cudaStream_t branch : take_open_forks(capture_id(s.get()))) (void)link(branch, s.get());
  cudaGraph_t g = nullptr;
  if (cudaStreamEndCapture(s.get(), &g) == cudaSuccess && g != nullptr && owns_graph) (void)cudaGraphDestroy(g);
  (void)cudaGetLastError();
}

} // namespace conveyor::detail

namespace conveyor {

void fork(const stream& origin, const stream& branch) {
  CONVEYOR_CHECK(detail::link(origin.get(), branch.get()));
  const unsigned long long id = detail::capture_id(origin.get());
  if (id == 0) return; // not capturing: an ordinary cross-stream dependency
  std::lock_guard lock(detail::forks().mutex);
  detail::forks().open[id].push_back(branch.get());
}

void join(const stream& origin, const stream& branch) {
  CONVEYOR_CHECK(detail::link(branch.get(), origin.get()));
  unsigned long long id = detail::capture_id(origin.get());
  std::lock_guard lock(detail::forks().mutex);
  auto it = detail::forks().open.find(id);
  if (it == detail::forks().open.end()) return;
  auto& streams = it->second;
  streams.erase(std::remove(streams.begin(), streams.end(), branch.get()), streams.end());
}

} // namespace conveyor
