#pragma once
//! \file graph.hpp
//! conveyor::graph: the graph definition (`cudaGraph_t`) and its explicit builder.

#include "conveyor/define/kernel_args.hpp"
#include "conveyor/define/node.hpp"
#include "conveyor/runtime/event.hpp"
#include "conveyor/runtime/stream.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace conveyor {

//! A memory allocation node and the device address it provides (valid while the graph runs, until a
//! mem_free node or, with instantiate_flags::auto_free_on_launch, the next launch).
struct allocation {
  conveyor::node node; //!< the cudaGraphNodeTypeMemAlloc node
  void* pointer;       //!< the virtual address reserved for the allocation
  //! The address as a `T*` (e.g. `a.as<float>()`), for kernel arguments and copies of typed data.
  template <class T>
  [[nodiscard]] T* as() const noexcept {
    return static_cast<T*>(pointer);
  }
};

//! Access a device other than its own gets to a graph allocation (a `cudaMemAccessDesc` of the
//! allocation node). A plain value.
struct allocation_access {
  int device = 0;         //!< the device whose kernels and copies reach the allocation
  bool read_only = false; //!< cudaMemAccessFlagsProtRead; else cudaMemAccessFlagsProtReadWrite
};

//! Where a graph allocation lives and who reaches it: the pool properties and access descriptors of
//! its allocation node (`cudaMemAllocNodeParams`: poolProps, accessDescs). A plain value; the
//! default is an allocation on the current device that only it reaches, what mem_alloc(deps, bytes)
//! makes.
struct allocation_options {
  //! The device whose memory holds the allocation (poolProps.location); -1: the calling thread's
  //! current device.
  int device = -1;
  //! Other devices that reach it (CUDA maps it for each, over NVLink or PCIe: no
  //! cudaDeviceEnablePeerAccess needed). Each must be able to access `device`'s memory
  //! (cudaDeviceCanAccessPeer).
  std::vector<allocation_access> peers;
  //! poolProps.usage: how the pool's memory is meant to be used (a cudaMemPoolCreateUsage* bit
  //! mask, e.g. cudaMemPoolCreateUsageHwDecompress on GPUs with a decompression engine); 0:
  //! ordinary memory. The other pool properties CUDA fixes for graph allocations (pinned allocation
  //! type, no IPC handle types).
  unsigned short usage = 0;
};

//! A CUDA graph definition (`cudaGraph_t`), move-only, with an explicit builder for every node
//! kind.
//!
//! Each builder call adds one node and returns its handle; dependencies are given as a braced list
//! first (`g.memset({a, b}, ...)`) or added later with `node::precede` / `node::succeed`. Every
//! overload without a dependency list adds a node with no dependencies. Every builder call throws
//! std::invalid_argument when a dependency belongs to another graph, and (for host, event and
//! memory nodes) when the graph is the body of a conditional node, where CUDA does not allow those
//! kinds. Every member but get(), note_raw_change(), wrap() and owns() (and moving and
//! destroying) throws std::invalid_argument for an empty (moved-from) graph, before changing
//! anything. The graph owns what its nodes need (host callables, child graphs' resources) and
//! shares it with every clone and executable graph made from it: CUDA user objects
//! (`cudaUserObjectCreate`, `cudaGraphRetainUserObject`) tie them to the CUDA graph, so an
//! executable graph keeps them until its last queued launch has finished, even after the graph
//! object is gone. Thread safety: like CUDA's graph objects, a graph is not thread-safe: one thread
//! at a time may add nodes, edges or labels; different graphs may be built, captured, instantiated
//! and updated concurrently from different threads.
class graph {
public:
  //! Creates an empty graph (`cudaGraphCreate`).
  //! \throws cuda_error when creation fails.
  graph();
  //! Wraps an existing handle; with ownership::owned the graph destroys it (`cudaGraphDestroy`).
  [[nodiscard]] static graph adopt(cudaGraph_t handle, ownership own = ownership::owned);

