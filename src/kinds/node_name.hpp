#pragma once
// Internal (kinds layer): readable names for nodes, shared by instantiate/update reports, diff and errors.

#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace conveyor::detail {

//! "label", else "kind 'kernel name'", else "kind"; "unknown node" for null. Never throws.
std::string node_name(const graph_state* owner, cudaGraphNode_t n) noexcept;

} // namespace conveyor::detail
