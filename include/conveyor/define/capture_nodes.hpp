#pragma once
//! \file capture_nodes.hpp
//! Nodes added to a stream capture in progress: a host node running any C++ callable, a kernel node
//! with typed arguments, and conditional nodes (IF, IF/ELSE, WHILE, SWITCH) whose bodies are then
//! built or captured — so that one capture holds what otherwise takes several capture_into calls
//! around add_conditional. Each call reads the capture's graph and the dependencies of its next
//! node (`cudaStreamGetCaptureInfo`), adds the node to that graph after them, and makes it the
//! stream's only dependency (`cudaStreamUpdateCaptureDependencies` with
//! cudaStreamSetCaptureDependencies): work captured on the stream afterwards runs after the node,
//! as if the node had been enqueued there (CUDA Programming Guide, "Creating a Graph Using Stream
//! Capture": "Cross-stream Dependencies and Events" and the capture-info calls).

#include "conveyor/define/capture.hpp"
#include "conveyor/define/conditional.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/define/kernel_args.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace conveyor {

namespace detail {
//! Adds a host node running `callable` to the capture on `s` (capture_host). \throws as
//! capture_host.
node capture_add_host(const stream& s, std::shared_ptr<std::function<void()>> callable);
//! Adds a kernel node to the capture on `s` from an untyped function and argument array
//! (capture_kernel).
//! \throws as capture_kernel.
node capture_add_kernel(const stream& s, const launch_config& cfg, const void* function,
                        void** arguments);
//! Checks that `kind` takes `bodies` body callables (1 for if_then and while_loop, 2 for
//! if_then_else, at least 1 for switch_case). \throws std::invalid_argument naming the counts.
void check_body_count(conditional_kind kind, std::size_t bodies);
//! A stream of `s`'s device that is not capturing, for capturing a conditional node's body while
//! `s` captures the graph holding it: one of a pool per thread, created on first use (with the
//! thread's capture mode relaxed for the creation) and destroyed at thread exit. Valid until the
//! thread exits.
//! \throws cuda_error when a stream cannot be created.
[[nodiscard]] const stream& side_stream(const stream& s);
} // namespace detail

//! Keeps `item` alive as long as the graph being captured on `s` and everything made from it
//! (clones, parents that embed it, executable graphs and their queued launches), as
//! graph::keep_alive does for a graph: for a workspace or buffer the captured work points into that
//! must outlive every replay. In a capture Conveyor did not begin, a CUDA user object of its own on
//! the captured graph holds it. Thread safety: call it from the thread that captures on `s`.
//! \throws std::logic_error when `s` is not capturing; cuda_error when the capture was
//!         invalidated or CUDA refuses the user object.
void capture_keep_alive(const stream& s, std::shared_ptr<void> item);

//! Names the allocations a call makes in a capture in progress, so that they can be told apart
//! later: made before the call (a library call, say `cublasSgemm`) on the stream it enqueues on, it
//! labels, when it goes, every memory allocation and free node the capture added to its graph in
//! the meantime "<call>: allocation" and "<call>: free" (node::label; descriptions, exports and the
//! tuning doctor's captured_allocations check show them). Nothing happens when `s` is not
//! capturing, or captures into a graph Conveyor did not begin. The conveyor/libraries adapters make
//! one around each call they enqueue. Thread safety: make and destroy it on the thread that
//! captures on `s`.
class capture_scope {
public:
  //! Notes how many nodes the graph being captured on `s` holds now (cudaStreamGetCaptureInfo,
  //! cudaGraphGetNodes). Never throws but for std::bad_alloc.
  capture_scope(const stream& s, std::string call);
  capture_scope(const capture_scope&) = delete;
  capture_scope& operator=(const capture_scope&) = delete;
  //! Labels the allocation and free nodes added since the constructor. Never throws.
  ~capture_scope();

private:
  std::string call_;
  cudaGraph_t graph_ = nullptr;
  std::size_t before_ = 0;
};

//! Adds a host node that calls `f()` on a CPU thread each time the graph runs, to the capture in
//! progress on `s`, after the work captured on `s` so far; work captured on `s` afterwards runs
//! after it. The callable is owned as graph::host owns it: by the graph being captured (its
//! resources, tied to every executable graph made from it by a CUDA user object), so it lives as
//! long as the graph and every queued launch of an executable graph made from it — no C callback
//! and no `void*` to manage, where `cudaLaunchHostFunc` needs both. In a capture Conveyor did not
//! begin (a `cudaStreamBeginCapture` of the caller's) the callable is tied to the captured graph by
//! a CUDA user object of its own. `f` must not call CUDA and must not throw (an exception would end
//! the program). Where the stream's next node would get a programmatic edge, the host node gets a
//! full one (CUDA allows other edge types only between kernels). Thread safety: call it from the
//! thread that captures on `s`, like any launch into the capture.
//! \returns the host node (a node of the captured graph; for a capture Conveyor did not
//!          begin, its graph_handle() is null and it cannot be labelled).
//! \throws std::logic_error when `s` is not capturing (outside a capture, use graph::host
//!         on a graph, or run the work on the host after synchronising); std::invalid_argument when
//!         the capture is into a conditional node's body (CUDA allows no host node there);
//!         cuda_error when the capture was invalidated or CUDA refuses the node
//!         (`cudaGraphAddHostNode`, `cudaStreamUpdateCaptureDependencies`).
template <class F>
node capture_host(const stream& s, F&& f) {
  return detail::capture_add_host(s, std::make_shared<std::function<void()>>(std::forward<F>(f)));
}

