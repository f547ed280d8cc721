#pragma once
//! \file frame_pipeline.hpp
//! conveyor::frame_pipeline: runs a graphed step over a stream of inputs with two or three items in
//! flight. A step is three stages — upload (host to device copies of an item's inputs), compute (a
//! graph the caller builds once per slot), download (device to host copies of the outputs) — and
//! each item rotates through its own slot of device buffers. One graph launch per step holds, as
//! independent branches, upload of item k, compute of item k - 1 and download of item k - 2 (depth
//! 3), so both copy engines and the SMs work at once; successive launches on one stream keep the
//! steps in order. The schedule is conveyor::pipeline_schedule (plain C++, host-tested).

#include "conveyor/assembly/pipeline_schedule.hpp"
#include "conveyor/define/graph.hpp"
#include "conveyor/execute/instantiate_flags.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace conveyor {

class graph_exec;

//! The device buffers of one slot, as the compute builder sees them. Valid as long as the
//! frame_pipeline.
struct pipeline_slot {
  std::size_t index = 0; //!< 0 .. depth - 1
  //! device buffers the upload fills, one per input, in the pipeline's order
  std::span<void* const> inputs;
  std::span<void* const> outputs;            //!< device buffers the download reads, one per output
  std::span<const std::size_t> input_bytes;  //!< their sizes in bytes
  std::span<const std::size_t> output_bytes; //!< their sizes in bytes

  //! Input buffer `i` as a T*. \throws std::out_of_range when `i` >= inputs.size().
  template <class T>
  [[nodiscard]] T* input(std::size_t i) const {
    if (i >= inputs.size())
      throw std::out_of_range("pipeline_slot::input: no input " + std::to_string(i));
    return static_cast<T*>(inputs[i]);
  }
  //! Output buffer `i` as a T*. \throws std::out_of_range when `i` >= outputs.size().
  template <class T>
  [[nodiscard]] T* output(std::size_t i) const {
    if (i >= outputs.size())
      throw std::out_of_range("pipeline_slot::output: no output " + std::to_string(i));
    return static_cast<T*>(outputs[i]);
  }
};

//! Options of a frame_pipeline.
struct frame_pipeline_options {
  //! items in flight, 1 (no overlap) to 3; sets the default lags
  std::size_t depth = 3;
  //! other lags (see pipeline_schedule); their depth must equal `depth`
  std::optional<pipeline_lags> lags;
  //! for every step graph (upload is always added)
  instantiate_flags flags = instantiate_flags::none;
  std::string name = "frame pipeline"; //!< starts every error message and node label
};

//! Counters of a frame_pipeline, for reports and tests.
struct frame_pipeline_statistics {
  std::size_t steps = 0; //!< step graphs launched by push and drain
  std::size_t alone = 0; //!< single-stage graphs launched by run_alone
  //! Executable graphs made: each step shape once, at most depth² + 4 × depth − 1 (prologue, steady
  //! state, the epilogue of each run length modulo depth, and run_alone's one per stage and slot).
  std::size_t instantiations = 0;
  std::size_t nodes_updated = 0; //!< copy nodes given new host pointers (graph_exec::set_memcpy)
};

//! Pipelines a step (upload, compute, download) over a stream of items, expressed in CUDA graphs.
//!
//! Construction allocates `depth` slots of device buffers (one per input and output, of the given
//! sizes) and builds the compute graph of each slot by calling `compute(graph, slot)` once per
//! slot. Each push(item) launches one step graph on the pipeline's stream: uploads of the new item
//! into its slot, the compute graph (as a child graph node) of an earlier item and the downloads of
//! a still earlier one, in independent branches; stages of the same item (equal lags) are chained.
//! drain() launches the epilogue steps. A step graph exists per shape (which slot each active stage
//! uses), instantiated at its first use and replayed; moving to the next item only sets the host
//! pointers of the copy nodes that change (graph_exec::set_memcpy). Launches on one stream run in
//! order, so the compute graphs of two items never overlap: they may share scratch buffers; only
//! inputs and outputs rotate.
//!
//! Results arrive in order: push() returns the item whose download the step enqueued;
//! wait_for(item) blocks until it is in the item's host buffers. Host buffers must be page-locked
//! (cudaMallocHost, cudaHostAlloc, cudaHostRegister) or managed, stay valid and unchanged (inputs)
//! or unread (outputs) until the item is complete.
//!
//! Errors: invalid arguments throw std::invalid_argument naming the pipeline, the call and the
//! buffer, before anything is enqueued; a CUDA failure during a step throws conveyor::cuda_error
//! and leaves the pipeline unusable (each later call throws std::logic_error saying why): make a
//! new one. Thread safety: not thread-safe (one thread uses a pipeline, as for graph_exec);
//! different pipelines may be used from different threads.
class frame_pipeline {
public:
  //! Builds the compute graph of one slot into an empty graph (explicit builder or capture_into).
  //! It must add at least one node, and no conditional or memory node at the top level (the graph
  //! becomes a child graph node).
  using compute_builder = std::function<void(graph& g, const pipeline_slot& slot)>;

