#pragma once
//! \file node_kind.hpp
//! conveyor::node_kind: the kinds of graph node, with CUDA's own values (`cudaGraphNodeType` /
//! `CUgraphNodeType`).

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <string_view>

namespace conveyor {

//! The kind of a graph node. Each value equals CUDA's (`cudaGraphNodeType`; batch_mem_op is the
//! driver's `CU_GRAPH_NODE_TYPE_BATCH_MEM_OP`, which the runtime does not name), so a node's kind
//! is its CUDA type. Everything Conveyor knows about a kind (its name, how to add, read, compare,
//! set on an executable graph and describe it) lives in one place in the library, one table entry
//! per value (docs/architecture.md).
enum class node_kind : int {
  kernel = cudaGraphNodeTypeKernel, //!< a kernel launch
  memcpy = cudaGraphNodeTypeMemcpy, //!< a copy (1D, 2D or 3D)
  //! a fill of 1-, 2- or 4-byte elements
  //! a CPU callable run by the CUDA runtime
  memset = cudaGraphNodeTypeMemset,
  host = cudaGraphNodeTypeHost,
  child_graph = cudaGraphNodeTypeGraph,                       //!< a nested graph
  empty = cudaGraphNodeTypeEmpty,                             //!< no operation: a join point
  event_wait = cudaGraphNodeTypeWaitEvent,                    //!< waits for an event
  event_record = cudaGraphNodeTypeEventRecord,                //!< records an event
  ext_semaphore_signal = cudaGraphNodeTypeExtSemaphoreSignal, //!< signals external semaphores
  ext_semaphore_wait = cudaGraphNodeTypeExtSemaphoreWait,     //!< waits on external semaphores
  mem_alloc = cudaGraphNodeTypeMemAlloc,                      //!< allocates device memory
  mem_free = cudaGraphNodeTypeMemFree,                        //!< frees a graph allocation
  //! a batch of memory operations (driver API only)
  //! IF / IF-ELSE / WHILE / SWITCH on a device value
  //! a type this version of Conveyor does not know
  batch_mem_op = 12,
  conditional = cudaGraphNodeTypeConditional,
  other = 0x7fff,
};

//! Every kind, in CUDA's order (other last): for tables and for tests that every operation handles
//! every kind.
inline constexpr std::array<node_kind, 15> all_node_kinds{node_kind::kernel,
                                                          node_kind::memcpy,
                                                          node_kind::memset,
                                                          node_kind::host,
                                                          node_kind::child_graph,
                                                          node_kind::empty,
                                                          node_kind::event_wait,
                                                          node_kind::event_record,
                                                          node_kind::ext_semaphore_signal,
                                                          node_kind::ext_semaphore_wait,
                                                          node_kind::mem_alloc,
                                                          node_kind::mem_free,
                                                          node_kind::batch_mem_op,
                                                          node_kind::conditional,
                                                          node_kind::other};

//! The kind's name as used in exports and messages ("kernel", "memcpy", "child_graph", ...). Never
//! throws.
[[nodiscard]] std::string_view to_string(node_kind kind) noexcept;

//! Converts CUDA's node type: the same value, or node_kind::other for a type this version does not
//! know.
[[nodiscard]] node_kind to_node_kind(cudaGraphNodeType type) noexcept;

//! What Conveyor implements for a node kind: read from the library's kind table, one entry per
//! kind.
struct node_kind_support {
  node_kind kind = node_kind::other; //!< the kind the entry describes
  std::string_view name;             //!< to_string(kind)
  //! graph has a typed builder call for it (any kind: graph::add_node)
  bool builder = false;
  //! diff compares every parameter of it (else: always "not comparable")
  bool comparable = false;
  //! update_incremental can set it alone on an executable graph
  bool settable_per_node = false;
  bool allowed_in_conditional_body = false; //!< CUDA allows it in a conditional node's body
};

//! The kind table's entry for `kind`. Never throws.
[[nodiscard]] node_kind_support support_of(node_kind kind) noexcept;

} // namespace conveyor
