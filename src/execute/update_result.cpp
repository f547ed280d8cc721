// The words of an update's result: statuses, methods, and the reason update_result::reason() gives.
#include "conveyor/execute/update_result.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

namespace conveyor {

namespace {

//! One row per update_status, in the enum's order: its name, CUDA's result code and what it means.
struct status_row {
  update_status status;
  std::string_view name;
  cudaGraphExecUpdateResult cuda;
  std::string_view meaning;
};

constexpr std::array status_rows{
    status_row{update_status::success, "success", cudaGraphExecUpdateSuccess, "updated in place"},
    status_row{update_status::error, "error", cudaGraphExecUpdateError,
               "invalid update (e.g. a graph on another device)"},
    status_row{update_status::topology_changed, "topology_changed", cudaGraphExecUpdateErrorTopologyChanged,
               "nodes or dependencies were added or removed"},
    status_row{update_status::node_type_changed, "node_type_changed", cudaGraphExecUpdateErrorNodeTypeChanged,
               "a node changed kind"},
    status_row{update_status::function_changed, "function_changed", cudaGraphExecUpdateErrorFunctionChanged,
               "a kernel node runs another function"},
    status_row{update_status::parameters_changed, "parameters_changed", cudaGraphExecUpdateErrorParametersChanged,
               "a parameter changed in a way that cannot be updated"},
    status_row{update_status::not_supported, "not_supported", cudaGraphExecUpdateErrorNotSupported,
               "the node cannot be updated"},
    status_row{update_status::unsupported_function_change, "unsupported_function_change",
               cudaGraphExecUpdateErrorUnsupportedFunctionChange, "the kernel changed in an unsupported way"},
    status_row{update_status::attributes_changed, "attributes_changed", cudaGraphExecUpdateErrorAttributesChanged,
               "node attributes changed in an unsupported way"},
};

static_assert([] {
  for (std::size_t i = 0; i < status_rows.size(); ++i)
    if (static_cast<std::size_t>(status_rows[i].status) != i) return false;
  return true;
}());

//! The row of `status`; null for a value outside the enum.
constexpr const status_row* row_of(update_status status) noexcept {
  const auto i = static_cast<std::size_t>(status);
  return i < status_rows.size() ? &status_rows[i] : nullptr;
}

constexpr std::array<std::string_view, 5> method_names{"none", "per_node", "whole_graph", "reinstantiated", "refused"};
static_assert(static_cast<std::size_t>(update_method::refused) == method_names.size() - 1);

std::string_view explain(update_status status) noexcept {
  const status_row* row = row_of(status);
  return row != nullptr ? row->meaning : "unknown";
}

} // namespace

std::string_view to_string(update_status status) noexcept {
  const status_row* row = row_of(status);
  return row != nullptr ? row->name : "error";
}

update_status to_update_status(cudaGraphExecUpdateResult result) noexcept {
  const auto* row =
      std::find_if(status_rows.begin(), status_rows.end(), [result](const status_row& r) { return r.cuda == result; });
  return row != status_rows.end() ? row->status : update_status::error;
}

std::string_view to_string(update_method method) noexcept {
  const auto i = static_cast<std::size_t>(method);
  return i < method_names.size() ? method_names[i] : "none";
}

namespace {

//! "update refused: <status> (<what it means>)[ at node <label>]"; empty for a success.
std::string refusal_of(const update_result& r) {
  if (r.status == update_status::success) return {};
  std::string refusal = fmt::format("update refused: {} ({})", to_string(r.status), explain(r.status));
  if (!r.node_label.empty()) refusal += fmt::format(" at node {}", r.node_label);
  return refusal;
}

//! "<head>: <explanation>", or `empty` when there is no explanation.
std::string headed(std::string_view head, const std::string& explanation, std::string_view empty) {
  return explanation.empty() ? std::string(empty) : fmt::format("{}: {}", head, explanation);
}

} // namespace

std::string update_result::reason() const {
  const std::string refusal = refusal_of(*this);
  switch (method) {
  case update_method::refused: return explanation.empty() ? refusal : fmt::format("{}; {}", refusal, explanation);
  case update_method::reinstantiated:
    return fmt::format("reinstantiated: {}{}{}", explanation, explanation.empty() || refusal.empty() ? "" : "; ",
                       refusal);
  case update_method::none: return headed("none", explanation, "none: parameters already equal");
  case update_method::per_node:
  case update_method::whole_graph: return headed(to_string(method), explanation, to_string(method));
  }
  return explanation;
}

} // namespace conveyor
