// Node types this version of Conveyor does not know (a newer CUDA): never comparable, never set node by node.
#include "kinds/kind.hpp"

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t, cudaGraphNode_t, const compare_context&) {
  return param_diff::unknown("a node type this version of Conveyor does not know (not comparable)");
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

// Graph files (kinds/keep.hpp): refused at save.
extern const keep_facets other_keep{
    .refusal = "a node type this version of Conveyor does not know",
    .fix = "save with a Conveyor that knows the node type",
};

extern const kind_traits other_kind{
    .kind = node_kind::other,
    .name = "other",
    .allowed_in_body = false,
    .has_builder = false,
    .comparable = false,
    .device_launch =
        {.refusal = "a node of a kind this version of Conveyor does not know cannot be checked, and CUDA allows only "
                    "kernel, memcpy, memset and child-graph nodes in a device graph",
         .fix = "replace it by kernel, memcpy, memset or child-graph nodes"},
    .compare = &compare,
    .describe = &describe,
    .keep = &other_keep,
};

} // namespace conveyor::detail
