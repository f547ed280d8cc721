#pragma once
//! \file graph_exec.hpp
//! conveyor::graph_exec: an executable graph (`cudaGraphExec_t`): instantiate, upload, launch,
//! per-node setters and updates, with what queued launches use kept alive until they finish.

#include "conveyor/define/graph.hpp"
#include "conveyor/execute/exec_facts.hpp"
#include "conveyor/execute/instantiate_flags.hpp"
#include "conveyor/execute/update_result.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <functional>
#include <source_location>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

namespace detail {
// what an executable graph knows beyond its handle (defined in the library)
struct exec_state;
// the attorney: the library's one way to an executable graph's handle and state
struct exec_access;
struct graph_snapshot;   // a graph read once for comparisons (kinds layer)
struct graph_comparison; // two snapshots compared (kinds layer)
// a kernel node's thread-block cluster attribute, by position (kinds layer)
struct kernel_attribute;
} // namespace detail

//! An executable graph (`cudaGraphExec_t`), move-only; the destructor destroys it
//! (`cudaGraphExecDestroy`) and never throws or waits.
//!
//! Lifetimes: what the graph's nodes point into (host callables, child graphs' resources, buffers
//! attached with graph::keep_alive) is held for as long as a launch that may use it is queued, and
//! no longer: the destructor, an update and a re-instantiation may all be called while launches are
//! still queued or running. Resources of the graph it was instantiated from, or last updated to as
//! a whole, are tied to it by CUDA user objects (CUDA releases them once the last launch using them
//! has finished); callables installed node by node (set_host, per-node updates of host nodes) are
//! released behind an event recorded after the last launch that could use them. Memory stays
//! bounded by what launches can still use, whatever the number of updates. Released resources are
//! destroyed on an ordinary thread at the next Conveyor call that instantiates, updates or destroys
//! an executable graph, or at reclaim_resources(). Graph definitions an update replaced (when
//! nothing else holds them) are destroyed behind the next launch (see launch).
//!
//! Thread safety: one graph_exec must not be used by two threads at once (CUDA's rule for
//! executable graphs); different graph_exec objects may be instantiated, updated, launched and
//! destroyed concurrently from different threads.
class graph_exec {
public:
  //! An empty executable graph (no CUDA handle), for code that instantiates later: assign the
  //! result of instantiate() to it. Launching, uploading or updating it throws std::logic_error.
  graph_exec() noexcept;
  //! Takes over `other`'s executable graph; `other` is left empty (get() == nullptr) and may only
  //! be destroyed or assigned to.
  graph_exec(graph_exec&& other) noexcept;
  //! Replaces this executable graph by `other`'s (the old one is destroyed as by the destructor).
  graph_exec& operator=(graph_exec&& other) noexcept;
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  //! Destroys the executable graph without waiting for its queued launches; what they use is
  //! released once they have finished. Never throws.
  ~graph_exec();

  //! The CUDA handle (null when empty).
  [[nodiscard]] cudaGraphExec_t get() const noexcept { return handle_; }
  //! True when it holds no executable graph (default-constructed, moved from, or reset).
  [[nodiscard]] bool empty() const noexcept { return handle_ == nullptr; }
  //! Destroys the executable graph now, as the destructor does (without waiting for queued
  //! launches), leaving this one empty. For graphs CUDA allows one executable graph of at a time
  //! (graphs with allocation or conditional nodes): `exec.reset(); exec = instantiate(g);` — an
  //! assignment alone makes the new one before the old one is destroyed, which CUDA refuses for
  //! them. Never throws.
  void reset() noexcept;
  //! The flags it was instantiated with.
  [[nodiscard]] instantiate_flags flags() const noexcept;

