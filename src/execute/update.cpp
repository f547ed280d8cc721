// Whole-graph updates: graph_exec::update (cudaGraphExecUpdate behind the guards of update_guards.cpp, and the
// per-node route after CUDA's topology refusal where Conveyor's comparison proves the DAG the same),
// update_or_reinstantiate, and the transitions they make (update_state.hpp): adopt_current, after_whole_update.
// The functions of a whole-graph update's fast path (update, whole_update, applied_as_whole, adopt_current, and
// api_scope's) are [[gnu::hot]]: GCC places them together (.text.hot), so that the few code lines an update of a small
// graph runs after CUDA's call lie near one another (each line missed after a launch costs a few nanoseconds).
#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/update_result.hpp"

#include "execute/graph_exec_impl.hpp"
#include "execute/update_guards.hpp"

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <utility>

namespace conveyor {

using detail::access;

namespace detail {

namespace {

// What was recorded about the nodes of the graph an update replaces (out of adopt_current's line: every update runs
// that, few have records).
[[gnu::noinline]] void forget_node_records(exec_state& state) {
  state.over.to_origin.clear();
  state.over.configs.clear();
  state.over.read.clear();
  state.over.shadow_disabled.clear();
}

// What the executable graph owns of a graph applied node by node: its definition and its resources (keep_alive
// items, callables, child-graph copies). The resources are held themselves: when the caller's graph object goes
// away, its definition drops them (release_resources: executable graphs are assumed to hold theirs through CUDA user
// objects, which is true only of graphs applied as a whole).
// Null when the graph holds nothing its nodes point into (no keep_alive item, callable or child-graph copy): queued
// launches then need nothing of it, and launches record no fence for it.
std::shared_ptr<void> applied_node_by_node(const graph& g) {
  const auto& state = access::state(g);
  if (!state->keep->any.load(std::memory_order_acquire) && state->copied_tokens.empty()) return nullptr;
  return std::make_shared<std::pair<std::shared_ptr<graph_state>, std::shared_ptr<resources>>>(state, state->keep);
}

} // namespace

[[gnu::hot]] bool adopt_current(exec_state& state, const graph& g, transition t, bool structural) {
  constexpr std::size_t most_retired = 4;
  if (state.current && state.current != state.source) {
    if (state.retired.size() >= most_retired) state.retired.erase(state.retired.begin());
    state.retired.push_back(std::move(state.current));
  }
  state.current = access::state(g);
  if (!state.over.patched.empty()) {
    state.over.patched.clear();
    state.over.patched_flag.clear();
  }
  state.snapshot.reset();
  state.over.shadow.reset();
  if (state.st.nodes != overlay::clean) forget_node_records(state);
  apply(
      state, t,
      {.known_structure = structural, .keeps_records = !state.over.owned.empty() || !state.over.zero_disabled.empty()});
  return !state.retired.empty();
}

[[gnu::noinline]] void after_whole_update(cudaGraphExec_t exec, exec_state& state) noexcept {
  if (!state.over.owned.empty()) release_owned(state);
  for (cudaGraphNode_t origin : state.over.zero_disabled) (void)cleared(cudaGraphNodeSetEnabled(exec, origin, 1U));
  state.over.zero_disabled.clear();
}

void own_applied(graph_exec& e, const graph& g) {
  auto kept = applied_node_by_node(g);
  if (kept || exec_access::state(e).over.owned.contains(nullptr))
    exec_access::own_for_node(e, nullptr, std::move(kept));
}

void refuse_reinstantiation_if_pinned(const exec_state& state, std::string_view call, const std::string& why) {
  if (!state.pinned) return;
  throw std::logic_error(fmt::format(
      "conveyor::graph_exec::{}: this executable graph belongs to a device_graph, whose handle kernels hold "
      "(device_graph_ref); it cannot be updated in place ({}), and re-instantiating it would leave that handle naming "
      "a destroyed executable graph. Nothing was changed. Make a new device_graph from the new graph "
      "(instantiate_for_device) and give kernels its ref()",
      call, why));
}

} // namespace detail

[[gnu::hot]] update_result graph_exec::whole_update(const graph& g, const detail::graph_snapshot* after) {
  auto& state = *impl_;
  detail::graph_state& next = *access::state(g);
  if (!detail::nothing_to_guard(state, next)) [[unlikely]]
    return guarded_update(g, after);
  // Nothing to guard: the executable graph's cluster list stays empty, as g's is.
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t rc = detail::update_as_whole(handle_, next, info);
  if (!detail::update_took(rc, info)) [[unlikely]] {
    std::vector<detail::kernel_attribute> none;
    return after_refused_update(g, after, none, rc, info);
  }
  return applied_as_whole(g, info, detail::known_structure(state, next));
}

// whole_update where the guards have something to compare (allocation nodes, cluster attributes, or facts not read
// yet): their refusal, or the update with the executable graph's cluster list set to g's.
[[gnu::noinline]] update_result graph_exec::guarded_update(const graph& g, const detail::graph_snapshot* after) {
  auto& state = *impl_;
  detail::graph_state& next = *access::state(g);
  std::vector<detail::kernel_attribute> attributes; // g's cluster attributes
  bool paired = false;
  if (auto refused = detail::guard_whole_update(state, g, after, attributes, paired)) return *refused;
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t rc = detail::update_as_whole(handle_, next, info);
  if (!detail::update_took(rc, info)) return after_refused_update(g, after, attributes, rc, info);
  update_result result = applied_as_whole(g, info, paired || detail::known_structure(state, next));
  state.attributes = std::move(attributes);
  return result;
}

// The executable graph after CUDA applied g as a whole (`paired`: CUDA paired their nodes by position, as it does
// with the source and a graph of its structure): g's user objects held, g adopted as the current graph, what was
// owned or disabled node by node released.
[[gnu::hot]] update_result graph_exec::applied_as_whole(const graph& g, const cudaGraphExecUpdateResultInfo& info,
                                                        bool paired) {
  auto& state = *impl_;
  update_result result;
  result.method = update_method::whole_graph;
  result.node = info.errorNode;
  result.from_node = info.errorFromNode;
  detail::hold_tokens_of(state, *access::state(g)); // CUDA swapped the user-object references
  const bool had_records = state.st.nodes != detail::overlay::clean;
  retired_ = detail::adopt_current(state, g, detail::transition::whole_graph_update, paired);
  if (had_records) detail::after_whole_update(handle_, state); // something owned or disabled node by node
  tracks_launches_ = false;
  return result;
}

namespace {

// Conveyor's comparison of `g` with the executable graph's current graph after CUDA's topology refusal, made only
// where the executable graph pairs by position (else nothing to compare); `g` read into `read` when `after` is null.
struct refusal_comparison {
  std::optional<detail::graph_snapshot> read;
  std::optional<detail::graph_comparison> c;
  detail::comparison_facts facts;
};

void compare_after_refusal(detail::exec_state& state, const graph& g, const detail::graph_snapshot*& after,
                           refusal_comparison& r) {
  if (after == nullptr) after = &r.read.emplace(detail::snapshot_graph(g.get()));
  auto [c, facts] = detail::compare_with_current(state, *after, access::state(g).get());
  r.c = std::move(c);
  r.facts = facts;
}

// The end of the explanation when CUDA's refusal stands (after_topology_refusal's keep_* rows); empty when the
// change is set node by node.
std::string refusal_stands(detail::topology_refusal route, const detail::graph_comparison* c,
                           const detail::graph_state* names) {
  switch (route) {
  case detail::topology_refusal::keep_unpaired: return fmt::format("; {}", detail::not_paired_by_position());
  case detail::topology_refusal::keep_other_topology:
    return fmt::format("; Conveyor's comparison: {}", c->topology_reason);
  case detail::topology_refusal::keep_not_settable:
    return fmt::format("; Conveyor's comparison found the same DAG, but {} cannot be set node by node",
                       detail::change_line(*c, *detail::first_unsettable(*c, false), names));
  case detail::topology_refusal::set_every_settable:
  case detail::topology_refusal::set_changed: return {};
  }
  return {};
}

} // namespace

// CUDA pairs each node's dependencies in the order they were added: the same DAG with its dependencies added in
// another order is refused as topology_changed. Where Conveyor's comparison proves the DAG the same, the change is
// set node by node (after_topology_refusal decides). CUDA's reason stays first in the explanation.
[[gnu::noinline]] update_result graph_exec::after_refused_update(const graph& g, const detail::graph_snapshot* after,
                                                                 std::vector<detail::kernel_attribute>& attributes,
                                                                 cudaError_t rc,
                                                                 const cudaGraphExecUpdateResultInfo& info) {
  auto& state = *impl_;
  update_result result = detail::refused_result(state, g, rc, info);
  if (result.status != update_status::topology_changed) return result;
  result.explanation = "CUDA refused the whole-graph update (topology_changed: it pairs each node's dependencies in "
                       "the order they were added)";
  const bool paired = detail::paired_by_position(state);
  refusal_comparison r;
  if (paired) compare_after_refusal(state, g, after, r);
  const auto* names = access::state(g).get();
  const auto route = detail::after_topology_refusal(state.st, paired, r.c ? &r.facts : nullptr);
  if (std::string end = refusal_stands(route, r.c ? &*r.c : nullptr, names); !end.empty()) {
    result.explanation += end;
    return result;
  }
  const detail::graph_comparison& c = *r.c;
  // set_every_settable: setters ran, so the executable graph runs neither graph
  if (route == detail::topology_refusal::set_every_settable) detail::mark_every_settable_node_patched(state, c);
  update_result per_node;
  per_node.nodes_changed = c.changed.size();
  per_node.explanation = result.explanation + "; Conveyor's comparison found the same DAG: set node by node";
  if (!set_changed_nodes(g, c, per_node)) {
    result.explanation = per_node.explanation;
    return result;
  }
  retired_ =
      detail::adopt_current(state, g, detail::transition::per_node_update, detail::known_structure(state, *names));
  state.snapshot = std::make_unique<detail::graph_snapshot>(*after);
  state.attributes = std::move(attributes);
  return per_node;
}

[[gnu::hot]] update_result graph_exec::update(const graph& g, std::source_location where) {
  if (!impl_) [[unlikely]]
    require_graph("update"); // throws
  (void)detail::nonempty_state(g, "conveyor::graph_exec::update");
  const detail::api_scope scope("conveyor::graph_exec::update", where);
  (void)detail::collect();
  return whole_update(g, nullptr);
}

update_result graph_exec::update_or_reinstantiate(const graph& g, std::source_location where) {
  require_graph("update_or_reinstantiate");
  (void)detail::nonempty_state(g, "conveyor::graph_exec::update_or_reinstantiate");
  const detail::api_scope scope("conveyor::graph_exec::update_or_reinstantiate", where);
  update_result result = update(g);
  if (result) return result;
  detail::refuse_reinstantiation_if_pinned(*impl_, "update_or_reinstantiate", result.reason());
  // Instantiate first: if it throws, this executable graph is unchanged. The old one is then destroyed without
  // waiting; its queued launches keep what they use (CUDA user objects, fences).
  graph_exec fresh = instantiate(g, without(impl_->flags, instantiate_flags::upload));
  fresh.step_launches_ = step_launches_;
  *this = std::move(fresh);
  result.method = update_method::reinstantiated;
  return result;
}

} // namespace conveyor
