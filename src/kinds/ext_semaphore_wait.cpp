// The external-semaphore-wait node kind (no builder call: add it with graph::add_node). Compared semaphore by
// semaphore (handle, fence value, NvSciSync fence, keyed-mutex key and timeout, flags); set with
// cudaGraphExecExternalSemaphoresWaitNodeSetParams.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

namespace conveyor::detail {

namespace {
bool same(const cudaExternalSemaphoreWaitParams& a, const cudaExternalSemaphoreWaitParams& b) {
  return a.params.fence.value == b.params.fence.value && a.params.nvSciSync.reserved == b.params.nvSciSync.reserved &&
         a.params.keyedMutex.key == b.params.keyedMutex.key &&
         a.params.keyedMutex.timeoutMs == b.params.keyedMutex.timeoutMs && a.flags == b.flags;
}
param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaExternalSemaphoreWaitNodeParams pa{};
  cudaExternalSemaphoreWaitNodeParams pb{};
  CONVEYOR_CHECK(cudaGraphExternalSemaphoresWaitNodeGetParams(a, &pa));
  CONVEYOR_CHECK(cudaGraphExternalSemaphoresWaitNodeGetParams(b, &pb));
  if (pa.numExtSems != pb.numExtSems)
    return param_diff::change(fmt::format("semaphore count {} -> {}", pa.numExtSems, pb.numExtSems));
  for (unsigned i = 0; i < pa.numExtSems; ++i)
    if (pa.extSemArray[i] != pb.extSemArray[i] || !same(pa.paramsArray[i], pb.paramsArray[i]))
      return param_diff::change(fmt::format("semaphore {} (handle or wait parameters)", i));
  return param_diff::same();
}
cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaExternalSemaphoreWaitNodeParams p{};
  const cudaError_t rc = cudaGraphExternalSemaphoresWaitNodeGetParams(source, &p);
  return rc != cudaSuccess ? rc : cudaGraphExecExternalSemaphoresWaitNodeSetParams(exec, target, &p);
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

namespace {
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  cudaExternalSemaphoreWaitNodeParams p{};
  const cudaError_t rc = cudaGraphExternalSemaphoresWaitNodeGetParams(n, &p);
  return rc != cudaSuccess ? rc : cudaGraphAddExternalSemaphoresWaitNode(out, target, nullptr, 0, &p);
}
} // namespace

// Graph files (kinds/keep.hpp): refused at save.
extern const keep_facets ext_semaphore_wait_keep{
    .refusal = "an external semaphore is a handle of another API in this process (Vulkan, Direct3D, NvSciSync), which "
               "a file cannot carry",
    .fix = "save the graph without the semaphore nodes, and add them after load (graph::add_node)",
};

extern const kind_traits ext_semaphore_wait_kind{
    .kind = node_kind::ext_semaphore_wait,
    .name = "ext_semaphore_wait",
    .allowed_in_body = false,
    .has_builder = false,
    .comparable = true,
    .device_launch =
        {.refusal = "an external semaphore wait node cannot be in a device graph (CUDA allows only kernel, memcpy, "
                    "memset and child-graph nodes)",
         .fix = "wait for the semaphore in a host graph, or on the stream before the launch"},
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .add_copy = &add_copy,
    .keep = &ext_semaphore_wait_keep,
};

} // namespace conveyor::detail
