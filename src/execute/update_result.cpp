// The words of an update's result: statuses, methods, and the reason update_result::reason() gives.
#include "conveyor/execute/update_result.hpp"

#include <fmt/format.h>

#include <string>

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
  case cudaGraphExecUpdateError: return update_status::error;
  case cudaGraphExecUpdateErrorTopologyChanged: return update_status::topology_changed;
  case cudaGraphExecUpdateErrorNodeTypeChanged: return update_status::node_type_changed;
  case cudaGraphExecUpdateErrorFunctionChanged: return update_status::function_changed;
  case cudaGraphExecUpdateErrorParametersChanged: return update_status::parameters_changed;
  case cudaGraphExecUpdateErrorNotSupported: return update_status::not_supported;
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return update_status::unsupported_function_change;
  case cudaGraphExecUpdateErrorAttributesChanged: return update_status::attributes_changed;
  }
  return update_status::error;
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
  std::string refusal;
  if (status != update_status::success) {
    refusal = fmt::format("update refused: {} ({})", to_string(status), explain(status));
    if (!node_label.empty()) refusal += fmt::format(" at node {}", node_label);
  }
  switch (method) {
  case update_method::refused: return explanation.empty() ? refusal : fmt::format("{}; {}", refusal, explanation);
  case update_method::reinstantiated:
    return fmt::format("reinstantiated: {}{}{}", explanation, explanation.empty() || refusal.empty() ? "" : "; ",
                       refusal);
  case update_method::none: return explanation.empty() ? "none: parameters already equal" : "none: " + explanation;
  case update_method::per_node:
  case update_method::whole_graph:
    return explanation.empty() ? std::string(to_string(method)) : fmt::format("{}: {}", to_string(method), explanation);
  }
  return explanation;
}

} // namespace conveyor
