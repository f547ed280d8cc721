#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/update_result.hpp"

#include "conveyor/error.hpp"
#include "detail/diff.hpp"
#include "detail/driver.hpp"
#include "detail/kernel_node.hpp"
#include "detail/node_name.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor {

std::string_view to_string(update_status status) noexcept {
  switch (status) {
  case update_status::success: return "success";
  case update_status::error: return "error";
  case update_status::topology_changed: return "topology_changed";
  case update_status::node_type_changed: return "node_type_changed";
  case update_status::function_changed: return "function_changed";
  case update_status::parameters_changed: return "parameters_changed";
  case update_status::not_supported: return "not_supported";
  case update_status::unsupported_function_change: return "unsupported_function_change";
  case update_status::attributes_changed: return "attributes_changed";
  }
  return "error";
}

update_status to_update_status(cudaGraphExecUpdateResult result) noexcept {
  switch (result) {
  case cudaGraphExecUpdateSuccess: return update_status::success;
  case cudaGraphExecUpdateErrorTopologyChanged: return update_status::topology_changed;
  case cudaGraphExecUpdateErrorNodeTypeChanged: return update_status::node_type_changed;
  case cudaGraphExecUpdateErrorFunctionChanged: return update_status::function_changed;
  case cudaGraphExecUpdateErrorParametersChanged: return update_status::parameters_changed;
  case cudaGraphExecUpdateErrorNotSupported: return update_status::not_supported;
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return update_status::unsupported_function_change;
  case cudaGraphExecUpdateErrorAttributesChanged: return update_status::attributes_changed;
  default: return update_status::error;
  }
}

namespace {
std::string_view explain(update_status status) noexcept {
  switch (status) {
  case update_status::success: return "updated in place";
  case update_status::error: return "invalid update (e.g. a graph on another device)";
  case update_status::topology_changed: return "nodes or dependencies were added or removed";
  case update_status::node_type_changed: return "a node changed kind";
  case update_status::function_changed: return "a kernel node runs another function";
  case update_status::parameters_changed: return "a parameter changed in a way that cannot be updated";
  case update_status::not_supported: return "the node cannot be updated";
  case update_status::unsupported_function_change: return "the kernel changed in an unsupported way";
  case update_status::attributes_changed: return "node attributes changed in an unsupported way";
  }
  return "unknown";
}
} // namespace

std::string update_result::reason() const {
  if (status == update_status::success) return "updated in place";
  std::string out = fmt::format("update refused: {} ({})", to_string(status), explain(status));
  if (!node_label.empty()) out += fmt::format(" at node {}", node_label);
  return out;
}

update_result graph_exec::update(const graph& g) {
  cudaGraphExecUpdateResultInfo info{};
  cudaError_t rc = cudaGraphExecUpdate(handle_, g.get(), &info);
  update_result result;
  result.status = to_update_status(info.result);
  result.node = info.errorNode;
  result.from_node = info.errorFromNode;
  if (rc == cudaSuccess && result.status == update_status::success) {
    adopt_current(g);
    return result;
  }
  (void)cudaGetLastError();
  if (rc != cudaErrorGraphExecUpdateFailure && rc != cudaSuccess && result.status == update_status::success)
    throw cuda_error(rc, "cudaGraphExecUpdate", std::source_location::current());
  if (result.status == update_status::success) result.status = update_status::error;
  if (info.errorNode != nullptr)
    result.node_label = detail::node_name(g.state().get(), info.errorNode);
  else if (info.errorFromNode != nullptr)
    result.node_label = detail::node_name(source_.get(), info.errorFromNode);
  return result;
}

std::string_view to_string(update_method method) noexcept {
  switch (method) {
  case update_method::none: return "none";
  case update_method::per_node: return "per_node";
  case update_method::whole_graph: return "whole_graph";
  case update_method::reinstantiated: return "reinstantiated";
  case update_method::refused: return "refused";
  }
  return "none";
}

