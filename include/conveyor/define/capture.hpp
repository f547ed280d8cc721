#pragma once
//! \file capture.hpp
//! Stream capture into a conveyor::graph: exception-safe, with fork/join of extra streams and
//! capture into an existing graph (CUDA Programming Guide, "Creating a Graph Using Stream
//! Capture").

#include "conveyor/define/graph.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

//! Which CUDA calls other threads may make during a capture (`cudaStreamCaptureMode`).
enum class capture_mode {
  global = cudaStreamCaptureModeGlobal, //!< unsafe calls are refused in every thread
  //! refused only in the capturing thread (the default)
  //! not refused (the caller takes responsibility)
  thread_local_ = cudaStreamCaptureModeThreadLocal,
  relaxed = cudaStreamCaptureModeRelaxed,
};

//! What a capture checks of the host memory its copy and host nodes use, when it ends. A replay
//! re-reads every host address a node holds (a copy's source or destination, a host function's data
//! pointer) at every launch, long after the code that captured it has returned.
enum class host_memory_check : std::uint8_t {
  //! Refuse host addresses in stack frames that returned before the capture ended: a local variable
  //! or temporary of the captured code (`cudaMemcpyAsync(d, &local, ...)`), which a replay would
  //! read after it is gone. Pageable heap memory is let through: choosing this **declares** that
  //! every pageable buffer a captured copy reads or writes outlives the graph and holds, at each
  //! replay, what the eager code would have copied. Costs one pass over the graph's nodes when the
  //! capture ends.
  returned_frames,
  //! As returned_frames, and also record every other pageable host buffer a copy node reads or
  //! writes (cudaPointerGetAttributes: cudaMemoryTypeUnregistered), on the graph: conveyor::graphed
  //! warns of them.
  pageable,
  //! As returned_frames, and refuse every other pageable host buffer a copy node reads or writes
  //! too: a helper that uploads from a local std::vector freed when it returns would leave a node
  //! that reads freed heap memory at every replay. The default. Costs one cudaPointerGetAttributes
  //! per host side of each copy node.
  refuse_pageable,
  //! Check nothing: no node is read when the capture ends.
  off,
};

//! Whether a capture watches for work that misses it: a kernel launch, copy, memset, host function
//! or graph launch enqueued while the capture is open, by any thread of the process, on a stream
//! that takes part in no capture (a library handle bound once to another stream, a side stream the
//! code forgot to fork, a helper thread's per-thread default stream, the legacy default stream).
//! Such work runs once, at capture time, and no replay runs it: the capture's end throws a
//! cuda_error naming each call, its kernel, its stream and thread, and the fix. The watch
//! subscribes to CUPTI's driver-API callbacks (libcupti, loaded at the first watch) while watched
//! captures are open, and lets go when the last one ends; CUPTI takes one subscriber per process
//! (compute-sanitizer, Nsight Systems and conveyor::profile::module_images are subscribers too).
//! Costs are in docs/benchmarks.md ("The stream watch and the other capture checks").
enum class stream_watch : std::uint8_t {
  //! Watch when the environment variable CONVEYOR_WATCH_STREAMS is "1" (as `on`), not otherwise.
  //! The default.
  environment,
  //! Never watch.
  off,
  //! Watch every thread's work; the capture's start throws std::runtime_error when CUPTI's callback
  //! API cannot be had (libcupti not found, or another subscriber holds it), saying why.
  on,
  //! Watch the capturing thread's own work when CUPTI's callback API can be had, else capture
  //! unwatched: a default that never refuses a program whose other threads run eager work on
  //! purpose meanwhile. conveyor::graphed watches its first capture of each shape so, unless
  //! CONVEYOR_WATCH_STREAMS is "0" (never) or "1" (every thread's work, as `on`).
  if_available,
};

//! Keeps the stream watch's CUPTI subscription from one watched capture to the next, so that a
//! batch of watched captures (graphed::prepare's buckets) subscribes once instead of once a
//! capture; while no watch is open, the callbacks record nothing. Watches nothing by itself.
//! Made by hold_stream_watch; movable, not copyable; the destructor lets go (never throws).
//! Thread safety: a hold may be ended on any thread.
class stream_watch_hold {
public:
  //! Holds nothing.
  stream_watch_hold() noexcept = default;
  //! Takes over `other`'s hold.
  stream_watch_hold(stream_watch_hold&& other) noexcept :
      held_(std::exchange(other.held_, false)) {}
  //! Lets go of this hold, then takes over `other`'s.
  stream_watch_hold& operator=(stream_watch_hold&& other) noexcept;
  stream_watch_hold(const stream_watch_hold&) = delete;
  stream_watch_hold& operator=(const stream_watch_hold&) = delete;
  //! Lets go: CUPTI's subscription ends when no watch is open or held any more.
  ~stream_watch_hold();
  //! Whether the subscription is held (false when the watch is off or CUPTI cannot be had).
  [[nodiscard]] bool held() const noexcept { return held_; }

private:
  friend stream_watch_hold hold_stream_watch(stream_watch);
  explicit stream_watch_hold(bool held) noexcept : held_(held) {}
  bool held_ = false;
};

