// update_incremental: the new graph compared with the one whose parameters the executable graph holds, then the
// route update_state.hpp's route_incremental picks (nothing, the changed nodes set one by one, a whole-graph update,
// a new instantiation), and the per-node application itself (set_changed_nodes), which update() shares.
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
#include <span>
#include <utility>

namespace conveyor {

using detail::access;

namespace {

// The positions a per-node update sets: the changed nodes, then the nodes patched by position (graphed's
// rebinding), which run other parameters than the graph compared against: set to g's as well, changed or not.
std::vector<std::size_t> positions_to_set(const detail::graph_comparison& c, const std::vector<std::size_t>& patched) {
  std::vector<std::size_t> positions;
  positions.reserve(c.changed.size() + patched.size());
  std::vector<std::uint8_t> listed(c.after.size(), 0);
  for (const auto& d : c.changed) {
    positions.push_back(d.position);
    listed[d.position] = 1;
  }
  for (std::size_t p : patched)
    if (p < c.after.size() && listed[p] == 0) positions.push_back(p);
  return positions;
}

// Sets the executable graph's node `origin` to the parameters of `source` (of `kind`) through its kind's
// copy_to_exec (cudaErrorNotSupported for a kind without one); the error cleared. \throws what copy_to_exec throws.
cudaError_t copy_node(cudaGraphExec_t exec, cudaGraphNode_t origin, cudaGraphNode_t source, node_kind kind) {
  const auto& traits = detail::traits_of(kind);
  return traits.copy_to_exec == nullptr ? cudaErrorNotSupported
                                        : detail::cleared(traits.copy_to_exec(exec, origin, source));
}

// Back to the parameters the executable graph held (those of the graph compared against) at the positions `done`
// set; a node that cannot be set back runs neither graph's parameters (transition::setter).
void restore_set(cudaGraphExec_t exec, detail::exec_state& state, const detail::graph_comparison& c,
                 std::span<const std::size_t> done) {
  for (std::size_t q : done)
    if (copy_node(exec, state.origin_nodes.at(q), c.before[q], detail::kind_of(c.before[q])) != cudaSuccess)
      detail::apply(state, detail::transition::setter);
}

// The explanation of a per-node update: what changed, then how many patched nodes were set besides.
void explain_set(update_result& out, const detail::graph_comparison& c, const detail::graph_state* names,
                 std::size_t restored) {
  const std::string changes = detail::change_lines(c, names);
  out.explanation += (out.explanation.empty() || changes.empty() ? "" : "; ") + changes;
  if (restored > 0)
    out.explanation += fmt::format("{}{} patched node(s) set to the new graph's parameters",
                                   out.explanation.empty() ? "" : "; ", restored);
}

} // namespace

bool graph_exec::set_changed_nodes(const graph& g, const detail::graph_comparison& c, update_result& out) {
  auto& state = *impl_;
  if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
  const std::vector<std::size_t> positions = positions_to_set(c, state.over.patched);
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const std::size_t p = positions[k];
    const cudaGraphNode_t origin = state.origin_nodes.at(p);
    const node_kind kind = detail::kind_of(c.after[p]);
    if (const cudaError_t rc = copy_node(handle_, origin, c.after[p], kind); rc != cudaSuccess) {
      out.explanation = fmt::format("per-node update refused ({}) for node {} ({})", cudaGetErrorName(rc), p,
                                    detail::node_name(access::state(g).get(), c.after[p]));
      restore_set(handle_, state, c, std::span(positions).first(k));
      return false;
    }
    after_node_set(g, origin, kind);
  }
  // The executable graph's CUDA user objects hold the resources of the graph it was instantiated from or last
  // updated to as a whole (cudaGraphExecUpdate swaps them), not those of a graph applied node by node, yet launches
  // queued while `g` is current use its keep_alive buffers, callables and child-graph copies: the executable graph
  // owns `g` (in the slot of no node) until a later graph replaces it, then releases it behind the last launch.
  detail::own_applied(*this, g);
  out.method = update_method::per_node;
  out.nodes_set = positions.size();
  explain_set(out, c, access::state(g).get(), positions.size() - c.changed.size());
  return true;
}

