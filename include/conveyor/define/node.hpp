#pragma once
//! \file node.hpp
//! conveyor::node, a non-owning handle to one node of a graph, and node_list, the dependencies
//! given at insertion.

#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/kernel_args.hpp"
#include "conveyor/define/node_kind.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

namespace conveyor {

class graph;
struct dependency;
namespace detail {
struct graph_state;
struct access; // the library's own way in (an "attorney"): not part of the API
} // namespace detail

//! A handle to one node of a conveyor::graph: the CUDA node plus the graph it belongs to, and for
//! kernel nodes made by the builder the kernel and launch configuration they were added with (a
//! plain value of 64 bytes, copied without allocation). Nodes come from the builder (graph::kernel,
//! ...), graph::nodes(), capture_into() and graph::wrap(). Valid while the graph (or an executable
//! graph instantiated from it) is alive. Taskflow-style dependency calls: `a.precede(b)` adds the
//! edge a → b, `b.succeed(a)` the same edge. Thread safety: a plain value; the calls that change
//! the graph (precede, succeed, label) must not run concurrently with other changes to the same
//! graph.
class node {
public:
  //! An empty handle (get() == nullptr).
  node() noexcept = default;

  //! The CUDA node handle. After setting a launch attribute through it, call
  //! graph::note_raw_change() on its graph (whole-graph updates compare thread-block cluster
  //! attributes Conveyor knows without reading the graph).
  [[nodiscard]] cudaGraphNode_t get() const noexcept { return handle_; }
  //! The CUDA graph containing this node, or null for an empty handle.
  [[nodiscard]] cudaGraph_t graph_handle() const noexcept;
  //! True for a non-empty handle.
  explicit operator bool() const noexcept { return handle_ != nullptr; }

  //! The node's kind (`cudaGraphNodeGetType`).
  //! \throws cuda_error when the handle is invalid.
  [[nodiscard]] node_kind kind() const;

  //! Adds edges this → each of `successors` (`cudaGraphAddDependencies`, with `cudaGraphEdgeData`
  //! for an edge type other than full). All or none: every end is checked before the first edge is
  //! added, and the edges already added are removed again when CUDA refuses a later one. Returns
  //! *this for chaining.
  //! \throws std::invalid_argument when a node is empty or belongs to another graph, or
  //!         when `type` is not full and an end is not a kernel node (CUDA allows programmatic
  //!         edges only between kernel nodes); cuda_error when CUDA rejects it (e.g. the edge
  //!         exists already).
  node& precede(std::initializer_list<node> successors, edge_type type = edge_type::full);
  //! Adds the edge this → `successor` of type `type`: `a.precede(b, edge_type::programmatic)`.
  //! \throws as precede(std::initializer_list, edge_type).
  node& precede(const node& successor, edge_type type) { return precede({successor}, type); }
  //! Adds edges each of `predecessors` → this (`cudaGraphAddDependencies`), all or none as precede.
  //! Returns *this for chaining.
  //! \throws std::invalid_argument when a node is empty or belongs to another graph;
  //!         cuda_error when CUDA rejects it.
  node& succeed(std::initializer_list<node> predecessors);
  //! Adds edges from each of `predecessors` → this, each of its own type:
  //! `c.succeed({programmatic(a), b})` (`cudaGraphAddDependencies` with `cudaGraphEdgeData`), all
  //! or none as precede. Returns *this for chaining.
  //! \throws as precede(std::initializer_list, edge_type).
  node& succeed(std::initializer_list<dependency> predecessors);
  //! Variadic form of precede: `a.precede(b, c)`. \throws as precede(std::initializer_list).
  template <class... Nodes>
  node& precede(const node& first, const Nodes&... rest) {
    return precede({first, rest...});
  }
  //! Variadic form of succeed: `c.succeed(a, b)`. \throws as succeed(std::initializer_list).
  template <class... Nodes>
  node& succeed(const node& first, const Nodes&... rest) {
    return succeed({first, rest...});
  }

  //! Gives the node a readable label, used by exports and in update and error reports. Returns
  //! *this.
  //! \throws std::invalid_argument on an empty handle.
  node& label(std::string text);
  //! The node's label, or an empty string when none was given.
  [[nodiscard]] std::string label() const;

  //! The nodes this node depends on (`cudaGraphNodeGetDependencies`).
  //! \throws cuda_error when the handle is invalid.
  [[nodiscard]] std::vector<node> dependencies() const;
  //! The nodes that depend on this node (`cudaGraphNodeGetDependentNodes`).
  //! \throws cuda_error when the handle is invalid.
  [[nodiscard]] std::vector<node> dependents() const;

  //! Same CUDA node (handles compared; a node belongs to one graph).
  friend bool operator==(const node& a, const node& b) noexcept { return a.handle_ == b.handle_; }