//! Holds the stream watch's subscription for the captures that `requested` would watch (resolved
//! with CONVEYOR_WATCH_STREAMS, as a capture resolves it): subscribes now when no watch is open.
//! A hold of a watch that is off, or that CUPTI refuses (another subscriber, no libcupti), holds
//! nothing: each capture then acts as without it (stream_watch::on throws at its start, saying
//! why). \throws std::bad_alloc only.
[[nodiscard]] stream_watch_hold
hold_stream_watch(stream_watch requested = stream_watch::if_available);

//! Options of a capture. A plain value; converts from a capture_mode
//! (`capture(s, f, capture_mode::global)`).
struct capture_options {
  //! Which CUDA calls other threads may make during the capture.
  capture_mode mode = capture_mode::thread_local_;
  //! Catch work that escapes the capture on a default stream: a kernel or copy launched on the
  //! legacy default stream (stream 0, a forgotten stream argument) or the per-thread default stream
  //! (stream 0 in code compiled with `--default-stream per-thread`) runs once, at capture time, and
  //! is missing from every replay. With this on, the capturing thread's per-thread default stream
  //! takes part in the capture (forked at the start, joined back at the end only when work was
  //! enqueued on it; no node is added): a launch on the legacy stream then needs an implicit
  //! dependency on a capturing stream, which CUDA refuses (cudaErrorStreamCaptureImplicit) and
  //! which invalidates the capture; a launch on the per-thread stream becomes a node on a branch
  //! nothing joins. Either way the capture's end throws a cuda_error naming the default stream and
  //! the fix. Side effect: while the capture is open, work on the legacy default stream from any
  //! thread of the process fails the same way (CUDA's legacy-stream rule); turn this off for a
  //! capture that must run beside such work. Left out for a capture that is itself on a default
  //! stream, or while the per-thread stream is already part of another open capture of the thread
  //! (that capture guards it), and for a capture into a conditional node's body: there CUDA 13.0
  //! (driver 580) corrupts its own state when the capture is invalidated (seen on the H200:
  //! destroying the parent graph, or later calls, crash), so such a launch cannot be refused
  //! safely.
  bool catch_default_streams = true;
  //! What to check of the host memory the captured nodes use (host_memory_check).
  host_memory_check host_memory = host_memory_check::refuse_pageable;
  //! Check the capture (into a new graph) by a conditional node's body's rules: the node kinds CUDA
  //! does not allow in a body (memory allocation and free, host, event nodes) are refused when it
  //! ends, and capture_host refuses to add a host node. capture_into sets it for the dry run of a
  //! body's callable, so that what the body would refuse is refused before anything is captured
  //! into the body. Ignored by capture_into itself (a body is checked so anyway).
  bool body_rules = false;
  //! Watch for work enqueued on streams outside every capture while this one is open
  //! (stream_watch).
  stream_watch watch_streams = stream_watch::environment;

  //! The defaults.
  capture_options() = default;
  //! The defaults with capture mode `m`.
  capture_options(capture_mode m) noexcept :
      mode(m) {} // NOLINT(google-explicit-constructor): capture_mode converts
};

