#pragma once
//! \file graph_exec.hpp
//! conveyor::graph_exec: an executable graph (`cudaGraphExec_t`): instantiate, upload, launch, per-node setters and
//! whole-graph update.

#include "conveyor/define/graph.hpp"
#include "conveyor/execute/instantiate_flags.hpp"
#include "conveyor/execute/update_result.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace conveyor {

//! An executable graph (`cudaGraphExec_t`), move-only; the destructor destroys it (`cudaGraphExecDestroy`) and never
//! throws. It shares ownership of its source graph's state, so it keeps host callables and child resources alive,
//! and its nodes stay valid for per-node setters after the source `graph` object is gone.
//! Synchronise before destroying an executable graph whose launches are still running host nodes.
class graph_exec {
public:
  //! Takes over `other`'s executable graph; `other` is left empty (get() == nullptr) and may only be destroyed or
  //! assigned to.
  graph_exec(graph_exec&& other) noexcept;
  graph_exec& operator=(graph_exec&&) noexcept;
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  ~graph_exec();

  //! The CUDA handle.
  [[nodiscard]] cudaGraphExec_t get() const noexcept { return handle_; }
  //! The flags it was instantiated with.
  [[nodiscard]] instantiate_flags flags() const noexcept { return flags_; }

  //! Uploads the executable graph to the device ahead of its first launch (`cudaGraphUpload`), so that launch
  //! does not pay for it.
  //! \throws cuda_error when the upload fails.
  void upload(const stream& s) const;
  //! Launches the graph on `s` (`cudaGraphLaunch`); asynchronous.
  //! \throws cuda_error when the launch fails.
  void launch(const stream& s) const;

  // ---- per-node setters (the node is one of the source graph's, or of the graph last applied by an update) -------
  //! Sets a kernel node's function, launch configuration and arguments for later launches
  //! (`cudaGraphExecKernelNodeSetParams`). Arguments are checked against the kernel at compile time.
  //! \throws cuda_error when the node is not a kernel node of the source graph or the change is not allowed
  //!         (e.g. another function in a different context).
  template <class... Params, class... Args>
  void set_kernel(const node& n, const launch_config& cfg, void (*fn)(Params...), Args&&... args) {
    auto values = make_kernel_args(fn, std::forward<Args>(args)...);
    set_kernel_raw(n, cfg, reinterpret_cast<const void*>(fn), values.pointers());
  }
  //! Sets only a kernel node's arguments, keeping its launch configuration (the node's, or the last one given to
  //! set_kernel).
  //! \throws cuda_error as set_kernel; std::invalid_argument when `fn` is not the node's kernel.
  template <class... Params, class... Args>
  void set_kernel_args(const node& n, void (*fn)(Params...), Args&&... args) {
    auto values = make_kernel_args(fn, std::forward<Args>(args)...);
    set_kernel_args_raw(n, reinterpret_cast<const void*>(fn), values.pointers());
  }
  //! Untyped form of set_kernel: `arguments` as cudaKernelNodeParams::kernelParams takes them.
  //! \throws cuda_error as set_kernel.
  void set_kernel_raw(const node& n, const launch_config& cfg, const void* function, void** arguments);
  //! Untyped form of set_kernel_args: `function` must be the kernel the node runs. The launch configuration comes
  //! from the last set_kernel of the node, else from the handle itself when graph::kernel made it (no lookup: a
  //! replay loop pays only the `cudaGraphExecKernelNodeSetParams` call), else from the node, read once
  //! (`cudaGraphKernelNodeGetParams`) and remembered.
  //! \throws cuda_error as set_kernel; std::invalid_argument when `function` is not the node's kernel.
  void set_kernel_args_raw(const node& n, const void* function, void** arguments);
  //! Sets a 1D memcpy node's pointers and size (`cudaGraphExecMemcpyNodeSetParams1D`).
  //! \throws cuda_error when the node is not a memcpy node or the memory is on another device.
  void set_memcpy(const node& n, void* dst, const void* src, std::size_t bytes,
                  cudaMemcpyKind kind = cudaMemcpyDefault);
  //! Sets a memset node to fill `count` elements of T (1, 2 or 4 bytes) at `dst` with `value`
  //! (`cudaGraphExecMemsetNodeSetParams`).
  //! \throws cuda_error when the node is not a memset node or the change is not allowed.
  template <class T>
  void set_memset(const node& n, T* dst, std::type_identity_t<T> value, std::size_t count) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4,
                  "conveyor: memset elements must be 1, 2 or 4 bytes wide");
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    set_memset_raw(n, dst, bits, sizeof(T), count);
  }
  //! Untyped form of set_memset (one row of `count` elements of `element_size` bytes).
  //! \throws cuda_error as set_memset.
  void set_memset_raw(const node& n, void* dst, unsigned value, unsigned element_size, std::size_t count);
  //! Replaces a host node's callable for later launches (`cudaGraphExecHostNodeSetParams`); the executable graph
  //! owns the new callable.
  //! \throws cuda_error when the node is not a host node.
  template <class F>
  void set_host(const node& n, F&& f) {
    set_host_raw(n, std::make_shared<std::function<void()>>(std::forward<F>(f)));
  }
  //! Enables or disables a kernel, memcpy or memset node for later launches (`cudaGraphNodeSetEnabled`).
  //! \throws cuda_error for other node kinds.
  void set_enabled(const node& n, bool enabled);

  // ---- whole-graph update ----------------------------------------------------------------------------------
  //! Updates this executable graph to run `g`'s parameters (`cudaGraphExecUpdate`). `g` must have the same
  //! topology and node kinds as the source; on success its resources are kept alive and its nodes (as well as the
  //! source's) may be passed to the per-node setters. On refusal the result says why and names the offending node;
  //! the executable graph is unchanged.
  //! \throws cuda_error only for errors other than a refused update.
  [[nodiscard]] update_result update(const graph& g);
  //! Tries update(g); when refused, instantiates `g` again with the same flags and replaces this executable graph.
  //! \throws cuda_error when re-instantiation fails.
  update_outcome update_or_reinstantiate(const graph& g);

  //! Brings this executable graph to `g`'s parameters at a cost that scales with what changed: compares `g` with
  //! the graph whose parameters it holds (graph_diff), sets only the nodes that differ; falls back to whole-graph
  //! update when a node cannot be set alone, and (with `reinstantiate` true) to instantiating `g` again when the
  //! topology changed or the update was refused. Nodes of `g` may then be passed to the per-node setters.
  //! \throws cuda_error when reading the graphs or re-instantiating fails.
  incremental_update update_incremental(const graph& g, bool reinstantiate = true);

  //! The graph it was instantiated from (its nodes are the ones CUDA's setters address).
  [[nodiscard]] const std::shared_ptr<detail::graph_state>& source() const noexcept { return source_; }

