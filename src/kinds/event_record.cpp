// The event-record node kind: compared by event, set with cudaGraphExecEventRecordNodeSetEvent.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaEvent_t ea = nullptr;
  cudaEvent_t eb = nullptr;
  CONVEYOR_CHECK(cudaGraphEventRecordNodeGetEvent(a, &ea));
  CONVEYOR_CHECK(cudaGraphEventRecordNodeGetEvent(b, &eb));
  return ea == eb ? param_diff::same() : param_diff::change("recorded event");
}
cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaEvent_t e = nullptr;
  const cudaError_t rc = cudaGraphEventRecordNodeGetEvent(source, &e);
  return rc != cudaSuccess ? rc : cudaGraphExecEventRecordNodeSetEvent(exec, target, e);
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

namespace {
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  cudaEvent_t e = nullptr;
  const cudaError_t rc = cudaGraphEventRecordNodeGetEvent(n, &e);
  return rc != cudaSuccess ? rc : cudaGraphAddEventRecordNode(out, target, nullptr, 0, e);
}
} // namespace

extern const kind_traits event_record_kind{
    .kind = node_kind::event_record,
    .name = "event_record",
    .allowed_in_body = false,
    .has_builder = true,
    .comparable = true,
    .device_launch = {.refusal = "an event record node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and "
                    "child-graph nodes)",
                      .fix = "order the work with edges inside the graph; record events on the stream after the host launch "
               "that starts the device work"},
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .add_copy = &add_copy,
};

cudaGraphNode_t add_event_record(cudaGraph_t g, node_handles deps, cudaEvent_t e) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventRecordNode(&n, g, deps.data(), deps.size(), e));
  return n;
}

} // namespace conveyor::detail