  //! Uploads the executable graph to the device ahead of its first launch (`cudaGraphUpload`), so
  //! that launch does not pay for it.
  //! \throws cuda_error when the upload fails.
  void upload(const stream& s, std::source_location where = std::source_location::current()) const;
  //! Launches the graph on `s` (`cudaGraphLaunch`); asynchronous. Launches of one executable graph
  //! run one after another (CUDA orders them), whatever the streams. The first launch after an
  //! update that replaced a graph definition destroys that definition on the calling thread once
  //! the launch is queued (host time in proportion to its nodes, while the GPU runs:
  //! docs/benchmarks.md; step-through launches leave it for a later launch, reset() or the
  //! destructor).
  //! \throws cuda_error when the launch fails; for a graph that allocates memory it never
  //!         frees, launched again while the previous allocation is live, the message names the
  //!         allocation node and the fix.
  void launch(const stream& s, std::source_location where = std::source_location::current()) const {
    if (step_launches_) [[unlikely]]
      return launch_stepping(s, where);
    const cudaError_t rc = cudaGraphLaunch(handle_, s.get());
    if (rc != cudaSuccess || tracks_launches_ || !launched_ || retired_ || s.get() == nullptr ||
        s.get() == cudaStreamLegacy)
      after_launch(rc, s, where);
  }

  //! Makes every later launch a step-through run (conveyor::step_through, debug/step.hpp): each
  //! node of the graph as a launch of its own followed by a synchronisation, so that a failing node
  //! is named (step_failure). Launches are then synchronous. Also on from instantiation when the
  //! environment variable CONVEYOR_STEP_THROUGH is set to anything but "0" or "" (an unchanged
  //! program run step by step). Off costs the replay path one predicted branch. Thread safety: as
  //! launch.
  void step_through_launches(bool on) noexcept { step_launches_ = on; }
  //! True when launches run step by step (step_through_launches).
  [[nodiscard]] bool steps_through_launches() const noexcept { return step_launches_; }

