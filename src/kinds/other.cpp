// Node types this version of Conveyor does not know (a newer CUDA): never comparable, never set node by node.
#include "kinds/kind.hpp"

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t, cudaGraphNode_t, const compare_context&) {
  return param_diff::unknown("a node type this version of Conveyor does not know (not comparable)");
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

extern const kind_traits other_kind{node_kind::other, "other", false, false, false, &compare, nullptr, &describe};

} // namespace conveyor::detail
