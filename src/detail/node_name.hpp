#pragma once
// Internal: readable names for nodes, shared by instantiate/update reports and the exports.

#include "conveyor/define/detail/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace conveyor::detail {

// "label", else "kind 'kernel name'", else "kind"; "unknown node" for null.
std::string node_name(const graph_state* owner, cudaGraphNode_t n);

} // namespace conveyor::detail