  // ---- per-node setters (the node is one of the source graph's, or of the graph last applied by
  // an update) ------- A node of the graph last applied is matched by its creation-order position.
  // cudaGraphExecUpdate pairs nodes through their dependencies instead: a graph whose nodes were
  // created in another order than the source's (an isomorphic DAG) is applied with its nodes run by
  // other positions; every setter then throws std::logic_error for its nodes, changing nothing (the
  // source's nodes stay settable). That is checked once after such an update (both graphs'
  // dependencies read), only when a setter or update_incremental needs positions.
  //! Sets a kernel node's function, launch configuration and arguments for later launches
  //! (`cudaGraphExecKernelNodeSetParams`). Arguments are checked against the kernel at compile
  //! time.
  //! \throws cuda_error naming the node when it is not a kernel node of the executable
  //!         graph or the change is not allowed (e.g. another function in a different context).
  template <class... Params, class... Args>
  void set_kernel(const node& n, const launch_config& cfg, void (*fn)(Params...), Args&&... args) {
    auto values = make_kernel_args(fn, std::forward<Args>(args)...);
    set_kernel_raw(n, cfg, reinterpret_cast<const void*>(fn), values.pointers());
  }
  //! Sets only a kernel node's arguments, keeping its launch configuration (the node's, or the last
  //! one given to set_kernel).
  //! \throws cuda_error as set_kernel; std::invalid_argument when `fn` is not the node's kernel.
  template <class... Params, class... Args>
  void set_kernel_args(const node& n, void (*fn)(Params...), Args&&... args) {
    auto values = make_kernel_args(fn, std::forward<Args>(args)...);
    set_kernel_args_raw(n, reinterpret_cast<const void*>(fn), values.pointers());
  }
  //! Untyped form of set_kernel: `arguments` as cudaKernelNodeParams::kernelParams takes them.
  //! \throws cuda_error as set_kernel.
  void set_kernel_raw(const node& n, const launch_config& cfg, const void* function,
                      void** arguments);
  //! Untyped form of set_kernel_args: `function` must be the kernel the node runs. The launch
  //! configuration comes from the last set_kernel of the node, else from the handle itself when
  //! graph::kernel made it (no lookup: a replay loop pays only the
  //! `cudaGraphExecKernelNodeSetParams` call), else from the node, read once
  //! (`cudaGraphKernelNodeGetParams`) and remembered.
  //! \throws cuda_error as set_kernel; std::invalid_argument when `function` is not the
  //!         node's kernel.
  void set_kernel_args_raw(const node& n, const void* function, void** arguments);
  //! Sets a 1D memcpy node's pointers and size (`cudaGraphExecMemcpyNodeSetParams1D`). A size of 0
  //! disables the node (`cudaGraphNodeSetEnabled`: the copy does nothing) until a later set_memcpy
  //! of a non-zero size enables it again.
  //! \throws cuda_error naming the node when it is not a memcpy node or the memory is on
  //!         another device.
  void set_memcpy(const node& n, void* dst, const void* src, std::size_t bytes,
                  cudaMemcpyKind kind = cudaMemcpyDefault);
  //! Sets a memset node to fill `count` elements of T (1, 2 or 4 bytes) at `dst` with `value`
  //! (`cudaGraphExecMemsetNodeSetParams`). A count of 0 disables the node, as set_memcpy does.
  //! \throws cuda_error naming the node when it is not a memset node or the change is not allowed.
  template <class T>
  void set_memset(const node& n, T* dst, std::type_identity_t<T> value, std::size_t count) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                  "conveyor: memset elements must be 1, 2 or 4 bytes wide");
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    set_memset_raw(n, dst, bits, sizeof(T), count);
  }
  //! Untyped form of set_memset (one row of `count` elements of `element_size` bytes).
  //! \throws cuda_error as set_memset; std::invalid_argument for an element size other than
  //!         1, 2 or 4.
  void set_memset_raw(const node& n, void* dst, unsigned value, unsigned element_size,
                      std::size_t count);
  //! Replaces a host node's callable for later launches (`cudaGraphExecHostNodeSetParams`). The
  //! executable graph owns the new callable; the one it replaces is released once the launches
  //! queued before have finished.
  //! \throws cuda_error naming the node when it is not a host node.
  template <class F>
  void set_host(const node& n, F&& f) {
    set_host_raw(n, std::make_shared<std::function<void()>>(std::forward<F>(f)));
  }
  //! Enables or disables a kernel, memcpy or memset node for later launches
  //! (`cudaGraphNodeSetEnabled`).
  //! \throws cuda_error naming the node for other node kinds.
  void set_enabled(const node& n, bool enabled);

  // ---- updates: one result type
  // ------------------------------------------------------------------------------
  //! Updates this executable graph to run `g`'s parameters (`cudaGraphExecUpdate`), as a whole. `g`
  //! must have the same topology and node kinds as the source. On success the method is
  //! whole_graph, `g`'s resources are held (the previous graph's released once queued launches
  //! finish; its definition, unless the caller still holds it, destroyed behind the next launch: at
  //! most 4 are kept when updates come without launches, a fifth update destroys the oldest
  //! itself), and `g`'s nodes (as well as the source's) may be passed to the per-node setters
  //! (unless CUDA paired them with other positions: see the setters). When refused, the method is
  //! refused, the status and node say why, and the executable graph is unchanged. A graph whose
  //! allocation nodes reserve other addresses than the executable graph's is refused
  //! (parameters_changed) before CUDA is asked: its kernels would use unmapped memory. So is one
  //! whose kernels hold other thread-block cluster attributes (attributes_changed), at any depth:
  //! top-level kernels and those inside child graphs and conditional bodies (CUDA reports the
  //! update applied and the launches keep the old clusters; H200, driver 580), and one where either
  //! graph holds a conditional node Conveyor did not build (not_supported: CUDA 13.0 cannot read
  //! its bodies back, so their clusters cannot be compared).
  //! \throws cuda_error only for errors other than a refused update; std::invalid_argument,
  //!         changing nothing, for an empty (moved-from) graph; std::logic_error for an empty
  //!         executable graph.
  [[nodiscard]] update_result update(const graph& g,
                                     std::source_location where = std::source_location::current());
  //! Tries update(g); when refused, instantiates `g` again with the same flags and replaces this
  //! executable graph (method reinstantiated; the refusal's status and node are kept in the
  //! result). Exception-safe: when the new instantiation throws, this executable graph is
  //! unchanged.
  //! \throws cuda_error when re-instantiation fails; std::logic_error, changing nothing,
  //!         when it would have to re-instantiate a device_graph's executable graph (kernels hold
  //!         its handle); std::invalid_argument, changing nothing, for an empty (moved-from)
  //!         graph.
  update_result
  update_or_reinstantiate(const graph& g,
                          std::source_location where = std::source_location::current());
  //! Brings this executable graph to `g`'s parameters at a cost that scales with what changed:
  //! compares `g` with the graph whose parameters it holds (diff) and sets only the nodes that
  //! differ (method per_node); uses a whole-graph update when a change cannot be set node by node
  //! (launch attributes, memory nodes, conditional nodes, nodes that cannot be compared), after
  //! per-node setters, or when the graph last applied as a whole is not matched by position (see
  //! the setters); and, with `reinstantiate` true, instantiates `g` again when the topology changed
  //! or the update was refused. Nodes of `g` may then be passed to the per-node setters.
  //! Exception-safe as update_or_reinstantiate.
  //! \throws cuda_error when reading the graphs or re-instantiating fails; std::logic_error
  //!         as update_or_reinstantiate for a device_graph's executable graph;
  //!         std::invalid_argument, changing nothing, for an empty (moved-from) graph.
  update_result update_incremental(const graph& g, bool reinstantiate = true,
                                   std::source_location where = std::source_location::current());

  //! The allocation nodes of the graph it was instantiated from whose memory the graph never frees
  //! (no mem_free node, no instantiate_flags::auto_free_on_launch), one readable line each; empty
  //! when there are none. Such a graph cannot be launched again until the allocation is freed
  //! (cudaFree / cudaFreeAsync). Read from that graph at the first call (or the first update or
  //! failed launch). Not thread-safe (as the rest of graph_exec).
  [[nodiscard]] const std::vector<std::string>& unfreed_allocations() const noexcept;
  //! How this executable graph was instantiated and has been used: flags, whether it was uploaded
  //! before its first launch, whether a launch went to the legacy default stream, and the
  //! allocations it never frees (read as unfreed_allocations() does). Feeds the tuning doctor
  //! (conveyor/profile/doctor.hpp). Costs one read of the graph's allocation nodes at the first
  //! call; the launch history costs launch() one branch. Not thread-safe (as the rest of
  //! graph_exec). Never throws but for std::bad_alloc.
  [[nodiscard]] exec_facts facts() const;

