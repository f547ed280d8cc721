// Step-through replay (debug/step.hpp): every node of a graph as a graph of its own — instantiated, launched,
// synchronised — in a topological order, child graphs and conditional bodies stepped into, conditions followed as
// the graph would follow them.
#include "conveyor/debug/step.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"
#include "cuda/check.hpp"
#include "cuda/driver.hpp"
#include "debug/step_runner.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <queue>
#include <stdexcept>

namespace conveyor {

namespace {

// The errors that leave the CUDA context unusable: after one, this process can make no more CUDA calls.
constexpr std::array sticky_errors{cudaErrorIllegalAddress,
                                   cudaErrorLaunchFailure,
                                   cudaErrorAssert,
                                   cudaErrorHardwareStackError,
                                   cudaErrorIllegalInstruction,
                                   cudaErrorMisalignedAddress,
                                   cudaErrorInvalidAddressSpace,
                                   cudaErrorInvalidPc,
                                   cudaErrorLaunchTimeout,
                                   cudaErrorECCUncorrectable,
                                   cudaErrorUnknown};

bool is_sticky(cudaError_t code) noexcept {
  return std::find(sticky_errors.begin(), sticky_errors.end(), code) != sticky_errors.end();
}

std::string failure_text(const step_node& node, cudaError_t code, const std::string& call) {
  std::string text = fmt::format("conveyor::step_through: {} failed: {} failed with {} ({})", node.text(), call,
                                 cudaGetErrorName(code), cudaGetErrorString(code));
  if (is_sticky(code))
    text += ". This error is sticky: the CUDA context is lost and this process can make no more CUDA calls. Find "
            "the fault in a fresh process: run the program again step by step from the start (step_through, or "
            "CONVEYOR_STEP_THROUGH=1 for an unchanged program), under `compute-sanitizer --tool memcheck`, which "
            "names the faulting access, the thread and the address";
  return text;
}

std::string shape(const std::array<unsigned, 3>& s) { return fmt::format("{}x{}x{}", s[0], s[1], s[2]); }

} // namespace

const char* to_string(element_type t) noexcept {
  switch (t) {
  case element_type::f32: return "float";
  case element_type::f64: return "double";
  case element_type::f16: return "half";
  case element_type::bf16: return "bfloat16";
  }
  return "float";
}

namespace {

// " (kernel k, grid 1x1x1 block 32x1x1, 64 B dynamic shared memory, arguments …)" for a kernel node, else empty.
std::string kernel_words(const step_node& n) {
  if (n.kind != node_kind::kernel) return {};
  std::string kernel = n.kernel_name.empty() ? std::string() : fmt::format("kernel {}, ", n.kernel_name);
  std::string out = fmt::format(" ({}grid {} block {}", kernel, shape(n.grid), shape(n.block));
  if (n.shared_bytes > 0) out += fmt::format(", {} B dynamic shared memory", n.shared_bytes);
  if (!n.arguments.empty()) out += fmt::format(", arguments {}", n.arguments);
  return out + ")";
}

// ", after node 0 (kernel), node 1 (memset)", or that the node has no dependencies.
std::string dependency_words(const std::vector<std::string>& dependencies) {
  if (dependencies.empty()) return ", no dependencies in its graph";
  std::string out = ", after ";
  for (std::size_t i = 0; i < dependencies.size(); ++i) out += (i == 0 ? "" : ", ") + dependencies[i];
  return out;
}

} // namespace

std::string step_node::text() const {
  std::string out = fmt::format("step {}: {}", order, path) + kernel_words(*this);
  if (device >= 0) out += fmt::format(" on device {}", device);
  return out + dependency_words(dependencies);
}

step_failure::step_failure(step_node node, cudaError_t code, std::string call) :
    std::runtime_error(failure_text(node, code, call)),
    node_(std::move(node)),
    code_(code),
    sticky_(is_sticky(code)) {}

nonfinite_error::nonfinite_error(step_node node, std::string buffer, std::size_t index, double before, double after) :
    std::runtime_error(fmt::format("conveyor::step_through: after {}, buffer '{}' holds {} at index {} (it held {} "
                                   "before that node): the first non-finite value of the watched buffers",
                                   node.text(), buffer, after, index, before)),
    node_(std::move(node)),
    buffer_(std::move(buffer)),
    index_(index),
    before_(before),
    after_(after) {}

step_report step_through(const graph& g, const stream& s, const step_options& options) {
  const detail::api_scope scope("conveyor::step_through", std::source_location::current());
  const auto& state = *detail::nonempty_state(g, "conveyor::step_through");
  detail::check_not_lost(state, "conveyor::step_through");
  detail::step_runner runner(s, options);
  return runner.run(state);
}

step_report step_through(const graph_exec& e, const stream& s, const step_options& options) {
  if (e.empty())
    throw std::logic_error("conveyor::step_through: the executable graph is empty (default-constructed, moved from or "
                           "reset)");
  const auto& state = detail::exec_access::state(e);
  detail::step_runner runner(s, options);
  if (state.over.shadow &&
      state.over.patched.empty()) { // per-node setters ran with step-through launches on: their copy
    runner.skip(&state.over.shadow_disabled);
    return runner.run(*state.over.shadow);
  }
  if (state.st.nodes == detail::overlay::changed || !state.over.patched.empty())
    throw std::logic_error("conveyor::step_through: per-node setters changed this executable graph since its last "
                           "update (with step-through launches off), so it runs parameters its graph does not hold; "
                           "update it to the graph to step through (graph_exec::update), step through that graph, or "
                           "turn step_through_launches on before the setters run (CONVEYOR_STEP_THROUGH=1 does from "
                           "the start)");
  return runner.run(*state.current);
}

bool mark_fault(graph_description& d, const step_node& node, std::string text) {
  const auto& p = node.position;
  graph_description* level = &d;
  for (std::size_t k = 0; k < p.size(); k += 2) {
    if (p[k] >= level->nodes.size()) return false;
    node_description& n = level->nodes[p[k]];
    if (k + 1 == p.size()) {
      n.fault = std::move(text);
      return true;
    }
    if (p[k + 1] >= n.bodies.size()) return false;
    level = &n.bodies[p[k + 1]];
  }
  return false;
}

std::vector<step_node> step_order(const graph& g) {
  const auto& state = *detail::nonempty_state(g, "conveyor::step_order");
  detail::check_not_lost(state, "conveyor::step_order");
  return detail::list_steps(state);
}

void graph_exec::launch_stepping(const stream& s, const std::source_location& where) const {
  const detail::api_scope scope("conveyor::graph_exec::launch (step-through)", where);
  (void)step_through(*this, s);
}

} // namespace conveyor
