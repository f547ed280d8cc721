#pragma once
//! \file describe.hpp
//! A plain description of a graph's nodes and edges (kinds, labels, kernel names, launch shapes, copy sizes) and
//! statistics over it: the data behind the DOT and JSON exports, testable without a GPU.

#include "conveyor/define/node.hpp"

#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace conveyor {

class graph;
struct graph_description;

//! One node as exports show it.
struct node_description {
  std::size_t id = 0;                     //!< index in graph_description::nodes
  node_kind kind = node_kind::other;      //!< what the node does
  std::string label;                      //!< the user's label, or empty
  std::string kernel_name;                //!< kernel nodes: the function's name (`cudaFuncGetName`)
  std::array<unsigned, 3> grid{0, 0, 0};  //!< kernel nodes: blocks per grid (x, y, z)
  std::array<unsigned, 3> block{0, 0, 0}; //!< kernel nodes: threads per block (x, y, z)
  std::size_t shared_bytes = 0;           //!< kernel nodes: dynamic shared memory, bytes
  std::size_t bytes = 0;                  //!< memcpy, memset and mem_alloc nodes: bytes moved, set or reserved
  std::string copy_kind;                  //!< memcpy nodes: "HtoD", "DtoH", "DtoD", "HtoH" or "default"
  std::vector<graph_description> bodies;  //!< child-graph and conditional nodes: the nested graph(s)

  //! The label if given, else the kernel name, else the kind's name: the name exports print first.
  [[nodiscard]] std::string display_name() const;
};

//! Nodes and edges of one graph; edges are (from, to) indices into `nodes`.
struct graph_description {
  std::vector<node_description> nodes;                     //!< in creation order; node_description::id = index
  std::vector<std::pair<std::size_t, std::size_t>> edges;  //!< dependencies as (from, to) indices into `nodes`
};

//! Reads `g` into a description (node types and parameters through the cudaGraph*GetParams calls). Nested graphs
//! of child-graph nodes are described recursively.
//! \throws cuda_error when a query fails.
[[nodiscard]] graph_description describe(const graph& g);

//! Counts over a description.
struct graph_statistics {
  std::size_t nodes = 0;                       //!< top-level nodes
  std::size_t edges = 0;                       //!< top-level edges
  std::size_t nested_nodes = 0;                //!< nodes inside child graphs and conditional bodies, all levels
  std::map<node_kind, std::size_t> by_kind;    //!< top-level nodes by kind
  std::size_t depth = 0;                       //!< nodes on the longest dependency path (the critical path)
  std::size_t width = 0;                       //!< most nodes at one depth level (parallelism available)
  std::size_t memcpy_bytes = 0;                //!< bytes moved by top-level memcpy nodes
};

//! Computes statistics of a description.
//! \throws std::invalid_argument when the edges do not form a DAG or name a node out of range.
[[nodiscard]] graph_statistics statistics(const graph_description& d);

} // namespace conveyor