private:
  friend graph_exec instantiate(const graph&, instantiate_flags, const stream*,
                                std::source_location);
  friend struct detail::exec_access;
  graph_exec(cudaGraphExec_t handle, std::unique_ptr<detail::exec_state> state) noexcept;
  void after_launch(cudaError_t rc, const stream& s, const std::source_location& where) const;
  // Throws std::logic_error naming `call` when this executable graph is empty.
  void require_graph(const char* call) const;
  // With step-through launches: makes the same per-node change on the shadow graph a step-through
  // run steps through (`set` on its node standing for `origin`), or disables that node there
  // (`enabled` false).
  void shadow_change(cudaGraphNode_t origin, const std::function<cudaError_t(cudaGraphNode_t)>& set,
                     bool enabled = true);
  // launch() when step_launches_ (src/debug/step.cpp): conveyor::step_through of the graph this one
  // runs.
  void launch_stepping(const stream& s, const std::source_location& where) const;
  void set_host_raw(const node& n, std::shared_ptr<std::function<void()>> callable);
  // The executable graph owns `item` for node `origin` from now on (launches record a fence); what
  // it owned there before is released behind the fence of the last launch, which queued launches
  // may still be using.
  void own_for_node(cudaGraphNode_t origin, std::shared_ptr<void> item);
  // The phases of the updates (execute/update.cpp): a whole-graph update of `g` (`after`: g read
  // already, or null), with nothing to guard, or behind the guards (guarded_update, out of
  // whole_update's line, which every update runs); the executable graph after CUDA applied it
  // (`paired`: CUDA paired the nodes by position); what follows CUDA's refusal (`rc`, `info`),
  // falling back to node-by-node setting when CUDA refused a topology Conveyor's comparison proves
  // unchanged; and the node-by-node setting of the positions `c` lists as changed (with the
  // patched ones), restoring the executable graph's parameters when a setter fails midway.
  update_result whole_update(const graph& g, const detail::graph_snapshot* after);
  update_result guarded_update(const graph& g, const detail::graph_snapshot* after);
  update_result applied_as_whole(const graph& g, const cudaGraphExecUpdateResultInfo& info,
                                 bool paired);
  update_result after_refused_update(const graph& g, const detail::graph_snapshot* after,
                                     std::vector<detail::kernel_attribute>& attributes,
                                     cudaError_t rc, const cudaGraphExecUpdateResultInfo& info);
  // update_incremental's work, with `g` read already into `after` (consumed), or read here when
  // null.
  update_result incremental_update(const graph& g, detail::graph_snapshot* after,
                                   bool reinstantiate);
  bool set_changed_nodes(const graph& g, const detail::graph_comparison& c, update_result& out);
  // After node `origin` (of `kind`) was set to g's parameters node by node: a host node's callable
  // is owned, a copy disabled by a zero size is enabled again.
  void after_node_set(const graph& g, cudaGraphNode_t origin, node_kind kind);
  // update_incremental's ends: `g` adopted after a node-by-node update (its read, `after`); a new
  // instantiation after a refusal, where `reinstantiate` allows and the graph is not pinned.
  void adopt_node_by_node(const graph& g, detail::graph_snapshot&& after);
  update_result last_resort(const graph& g, update_result out, bool reinstantiate);

  cudaGraphExec_t handle_ = nullptr;
  bool tracks_launches_ = false;  // true once the executable graph owns callables set node by node
  mutable bool launched_ = false; // the first launch was recorded (exec_facts)
  bool step_launches_ = false;    // launches run step by step (step_through_launches)
  // graph definitions an update replaced wait for the next launch to be destroyed
  mutable bool retired_ = false;
  std::unique_ptr<detail::exec_state> impl_;
};

