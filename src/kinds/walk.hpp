#pragma once
// Internal (kinds layer): walking whole graphs through the kind table — comparing two graphs node by node (the
// basis of diff, update_incremental and the child-graph kind's own comparison) and describing one.

#include "kinds/kind.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::detail {

//! One node whose parameters differ, by position in creation order.
struct node_delta {
  std::size_t position = 0;
  node_kind kind = node_kind::other;
  param_diff diff;
};

//! Two graphs compared: topology (node count, kinds, edges with their types) first, then every node.
struct graph_comparison {
  bool same_topology = true;
  std::string topology_reason;
  std::vector<node_delta> changed;
  std::vector<cudaGraphNode_t> before; //!< nodes of `before`, creation order
  std::vector<cudaGraphNode_t> after;  //!< nodes of `after`, creation order
};

//! Nodes of `g` in creation order (`cudaGraphGetNodes`). \throws cuda_error.
[[nodiscard]] std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g);

//! Compares `before` with `after`, pairing nodes by position. \throws cuda_error when a graph cannot be read.
[[nodiscard]] graph_comparison compare_graphs(cudaGraph_t before, cudaGraph_t after, const compare_context& ctx);

//! Describes `g`: every node through its kind's entry (nested graphs recursively), labels from `owner`, edges.
//! \throws cuda_error when a query fails.
[[nodiscard]] graph_description describe_graph(cudaGraph_t g, const graph_state* owner);

} // namespace conveyor::detail