//! Adds a kernel node running `fn<<<cfg.grid, cfg.block, cfg.shared_bytes>>>(args...)` to the
//! capture in progress on `s`, after the work captured on `s` so far (`cudaGraphAddKernelNode` on
//! the captured graph), and returns it: the typed form of a captured launch, with the arguments
//! checked against the kernel's parameters at compile time (make_kernel_args) and a node handle to
//! keep (kernel_function() and kernel_config() say what it runs). Edges keep the type the capture
//! gives them; with cfg.programmatic, the edges from kernel nodes become programmatic (as
//! graph::kernel makes them); cfg.priority sets the node's priority. Thread safety: call it from
//! the thread that captures on `s`.
//! \throws std::logic_error when `s` is not capturing (outside a capture use
//!         conveyor::launch); cuda_error when the capture was invalidated or CUDA refuses the node
//!         or an edge.
template <class... Params, class... Args>
node capture_kernel(const stream& s, const launch_config& cfg, void (*fn)(Params...),
                    Args&&... args) {
  auto values = make_kernel_args(fn, std::forward<Args>(args)...);
  return detail::capture_add_kernel(s, cfg, reinterpret_cast<const void*>(fn), values.pointers());
}

//! Creates a condition handle on the graph being captured on `s`
//! (`cudaGraphConditionalHandleCreate` on the graph `cudaStreamGetCaptureInfo` gives), for a
//! conditional node added to the same capture with capture_conditional. Pass its handle to the
//! kernel that sets it (conveyor::set_condition), captured on `s` before the node.
//! \param s             a stream capturing into a graph (a graph's body included: a
//!        capture_into a conditional body makes the condition for that body, which is where a
//!        nested conditional node goes)
//! \param default_value the value every launch starts with, with condition_reset::each_launch
//! \param reset         condition_reset::each_launch or never (make_condition says what each means)
//! \throws std::logic_error when `s` is not capturing; cuda_error when the toolkit or
//!         driver lacks conditional nodes, the capture was invalidated or the creation fails.
[[nodiscard]] condition capture_condition(const stream& s, unsigned default_value,
                                          condition_reset reset);

//! Adds a conditional node of `kind` controlled by `cond` to the capture in progress on `s`, after
//! the work captured on `s` so far (`cudaGraphAddNode` with cudaConditionalNodeParams on the
//! captured graph); work captured on `s` afterwards runs after the node. Returns the node, the
//! condition and its bodies, which are then built with the builder or captured into with
//! capture_into on *another* stream (`s` is capturing the parent; the body-callable overload below
//! picks one). The node is recorded in the graph as add_conditional records it (describe, diff,
//! step_through see its bodies). `cases`: the number of bodies of a switch_case (ignored
//! otherwise). A graph holding a conditional node can have only one executable graph at a time
//! (CUDA's rule). Thread safety: call it from the thread that captures on `s`.
//! \throws std::logic_error when `s` is not capturing, or the capture was not begun by
//!         Conveyor (capture, capture_into, capture_session, graphed: the bodies' model must belong
//!         to the graph); std::invalid_argument when `cond` was made for another graph (make it
//!         with capture_condition on `s`) or a switch_case has 0 cases; cuda_error naming the CUDA
//!         version needed when the toolkit or driver is too old, when the capture was invalidated,
//!         or when CUDA refuses the node.
[[nodiscard]] conditional_node capture_conditional(const stream& s, conditional_kind kind,
                                                   const condition& cond, unsigned cases = 0);

//! As capture_conditional above, and captures each body from a callable, in order — `bodies[i]` of
//! the node from the i-th callable, called as `body(side)` with a stream of `s`'s device that is
//! not capturing (a pool per thread: detail::side_stream) through capture_into (which checks a
//! body's capture by a dry run first: each callable is called twice) — so one capture holds the
//! node and what it runs:
//!
//!     auto g = conveyor::capture(s, [&](const conveyor::stream& cs) {
//!       auto c = conveyor::capture_condition(cs, 0, conveyor::condition_reset::each_launch);
//!       start<<<1, 1, 0, cs.get()>>>(c.handle, counter, limit);
//!       conveyor::capture_conditional(cs, conveyor::conditional_kind::while_loop, c,
//!                                     [&](const conveyor::stream& body) {
//!                                       step<<<1, 1, 0, body.get()>>>(c.handle, ...);
//!                                     });
//!       after<<<n, 256, 0, cs.get()>>>(...);
//!     });
//!
//! The callables must launch on the stream they are given. if_then and while_loop take one
//! callable, if_then_else two (then, else), switch_case one per case. Thread safety: call it from
//! the thread that captures on `s`.
//! \throws std::invalid_argument for a wrong number of callables (before anything is
//!         added); as capture_conditional and capture_into; whatever a callable throws (the node
//!         stays in the capture with what its bodies hold: let the exception end the capture).
template <class... Bodies>
requires(sizeof...(Bodies) > 0 &&
         (std::is_invocable_v<Bodies&, const stream&> && ...)) conditional_node
    capture_conditional(const stream& s, conditional_kind kind, const condition& cond,
                        Bodies&&... bodies) {
  detail::check_body_count(kind, sizeof...(Bodies));
  conditional_node out =
      capture_conditional(s, kind, cond, static_cast<unsigned>(sizeof...(Bodies)));
  const stream& side = detail::side_stream(s);
  std::size_t i = 0;
  ((void)capture_into(out.bodies[i++], side, bodies), ...);
  return out;
}

} // namespace conveyor
