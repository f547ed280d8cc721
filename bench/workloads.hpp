#pragma once
//! \file workloads.hpp
//! What the benchmarks run: the shared GPU context (buffer pool, streams, events) and the N-kernel step in each
//! form: eager launches, Conveyor-built and raw-built graphs, captured graphs. Needs a GPU at run time.

#include "bench/kernels.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/define/node.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/runtime/event.hpp>
#include <conveyor/runtime/stream.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <span>
#include <type_traits>
#include <vector>

namespace conveyor::bench {

//! The kernel's arguments: y = axpb_a * y + b, with b = axpb_b, or axpb_b_changed after an update.
inline constexpr float axpb_a = 0.5F;
inline constexpr float axpb_b = 1.0F;
inline constexpr float axpb_b_changed = 2.0F;

//! Destroys a raw CUDA graph (`cudaGraphDestroy`); never throws.
struct graph_deleter {
  void operator()(cudaGraph_t g) const noexcept { (void)cudaGraphDestroy(g); }
};
//! Destroys a raw executable graph (`cudaGraphExecDestroy`); never throws.
struct graph_exec_deleter {
  void operator()(cudaGraphExec_t e) const noexcept { (void)cudaGraphExecDestroy(e); }
};
//! An owned raw `cudaGraph_t`, for the raw-API side of the comparisons.
using raw_graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, graph_deleter>;
//! An owned raw `cudaGraphExec_t`.
using raw_graph_exec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, graph_exec_deleter>;

//! The GPU resources every benchmark shares: a buffer pool split into chunks (one per kernel launch), the streams
//! of the fork/join topology (lane 0 is the main stream) and the events that fork and join them.
//!
//! Buffers rotate: kernel `j` of a step over N kernels in buffer set `s` updates chunk (s * N + j) mod chunks(), in
//! every mode alike. Every repetition of a benchmark starts at new sets, so repetitions run on different memory;
//! within a repetition iterations rotate through rotation_sets() sets (graph modes: one executable graph per set).
//! The pool holds at least four times the L2 cache.
class bench_context {
public:
  //! Allocates the pool (`cudaMalloc`, zeroed) and creates the streams and events on the current device.
  //! \param rotation_sets buffer sets the iterations of one repetition rotate through
  //! \param max_nodes     the largest N that will be run
  //! \param l2_bytes      the device's L2 cache size, bytes
  //! \throws cuda_error when an allocation or creation fails.
  bench_context(std::size_t rotation_sets, std::size_t max_nodes, std::size_t l2_bytes);
  bench_context(const bench_context&) = delete;
  bench_context& operator=(const bench_context&) = delete;
  //! Frees the pool; never throws.
  ~bench_context();

