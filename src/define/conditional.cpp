#include "conveyor/define/conditional.hpp"

#include "conveyor/error.hpp"
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
    throw cuda_error(cudaErrorNotSupported, what, std::source_location::current(),
                     fmt::format("needs CUDA {}; Conveyor was built with CUDA Toolkit {}", text(needed),
                                 text(CUDART_VERSION)));
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  if (driver < needed)
    throw cuda_error(cudaErrorInsufficientDriver, what, std::source_location::current(),
                     fmt::format("needs a driver for CUDA {}; the installed driver supports CUDA {}", text(needed),
                                 text(driver)));
}

} // namespace

int required_cuda_version(conditional_kind kind) noexcept {
  return kind == conditional_kind::if_then || kind == conditional_kind::while_loop ? 12040 : 12080;
}

condition make_condition(graph& g, unsigned default_value, condition_reset reset) {
  require_version(12040, "cudaGraphConditionalHandleCreate");
  const bool reset_each_launch = reset == condition_reset::each_launch;
  condition c;
  c.default_value = default_value;
  c.reset_each_launch = reset_each_launch;
  c.graph = g.get();
  CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(&c.handle, g.get(), default_value,
                                                  reset_each_launch ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0U));
  return c;
}

conditional_node add_conditional(graph& g, const node_list& deps, conditional_kind kind, const condition& cond,
                                 unsigned cases) {
  require_version(required_cuda_version(kind), kind_name(kind));
  auto& state = *detail::access::state(g);
  if (!detail::access::all_in(deps, &state))
    throw std::invalid_argument("conveyor::add_conditional: a dependency belongs to another graph");
  if (deps.typed())
    throw std::invalid_argument("conveyor::add_conditional: a conditional node takes full dependencies only (CUDA "
                                "allows programmatic edges only between kernel nodes)");
  if (cond.graph != g.get())
    throw std::invalid_argument("conveyor::add_conditional: the condition was made for another graph; call "
                                "make_condition on the graph that gets the conditional node");
  if (kind == conditional_kind::switch_case && cases == 0)
    throw std::invalid_argument("conveyor::add_conditional: a switch_case needs at least one case");
  cudaGraphConditionalNodeType type = cudaGraphCondTypeIf;
  unsigned size = 1;
  switch (kind) {
  case conditional_kind::if_then: break;
  case conditional_kind::if_then_else: size = 2; break;
  case conditional_kind::while_loop: type = cudaGraphCondTypeWhile; break;
  case conditional_kind::switch_case:
    type = cudaGraphCondTypeSwitch;
    size = cases;
    break;
  }
  auto [n, body_handles] = detail::add_conditional(g.get(), deps.handles(), cond.handle, type, size);
  conditional_node out{g.wrap(n), cond, {}};
  detail::conditional_info info{cond.handle, type, size, {}, cond.default_value, cond.reset_each_launch};
  for (cudaGraph_t body : body_handles) {
    auto body_state = std::make_shared<detail::graph_state>();
    body_state->handle = body;
    body_state->owned = false; // CUDA owns body graphs for the node's lifetime
    body_state->conditional_body = true;
    body_state->keep = state.keep; // what body nodes need lives as long as the parent
    body_state->parent = detail::access::state(g);
    info.bodies.push_back(body_state);
    out.bodies.push_back(detail::access::make_graph(std::move(body_state)));
  }
  state.conditionals.emplace(n, std::move(info));
  return out;
}

} // namespace conveyor
