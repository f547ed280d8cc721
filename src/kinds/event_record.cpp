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

extern const kind_traits event_record_kind{node_kind::event_record, "event_record", false, true, true, &compare, &copy_to_exec, &describe};

cudaGraphNode_t add_event_record(cudaGraph_t g, node_handles deps, cudaEvent_t e) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventRecordNode(&n, g, deps.data(), deps.size(), e));
  return n;
}

} // namespace conveyor::detail