//! One capture on one stream, as an RAII object: the constructor begins it
//! (`cudaStreamBeginCapture`, or `cudaStreamBeginCaptureToGraph` for an existing graph), finish()
//! ends it, and a session destroyed unfinished (an exception, an early return) ends the capture and
//! discards what it captured, joining the streams forked into it, so that every stream is usable
//! again. capture() and capture_into() are built on it. When it ends it checks what capture_options
//! asks: work escaped to a default stream, host memory of frames that returned (those of the
//! functions called after the session began: capture() and capture_into() run the captured code in
//! a frame of its own; block-scope locals of the function holding the session itself are not told
//! from its live ones). Thread safety: use a session from the thread that began it (CUDA's rule for
//! thread_local_ and global modes); sessions on different streams in different threads are
//! independent.
class capture_session {
public:
  //! Begins capturing `s` into a new graph.
  //! \param s       the stream to capture; make it with cudaStreamNonBlocking (the default
  //!        for conveyor::stream) so that it does not synchronise with the legacy default stream
  //! \param options capture mode (thread_local_ unless other threads must be allowed unsafe
  //!        calls) and checks
  //! \throws cuda_error when capture cannot begin (the legacy default stream, a stream
  //!         already capturing).
  explicit capture_session(const stream& s, capture_options options = {});
  //! Begins capturing `s` into the existing graph `target`, after `deps` (nodes of `target`).
  //! \throws std::invalid_argument when `target` is empty (moved-from) or a dependency belongs
  //!         to another graph; cuda_error when capture cannot begin.
  capture_session(graph& target, const stream& s, const node_list& deps = {},
                  capture_options options = {});
  capture_session(const capture_session&) = delete;
  capture_session& operator=(const capture_session&) = delete;
  //! Ends an unfinished capture and discards it (nodes already added to an existing target graph
  //! stay there, unless the capture was invalidated: see finish_into). Never throws.
  ~capture_session();

  //! Ends the capture into a new graph and returns it (`cudaStreamEndCapture`). Streams forked into
  //! the capture and not joined are joined first, and the call throws
  //! cudaErrorStreamCaptureUnjoined naming how many.
  //! \throws std::logic_error when the session captures into an existing graph or was
  //!         already finished; cuda_error when the capture was invalidated by an illegal call (the
  //!         message says which calls are illegal and what to use instead), work was enqueued on a
  //!         default stream (catch_default_streams), or forked streams were left unjoined;
  //!         std::invalid_argument when a node uses host memory of a frame that returned or
  //!         pageable heap memory (host_memory_check::refuse_pageable, the default), naming the
  //!         node, the address, where it lies and the fix. The graph is destroyed before any of
  //!         these is thrown.
  [[nodiscard]] graph finish();
  //! Ends the capture into the existing graph and returns the frontier: the captured nodes that
  //! later work should depend on. When the capture was invalidated (an illegal call, work on the
  //! legacy default stream), CUDA 13.0 frees the target graph's definition — and, for a conditional
  //! body, destroying the graph holding it crashes — so the target (and that parent) is marked
  //! lost: it may only be destroyed, and every other use throws std::logic_error saying why.
  //! \throws std::logic_error when the session captures into a new graph or was already
  //!         finished; cuda_error and std::invalid_argument as finish() (the nodes captured stay in
  //!         the graph, unless it was invalidated).
  std::vector<node> finish_into();

private:
  // Work found on a default stream when the capture ended.
  struct escape {
    // a launch on the legacy default stream was refused (cudaErrorStreamCaptureImplicit)
    bool legacy = false;
    std::size_t nodes = 0; // nodes captured on the per-thread default stream and not joined
    explicit operator bool() const noexcept { return legacy || nodes != 0; }
  };
  void begin_checks(const capture_options& options, std::uintptr_t frame, int device);
  escape end_guard() noexcept;
  void check_nodes(cudaGraph_t g, detail::graph_state* owner, std::size_t first) const;
  void register_graph(cudaGraph_t g, std::shared_ptr<detail::graph_state> state) noexcept;
  void unregister_graph() noexcept;

  cudaStream_t stream_ = nullptr;
  graph* target_ = nullptr;
  bool open_ = false;
  // CUDA's id of the capture, when read at its start (0: read at its end)
  unsigned long long capture_id_ = 0;
  // The checks (capture_options): the per-thread default stream forked into the capture (null: not
  // guarded) and its device; where the stack frames that return before the capture ends begin
  // (addresses below it, down to the end of the thread's stack, are gone after it); what to check
  // of host memory; the number of nodes of the target graph before the capture (capture_into: only
  // the captured ones are checked).
  cudaStream_t guard_ = nullptr;
  int guard_device_ = 0;
  std::uintptr_t frame_ = 0;
  host_memory_check host_memory_ = host_memory_check::returned_frames;
  std::uint64_t watch_ = 0; // the stream watch's ticket (0: not watched)
  std::size_t nodes_before_ = 0;
  // The model of the graph being captured into — a new one for capture(), whose handle is CUDA's
  // capture graph (not owned until finish() hands it over), the target's for capture_into —
  // registered under that graph while the capture is open, so that nodes added to the capture in
  // progress (capture_nodes.hpp: host callables, conditional nodes) are owned by and recorded in
  // the graph. Null when the capture's graph could not be read.
  std::shared_ptr<detail::graph_state> state_;
  cudaGraph_t registered_ = nullptr;
};

