// Per-node setters of an executable graph (cudaGraphExec*NodeSetParams, cudaGraphNodeSetEnabled) and graphed's patches
// by position: where a node leads (update_state.hpp's target_of), the step-through shadow that follows the change,
// and the transitions they make (setter, record).
#include "conveyor/execute/graph_exec.hpp"

#include "execute/graph_exec_impl.hpp"

#include "cuda/driver.hpp"
#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <stdexcept>
#include <unordered_set>

namespace conveyor {

using detail::access;

namespace detail {

namespace {
// Node `position` of the graph `e` was instantiated from, or null when there is none.
cudaGraphNode_t origin_at(exec_state& state, std::size_t position) {
  if (state.origin_nodes.empty()) state.origin_nodes = graph_nodes(state.source->handle);
  return position < state.origin_nodes.size() ? state.origin_nodes[position] : nullptr;
}

void mark_patched(exec_state& state, std::size_t position) {
  if (state.over.patched_flag.size() <= position) state.over.patched_flag.resize(state.origin_nodes.size(), 0);
  if (state.over.patched_flag[position] != 0) return;
  state.over.patched_flag[position] = 1;
  state.over.patched.push_back(position);
}
} // namespace

namespace {
// Sets node `position` of `e` through `set(exec, origin node)` and marks it patched when CUDA accepts.
template <class Setter>
cudaError_t patch_node(graph_exec& e, std::size_t position, Setter set) {
  auto& state = exec_access::state(e);
  if (!paired_by_position(state)) return cudaErrorInvalidValue; // position means nothing
  const cudaGraphNode_t origin = origin_at(state, position);
  if (origin == nullptr) return cudaErrorInvalidValue;
  const cudaError_t rc = set(exec_access::handle(e), origin);
  if (rc == cudaSuccess) mark_patched(state, position);
  return rc;
}
} // namespace

cudaError_t patch_fields(graph_exec& e, std::size_t position, node_fields& fields) {
  const auto set = traits_of(fields.kind).set_fields;
  if (set == nullptr || !fields.patchable) return cudaErrorInvalidValue;
  return patch_node(e, position,
                    [&](cudaGraphExec_t exec, cudaGraphNode_t origin) { return set(exec, origin, fields); });
}

const std::shared_ptr<graph_state>& current_graph(const graph_exec& e) noexcept {
  return exec_access::state(e).current;
}

} // namespace detail

namespace {

// Why a per-node change that needs positions cannot be made (paired_by_position is false).
[[noreturn]] void refuse_unpaired(const node& n, bool of_current) {
  throw std::logic_error(fmt::format(
      "conveyor::graph_exec: {}{}. Nothing was changed. {}",
      of_current ? fmt::format("node {} belongs to the graph last applied by a whole-graph update, and ",
                               detail::node_name(access::owner(n), n.get()))
                 : fmt::format("node {} belongs to the graph this executable graph was instantiated from, which a "
                               "whole-graph update replaced (or step-through launches follow per-node changes by "
                               "position), and ",
                               detail::node_name(access::owner(n), n.get())),
      detail::not_paired_by_position(),
      "Update to a graph built or captured in the same order as the source first (or instantiate the new graph)"));
}

// The node of the instantiation graph that `n` (of it, or of the graph last applied by an update) stands for.
// `stepping`: step-through launches follow per-node changes on a copy of `current` by position.
// \throws std::logic_error when that needs positions and the graph last applied is not paired by them.
// Which graph `n` belongs to, for target_of. (A node of the source after a whole-graph update that CUDA paired
// through dependencies names an executable graph's node that may now run another node's work.)
detail::node_owner owner_of(const detail::exec_state& state, const node& n) noexcept {
  const auto* owner = access::owner(n);
  if (owner == state.source.get())
    return state.current == state.source ? detail::node_owner::source : detail::node_owner::replaced_source;
  return owner == state.current.get() ? detail::node_owner::current : detail::node_owner::other;
}

// Maps each node of `current` to the source's node at its position (over.to_origin, made at the first need).
void map_to_origin(detail::exec_state& state) {
  if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
  const auto nodes = detail::graph_nodes(state.current->handle);
  detail::apply(state, detail::transition::record);
  for (std::size_t i = 0; i < nodes.size() && i < state.origin_nodes.size(); ++i)
    state.over.to_origin.emplace(nodes[i], state.origin_nodes[i]);
}

cudaGraphNode_t origin_of(detail::exec_state& state, const node& n, bool stepping) {
  const detail::node_owner owner = owner_of(state, n);
  detail::setter_target target = detail::target_of(owner, state.st.pair, stepping);
  if (target == detail::setter_target::read_first) {
    (void)detail::paired_by_position(state); // transition::pairing_read
    target = detail::target_of(owner, state.st.pair, stepping);
  }
  if (target == detail::setter_target::refuse) refuse_unpaired(n, owner == detail::node_owner::current);
  if (target == detail::setter_target::itself) return n.get();
  if (state.over.to_origin.empty()) map_to_origin(state);
  auto it = state.over.to_origin.find(n.get());
  return it != state.over.to_origin.end() ? it->second : n.get();
}

// The node of the graph applied last (`current`) that node `origin` of the executable graph runs the parameters of:
// the same position (origin_of has checked that the nodes pair by position).
cudaGraphNode_t applied_node(detail::exec_state& state, cudaGraphNode_t origin) {
  if (state.current == state.source) return origin;
  if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
  const auto at = std::find(state.origin_nodes.begin(), state.origin_nodes.end(), origin);
  const auto nodes = detail::graph_nodes(state.current->handle);
  const auto position = static_cast<std::size_t>(at - state.origin_nodes.begin());
  if (position >= nodes.size()) throw std::logic_error("conveyor::graph_exec: a node outside the executable graph");
  return nodes[position];
}

// The one error check of the setters: names the node.
void check_node(cudaError_t rc, std::string_view call, const node& n,
                std::source_location where = std::source_location::current()) {
  detail::check_with(
      rc, call, [&] { return fmt::format("node {}", detail::node_name(access::owner(n), n.get())); }, where);
}

} // namespace

namespace {

// The step-through shadow's node standing for `origin` (a node of the graph the executable graph was instantiated
// from): the shadow, a clone of the graph the executable graph holds, made at the first per-node change.
cudaGraphNode_t shadow_node(detail::exec_state& state, cudaGraphNode_t origin) {
  if (!state.over.shadow) {
    auto shadow = std::make_shared<detail::graph_state>();
    detail::check_with(cudaGraphClone(&shadow->handle, state.current->handle), "cudaGraphClone", [] {
      return std::string("a step-through copy of an executable graph changed by per-node setters");
    });
    shadow->keep = state.current->keep;
    shadow->clusters.reset(); // a clone: its cluster attributes are not known by position (read if ever needed)
    for (const auto& [node, label] : state.current->labels) {
      cudaGraphNode_t copy = nullptr;
      if (cudaGraphNodeFindInClone(&copy, node, shadow->handle) == cudaSuccess) shadow->labels.emplace(copy, label);
    }
    state.over.shadow = std::move(shadow);
  }
  cudaGraphNode_t copy = nullptr;
  CONVEYOR_CHECK(cudaGraphNodeFindInClone(&copy, applied_node(state, origin), state.over.shadow->handle));
  return copy;
}

} // namespace

void graph_exec::shadow_change(cudaGraphNode_t origin, const std::function<cudaError_t(cudaGraphNode_t)>& set,
                               bool enabled) {
  if (!step_launches_) return;
  const cudaGraphNode_t copy = shadow_node(*impl_, origin);
  if (!enabled) {
    detail::apply(*impl_, detail::transition::record);
    impl_->over.shadow_disabled.insert(copy);
    return;
  }
  impl_->over.shadow_disabled.erase(copy);
  if (set) CONVEYOR_CHECK(set(copy));
}

void graph_exec::set_kernel_raw(const node& n, const launch_config& cfg, const void* function, void** arguments) {
  require_graph("set_kernel");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(detail::set_exec_kernel(handle_, origin, cfg, function, arguments), "cudaGraphExecKernelNodeSetParams", n);
  detail::apply(*impl_, detail::transition::setter);
  impl_->over.configs.insert_or_assign(origin, detail::kernel_setting{function, cfg});
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_kernel(c, cfg, function, arguments); });
}