  //! Takes over `other`'s graph; `other` is left empty (get() == nullptr).
  graph(graph&& other) noexcept = default;
  //! Replaces this graph by `other`'s (the old one is let go as by the destructor).
  graph& operator=(graph&& other) noexcept;
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  //! Lets go of the graph: destroys it (`cudaGraphDestroy`) and what it keeps alive, unless an
  //! executable graph still refers to its nodes; then only its resources are let go (executable
  //! graphs hold what their launches use through CUDA user objects, not through the definition).
  //! Never throws.
  ~graph();

  //! The CUDA handle (null for a moved-from graph). Conveyor keeps one fact about the graph that a
  //! change made through this handle (or a node's) is not seen in: which kernel nodes hold
  //! thread-block cluster attributes, those inside child graphs and conditional bodies included —
  //! none for nodes the builder adds, read when a capture ends — which whole-graph updates compare
  //! (CUDA reports new cluster dimensions applied and keeps the old ones). After setting launch
  //! attributes or adding nodes through raw handles (cudaGraphKernelNodeSetAttribute,
  //! cudaGraphKernelNodeCopyAttributes, cudaGraphAddChildGraphNode), call note_raw_change().
  [[nodiscard]] cudaGraph_t get() const noexcept;

  //! Tells Conveyor that the graph was changed through raw CUDA handles (get(), node::get()): what
  //! it knows of the graph without reading it — which kernel nodes hold thread-block cluster
  //! attributes — is read from the graph again by the next whole-graph update (graph_exec::update)
  //! from it. graphed calls it before its `transform`. Never throws. Thread safety: as other
  //! changes of the graph (not concurrently with its other uses).
  void note_raw_change() noexcept;

  // ---- kernel
  // ----------------------------------------------------------------------------------------------
  //! Adds a kernel node running `kernel<<<cfg.grid, cfg.block, cfg.shared_bytes>>>(args...)`
  //! (`cudaGraphAddKernelNode`). Arguments are checked against the kernel's parameters at compile
  //! time and copied into the node. Typed dependencies (`{programmatic(a), b}`), and with
  //! cfg.programmatic every dependency that is a kernel node, become programmatic or
  //! launch-completion edges (`cudaGraphAddDependencies` with `cudaGraphEdgeData`); cfg.priority
  //! sets `cudaLaunchAttributePriority` on the node. All or nothing: when an edge or attribute is
  //! refused, the node is removed again.
  //! \throws std::invalid_argument when the graph is empty (moved-from), a dependency belongs
  //!         to another graph, or a typed dependency is not a kernel node; cuda_error when CUDA
  //!         rejects the launch configuration, function, priority or an edge.
  template <class... Params, class... Args>
  node kernel(const node_list& deps, const launch_config& cfg, void (*fn)(Params...),
              Args&&... args) {
    auto values = make_kernel_args(fn, std::forward<Args>(args)...);
    return add_kernel(deps, cfg, reinterpret_cast<const void*>(fn), values.pointers());
  }
  //! As above, with no dependencies (a root node).
  template <class... Params, class... Args>
  node kernel(const launch_config& cfg, void (*fn)(Params...), Args&&... args) {
    return kernel(node_list{}, cfg, fn, std::forward<Args>(args)...);
  }
  //! Adds a kernel node from an untyped function pointer and argument array (as
  //! cudaKernelNodeParams takes them), with edge types and attributes as kernel().
  //! \throws as kernel().
  node add_kernel(const node_list& deps, const launch_config& cfg, const void* function,
                  void** arguments);

