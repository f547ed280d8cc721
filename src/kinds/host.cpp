// The host node kind: a CPU callable run by CUDA. Compared by function and user data (Conveyor's callables are
// std::function objects owned by the graph's resources; two builds make two callables, so they count as changed).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

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

} // namespace

extern const kind_traits host_kind{node_kind::host, "host", false, true, true, &compare, &copy_to_exec, &describe};

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

} // namespace conveyor::detail
