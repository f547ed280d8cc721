#include "conveyor/define/conditional.hpp"

#include "conveyor/error.hpp"

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

condition make_condition(graph& g, unsigned default_value, bool reset_each_launch) {
  require_version(12040, "cudaGraphConditionalHandleCreate");
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
  if (!deps.all_in(g.state().get()))
    throw std::invalid_argument("conveyor::add_conditional: a dependency belongs to another graph");
  if (cond.graph != g.get())
    throw std::invalid_argument("conveyor::add_conditional: the condition was made for another graph; call "
                                "make_condition on the graph that gets the conditional node");
  if (kind == conditional_kind::switch_case && cases == 0)
    throw std::invalid_argument("conveyor::add_conditional: a switch_case needs at least one case");
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = cond.handle;
  switch (kind) {
  case conditional_kind::if_then:
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 1;
    break;
  case conditional_kind::if_then_else:
    params.conditional.type = cudaGraphCondTypeIf;
    params.conditional.size = 2;
    break;
  case conditional_kind::while_loop:
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    break;
  case conditional_kind::switch_case:
    params.conditional.type = cudaGraphCondTypeSwitch;
    params.conditional.size = cases;
    break;
  }
  const auto handles = deps.handles();
  cudaGraphNode_t n = nullptr;
  cudaError_t rc = cudaGraphAddNode(&n, g.get(), handles.data(), nullptr, handles.size(), &params);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, fmt::format("cudaGraphAddNode(conditional {})", kind_name(kind)),
                     std::source_location::current(), "is the condition handle made for this graph?");
  }
  conditional_node out{g.wrap(n), cond, {}};
  auto& body_states = g.state()->bodies[n];
  for (unsigned i = 0; i < params.conditional.size; ++i) {
    auto state = std::make_shared<detail::graph_state>();
    state->handle = params.conditional.phGraph_out[i];
    state->owned = false; // CUDA owns body graphs for the node's lifetime
    state->conditional_body = true;
    state->keep = g.state()->keep; // what body nodes need lives as long as the parent
    body_states.push_back(state);
    out.bodies.push_back(graph::from_state(std::move(state)));
  }
  return out;
}

} // namespace conveyor
