#pragma once
//! \file graph_diff.hpp
//! Comparing two graphs node by node: same topology or not (and why), and which nodes' parameters
//! differ, with every parameter CUDA runs a node with compared (for kernels: function, context,
//! launch shape, dynamic shared memory, argument bytes and every launch attribute; for edges: their
//! types). The basis of incremental update.

#include "conveyor/define/graph.hpp"
#include "conveyor/define/node_kind.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor {

//! One node whose parameters differ. A plain value.
struct node_change {
  std::size_t position = 0;          //!< the node's position in creation order
  node_kind kind = node_kind::other; //!< its kind
  //! its label in the new graph, else "kind 'kernel name'", else the kind
  std::string name;
  //! readable: "arguments 1", "attributes: cluster 1x1x1 -> 2x1x1", ...
  std::string what;
  //! false: its parameters could not be read or compared (counted as changed)
  bool comparable = true;
  //! a per-node setter can apply the change (else only a whole-graph update or
  bool settable = true;
  // !< a new instantiation can)
  //! a whole-graph update applies it (false for launch attributes and
  bool updatable = true;
  // !< allocation addresses: only a new instantiation does)
};

//! The difference between two graphs. Nodes are paired by position in creation order
//! (`cudaGraphGetNodes`), as two captures or builds of the same code produce them. A plain value.
struct graph_diff {
  bool same_topology = true; //!< same node count, kinds and edges (with their types)
  //! why not, e.g. "node count 12 -> 13" or "node 4 (x): kernel -> memcpy"
  std::string topology_reason;
  std::vector<node_change> changed; //!< nodes whose parameters differ, or cannot be compared
  std::size_t nodes = 0;            //!< nodes compared

  //! True when the graphs are the same in topology and in every parameter. Never true when CUDA
  //! would run something else: a node that cannot be compared counts as changed.
  [[nodiscard]] bool identical() const noexcept { return same_topology && changed.empty(); }
  //! One readable line per changed node: "node 3 (axpy): arguments 1".
  [[nodiscard]] std::vector<std::string> lines() const;
};

//! Compares `before` with `after`: topology first (node count, kinds, edges and their types), then
//! each node's parameters through its kind (nested graphs and conditional bodies recursively).
//! Thread safety: reads both graphs; do not modify them from another thread meanwhile.
//! \throws cuda_error when reading a graph fails; std::invalid_argument when `before` or
//!         `after` is an empty (moved-from) graph (the message names which).
[[nodiscard]] graph_diff diff(const graph& before, const graph& after);

} // namespace conveyor
