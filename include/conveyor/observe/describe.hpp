#pragma once
//! \file describe.hpp
//! describe(): a graph read into a plain description (conveyor/define/description.hpp), and
//! statistics over one.

#include "conveyor/define/description.hpp"
#include "conveyor/define/node_kind.hpp"

#include <cstddef>
#include <map>

namespace conveyor {

class graph;
class graph_exec;

//! Reads `g` into a description (node types and parameters through the cudaGraph*GetParams calls).
//! Nested graphs of child-graph nodes, and the bodies of conditional nodes Conveyor built, are
//! described recursively. Thread safety: reads `g`; do not modify `g` from another thread
//! meanwhile.
//! \throws cuda_error when a query fails; std::invalid_argument for an empty (moved-from) graph.
[[nodiscard]] graph_description describe(const graph& g);

//! Reads the graph whose parameters the executable graph `e` runs (the graph it was instantiated
//! from, or the one an update applied last), nested bodies included. Its nodes are numbered as the
//! executable graph's: a profiler (conveyor/profile/profiler.hpp) attributes each node's GPU
//! activity through it. Nodes patched in place since (per-node setters, graphed rebinding) are
//! described with the applied graph's parameters. Thread safety: as describe(const graph&). \throws
//! cuda_error when a query fails; std::invalid_argument for an empty (moved-from) executable graph.
[[nodiscard]] graph_description describe(const graph_exec& e);

//! Counts over a description. A plain value.
struct graph_statistics {
  std::size_t nodes = 0; //!< top-level nodes
  std::size_t edges = 0; //!< top-level edges
  //! nodes inside child graphs and conditional bodies, all levels
  std::size_t nested_nodes = 0;
  std::map<node_kind, std::size_t> by_kind; //!< top-level nodes by kind
  //! nodes on the longest dependency path (the critical path)
  std::size_t depth = 0;
  //! most nodes at one depth level (parallelism available)
  std::size_t width = 0;
  std::size_t memcpy_bytes = 0; //!< bytes moved by top-level memcpy nodes
};

//! Computes statistics of a description. Pure function of `d`; thread-safe.
//! \throws std::invalid_argument when the edges do not form a DAG or name a node out of range.
[[nodiscard]] graph_statistics statistics(const graph_description& d);

} // namespace conveyor