namespace {

// The function and launch configuration that node `origin` of the executable graph (standing for `n`) runs now:
// set_kernel's, else the handle's own (graph::kernel made it), else the node's, read once (from the graph it
// belongs to: the current one unless the caller kept a node of an older graph).
// The launch shape is that of the node whose parameters the executable graph runs now: `n` itself when it
// belongs to the graph applied last, else that graph's node at the same position (an update may have changed the
// grid or the shared memory since `n` was made).
detail::kernel_setting kernel_setting_of(detail::exec_state& state, const node& n, cudaGraphNode_t origin) {
  const bool of_applied = access::owner(n) == state.current.get();
  if (auto it = state.over.configs.find(origin); !state.over.configs.empty() && it != state.over.configs.end())
    return it->second;
  if (of_applied && n.kernel_function() != nullptr) return {n.kernel_function(), n.kernel_config()};
  if (auto r = state.over.read.find(origin); r != state.over.read.end()) return r->second;
  const cudaGraphNode_t runs = of_applied ? n.get() : applied_node(state, origin);
  detail::apply(state, detail::transition::record);
  return state.over.read.emplace(origin, detail::read_kernel_setting(runs)).first->second;
}

} // namespace

void graph_exec::set_kernel_args_raw(const node& n, const void* function, void** arguments) {
  require_graph("set_kernel_args");
  auto& state = *impl_;
  const cudaGraphNode_t origin = origin_of(state, n, step_launches_);
  const detail::kernel_setting now = kernel_setting_of(state, n, origin);
  if (now.function != nullptr && now.function != function) // the runtime may not report a fresh node's function
    throw std::invalid_argument(fmt::format("conveyor::graph_exec::set_kernel_args: node {} runs another kernel; "
                                            "use set_kernel to change the function",
                                            detail::node_name(access::owner(n), n.get())));
  check_node(detail::set_exec_kernel(handle_, origin, now.config, function, arguments),
             "cudaGraphExecKernelNodeSetParams", n);
  detail::apply(state, detail::transition::setter);
  shadow_change(origin,
                [&](cudaGraphNode_t c) { return detail::set_graph_kernel(c, now.config, function, arguments); });
}

