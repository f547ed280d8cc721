#pragma once
//! \file capture.hpp
//! Stream capture into a conveyor::graph: exception-safe, with fork/join of extra streams and capture into an
//! existing graph (CUDA Programming Guide, "Creating a Graph Using Stream Capture").

#include "conveyor/define/graph.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

//! Which CUDA calls other threads may make during a capture (`cudaStreamCaptureMode`).
enum class capture_mode {
  global = cudaStreamCaptureModeGlobal,           //!< unsafe calls are refused in every thread
  thread_local_ = cudaStreamCaptureModeThreadLocal, //!< refused only in the capturing thread (the default)
  relaxed = cudaStreamCaptureModeRelaxed,         //!< not refused (the caller takes responsibility)
};

//! One capture on one stream, as an RAII object: the constructor begins it (`cudaStreamBeginCapture`, or
//! `cudaStreamBeginCaptureToGraph` for an existing graph), finish() ends it, and a session destroyed unfinished
//! (an exception, an early return) ends the capture and discards what it captured, joining the streams forked into
//! it, so that every stream is usable again. capture() and capture_into() are built on it.
//! Thread safety: use a session from the thread that began it (CUDA's rule for thread_local_ and global modes);
//! sessions on different streams in different threads are independent.
class capture_session {
public:
  //! Begins capturing `s` into a new graph.
  //! \param s    the stream to capture; make it with cudaStreamNonBlocking (the default for conveyor::stream) so
  //!             that it does not synchronise with the legacy default stream
  //! \param mode capture_mode::thread_local_ unless other threads must be allowed unsafe calls
  //! \throws cuda_error when capture cannot begin (the legacy default stream, a stream already capturing).
  explicit capture_session(const stream& s, capture_mode mode = capture_mode::thread_local_);
  //! Begins capturing `s` into the existing graph `target`, after `deps` (nodes of `target`).
  //! \throws std::invalid_argument when a dependency belongs to another graph; cuda_error when capture cannot begin.
  capture_session(graph& target, const stream& s, const node_list& deps = {},
                  capture_mode mode = capture_mode::thread_local_);
  capture_session(const capture_session&) = delete;
  capture_session& operator=(const capture_session&) = delete;
  //! Ends an unfinished capture and discards it (nodes already added to an existing target graph stay there).
  //! Never throws.
  ~capture_session();

  //! Ends the capture into a new graph and returns it (`cudaStreamEndCapture`). Streams forked into the capture
  //! and not joined are joined first, and the call throws cudaErrorStreamCaptureUnjoined naming how many.
  //! \throws std::logic_error when the session captures into an existing graph or was already finished;
  //!         cuda_error when the capture was invalidated by an illegal call (the message says which calls are
  //!         illegal and what to use instead), or forked streams were left unjoined.
  [[nodiscard]] graph finish();
  //! Ends the capture into the existing graph and returns the frontier: the captured nodes that later work should
  //! depend on. \throws std::logic_error when the session captures into a new graph or was already finished;
  //! cuda_error as finish().
  std::vector<node> finish_into();

private:
  cudaStream_t stream_ = nullptr;
  graph* target_ = nullptr;
  bool open_ = false;
};

//! Captures the work `f` enqueues on `s` into a new graph. `f` is called as `f(s)` or `f()`. If `f` throws, the
//! capture is ended, the partial graph destroyed, forked streams released, and the exception propagates: the
//! stream is usable again.
//! \throws cuda_error as capture_session and capture_session::finish; whatever `f` throws.
template <class F>
[[nodiscard]] graph capture(const stream& s, F&& f, capture_mode mode = capture_mode::thread_local_,
                            std::source_location where = std::source_location::current()) {
  const detail::api_scope scope("conveyor::capture", where);
  capture_session session(s, mode);
  if constexpr (std::is_invocable_v<F&, const stream&>)
    f(s);
  else
    f();
  return session.finish();
}

//! Captures the work `f` enqueues on `s` into the existing graph `g`, after `deps`. Returns the frontier: the
//! captured nodes that later work should depend on. Exception-safe as capture(); nodes already added to `g` by a
//! capture that throws stay in `g`.
//! \throws std::invalid_argument when a dependency belongs to another graph; cuda_error as capture().
template <class F>
std::vector<node> capture_into(graph& g, const stream& s, F&& f, const node_list& deps = {},
                               capture_mode mode = capture_mode::thread_local_,
                               std::source_location where = std::source_location::current()) {
  const detail::api_scope scope("conveyor::capture_into", where);
  capture_session session(g, s, deps, mode);
  if constexpr (std::is_invocable_v<F&, const stream&>)
    f(s);
  else
    f();
  return session.finish_into();
}

//! Makes later work on `branch` depend on all work enqueued on `origin` so far (an event recorded on `origin`,
//! waited on by `branch`). Inside a capture on `origin` this makes `branch` join the capture, and the work on it
//! becomes a parallel branch of the graph until join(); outside a capture it is an ordinary cross-stream
//! dependency, so one function can serve the eager and the captured run. The event is one timing-free event per
//! thread and device, created on first use and reused (cudaStreamWaitEvent takes the record current at the call),
//! so fork and join create and destroy nothing. The two streams may belong to different devices: the event is
//! recorded on the device of the stream that records it (stream::device()), and a capture forked onto a stream of
//! another device makes a multi-device graph whose nodes run on the device of the stream they were captured on
//! (CUDA Programming Guide, "Multi-device graphs"; describe() shows each node's device).
//! \throws cuda_error (cudaErrorStreamCaptureMerge, before any CUDA call is made, so that both captures stay valid)
//!         when `branch` is already capturing into another graph, or is capturing while `origin` is not; cuda_error
//!         when the event calls fail (e.g. a stream handle is invalid).
void fork(const stream& origin, const stream& branch);

//! Makes later work on `origin` wait for everything enqueued on `branch` so far. Inside a capture, every forked
//! stream must be joined before the capture ends.
//! \throws cuda_error (cudaErrorStreamCaptureIsolation, before any CUDA call is made) when the two streams are not
//!         in the same capture (one capturing and the other not, or two different captures); cuda_error when the
//!         event calls fail.
void join(const stream& origin, const stream& branch);

} // namespace conveyor