// After node `origin` (of `kind`) was set to g's parameters: a host node runs a callable of g's (owned), a copy
// disabled by a zero size runs again.
void graph_exec::after_node_set(const graph& g, cudaGraphNode_t origin, node_kind kind) {
  if (kind == node_kind::host) own_for_node(origin, access::state(g)->keep);
  if (kind == node_kind::memcpy || kind == node_kind::memset)
    (void)detail::enable_if_zero_disabled(handle_, *impl_, origin);
}

update_result graph_exec::update_incremental(const graph& g, bool reinstantiate, std::source_location where) {
  require_graph("update_incremental");
  (void)detail::nonempty_state(g, "conveyor::graph_exec::update_incremental");
  const detail::api_scope scope("conveyor::graph_exec::update_incremental", where);
  return incremental_update(g, nullptr, reinstantiate);
}

namespace {

// The explanation of update_incremental's route, from the comparison `c` (when made) of the graph `names` holds.
std::string route_explanation(detail::incremental_why why, const detail::graph_comparison* c,
                              const detail::graph_state* names) {
  switch (why) {
  case detail::incremental_why::setters_changed:
    return "parameters were changed by per-node setters since the last update";
  case detail::incremental_why::unpaired: return std::string(detail::not_paired_by_position());
  case detail::incremental_why::topology_changed: return fmt::format("topology changed: {}", c->topology_reason);
  case detail::incremental_why::instantiation_only:
    return fmt::format("only a new instantiation applies {}",
                       detail::change_line(*c, *detail::first_unsettable(*c, true), names));
  case detail::incremental_why::not_settable:
    return fmt::format("not settable node by node: {}",
                       detail::change_line(*c, *detail::first_unsettable(*c, false), names));
  case detail::incremental_why::unchanged:
  case detail::incremental_why::settable: return {};
  }
  return {};
}

// The status and node of a route that needs a new instantiation (CUDA's refusal to come, named ahead).
void name_refusal(update_result& out, detail::incremental_why why, const detail::graph_comparison& c,
                  const detail::graph_state* names) {
  if (why == detail::incremental_why::topology_changed) {
    out.status = update_status::topology_changed;
    return;
  }
  const auto* d = detail::first_unsettable(c, true);
  out.status = d->kind == node_kind::kernel ? update_status::attributes_changed : update_status::parameters_changed;
  out.node = c.after[d->position];
  out.node_label = detail::node_name(names, out.node);
}

// What update_incremental compares: `g` read (`after`, from `read` when given), the comparison with the executable
// graph's own read (`c`) and its facts; empty when the comparison would mean nothing.
struct incremental_read {
  std::optional<detail::graph_snapshot> after;
  std::optional<detail::graph_comparison> c;
  detail::comparison_facts facts;
};

incremental_read read_for_route(detail::exec_state& state, const graph& g, detail::graph_snapshot* read,
                                const detail::graph_state* names) {
  incremental_read r;
  // Pairing is read (transition::pairing_read) only when setters left the parameters alone.
  const bool paired = state.st.nodes != detail::overlay::changed && detail::paired_by_position(state);
  if (!detail::compares(state.st, paired)) return r;
  r.after = read != nullptr ? std::move(*read) : detail::snapshot_graph(g.get());
  r.after->fields.clear(); // kept with the executable graph: the comparison needs no fields
  auto [c, facts] = detail::compare_with_current(state, *r.after, names);
  r.c = std::move(c);
  r.facts = facts;
  return r;
}

// The whole-graph update that succeeded, with what the comparison found (`out`) before its explanation.
update_result joined(update_result whole, const update_result& out) {
  whole.nodes_changed = out.nodes_changed;
  if (!out.explanation.empty())
    whole.explanation = whole.explanation.empty() ? out.explanation : out.explanation + "; " + whole.explanation;
  return whole;
}

// CUDA's refusal of the whole-graph update (`whole`) into `out`: its status, node and explanation.
void merge_refusal(update_result& out, const update_result& whole) {
  out.status = whole.status;
  out.node = whole.node;
  out.from_node = whole.from_node;
  out.node_label = whole.node_label;
  if (!whole.explanation.empty()) out.explanation += (out.explanation.empty() ? "" : "; ") + whole.explanation;
}

} // namespace

