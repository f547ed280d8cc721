#pragma once
// One background instantiation of graph_cache (graphed_options::instantiate_in_background): the captured graph, what
// it holds, and the executable graph a worker thread makes of it.

#include "conveyor/assembly/graphed_types.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/execute/graph_exec.hpp"

#include <cuda.h>

#include <cstddef>
#include <exception>
#include <future>

namespace conveyor::detail {

//! What a graph holds: its top-level nodes, its allocation nodes and their bytes (read from each node).
struct graph_holding {
  std::size_t nodes = 0;
  std::size_t allocations = 0;
  std::size_t bytes = 0;
};
//! Reads graph_holding of `g`. \throws cuda_error when the graph cannot be read.
[[nodiscard]] graph_holding holding_of(const graph& g);

//! One graph handed to a worker thread. The worker writes `exec`, `holding` and `error`, then sets `done`; the
//! calling thread reads them only after finished() saw `done` ready (the promise orders the writes before), and
//! moves `source` and `exec` out before it lets the job go, so that no graph state dies on the worker.
struct background_job {
  call_key key;         //!< the call it was captured for
  std::size_t call = 0; //!< that call's number (graphed_statistics::calls)
  graph source;         //!< the capture
  instantiate_flags flags = instantiate_flags::none;
  CUcontext context = nullptr; //!< the calling thread's context at the hand-over (null: none current)
  int device = 0;              //!< the device current at the hand-over (when `context` is null)
  bool upload = true;          //!< upload it (false under a byte budget: the first launch uploads then)
  graph_exec exec;             //!< made by run()
  graph_holding holding;
  std::exception_ptr error; //!< what run() caught, thrown by the call that takes the job
  std::promise<void> done;
  std::shared_future<void> ready = done.get_future().share();

  //! On the worker thread: the hand-over's context current (cuCtxSetCurrent; else cudaSetDevice), relaxed capture
  //! mode for the thread (cudaThreadExchangeStreamCaptureMode: its calls never invalidate another thread's capture),
  //! the release queue left to the calling threads (detail::collect_elsewhere: users' deleters never run on the
  //! worker), reads holding, instantiates `source` with `flags` and, with `upload`, uploads it on a stream of its
  //! own, waiting for the upload. Never throws (an error is kept in `error`).
  void run() noexcept;
  //! True once run() has finished. Never throws.
  [[nodiscard]] bool finished() const noexcept;
};

} // namespace conveyor::detail