//! Instantiates `g` (`cudaGraphInstantiateWithParams`). instantiate_flags::upload needs the
//! overload taking a stream. Thread safety: reads `g`; instantiating one graph from several threads
//! at once is allowed.
//! \throws cuda_error when instantiation fails; the message gives CUDA's instantiate result
//!         and names the offending node; std::invalid_argument for the upload flag without a
//!         stream, or an empty (moved-from) graph.
[[nodiscard]] graph_exec instantiate(const graph& g,
                                     instantiate_flags flags = instantiate_flags::none,
                                     const stream* upload_stream = nullptr,
                                     std::source_location where = std::source_location::current());
//! Instantiates `g` and uploads it on `upload_stream` (adds instantiate_flags::upload).
//! \throws as instantiate(const graph&, instantiate_flags, const stream*).
[[nodiscard]] inline graph_exec
instantiate(const graph& g, instantiate_flags flags, const stream& upload_stream,
            std::source_location where = std::source_location::current()) {
  return instantiate(g, flags | instantiate_flags::upload, &upload_stream, where);
}

//! The one point at which every resource of finished launches has been destroyed. Resources (host
//! callables, child graphs' resources, kept buffers) are released once nothing can use them: no
//! graph or executable graph object refers to them and no queued launch uses them. CUDA hands those
//! tied to user objects over from its own thread, some time after the last launch finished;
//! reclaim_resources() waits (at most `timeout`) until CUDA has handed over every such resource
//! that no graph or executable graph object holds any more, then destroys, on the calling thread,
//! all that no queued launch can use. So after the executable graphs and graphs are destroyed and
//! their streams synchronised, a call returning 0 has destroyed every one of their resources,
//! exactly once. Returns how many items still wait: for a launch that has not finished (an
//! unsynchronised stream), or, when the timeout expired, for CUDA's hand-over. Conveyor destroys
//! released resources itself, without waiting, whenever an executable graph is instantiated,
//! updated or destroyed. Thread-safe; never throws; never waits longer than `timeout` (a launch
//! still running is not waited for: it keeps what it uses).
std::size_t reclaim_resources(std::chrono::milliseconds timeout = std::chrono::seconds(2)) noexcept;

} // namespace conveyor