bool graph_exec::apply_node(cudaGraphNode_t origin, cudaGraphNode_t from, const graph& g) {
  cudaGraphNodeType type{};
  if (cudaGraphNodeGetType(from, &type) != cudaSuccess) return false;
  cudaError_t rc = cudaErrorNotSupported;
  switch (type) {
  case cudaGraphNodeTypeKernel: {
    auto p = detail::read_kernel_node(from);
    if (!p) return false;
    return detail::driver::exec_kernel_node_set_params(reinterpret_cast<CUgraphExec>(handle_),
                                                       reinterpret_cast<CUgraphNode>(origin), &*p) == CUDA_SUCCESS;
  }
  case cudaGraphNodeTypeMemcpy: {
    cudaMemcpy3DParms p{};
    rc = cudaGraphMemcpyNodeGetParams(from, &p);
    if (rc == cudaSuccess) rc = cudaGraphExecMemcpyNodeSetParams(handle_, origin, &p);
    break;
  }
  case cudaGraphNodeTypeMemset: {
    cudaMemsetParams p{};
    rc = cudaGraphMemsetNodeGetParams(from, &p);
    if (rc == cudaSuccess) rc = cudaGraphExecMemsetNodeSetParams(handle_, origin, &p);
    break;
  }
  case cudaGraphNodeTypeHost: {
    cudaHostNodeParams p{};
    rc = cudaGraphHostNodeGetParams(from, &p);
    if (rc == cudaSuccess) rc = cudaGraphExecHostNodeSetParams(handle_, origin, &p);
    break;
  }
  case cudaGraphNodeTypeEventRecord: {
    cudaEvent_t e = nullptr;
    rc = cudaGraphEventRecordNodeGetEvent(from, &e);
    if (rc == cudaSuccess) rc = cudaGraphExecEventRecordNodeSetEvent(handle_, origin, e);
    break;
  }
  case cudaGraphNodeTypeWaitEvent: {
    cudaEvent_t e = nullptr;
    rc = cudaGraphEventWaitNodeGetEvent(from, &e);
    if (rc == cudaSuccess) rc = cudaGraphExecEventWaitNodeSetEvent(handle_, origin, e);
    break;
  }
  case cudaGraphNodeTypeGraph: {
    cudaGraph_t child = nullptr;
    rc = cudaGraphChildGraphNodeGetGraph(from, &child);
    if (rc == cudaSuccess) rc = cudaGraphExecChildGraphNodeSetParams(handle_, origin, child);
    break;
  }
  default: break; // memory nodes, conditionals: not settable one by one
  }
  (void)g;
  if (rc != cudaSuccess) (void)cudaGetLastError();
  return rc == cudaSuccess;
}

incremental_update graph_exec::update_incremental(const graph& g, bool reinstantiate) {
  incremental_update out;
  if (current_exact_) {
    auto d = detail::diff_handles(current_->handle, g.get(), g.state().get());
    out.nodes_changed = d.diff.changed.size();
    if (d.diff.same_topology) {
      if (d.diff.changed.empty()) {
        adopt_current(g);
        out.method = update_method::none;
        return out;
      }
      if (origin_nodes_.empty()) origin_nodes_ = detail::graph_nodes(source_->handle);
      bool all_set = origin_nodes_.size() == d.after.size();
      std::size_t failed_at = 0;
      for (std::size_t k = 0; all_set && k < d.diff.changed.size(); ++k) {
        const std::size_t i = d.diff.changed[k];
        if (!apply_node(origin_nodes_[i], d.after[i], g)) {
          all_set = false;
          failed_at = k;
        } else {
          ++out.nodes_set;
        }
      }
      if (all_set) {
        adopt_current(g);
        out.method = update_method::per_node;
        out.reason = fmt::format("{}", fmt::join(d.diff.changes, "; "));
        return out;
      }
      out.reason = failed_at < d.diff.changes.size()
                       ? fmt::format("per-node update refused for {}", d.diff.changes[failed_at])
                       : "per-node update not possible";
    } else {
      out.reason = fmt::format("topology changed: {}", d.diff.topology_reason);
    }
  } else {
    out.reason = "parameters were changed by per-node setters since the last update";
  }
  out.update = update(g);
  if (out.update) {
    out.method = update_method::whole_graph;
    return out;
  }
  if (!reinstantiate) {
    out.method = update_method::refused;
    out.reason += fmt::format("; {}", out.update.reason());
    return out;
  }
  auto previously_retained = std::move(retained_);
  *this = instantiate(g, without(flags_, instantiate_flags::upload));
  for (auto& item : previously_retained) retain(std::move(item));
  out.method = update_method::reinstantiated;
  out.reason += fmt::format("; {}", out.update.reason());
  return out;
}

update_outcome graph_exec::update_or_reinstantiate(const graph& g) {
  update_outcome outcome;
  outcome.update = update(g);
  if (outcome.update) return outcome;
  // Launches of the old executable graph may still be queued: keep what its host nodes use.
  auto previously_retained = std::move(retained_);
  *this = instantiate(g, without(flags_, instantiate_flags::upload));
  for (auto& item : previously_retained) retain(std::move(item));
  outcome.reinstantiated = true;
  return outcome;
}

} // namespace conveyor