  // ---- memory
  // ----------------------------------------------------------------------------------------------
  //! Adds a 1D copy of `bytes` bytes (`cudaGraphAddMemcpyNode1D`). Host memory should be pinned. A
  //! copy of 0 bytes adds an empty node instead (CUDA has no zero-size copy node; stream capture
  //! likewise records nothing), so the dependencies are kept and the graph does nothing there.
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects the pointers or kind.
  node memcpy(const node_list& deps, void* dst, const void* src, std::size_t bytes,
              cudaMemcpyKind kind = cudaMemcpyDefault);
  //! As above, with no dependencies (a root node).
  node memcpy(void* dst, const void* src, std::size_t bytes,
              cudaMemcpyKind kind = cudaMemcpyDefault) {
    return memcpy(node_list{}, dst, src, bytes, kind);
  }
  //! Adds a 2D copy of `height` rows of `width_bytes` bytes between pitched buffers
  //! (`cudaGraphAddMemcpyNode` with a depth-1 cudaMemcpy3DParms). Pitches are in bytes. A copy of 0
  //! rows or 0 bytes a row adds an empty node.
  //! \throws std::invalid_argument when a pitch is smaller than width_bytes or the graph is
  //!         empty (moved-from); cuda_error when CUDA rejects it.
  node memcpy_2d(const node_list& deps, void* dst, std::size_t dst_pitch, const void* src,
                 std::size_t src_pitch, std::size_t width_bytes, std::size_t height,
                 cudaMemcpyKind kind = cudaMemcpyDefault);
  //! As above, with no dependencies (a root node).
  node memcpy_2d(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                 std::size_t width_bytes, std::size_t height,
                 cudaMemcpyKind kind = cudaMemcpyDefault) {
    return memcpy_2d(node_list{}, dst, dst_pitch, src, src_pitch, width_bytes, height, kind);
  }
  //! Adds a memset of `count` elements of T to `value` (`cudaGraphAddMemsetNode`). A memset of 0
  //! elements adds an empty node (as for memcpy). CUDA's memset nodes set elements of 1, 2 or 4
  //! bytes; an 8-byte T (double, std::int64_t, a pointer) is set as 2 × `count` 4-byte elements
  //! when both halves of `value` are equal (0.0, 0, nullptr, -1, ...).
  //! \throws std::invalid_argument for an 8-byte value whose halves differ (say 1.0: use a
  //!         kernel, or copy from a filled buffer), or an empty (moved-from) graph; cuda_error
  //!         when CUDA rejects the pointer.
  template <class T>
  node memset(const node_list& deps, T* dst, std::type_identity_t<T> value, std::size_t count) {
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                  "conveyor: memset elements must be 1, 2, 4 or 8 bytes wide");
    if constexpr (sizeof(T) == 8) {
      std::uint32_t halves[2];
      std::memcpy(halves, &value, sizeof value);
      if (halves[0] != halves[1]) throw_wide_memset(sizeof(T));
      return memset_2d(deps, dst, 0, halves[0], 4, count * 2, 1);
    } else {
      return memset_2d(deps, dst, 0, bit_pattern(value), sizeof(T), count, 1);
    }
  }
  //! As above, with no dependencies (a root node).
  template <class T>
  node memset(T* dst, std::type_identity_t<T> value, std::size_t count) {
    return memset(node_list{}, dst, value, count);
  }
  //! Adds a pitched memset: `height` rows of `width` elements of `element_size` bytes (1, 2 or 4),
  //! rows `pitch` bytes apart (ignored when height is 1), each element set to the low bytes of
  //! `value`. A width or height of 0 adds an empty node.
  //! \throws std::invalid_argument for another element size, a pitch below the row width
  //!         when height > 1, or an empty (moved-from) graph; cuda_error when CUDA rejects it.
  node memset_2d(const node_list& deps, void* dst, std::size_t pitch, unsigned value,
                 unsigned element_size, std::size_t width, std::size_t height);
  //! Adds a memory allocation node of `bytes` bytes on the current device
  //! (`cudaGraphAddMemAllocNode`).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects it.
  allocation mem_alloc(const node_list& deps, std::size_t bytes);
  //! As above, with no dependencies (a root node).
  allocation mem_alloc(std::size_t bytes) { return mem_alloc(node_list{}, bytes); }
  //! Adds a memory allocation node of `bytes` bytes on the device and with the peer access
  //! `options` give (`cudaGraphAddMemAllocNode` with its pool properties and access descriptors).
  //! Graph allocations of a device come from its graph memory pool, which every executable graph of
  //! the device shares (graph_memory.hpp).
  //! \throws std::invalid_argument when the graph is empty (moved-from), the device or a peer
  //!         is not a visible device, a peer is the allocation's own device or named twice, or a
  //!         peer cannot access the device's memory (no peer path); cuda_error when CUDA rejects
  //!         the node.
  allocation mem_alloc(const node_list& deps, std::size_t bytes, const allocation_options& options);
  //! Adds a node freeing `pointer`, which a mem_alloc node of this graph (or an earlier launch)
  //! provided (`cudaGraphAddMemFreeNode`).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when the pointer is not a graph allocation.
  node mem_free(const node_list& deps, void* pointer);
  //! As above, with no dependencies (a root node).
  node mem_free(void* pointer) { return mem_free(node_list{}, pointer); }

  // ---- host, child, empty, events
  // ----------------------------------------------------------------------------
  //! Adds a host node that calls `f()` on a CPU thread each time the graph runs
  //! (`cudaGraphAddHostNode`). The graph owns the callable. It must not call CUDA APIs, and must
  //! not throw (an exception would end the program).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects it.
  template <class F>
  node host(const node_list& deps, F&& f) {
    auto callable = std::make_shared<std::function<void()>>(std::forward<F>(f));
    return add_host(deps, std::move(callable));
  }
  //! As above, with no dependencies (a root node).
  template <class F>
  node host(F&& f) {
    return host(node_list{}, std::forward<F>(f));
  }
  //! Adds a node running a copy of `body` (`cudaGraphAddChildGraphNode`); later changes to `body`
  //! do not affect it. The parent keeps the child's resources alive.
  //! \throws std::invalid_argument when this graph or `body` is empty (moved-from), or `body`
  //!         holds a conditional node; cuda_error when it holds other kinds child graphs do not
  //!         allow (memory allocation or free nodes: the message names the node, the rule and the
  //!         fix).
  node child(const node_list& deps, const graph& body);
  //! As above, with no dependencies (a root node).
  node child(const graph& body) { return child(node_list{}, body); }
  //! Adds an empty node, a cheap join point (`cudaGraphAddEmptyNode`).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects it.
  node empty(const node_list& deps = {});
  //! Adds a node of any kind from CUDA's generic parameters (`cudaGraphAddNode`): the way to add
  //! kinds without a builder call of their own (external semaphores, ...). The caller keeps alive
  //! what the parameters point to (keep_alive). `params` is updated by CUDA as cudaGraphAddNode
  //! does (e.g. conditional bodies are returned). A conditional node added this way is not recorded
  //! as add_conditional records one: its bodies cannot be read back, so diff cannot compare it and
  //! whole-graph updates of graphs holding it are refused (not_supported). Typed dependencies
  //! (`{programmatic(a), b}`) are passed as CUDA's edge data; both ends must be kernel nodes.
  //! \throws std::invalid_argument when the graph is empty (moved-from), a dependency belongs
  //!         to another graph, the kind is not allowed in a conditional body, or a dependency is
  //!         typed and an end is not a kernel node; cuda_error when CUDA rejects it.
  node add_node(const node_list& deps, cudaGraphNodeParams& params);
  //! Adds a node that records `e` (`cudaGraphAddEventRecordNode`). The event must outlive every
  //! launch.
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects it.
  node event_record(const node_list& deps, const event& e);
  //! As above, with no dependencies (a root node).
  node event_record(const event& e) { return event_record(node_list{}, e); }
  //! Adds a node that waits for `e` (`cudaGraphAddEventWaitNode`). The event must outlive every
  //! launch.
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when CUDA rejects it.
  node event_wait(const node_list& deps, const event& e);
  //! As above, with no dependencies (a root node).
  node event_wait(const event& e) { return event_wait(node_list{}, e); }

  // ---- structure
  // -------------------------------------------------------------------------------------------
  //! A deep copy (`cudaGraphClone`), labels carried over, resources shared.
  //! \throws std::invalid_argument when the graph is empty (moved-from) or holds a
  //!         conditional node (CUDA cannot clone those); cuda_error when cloning fails.
  [[nodiscard]] graph clone() const;
  //! Number of nodes and edges (`cudaGraphGetNodes`, `cudaGraphGetEdges`).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when the query fails (as for every structure query below).
  [[nodiscard]] std::size_t node_count() const;
  //! Number of edges (dependencies).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when the query fails.
  [[nodiscard]] std::size_t edge_count() const;
  //! All nodes, in creation order. \throws as node_count().
  [[nodiscard]] std::vector<node> nodes() const;
  //! The nodes without dependencies (`cudaGraphGetRootNodes`). \throws as node_count().
  [[nodiscard]] std::vector<node> root_nodes() const;
  //! All edges as (from, to). \throws as node_count().
  [[nodiscard]] std::vector<std::pair<node, node>> edges() const;
  //! The type of the edge from -> to, or nullopt when there is none (`cudaGraphNodeGetDependencies`
  //! with edge data).
  //! \throws std::invalid_argument when the graph is empty (moved-from), a node is empty or
  //!         of another graph, or the edge has ports Conveyor does not name; cuda_error when the
  //!         query fails.
  [[nodiscard]] std::optional<edge_type> edge_type_between(const node& from, const node& to) const;
  //! Changes the type of the existing edge from -> to (`cudaGraphRemoveDependencies`, then
  //! `cudaGraphAddDependencies` with the new `cudaGraphEdgeData`; on failure the old edge is put
  //! back). Executable graphs made before are not affected (a whole-graph update refuses the
  //! change: edge types are topology).
  //! \throws std::invalid_argument when the graph is empty (moved-from), there is no such
  //!         edge, a node belongs to another graph, or `type` is not full and an end is not a
  //!         kernel node; cuda_error when CUDA refuses it.
  void set_edge_type(const node& from, const node& to, edge_type type);
  //! Wraps a CUDA node handle of this graph (e.g. from a CUDA call on get()) as a conveyor::node.
  [[nodiscard]] node wrap(cudaGraphNode_t handle) const noexcept;
  //! True when `n` is a node of this graph (not of another graph, a clone or a body).
  [[nodiscard]] bool owns(const node& n) const noexcept;

  //! Keeps `item` alive as long as this graph or anything made from it (clones, parents that embed
  //! it, executable graphs and their queued launches). Thread-safe with respect to other keep_alive
  //! calls. \throws std::invalid_argument for an empty (moved-from) graph.
  void keep_alive(std::shared_ptr<void> item);

  //! True when the graph holds a conditional node at its top level (such a graph cannot be cloned
  //! or embedded as a child graph).
  //! \throws std::invalid_argument for an empty (moved-from) graph;
  //!         cuda_error when reading the graph fails.
  [[nodiscard]] bool has_conditional() const;

private:
  friend struct detail::access;
  explicit graph(std::shared_ptr<detail::graph_state> state) noexcept : state_(std::move(state)) {}
  node add_host(const node_list& deps, std::shared_ptr<std::function<void()>> callable);
  [[noreturn]] static void throw_wide_memset(std::size_t bytes);
  template <class T>
  static unsigned bit_pattern(T value) noexcept {
    unsigned bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    return bits;
  }
  std::shared_ptr<detail::graph_state> state_;
};

} // namespace conveyor