update_result graph_exec::incremental_update(const graph& g, detail::graph_snapshot* read, bool reinstantiate) {
  (void)detail::collect();
  auto& state = *impl_;
  const auto* names = access::state(g).get();
  update_result out;
  // 1. Compare g with the graph whose parameters the executable graph holds, when the comparison means something;
  // route_incremental decides.
  incremental_read r = read_for_route(state, g, read, names);
  if (r.c) out.nodes_changed = r.c->changed.size();
  const detail::incremental_plan plan = detail::route_incremental(state.st, r.c ? &r.facts : nullptr);
  out.explanation = route_explanation(plan.why, r.c ? &*r.c : nullptr, names);
  // 2. Apply.
  switch (plan.route) {
  case detail::incremental_route::nothing:
    detail::own_applied(*this, g); // its parameters run now: owned until replaced
    adopt_node_by_node(g, std::move(*r.after));
    out.method = update_method::none;
    return out;
  case detail::incremental_route::per_node:
    if (set_changed_nodes(g, *r.c, out)) {
      adopt_node_by_node(g, std::move(*r.after));
      return out;
    }
    [[fallthrough]]; // a setter failed: the executable graph holds its old parameters again
  case detail::incremental_route::whole_graph:
    if (auto whole = whole_update(g, r.after ? &*r.after : nullptr); whole) return joined(std::move(whole), out);
    else merge_refusal(out, whole);
    break;
  case detail::incremental_route::reinstantiate: name_refusal(out, plan.why, *r.c, names); break;
  }
  // 3. A new instantiation, the last resort.
  return last_resort(g, std::move(out), reinstantiate);
}

// After `g` was applied node by node (or needed nothing): its state is the current one, read into `after`.
void graph_exec::adopt_node_by_node(const graph& g, detail::graph_snapshot&& after) {
  auto& state = *impl_;
  retired_ = detail::adopt_current(state, g, detail::transition::per_node_update,
                                   detail::known_structure(state, *access::state(g)));
  state.snapshot = std::make_unique<detail::graph_snapshot>(std::move(after));
}

// A new instantiation of `g` after `out`'s refusal, when `reinstantiate` allows and the graph is not pinned.
update_result graph_exec::last_resort(const graph& g, update_result out, bool reinstantiate) {
  switch (detail::after_failed_update(reinstantiate, impl_->pinned)) {
  case detail::last_resort::refuse:
    out.method = update_method::refused;
    if (out.status == update_status::success) out.status = update_status::error;
    return out;
  case detail::last_resort::refuse_pinned:
    detail::refuse_reinstantiation_if_pinned(*impl_, "update_incremental", out.explanation);
    break;
  case detail::last_resort::reinstantiate: break;
  }
  graph_exec fresh = instantiate(g, without(impl_->flags, instantiate_flags::upload)); // first: exception-safe
  fresh.step_launches_ = step_launches_;
  *this = std::move(fresh);
  out.method = update_method::reinstantiated;
  return out;
}

void graph_exec::own_for_node(cudaGraphNode_t origin, std::shared_ptr<void> item) {
  detail::apply(*impl_, detail::transition::record);
  auto& slot = impl_->over.owned[origin];
  detail::defer_release(std::exchange(slot, std::move(item)), impl_->over.last_launch);
  tracks_launches_ = true;
}

} // namespace conveyor
