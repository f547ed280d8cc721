#pragma once
// Internal (define layer): adding one edge of any type, with the ends checked first (programmatic and
// launch-completion edges join kernel nodes only), so that CUDA's refusal never is the first error a user sees.

#include "conveyor/define/edge_type.hpp"
#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

namespace conveyor::detail {

//! Throws std::invalid_argument, naming `call`, both ends and the offending kind, when `type` is not full and an end
//! is not a kernel node. A null end stands for a node about to be added (its kind checked by the caller).
void check_edge_ends(const graph_state* owner, cudaGraphNode_t from, cudaGraphNode_t to, edge_type type,
                     const char* call);

//! Adds the edge from -> to of `type` to owner's graph (`cudaGraphAddDependencies` with `cudaGraphEdgeData`).
//! \throws std::invalid_argument as check_edge_ends; cuda_error naming both ends when CUDA refuses it.
void add_edge(const graph_state* owner, cudaGraphNode_t from, cudaGraphNode_t to, edge_type type, const char* call);

} // namespace conveyor::detail
