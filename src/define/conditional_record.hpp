#pragma once
// Internal (define layer): the parts of adding a conditional node that the builder (add_conditional) and the
// insertion into a capture in progress (capture_conditional) share: the checks of the kind and version, CUDA's type
// and body count, and what Conveyor records of the node (its bodies as graphs, its parameters for diff and exports).

#include "conveyor/define/conditional.hpp"
#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

namespace conveyor::detail {

//! CUDA's type and body count of a conditional node.
struct conditional_shape {
  cudaGraphConditionalNodeType type = cudaGraphCondTypeIf;
  unsigned size = 1;
};

//! Checks that the toolkit and driver have `kind` and that a switch_case has cases, naming `call`; returns CUDA's
//! type and body count. \throws cuda_error naming the version needed; std::invalid_argument for 0 cases.
conditional_shape conditional_shape_of(conditional_kind kind, unsigned cases, const char* call);

//! Records the conditional node `n` of the graph whose model is `state` (added with `cond` and `shape`, its bodies
//! `bodies`): each body becomes a graph sharing the parent's resources, and the node's parameters are kept for diff
//! and exports (CUDA cannot read them back). Returns the node, condition and bodies.
conditional_node record_conditional(const std::shared_ptr<graph_state>& state, cudaGraphNode_t n,
                                    const std::vector<cudaGraph_t>& bodies, const condition& cond,
                                    conditional_shape shape);

} // namespace conveyor::detail