namespace detail {
//! Calls the captured code `f` as `f(s)` or `f()`, in a frame of its own (never inlined into the
//! caller): the code's locals and temporaries then lie in frames that have returned when the
//! capture ends, where the capture's host memory check finds a copy node that still points at them
//! (host_memory_check::returned_frames).
template <class F>
[[gnu::noinline]] void run_captured(F& f, const stream& s) {
  if constexpr (std::is_invocable_v<F&, const stream&>) f(s);
  else f();
}
//! True when `g` is a conditional node's body (conditional.hpp); false for an empty (moved-from)
//! graph. Never throws.
[[nodiscard]] bool is_conditional_body(const graph& g) noexcept;
} // namespace detail

//! Captures the work `f` enqueues on `s` into a new graph. `f` is called as `f(s)` or `f()`. If `f`
//! throws, the capture is ended, the partial graph destroyed, forked streams released, and the
//! exception propagates: the stream is usable again. `options` (or a capture_mode) chooses the mode
//! and the checks made at the end: work escaped to a default stream, host memory of frames that
//! returned and pageable heap memory in copies are refused by default (capture_options::host_memory
//! says how to declare a pageable buffer that outlives the graph).
//! \throws cuda_error and std::invalid_argument as capture_session and
//!         capture_session::finish; whatever `f` throws.
template <class F>
[[nodiscard]] graph capture(const stream& s, F&& f, capture_options options = {},
                            std::source_location where = std::source_location::current()) {
  const detail::api_scope scope("conveyor::capture", where);
  capture_session session(s, options);
  detail::run_captured(f, s);
  return session.finish();
}

//! Captures the work `f` enqueues on `s` into the existing graph `g`, after `deps`. Returns the
//! frontier: the captured nodes that later work should depend on. Exception-safe as capture();
//! nodes already added to `g` by a capture that throws stay in `g`. Into a conditional node's body,
//! work escaping to a default stream is caught by a dry run first: `f` is captured into a graph of
//! its own with the check (an invalidated capture into a body corrupts CUDA 13.0's state, so the
//! body's own capture cannot be the one that fails), then into the body; `f` is then called twice.
//! \throws std::invalid_argument, before `f` is called, when `g` is empty (moved-from) or a
//!         dependency belongs to another graph; cuda_error as capture().
template <class F>
std::vector<node> capture_into(graph& g, const stream& s, F&& f, const node_list& deps = {},
                               capture_options options = {},
                               std::source_location where = std::source_location::current()) {
  const detail::api_scope scope("conveyor::capture_into", where);
  if (options.catch_default_streams && detail::is_conditional_body(g)) {
    capture_options dry = options;
    dry.host_memory = host_memory_check::off;
    dry.body_rules = true;
    capture_session check(s, dry);
    detail::run_captured(f, s);
    (void)check.finish(); // throws when work escaped; the dry graph is destroyed either way
  }
  capture_session session(g, s, deps, options);
  detail::run_captured(f, s);
  return session.finish_into();
}

//! Makes later work on `branch` depend on all work enqueued on `origin` so far (an event recorded
//! on `origin`, waited on by `branch`). Inside a capture on `origin` this makes `branch` join the
//! capture, and the work on it becomes a parallel branch of the graph until join(); outside a
//! capture it is an ordinary cross-stream dependency, so one function can serve the eager and the
//! captured run. The event is one timing-free event per thread and device, created on first use and
//! reused (cudaStreamWaitEvent takes the record current at the call), so fork and join create and
//! destroy nothing. The two streams may belong to different devices: the event is recorded on the
//! device of the stream that records it (stream::device()), and a capture forked onto a stream of
//! another device makes a multi-device graph whose nodes run on the device of the stream they were
//! captured on (CUDA Programming Guide, "Multi-device graphs"; describe() shows each node's
//! device).
//! \throws cuda_error (cudaErrorStreamCaptureMerge, before any CUDA call is made, so that
//!         both captures stay valid) when `branch` is already capturing into another graph, or is
//!         capturing while `origin` is not; cuda_error when the event calls fail (e.g. a stream
//!         handle is invalid).
void fork(const stream& origin, const stream& branch);

//! Makes later work on `origin` wait for everything enqueued on `branch` so far. Inside a capture,
//! every forked stream must be joined before the capture ends.
//! \throws cuda_error (cudaErrorStreamCaptureIsolation, before any CUDA call is made) when
//!         the two streams are not in the same capture (one capturing and the other not, or two
//!         different captures); cuda_error when the event calls fail.
void join(const stream& origin, const stream& branch);

} // namespace conveyor
