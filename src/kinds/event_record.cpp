// The event-record node kind: compared by event, set with cudaGraphExecEventRecordNodeSetEvent.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

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

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_event(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  cudaEvent_t e = nullptr;
  CONVEYOR_CHECK(cudaGraphEventRecordNodeGetEvent(n, &e));
  out.parameters = saved_reference{s.event(e)};
}

cudaGraphNode_t load_event(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  cudaGraphNode_t node = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventRecordNode(&node, g, deps.data(), deps.size(),
                                             l.event(std::get<saved_reference>(n.parameters).index)));
  return node;
}

void describe_saved(const saved_node&, const graph_file&, node_description&) {}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = ctx.before->events[std::get<saved_reference>(na.parameters).index];
  const auto& b = ctx.after->events[std::get<saved_reference>(nb.parameters).index];
  return a == b ? param_diff::same() : param_diff::change(fmt::format("recorded event '{}' -> '{}'", a, b));
}

} // namespace

extern const keep_facets event_record_keep{
    .save = &save_event,
    .load = &load_event,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_reference>,
};

extern const kind_traits event_record_kind{
    .kind = node_kind::event_record,
    .name = "event_record",
    .allowed_in_body = false,
    .has_builder = true,
    .comparable = true,
    .device_launch =
        {.refusal = "an event record node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and "
                    "child-graph nodes)",
         .fix = "order the work with edges inside the graph; record events on the stream after the host launch "
                "that starts the device work"},
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .add_copy = &add_copy,
    .keep = &event_record_keep,
};

cudaGraphNode_t add_event_record(cudaGraph_t g, node_handles deps, cudaEvent_t e) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventRecordNode(&n, g, deps.data(), deps.size(), e));
  return n;
}

} // namespace conveyor::detail