  //! The chunk (kernel_threads floats) updated by kernel `index` of an `n`-kernel step in buffer set `set`.
  [[nodiscard]] float* chunk(std::size_t set, std::size_t index, std::size_t n) const noexcept {
    return pool_ + ((set * n + index) % chunks_) * kernel_threads;
  }
  //! Stream `i` of the fork/join topology (0 <= i < fork_join_width); lane(0) is the main stream.
  [[nodiscard]] const conveyor::stream& lane(std::size_t i) const noexcept { return lanes_[i]; }
  //! The main stream: every step starts and ends on it.
  [[nodiscard]] const conveyor::stream& main_stream() const noexcept { return lanes_[0]; }
  //! Events (timing disabled) for eager fork/join: one to fork, one per lane to join.
  [[nodiscard]] cudaEvent_t eager_fork() const noexcept { return eager_fork_.get(); }
  [[nodiscard]] cudaEvent_t eager_join(std::size_t lane) const noexcept { return eager_joins_[lane].get(); }
  //! Separate events for raw stream capture, so that captured and eager records never share an event.
  [[nodiscard]] cudaEvent_t capture_fork() const noexcept { return capture_fork_.get(); }
  [[nodiscard]] cudaEvent_t capture_join(std::size_t lane) const noexcept { return capture_joins_[lane].get(); }
  //! Number of buffer sets.
  [[nodiscard]] std::size_t rotation_sets() const noexcept { return rotation_sets_; }
  //! Number of chunks in the pool, and its size in bytes.
  [[nodiscard]] std::size_t chunks() const noexcept { return chunks_; }
  [[nodiscard]] std::size_t pool_bytes() const noexcept { return chunks_ * chunk_bytes; }
  //! Waits for every lane (`cudaStreamSynchronize`).
  //! \throws cuda_error with any error pending work raised.
  void synchronize() const;
  //! Keeps `exec` alive until release_kept() (the memory benchmarks: memory of destroyed executable graphs is
  //! reused by the driver for new ones, so none may be destroyed while they measure).
  void keep(conveyor::graph_exec&& exec) { kept_.push_back(std::move(exec)); }
  //! Destroys the kept executable graphs (after synchronising the device); never throws.
  void release_kept() noexcept;
  //! Number of executable graphs kept.
  [[nodiscard]] std::size_t kept() const noexcept { return kept_.size(); }

private:
  std::size_t rotation_sets_;
  std::size_t chunks_;
  float* pool_ = nullptr;
  std::vector<conveyor::stream> lanes_;
  conveyor::event eager_fork_;
  std::vector<conveyor::event> eager_joins_;
  conveyor::event capture_fork_;
  std::vector<conveyor::event> capture_joins_;
  std::vector<conveyor::graph_exec> kept_;
};

//! The b argument of each of `n` kernels: axpb_b everywhere, axpb_b_changed at `changed`.
[[nodiscard]] std::vector<float> b_values(std::size_t n, std::span<const std::size_t> changed = {});

//! Enqueues one step eagerly on the context's lanes: with width > 1, records the fork event on the main stream and
//! makes lanes 1.. wait for it; launches kernel j on lane j % width (so lane l runs the chain l, l + width, ...);
//! then joins every lane back into the main stream with events. No synchronisation and no launch check.
//! \throws cuda_error when an event call fails.
void enqueue_eager(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set);

//! A graph built through Conveyor, and its kernel nodes in launch order.
struct conveyor_built {
  conveyor::graph graph;             //!< the graph
  std::vector<conveyor::node> nodes; //!< node j runs kernel j
};
//! Builds the step explicitly with the conveyor::graph builder: node j depends on node j - width (a chain for
//! width 1, `width` parallel chains otherwise) and runs axpb(chunk(set, j, n), axpb_a, b[j]).
//! \throws cuda_error when CUDA refuses a node.
[[nodiscard]] conveyor_built build_conveyor(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                                            std::span<const float> b);

//! A graph built through the raw CUDA Runtime API, and its kernel nodes in launch order.
struct raw_built {
  raw_graph graph;                    //!< the graph
  std::vector<cudaGraphNode_t> nodes; //!< node j runs kernel j
};
//! The same graph as build_conveyor, with cudaGraphCreate and cudaGraphAddKernelNode.
//! \throws cuda_error when CUDA refuses a node.
[[nodiscard]] raw_built build_raw(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set,
                                  std::span<const float> b);

//! Sets b = `value` in the kernel nodes `changed` (indices into `nodes`, a chain of `n` kernels on buffer set `set`)
//! of `exec` through graph_exec::set_kernel_args, keeping y and a. Returns the seconds the calls took.
//! \throws cuda_error when CUDA refuses a node.
double set_b_conveyor(const bench_context& ctx, conveyor::graph_exec& exec, std::span<const conveyor::node> nodes,
                      std::span<const std::size_t> changed, std::size_t n, std::size_t set, float value);
//! The same through cudaGraphExecKernelNodeSetParams, once per changed node.
//! \throws cuda_error when CUDA refuses a node.
double set_b_raw(const bench_context& ctx, cudaGraphExec_t exec, std::span<const cudaGraphNode_t> nodes,
                 std::span<const std::size_t> changed, std::size_t n, std::size_t set, float value);

//! Instantiates a raw graph (`cudaGraphInstantiate`, no flags).
//! \throws cuda_error when instantiation fails.
[[nodiscard]] raw_graph_exec instantiate_raw(cudaGraph_t g);

//! Captures one eager step into a graph through Conveyor: conveyor::capture on the main stream, with
//! conveyor::fork / conveyor::join of the other lanes when width > 1.
//! \throws cuda_error when the capture fails.
[[nodiscard]] conveyor::graph capture_conveyor(const bench_context& ctx, std::size_t width, std::size_t n,
                                               std::size_t set);

//! Captures one eager step with cudaStreamBeginCapture / cudaStreamEndCapture on the main stream (the capture
//! events fork and join the lanes). On failure the capture is ended and its graph destroyed before rethrowing.
//! \throws cuda_error when the capture fails.
[[nodiscard]] raw_graph capture_raw(const bench_context& ctx, std::size_t width, std::size_t n, std::size_t set);

} // namespace conveyor::bench
