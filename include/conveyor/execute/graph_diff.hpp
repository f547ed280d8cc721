#pragma once
//! \file graph_diff.hpp
//! Comparing two graphs node by node: same topology or not (and why), and which nodes' parameters differ. The basis
//! of incremental update (graph_exec::update_incremental): only the nodes that differ are set.

#include "conveyor/define/graph.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor {

//! The difference between two graphs. Nodes are paired by position in creation order (`cudaGraphGetNodes`), as two
//! captures or builds of the same code produce them.
struct graph_diff {
  bool same_topology = true;            //!< same node count, kinds and edges
  std::string topology_reason;          //!< why not, e.g. "node count 12 -> 13" or "node 4: kernel -> memcpy"
  std::vector<std::size_t> changed;     //!< positions of nodes whose parameters differ
  std::vector<std::string> changes;     //!< one readable line per changed node ("node 3 'axpy': arguments")
  std::size_t nodes = 0;                //!< nodes compared

  //! True when the graphs are the same in topology and parameters.
  [[nodiscard]] bool identical() const noexcept { return same_topology && changed.empty(); }
};

//! Compares `before` with `after`: topology first (node count, kinds, edges), then each node's parameters (kernel
//! function, launch shape and argument bytes; copy, memset, host, event and child-graph parameters). Nodes whose
//! arguments cannot be compared (unknown parameter layout) count as changed.
//! \throws cuda_error when reading a graph fails.
[[nodiscard]] graph_diff diff(const graph& before, const graph& after);

} // namespace conveyor
