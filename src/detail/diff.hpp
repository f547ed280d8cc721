#pragma once
// Internal: graph comparison on raw handles, with the node lists it read (used by incremental update).

#include "conveyor/execute/graph_diff.hpp"

#include <cuda_runtime_api.h>

#include <vector>

namespace conveyor::detail {

struct handle_diff {
  graph_diff diff;
  std::vector<cudaGraphNode_t> before; // nodes of `before`, creation order
  std::vector<cudaGraphNode_t> after;  // nodes of `after`, creation order
};

// Nodes of `g` in creation order.
std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g);

// Compares `before` and `after`; `labels` (may be null) names `after`'s nodes in change lines.
handle_diff diff_handles(cudaGraph_t before, cudaGraph_t after, const graph_state* labels);

} // namespace conveyor::detail
