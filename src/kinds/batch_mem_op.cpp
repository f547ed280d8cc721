// The batch-memory-operation node kind (driver API only: cuGraphAddBatchMemOpNode). Conveyor does not read its
// operations: two such nodes are reported as not comparable, so an update applies them the safe way (a
// whole-graph update, which CUDA checks, or a new instantiation).
#include "kinds/kind.hpp"

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t, cudaGraphNode_t, const compare_context&) {
  return param_diff::unknown("batch memory operations (not comparable)");
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

// Graph files (kinds/keep.hpp): refused at save.
extern const keep_facets batch_mem_op_keep{
    .refusal = "a batch of memory operations holds its operations in a form the driver does not let Conveyor read back",
    .fix = "use kernels or memsets for the flags in the saved graph",
};

extern const kind_traits batch_mem_op_kind{
    .kind = node_kind::batch_mem_op,
    .name = "batch_mem_op",
    .allowed_in_body = false,
    .has_builder = false,
    .comparable = false,
    .device_launch = {.refusal =
                          "a batch memory operation node cannot be in a device graph (CUDA allows only kernel, memcpy, "
                          "memset and child-graph nodes)",
                      .fix = "do the memory operations in a kernel (atomics, volatile stores) or in a host graph"},
    .compare = &compare,
    .describe = &describe,
    .keep = &batch_mem_op_keep,
};

} // namespace conveyor::detail