  //! Allocates the slots (`cudaMalloc`), builds the compute graphs; step graphs are made at first
  //! use.
  //! \param input_bytes  size of each input buffer of an item, bytes (at least one, each > 0)
  //! \param output_bytes size of each output buffer of an item, bytes (at least one, each > 0)
  //! \param compute      called once per slot, here
  //! \param s            the stream every step is launched on; it must outlive the pipeline
  //! \param options      depth or lags, instantiation flags, the name in messages
  //! \throws std::invalid_argument for no or empty buffers, a bad depth or lags, a compute
  //!         builder that adds no node; conveyor::cuda_error when an allocation fails; what
  //!         `compute` throws.
  frame_pipeline(std::vector<std::size_t> input_bytes, std::vector<std::size_t> output_bytes,
                 const compute_builder& compute, const stream& s,
                 frame_pipeline_options options = {});
  frame_pipeline(const frame_pipeline&) = delete;
  frame_pipeline& operator=(const frame_pipeline&) = delete;
  //! Takes over `other`'s slots, graphs and run; `other` may only be destroyed.
  frame_pipeline(frame_pipeline&& other) noexcept;
  //! Waits for the stream (`cudaStreamSynchronize`, errors ignored), then frees the slots. Never
  //! throws.
  ~frame_pipeline();

  //! Pushes the next item: its host input buffers (one per input, each input_bytes[i] bytes) and
  //! host output buffers (one per output); launches step k (k: the item's index in the run, from 0)
  //! on the stream (`cudaGraphLaunch`, after `cudaGraphExecMemcpyNodeSetParams1D` for the copy
  //! nodes whose host pointer changes). A push after drain() starts a new run at item 0. Returns
  //! the item whose download this step enqueued (in order: 0, 1, ...), or nullopt during the
  //! prologue.
  //! \throws std::invalid_argument for a wrong number of buffers, a null pointer, or memory
  //!         that is not page-locked or managed host memory (`cudaPointerGetAttributes`);
  //!         conveyor::cuda_error when a CUDA call fails; std::logic_error when an earlier failure
  //!         left the pipeline unusable.
  std::optional<std::size_t> push(std::span<const void* const> inputs,
                                  std::span<void* const> outputs);
  //! push with braced lists: `p.push({in}, {edges, sharp})`. \throws as the span form.
  std::optional<std::size_t> push(std::initializer_list<const void*> inputs,
                                  std::initializer_list<void*> outputs) {
    return push(std::span<const void* const>(inputs.begin(), inputs.size()),
                std::span<void* const>(outputs.begin(), outputs.size()));
  }
  //! Launches the epilogue: the steps that finish the items in flight (depth - 1 of them after a
  //! run of at least depth - 1 items; `cudaGraphLaunch` each, then `cudaEventRecord` of the
  //! completion event). Returns the number of steps launched (0 when nothing is in flight). Does
  //! not wait.
  //! \throws conveyor::cuda_error when a CUDA call fails; std::logic_error as push.
  std::size_t drain();
  //! Blocks until item `item` of the current (or just drained) run is in its host output buffers
  //! (`cudaEventSynchronize` on the event recorded after the step that downloaded it; may wait for
  //! a few later items too).
  //! \throws std::logic_error when that item's download has not been enqueued yet (push
  //!         more items or drain()); conveyor::cuda_error with any error the work raised.
  void wait_for(std::size_t item) const;
  //! Launches one stage alone for slot `slot` (a graph of that stage only): upload of `inputs`, the
  //! compute graph, or download into `outputs` (the other span is ignored and may be empty). To
  //! measure each stage's time alone, or to run a step without overlap (`cudaGraphLaunch` on the
  //! pipeline's stream; asynchronous: the host buffers must stay valid until the stream has reached
  //! it). Only between runs: nothing may be in flight.
  //! \throws std::invalid_argument for a bad slot or buffers (as push); std::logic_error
  //!         while items are in flight or when unusable; conveyor::cuda_error when a CUDA call
  //!         fails.
  void run_alone(pipeline_stage stage, std::size_t slot, std::span<const void* const> inputs,
                 std::span<void* const> outputs);

  //! The schedule (depth, lags, slots).
  [[nodiscard]] const pipeline_schedule& schedule() const noexcept;
  //! Items in flight at once (1 to 3).
  [[nodiscard]] std::size_t depth() const noexcept { return schedule().depth(); }
  //! The device buffers of slot `s`. \throws std::out_of_range when `s` >= depth().
  [[nodiscard]] pipeline_slot slot(std::size_t s) const;
  //! The compute graph of slot `s` (as built; step graphs embed a copy). \throws std::out_of_range
  //! as slot().
  [[nodiscard]] const graph& compute_graph(std::size_t s) const;
  //! The graph of the steps of shape `step` (only which slots its active stages use matters; its
  //! copy nodes hold the host pointers they were built with), or nullptr when no step of that shape
  //! has been launched. For tests and exports.
  [[nodiscard]] const graph* step_graph(const pipeline_step& step) const noexcept;
  //! Items pushed in the current run.
  [[nodiscard]] std::size_t pushed() const noexcept;
  //! Items of the current run whose download has been enqueued (they complete in this order).
  [[nodiscard]] std::size_t completed() const noexcept;
  //! Items pushed but not yet downloaded: pushed() - completed().
  [[nodiscard]] std::size_t in_flight() const noexcept { return pushed() - completed(); }
  //! Counters since construction.
  [[nodiscard]] const frame_pipeline_statistics& statistics() const noexcept;
  //! The stream every step is launched on.
  [[nodiscard]] const stream& launch_stream() const noexcept;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace conveyor
