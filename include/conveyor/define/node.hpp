#pragma once
//! \file node.hpp
//! conveyor::node, a non-owning handle to one node of a graph, and node_kind.

#include "conveyor/define/kernel_args.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

namespace detail {
struct graph_state;
}

//! The kind of a graph node, in CUDA's terms (`cudaGraphNodeType`).
enum class node_kind {
  kernel,       //!< cudaGraphNodeTypeKernel
  memcpy,       //!< cudaGraphNodeTypeMemcpy
  memset,       //!< cudaGraphNodeTypeMemset
  host,         //!< cudaGraphNodeTypeHost
  child_graph,  //!< cudaGraphNodeTypeGraph
  empty,        //!< cudaGraphNodeTypeEmpty
  event_wait,   //!< cudaGraphNodeTypeWaitEvent
  event_record, //!< cudaGraphNodeTypeEventRecord
  mem_alloc,    //!< cudaGraphNodeTypeMemAlloc
  mem_free,     //!< cudaGraphNodeTypeMemFree
  conditional,  //!< cudaGraphNodeTypeConditional
  other,        //!< any other type (external semaphores, batch memory operations)
};

//! The kind's name as used in exports ("kernel", "memcpy", "child_graph", ...).
[[nodiscard]] std::string_view to_string(node_kind kind) noexcept;

//! Converts CUDA's node type to node_kind.
[[nodiscard]] node_kind to_node_kind(cudaGraphNodeType type) noexcept;

//! A handle to one node of a conveyor::graph: the CUDA node plus the graph it belongs to, and for kernel nodes made
//! by the builder the kernel and launch configuration they were added with (a plain value of 56 bytes, copied
//! without allocation). Valid while the graph (or an executable graph instantiated from it) is alive.
//! Taskflow-style dependency calls: `a.precede(b)` adds the edge a → b, `b.succeed(a)` the same edge.
class node {
public:
  //! An empty handle (get() == nullptr).
  node() noexcept = default;
  //! Wraps `handle` as a node of the graph whose state is `owner`. Used by conveyor::graph; rarely called directly.
  node(cudaGraphNode_t handle, detail::graph_state* owner) noexcept : handle_(handle), owner_(owner) {}
  //! Wraps a kernel node together with the function and launch configuration it was added with (graph::kernel),
  //! so that graph_exec::set_kernel_args can set its arguments without looking anything up.
  node(cudaGraphNode_t handle, detail::graph_state* owner, const void* function, const launch_config& cfg) noexcept
      : handle_(handle), owner_(owner), function_(function), config_(cfg) {}

  //! The CUDA node handle.
  [[nodiscard]] cudaGraphNode_t get() const noexcept { return handle_; }
  //! The CUDA graph containing this node.
  [[nodiscard]] cudaGraph_t graph_handle() const noexcept;
  //! True for a non-empty handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  //! The node's kind (`cudaGraphNodeGetType`).
  //! \throws cuda_error when the handle is invalid.
  [[nodiscard]] node_kind kind() const;

  //! Adds edges this → each of `successors` (`cudaGraphAddDependencies`). Returns *this for chaining.
  //! \throws std::invalid_argument when a node is empty or belongs to another graph; cuda_error when CUDA rejects it.
  node& precede(std::initializer_list<node> successors);
  //! Adds edges each of `predecessors` → this. Returns *this for chaining.
  //! \throws std::invalid_argument when a node is empty or belongs to another graph; cuda_error when CUDA rejects it.
  node& succeed(std::initializer_list<node> predecessors);
  //! Variadic forms of precede/succeed: `a.precede(b, c)`.
  template <class... Nodes>
  node& precede(const node& first, const Nodes&... rest) {
    return precede({first, rest...});
  }
  template <class... Nodes>
  node& succeed(const node& first, const Nodes&... rest) {
    return succeed({first, rest...});
  }

  //! Gives the node a readable label, used by exports and in update reports. Returns *this.
  //! \throws std::invalid_argument on an empty handle.
  node& label(std::string text);
  //! The node's label, or an empty string when none was given.
  [[nodiscard]] std::string label() const;

  //! The nodes this node depends on, and the nodes that depend on it (`cudaGraphNodeGetDependencies`,
  //! `cudaGraphNodeGetDependentNodes`).
  //! \throws cuda_error when the handle is invalid.
  [[nodiscard]] std::vector<node> dependencies() const;
  [[nodiscard]] std::vector<node> dependents() const;

  //! Same CUDA node (handles compared; a node belongs to one graph).
  friend bool operator==(const node& a, const node& b) noexcept { return a.handle_ == b.handle_; }

  //! The graph state this node belongs to (for conveyor's own bookkeeping).
  [[nodiscard]] detail::graph_state* owner() const noexcept { return owner_; }
  //! For a kernel node returned by graph::kernel / add_kernel: the kernel it was added with; null for every other
  //! handle (other kinds, and nodes obtained from capture or graph::nodes()).
  [[nodiscard]] const void* kernel_function() const noexcept { return function_; }
  //! The launch configuration the kernel node was added with; meaningful only when kernel_function() is not null.
  //! (A change made to the node behind Conveyor's back, with cudaGraphKernelNodeSetParams, is not seen here.)
  [[nodiscard]] const launch_config& kernel_config() const noexcept { return config_; }

private:
  cudaGraphNode_t handle_ = nullptr;
  detail::graph_state* owner_ = nullptr;
  const void* function_ = nullptr;
  launch_config config_{};
};

//! A list of nodes to depend on, given at insertion: `g.kernel({a, b}, cfg, fn, args...)`. Accepts a braced list,
//! a std::vector<node> or a std::span<const node>. Holds up to `inline_capacity` nodes without allocating, so that
//! adding a node costs no heap allocation in the common case.
class node_list {
public:
  //! Dependencies held without a heap allocation.
  static constexpr std::size_t inline_capacity = 8;

  node_list() = default;
  //! \throws std::invalid_argument when a node is empty.
  node_list(std::initializer_list<node> nodes) { assign(nodes.begin(), nodes.size()); }
  //! \throws std::invalid_argument when a node is empty.
  node_list(std::span<const node> nodes) { assign(nodes.data(), nodes.size()); }
  //! \throws std::invalid_argument when a node is empty.
  node_list(const std::vector<node>& nodes) { assign(nodes.data(), nodes.size()); }

  //! Number of nodes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  //! True when the list holds no node.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  //! The CUDA handles, contiguous, in order (what the cudaGraphAdd*Node calls take).
  [[nodiscard]] std::span<const cudaGraphNode_t> handles() const noexcept {
    return {size_ <= inline_capacity ? inline_handles_.data() : heap_handles_.data(), size_};
  }
  //! Node `i` (0-based).
  [[nodiscard]] node operator[](std::size_t i) const noexcept {
    return {handles()[i], size_ <= inline_capacity ? inline_owners_[i] : heap_owners_[i]};
  }
  //! True when every node belongs to the graph whose state is `owner`.
  [[nodiscard]] bool all_in(const detail::graph_state* owner) const noexcept;

private:
  void assign(const node* nodes, std::size_t count);
  std::array<cudaGraphNode_t, inline_capacity> inline_handles_{};
  std::array<detail::graph_state*, inline_capacity> inline_owners_{};
  std::vector<cudaGraphNode_t> heap_handles_;
  std::vector<detail::graph_state*> heap_owners_;
  std::size_t size_ = 0;
};

} // namespace conveyor
