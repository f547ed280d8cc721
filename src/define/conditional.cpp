#include "conveyor/define/conditional.hpp"

#include "conveyor/error.hpp"
#include "define/conditional_record.hpp"
#include "kinds/kinds.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor {

namespace {

const char* kind_name(conditional_kind kind) noexcept {
  switch (kind) {
  case conditional_kind::if_then: return "if_then";
  case conditional_kind::if_then_else: return "if_then_else";
  case conditional_kind::while_loop: return "while_loop";
  case conditional_kind::switch_case: return "switch_case";
  }
  return "conditional";
}

// Throws when the toolkit this was built with, or the driver, is older than `needed` (e.g. 12040).
void require_version(int needed, const char* what) {
  auto text = [](int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  if (CUDART_VERSION < needed)
    throw cuda_error(
        cudaErrorNotSupported, what, std::source_location::current(),
        fmt::format("needs CUDA {}; Conveyor was built with CUDA Toolkit {}", text(needed), text(CUDART_VERSION)));
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  if (driver < needed)
    throw cuda_error(
        cudaErrorInsufficientDriver, what, std::source_location::current(),
        fmt::format("needs a driver for CUDA {}; the installed driver supports CUDA {}", text(needed), text(driver)));
}

} // namespace

int required_cuda_version(conditional_kind kind) noexcept {
  return kind == conditional_kind::if_then || kind == conditional_kind::while_loop ? 12040 : 12080;
}

condition make_condition(graph& g, unsigned default_value, condition_reset reset) {
  (void)detail::nonempty_state(g, "conveyor::make_condition");
  require_version(12040, "cudaGraphConditionalHandleCreate");
  const bool reset_each_launch = reset == condition_reset::each_launch;
  condition c;
  c.default_value = default_value;
  c.reset_each_launch = reset_each_launch;
  c.graph = g.get();
  CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(
      &c.handle, g.get(), default_value, reset_each_launch ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0U));
  return c;
}

namespace detail {

conditional_shape conditional_shape_of(conditional_kind kind, unsigned cases, const char* call) {
  require_version(required_cuda_version(kind), kind_name(kind));
  if (kind == conditional_kind::switch_case && cases == 0)
    throw std::invalid_argument(fmt::format("{}: a switch_case needs at least one case", call));
  switch (kind) {
  case conditional_kind::if_then: return {cudaGraphCondTypeIf, 1};
  case conditional_kind::if_then_else: return {cudaGraphCondTypeIf, 2};
  case conditional_kind::while_loop: return {cudaGraphCondTypeWhile, 1};
  case conditional_kind::switch_case: return {cudaGraphCondTypeSwitch, cases};
  }
  return {};
}

conditional_node record_conditional(const std::shared_ptr<graph_state>& state, cudaGraphNode_t n,
                                    const std::vector<cudaGraph_t>& bodies, const condition& cond,
                                    conditional_shape shape) {
  conditional_node out{access::make_node(n, state.get()), cond, {}};
  conditional_info info{cond.handle, shape.type, shape.size, {}, cond.default_value, cond.reset_each_launch};
  for (cudaGraph_t body : bodies) {
    auto body_state = std::make_shared<graph_state>();
    body_state->handle = body;
    body_state->owned = false; // CUDA owns body graphs for the node's lifetime
    body_state->conditional_body = true;
    body_state->keep = state->keep; // what body nodes need lives as long as the parent
    body_state->parent = state;
    info.bodies.push_back(body_state);
    out.bodies.push_back(access::make_graph(std::move(body_state)));
  }
  state->conditionals.emplace(n, std::move(info));
  // The bodies are built after the node (and may change later): their kernels' cluster attributes, which count as
  // this graph's, are read at each whole-graph update.
  state->clusters.reset();
  return out;
}

} // namespace detail

conditional_node add_conditional(graph& g, const node_list& deps, conditional_kind kind, const condition& cond,
                                 unsigned cases) {
  const auto& state = detail::nonempty_state(g, "conveyor::add_conditional");
  if (!detail::access::all_in(deps, state.get()))
    throw std::invalid_argument("conveyor::add_conditional: a dependency belongs to another graph");
  if (deps.typed())
    throw std::invalid_argument("conveyor::add_conditional: a conditional node takes full dependencies only (CUDA "
                                "allows programmatic edges only between kernel nodes)");
  if (cond.graph != g.get())
    throw std::invalid_argument("conveyor::add_conditional: the condition was made for another graph; call "
                                "make_condition on the graph that gets the conditional node");
  const auto shape = detail::conditional_shape_of(kind, cases, "conveyor::add_conditional");
  auto [n, bodies] = detail::add_conditional(g.get(), deps.handles(), cond.handle, shape.type, shape.size);
  return detail::record_conditional(state, n, bodies, cond, shape);
}

} // namespace conveyor
