#pragma once
//! \file capture.hpp
//! Stream capture into a conveyor::graph: exception-safe, with fork/join of extra streams and capture into an
//! existing graph.

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

namespace detail {
void begin_capture(const stream& s, capture_mode mode);
void begin_capture_to_graph(const stream& s, const graph& g, const node_list& deps, capture_mode mode);
// End the capture on `s`. `owns_graph` is false when capturing into an existing graph, which is never destroyed.
[[nodiscard]] cudaGraph_t end_capture(const stream& s, bool owns_graph = true);
[[nodiscard]] std::vector<cudaGraphNode_t> capture_frontier(const stream& s);
void abort_capture(const stream& s, bool owns_graph = true) noexcept;
template <class F>
void invoke_with_stream(F& f, const stream& s) {
  if constexpr (std::is_invocable_v<F&, const stream&>)
    f(s);
  else
    f();
}
} // namespace detail

//! Captures the work `f` enqueues on `s` into a new graph (`cudaStreamBeginCapture` / `cudaStreamEndCapture`).
//! `f` is called as `f(s)` or `f()`. If `f` throws, the capture is ended, the partial graph destroyed, forked
//! streams released, and the exception propagates: the stream is usable again.
//! \param s    the stream to capture; make it with cudaStreamNonBlocking (the default) so that it does not
//!             synchronise with the legacy default stream
//! \param mode capture_mode::thread_local_ unless other threads must be allowed unsafe calls
//! \throws cuda_error when capture cannot begin (e.g. `s` is the legacy default stream), or when the capture was
//!         invalidated by an illegal call inside `f` (the message says which calls are illegal and what to use).
template <class F>
[[nodiscard]] graph capture(const stream& s, F&& f, capture_mode mode = capture_mode::thread_local_) {
  detail::begin_capture(s, mode);
  try {
    detail::invoke_with_stream(f, s);
  } catch (...) {
    detail::abort_capture(s);
    throw;
  }
  return graph::adopt(detail::end_capture(s));
}

//! Captures the work `f` enqueues on `s` into the existing graph `g` (`cudaStreamBeginCaptureToGraph`), after
//! `deps`. Returns the frontier: the captured nodes that later work should depend on. Exception-safe as capture();
//! nodes already added to `g` by a capture that throws stay in `g`.
//! \throws cuda_error as capture().
template <class F>
std::vector<node> capture_into(graph& g, const stream& s, F&& f, const node_list& deps = {},
                               capture_mode mode = capture_mode::thread_local_) {
  detail::begin_capture_to_graph(s, g, deps, mode);
  std::vector<cudaGraphNode_t> frontier;
  try {
    detail::invoke_with_stream(f, s);
    frontier = detail::capture_frontier(s);
  } catch (...) {
    detail::abort_capture(s, false);
    throw;
  }
  (void)detail::end_capture(s, false);
  std::vector<node> nodes;
  nodes.reserve(frontier.size());
  for (auto* handle : frontier) nodes.push_back(g.wrap(handle));
  return nodes;
}

//! Makes later work on `branch` depend on all work enqueued on `origin` so far (an event recorded on `origin`,
//! waited on by `branch`). Inside a capture on `origin` this makes `branch` join the capture, and the work on it
//! becomes a parallel branch of the graph until join(); outside a capture it is an ordinary cross-stream
//! dependency, so one function can serve the eager and the captured run. The event is one timing-free event per
//! thread and device, created on first use and reused (cudaStreamWaitEvent takes the record current at the call),
//! so fork and join create and destroy nothing.
//! \throws cuda_error when the event calls fail (e.g. a stream handle is invalid).
void fork(const stream& origin, const stream& branch);

//! Makes later work on `origin` wait for everything enqueued on `branch` so far. Inside a capture, every forked
//! stream must be joined before the capture ends.
//! \throws cuda_error when the event calls fail.
void join(const stream& origin, const stream& branch);

} // namespace conveyor
