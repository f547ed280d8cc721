// The host node kind: a CPU callable run by CUDA. Compared by function and user data (Conveyor's callables are
// std::function objects owned by the graph's resources; two builds make two callables, so they count as changed).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

namespace conveyor::detail {

namespace {

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaHostNodeParams pa{};
  cudaHostNodeParams pb{};
  CONVEYOR_CHECK(cudaGraphHostNodeGetParams(a, &pa));
  CONVEYOR_CHECK(cudaGraphHostNodeGetParams(b, &pb));
  if (pa.fn == pb.fn && pa.userData == pb.userData) return param_diff::same();
  return param_diff::change(pa.fn == pb.fn ? "host callable (user data)" : "host function");
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaHostNodeParams p{};
  const cudaError_t rc = cudaGraphHostNodeGetParams(source, &p);
  return rc != cudaSuccess ? rc : cudaGraphExecHostNodeSetParams(exec, target, &p);
}

void describe(cudaGraphNode_t, node_description&, const graph_state*) {}

// The data pointer CUDA passes to the host function: captured code may point it at its own locals.
cudaError_t host_addresses(cudaGraphNode_t n, std::vector<host_address>& out) {
  cudaHostNodeParams p{};
  if (const cudaError_t rc = cudaGraphHostNodeGetParams(n, &p); rc != cudaSuccess) return rc;
  if (p.userData != nullptr) out.push_back({p.userData, 0, "data pointer", false});
  return cudaSuccess;
}

} // namespace

namespace {
cudaError_t add_copy(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) {
  cudaHostNodeParams p{};
  const cudaError_t rc = cudaGraphHostNodeGetParams(n, &p);
  return rc != cudaSuccess ? rc : cudaGraphAddHostNode(out, target, nullptr, 0, &p);
}
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_host(cudaGraphNode_t, const graph_state*, keep_saver& s, saved_node& out) {
  out.parameters = saved_reference{s.host_function()};
}

cudaGraphNode_t load_host(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  return add_host(g, deps, l.host_function(std::get<saved_reference>(n.parameters).index));
}

void describe_saved(const saved_node&, const graph_file&, node_description&) {}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = ctx.before->host_functions[std::get<saved_reference>(na.parameters).index];
  const auto& b = ctx.after->host_functions[std::get<saved_reference>(nb.parameters).index];
  return a == b ? param_diff::same() : param_diff::change(fmt::format("host function '{}' -> '{}'", a, b));
}

} // namespace

extern const keep_facets host_keep{
    .save = &save_host,
    .load = &load_host,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_reference>,
};

extern const kind_traits host_kind{
    .kind = node_kind::host,
    .name = "host",
    .allowed_in_body = false,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#f4cccc",
    .device_launch =
        {.refusal =
             "a host node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and child-graph nodes; "
             "a host node runs on a CPU thread)",
         .fix = "do the host work in a host graph launched before or after the device graph, or in a kernel"},
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .host_addresses = &host_addresses,
    .add_copy = &add_copy,
    .keep = &host_keep,
};

cudaGraphNode_t add_host(cudaGraph_t g, node_handles deps, std::function<void()>* callable) {
  cudaHostNodeParams p{};
  p.fn = &invoke_host_callable;
  p.userData = callable;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddHostNode(&n, g, deps.data(), deps.size(), &p));
  return n;
}

cudaError_t set_exec_host(cudaGraphExec_t exec, cudaGraphNode_t node, std::function<void()>* callable) noexcept {
  cudaHostNodeParams p{};
  p.fn = &invoke_host_callable;
  p.userData = callable;
  return cudaGraphExecHostNodeSetParams(exec, node, &p);
}

cudaError_t set_graph_host(cudaGraphNode_t node, std::function<void()>* callable) noexcept {
  cudaHostNodeParams p{};
  p.fn = &invoke_host_callable;
  p.userData = callable;
  return cudaGraphHostNodeSetParams(node, &p);
}

} // namespace conveyor::detail