private:
  friend graph_exec instantiate(const graph&, instantiate_flags, const stream*);
  graph_exec(cudaGraphExec_t handle, std::shared_ptr<detail::graph_state> source, instantiate_flags flags);
  struct kernel_setting {
    const void* function;
    launch_config config;
  };
  // The function and configuration the node runs with now: set_kernel's, the handle's own, or read from the node.
  [[nodiscard]] kernel_setting current_setting(const node& n, cudaGraphNode_t origin);
  // cudaGraphExecKernelNodeSetParams of `origin` (naming `n` in errors).
  void apply_kernel(const node& n, cudaGraphNode_t origin, const launch_config& cfg, const void* function,
                    void** arguments);
  void set_host_raw(const node& n, std::shared_ptr<std::function<void()>> callable);
  void retain(std::shared_ptr<void> item);
  // The node of the instantiation graph that `n` (of it, or of the graph last applied by an update) stands for.
  [[nodiscard]] cudaGraphNode_t origin_of(const node& n);
  // Records that `g`'s parameters are now loaded.
  void adopt_current(const graph& g);
  bool apply_node(cudaGraphNode_t origin, cudaGraphNode_t from, const graph& g);

  cudaGraphExec_t handle_ = nullptr;
  std::shared_ptr<detail::graph_state> source_;  // instantiated from: its nodes address the executable graph
  std::shared_ptr<detail::graph_state> current_; // the graph whose parameters are loaded now
  bool current_exact_ = true;                    // false after a per-node setter changed a parameter
  instantiate_flags flags_ = instantiate_flags::none;
  std::vector<std::shared_ptr<void>> retained_;                 // resources of every graph it has run
  std::unordered_map<cudaGraphNode_t, kernel_setting> configs_; // set_kernel's settings (origin nodes)
  std::unordered_map<cudaGraphNode_t, kernel_setting> read_;    // settings read from nodes without their own
  std::vector<cudaGraphNode_t> origin_nodes_;                  // source_'s nodes in creation order (lazy)
  std::unordered_map<cudaGraphNode_t, cudaGraphNode_t> to_origin_; // current_'s nodes -> origin (lazy)
};

//! Instantiates `g` (`cudaGraphInstantiateWithParams`). instantiate_flags::upload needs the overload taking a stream.
//! \throws cuda_error when instantiation fails; the message gives CUDA's instantiate result and names the offending
//!         node; std::invalid_argument for the upload flag without a stream.
[[nodiscard]] graph_exec instantiate(const graph& g, instantiate_flags flags = instantiate_flags::none,
                                     const stream* upload_stream = nullptr);
//! Instantiates `g` and uploads it on `upload_stream` (adds instantiate_flags::upload).
[[nodiscard]] inline graph_exec instantiate(const graph& g, instantiate_flags flags, const stream& upload_stream) {
  return instantiate(g, flags | instantiate_flags::upload, &upload_stream);
}

} // namespace conveyor