  //! For a kernel node returned by graph::kernel / add_kernel: the kernel it was added with; null
  //! for every other handle (other kinds, and nodes obtained from capture or graph::nodes()).
  [[nodiscard]] const void* kernel_function() const noexcept { return function_; }
  //! The launch configuration the kernel node was added with; meaningful only when
  //! kernel_function() is not null. (A change made to the node behind Conveyor's back, with
  //! cudaGraphKernelNodeSetParams, is not seen here.)
  [[nodiscard]] const launch_config& kernel_config() const noexcept { return config_; }

private:
  friend struct detail::access;
  friend class node_list;
  node(cudaGraphNode_t handle, detail::graph_state* owner) noexcept :
      handle_(handle),
      owner_(owner) {}
  node(cudaGraphNode_t handle, detail::graph_state* owner, const void* function,
       const launch_config& cfg) noexcept :
      handle_(handle),
      owner_(owner),
      function_(function),
      config_(cfg) {}

  cudaGraphNode_t handle_ = nullptr;
  detail::graph_state* owner_ = nullptr;
  const void* function_ = nullptr;
  launch_config config_{};
};

//! One dependency given at insertion or to node::succeed: the node depended on and the edge's type.
//! A node converts to a full dependency, so `{a, b}` and `{programmatic(a), b}` are both dependency
//! lists. A plain value.
struct dependency {
  //! A dependency on `from` of type `type` (full unless told).
  dependency(const node& from, edge_type type = edge_type::full) noexcept :
      from(from),
      type(type) {}                 // NOLINT
  conveyor::node from;              //!< the predecessor
  edge_type type = edge_type::full; //!< what the new node waits for
};

//! A programmatic dependency on kernel node `from` (edge_type::programmatic): the new kernel node
//! may start before `from` completes and must call conveyor::device::wait_for_dependencies() before
//! reading what `from` writes.
[[nodiscard]] inline dependency programmatic(const node& from) noexcept {
  return {from, edge_type::programmatic};
}
//! A launch-completion dependency on kernel node `from` (edge_type::launch_completion): the new
//! kernel node may start once every block of `from` has started.
[[nodiscard]] inline dependency launch_completion(const node& from) noexcept {
  return {from, edge_type::launch_completion};
}

//! A list of nodes to depend on, given at insertion: `g.kernel({a, b}, cfg, fn, args...)`. Accepts
//! a braced list, a std::vector<node> or a std::span<const node>. Holds up to `inline_capacity`
//! nodes without allocating, so that adding a node costs no heap allocation in the common case.
//! Thread safety: a plain value.
class node_list {
public:
  //! Dependencies held without a heap allocation.
  static constexpr std::size_t inline_capacity = 8;

  //! No dependencies.
  node_list() = default;
  //! \throws std::invalid_argument when a node is empty.
  node_list(std::initializer_list<node> nodes) { assign(nodes.begin(), nodes.size()); }
  //! \throws std::invalid_argument when a node is empty.
  node_list(std::span<const node> nodes) { assign(nodes.data(), nodes.size()); }
  //! \throws std::invalid_argument when a node is empty.
  node_list(const std::vector<node>& nodes) { assign(nodes.data(), nodes.size()); }
  //! Dependencies with edge types: `{programmatic(a), b}`.
  //! \throws std::invalid_argument when a node is empty.
  node_list(std::initializer_list<dependency> deps) { assign(deps.begin(), deps.size()); }
  //! \throws std::invalid_argument when a node is empty.
  node_list(const std::vector<dependency>& deps) { assign(deps.data(), deps.size()); }

  //! Number of nodes.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  //! True when the list holds no node.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  //! The CUDA handles, contiguous, in order (what the cudaGraphAdd*Node calls take).
  [[nodiscard]] std::span<const cudaGraphNode_t> handles() const noexcept {
    return {size_ <= inline_capacity ? inline_handles_.data() : heap_handles_.data(), size_};
  }
  //! Node `i` (0-based); `i` must be below size().
  [[nodiscard]] node operator[](std::size_t i) const noexcept {
    return {handles()[i], size_ <= inline_capacity ? inline_owners_[i] : heap_owners_[i]};
  }
  //! The type of the edge from node `i`; `i` must be below size().
  [[nodiscard]] edge_type type(std::size_t i) const noexcept {
    return typed_ ? (size_ <= inline_capacity ? inline_types_[i] : heap_types_[i])
                  : edge_type::full;
  }
  //! True when some dependency is not full (programmatic or launch completion).
  [[nodiscard]] bool typed() const noexcept { return typed_; }

private:
  friend struct detail::access;
  void assign(const node* nodes, std::size_t count);
  void assign(const dependency* deps, std::size_t count);
  // size_ = count, heap storage (handles, owners) sized when above inline_capacity
  void set_size(std::size_t count);
  void store(std::size_t i, const node& n) noexcept; // entry i: n's handle and owner
  std::array<edge_type, inline_capacity> inline_types_{};
  std::vector<edge_type> heap_types_;
  bool typed_ = false;
  std::array<cudaGraphNode_t, inline_capacity> inline_handles_{};
  std::array<detail::graph_state*, inline_capacity> inline_owners_{};
  std::vector<cudaGraphNode_t> heap_handles_;
  std::vector<detail::graph_state*> heap_owners_;
  std::size_t size_ = 0;
};

} // namespace conveyor
