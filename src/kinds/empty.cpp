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

namespace {
cudaError_t add_copy(cudaGraphNode_t, cudaGraph_t target, cudaGraphNode_t* out) {
  return cudaGraphAddEmptyNode(out, target, nullptr, 0);
}
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {
void save_empty(cudaGraphNode_t, const graph_state*, keep_saver&, saved_node& out) {
  out.parameters = std::monostate{};
}
cudaGraphNode_t load_empty(const saved_node&, cudaGraph_t g, node_handles deps, keep_loader&) {
  return add_empty(g, deps);
}
void describe_saved(const saved_node&, const graph_file&, node_description&) {}
param_diff compare_saved(const saved_node&, const saved_node&, const saved_context&) { return param_diff::same(); }
} // namespace

extern const keep_facets empty_keep{
    .save = &save_empty,
    .load = &load_empty,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<std::monostate>,
};

extern const kind_traits empty_kind{
    .kind = node_kind::empty,
    .name = "empty",
    .allowed_in_body = true,
    .has_builder = true,
    .comparable = true,
    .device_launch =
        {.refusal =
             "an empty node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and child-graph "
             "nodes); Conveyor's builder also adds one for a copy or memset of size 0",
         .fix = "join with direct edges instead of an empty node, and give copies and memsets a non-zero size"},
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .add_copy = &add_copy,
    .keep = &empty_keep,
};

cudaGraphNode_t add_empty(cudaGraph_t g, node_handles deps) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEmptyNode(&n, g, deps.data(), deps.size()));
  return n;
}

} // namespace conveyor::detail
