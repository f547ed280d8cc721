// The empty node kind: no parameters; a join point.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t, cudaGraphNode_t, const compare_context&) { return param_diff::same(); }
cudaError_t copy_to_exec(cudaGraphExec_t, cudaGraphNode_t, cudaGraphNode_t) { return cudaSuccess; }
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

extern const kind_traits empty_kind{node_kind::empty, "empty", true, true, true, &compare, &copy_to_exec, &describe};

cudaGraphNode_t add_empty(cudaGraph_t g, node_handles deps) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEmptyNode(&n, g, deps.data(), deps.size()));
  return n;
}

} // namespace conveyor::detail