void graph_exec::set_memcpy(const node& n, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  require_graph("set_memcpy");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  detail::apply(*impl_, detail::transition::setter);
  if (bytes == 0) { // CUDA has no zero-size copy: the copy does nothing
    check_node(cudaGraphNodeSetEnabled(handle_, origin, 0U), "cudaGraphNodeSetEnabled(memcpy of 0 bytes)", n);
    impl_->over.zero_disabled.insert(origin); // a record, within transition::setter's overlay::changed
    shadow_change(origin, {}, false);
    return;
  }
  check_node(detail::set_exec_memcpy_1d(handle_, origin, dst, src, bytes, kind), "cudaGraphExecMemcpyNodeSetParams1D",
             n);
  check_node(detail::enable_if_zero_disabled(handle_, *impl_, origin), "cudaGraphNodeSetEnabled", n);
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_memcpy_1d(c, dst, src, bytes, kind); });
}

void graph_exec::set_memset_raw(const node& n, void* dst, unsigned value, unsigned element_size, std::size_t count) {
  require_graph("set_memset");
  if (element_size != 1 && element_size != 2 && element_size != 4)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph_exec::set_memset: element size {} B; CUDA memset nodes take 1, 2 or 4", element_size));
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  detail::apply(*impl_, detail::transition::setter);
  if (count == 0) {
    check_node(cudaGraphNodeSetEnabled(handle_, origin, 0U), "cudaGraphNodeSetEnabled(memset of 0 elements)", n);
    impl_->over.zero_disabled.insert(origin); // a record, within transition::setter's overlay::changed
    shadow_change(origin, {}, false);
    return;
  }
  check_node(detail::set_exec_memset(handle_, origin, dst, value, element_size, count),
             "cudaGraphExecMemsetNodeSetParams", n);
  check_node(detail::enable_if_zero_disabled(handle_, *impl_, origin), "cudaGraphNodeSetEnabled", n);
  shadow_change(origin,
                [&](cudaGraphNode_t c) { return detail::set_graph_memset(c, dst, value, element_size, count); });
}

void graph_exec::set_host_raw(const node& n, std::shared_ptr<std::function<void()>> callable) {
  require_graph("set_host");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(detail::set_exec_host(handle_, origin, callable.get()), "cudaGraphExecHostNodeSetParams", n);
  detail::apply(*impl_, detail::transition::setter);
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_host(c, callable.get()); });
  own_for_node(origin, std::move(callable));
}

void graph_exec::set_enabled(const node& n, bool enabled) {
  require_graph("set_enabled");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(cudaGraphNodeSetEnabled(handle_, origin, enabled ? 1U : 0U), "cudaGraphNodeSetEnabled", n);
  impl_->over.zero_disabled.erase(origin); // the user's choice now
  shadow_change(origin, {}, enabled);
}

} // namespace conveyor
