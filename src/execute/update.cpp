#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/update_result.hpp"

#include "execute/graph_exec_impl.hpp"

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

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

using detail::access;

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

namespace {

// What was recorded about the nodes of the graph a whole-graph update replaces (out of adopt_current's line: every
// update runs that, few have records).
[[gnu::noinline]] void forget_node_records(detail::exec_state& state) {
  state.to_origin.clear();
  state.configs.clear();
  state.read.clear();
  state.shadow_disabled.clear();
  state.node_level = !state.owned.empty() || !state.zero_disabled.empty();
}

// Records that `g`'s parameters are now loaded (after a whole-graph or per-node update); `paired`: node i of `g` is
// known to be run by node i of the executable graph (a per-node update set them so; CUDA's whole-graph update pairs
// nodes through their dependencies); `structural`: `g` is known to have the source's structure (pairs_by_position).
// The graph it replaces is kept in `retired` for the next launch to destroy (a few at most, when updates come
// without launches). Returns whether any graph waits there (graph_exec::retired_).
[[nodiscard]] bool adopt_current(detail::exec_state& state, const graph& g, bool paired, bool structural) {
  state.by_position = paired;
  state.current_structural = structural;
  state.by_position_checked = false;
  constexpr std::size_t most_retired = 4;
  if (state.current && state.current != state.source) {
    if (state.retired.size() >= most_retired) state.retired.erase(state.retired.begin());
    state.retired.push_back(std::move(state.current));
  }
  state.current = access::state(g);
  state.current_exact = true;
  if (!state.patched.empty()) {
    state.patched.clear();
    state.patched_flag.clear();
  }
  state.snapshot.reset();
  state.shadow.reset();
  if (state.node_level) forget_node_records(state);
  return !state.retired.empty();
}

// After a whole-graph update every node runs `g`'s parameters: what the executable graph owned node by node is
// released behind the last launch, and memcpy/memset nodes a zero-size setter disabled are enabled again. Called when
// state.node_level says some were (after adopt_current, which keeps it for those).
[[gnu::noinline]] void after_whole_update(cudaGraphExec_t exec, detail::exec_state& state) {
  if (!state.owned.empty()) detail::release_owned(state);
  for (cudaGraphNode_t origin : state.zero_disabled) (void)detail::cleared(cudaGraphNodeSetEnabled(exec, origin, 1U));
  state.zero_disabled.clear();
  state.node_level = false;
}

// The allocation nodes of `g` must reserve what the executable graph's do (same positions, addresses and sizes):
// CUDA keeps the executable graph's allocations, and kernels of `g` that use another address would fault. Reads `g`
// only when the executable graph has allocation nodes.
std::optional<update_result> refuse_other_allocations(detail::exec_state& state, const graph& g) {
  if (!state.allocations_read) detail::read_allocations(state);
  if (state.alloc_positions.empty()) return std::nullopt;
  const auto nodes = detail::graph_nodes(g.get());
  for (std::size_t k = 0; k < state.alloc_positions.size(); ++k) {
    const std::size_t i = state.alloc_positions[k];
    if (i >= nodes.size() || detail::kind_of(nodes[i]) != node_kind::mem_alloc) return std::nullopt; // CUDA says
    const auto a = detail::read_mem_alloc(nodes[i]);
    if (a.pointer == state.allocs[k].pointer && a.bytes == state.allocs[k].bytes) continue;
    update_result r;
    r.method = update_method::refused;
    r.status = update_status::parameters_changed;
    r.node = nodes[i];
    r.node_label = detail::node_name(access::state(g).get(), nodes[i]);
    r.explanation = fmt::format("allocation node {} reserves {} B at {} where the executable graph has {} B at {}; "
                                "kernels of the new graph use that address, so it needs a new instantiation",
                                i, a.bytes, a.pointer, state.allocs[k].bytes, state.allocs[k].pointer);
    return r;
  }
  return std::nullopt;
}

// The thread-block cluster attributes of `g`'s kernel nodes, those inside child graphs and conditional bodies
// included: those known without a read (graph_state::clusters), from `read` when `g` was read already, else read
// from the graph.
std::vector<detail::kernel_attribute> clusters_of(const detail::graph_state& g, const detail::graph_snapshot* read) {
  if (g.clusters) return *g.clusters;
  if (read != nullptr) return detail::cluster_attributes(*read, &g);
  return detail::cluster_attributes(g.handle, &g);
}

// Refused when either graph holds a conditional node whose bodies cannot be read (one Conveyor did not build): the
// cluster attributes of their kernels cannot be compared.
std::optional<update_result> refuse_unreadable_bodies(const std::vector<detail::kernel_attribute>& applied,
                                                      const std::vector<detail::kernel_attribute>& next,
                                                      const graph& g) {
  const auto marker = [](const detail::kernel_attribute& a) { return a.inner == detail::unreadable_bodies; };
  const auto in_applied = std::find_if(applied.begin(), applied.end(), marker);
  const auto in_next = std::find_if(next.begin(), next.end(), marker);
  if (in_applied == applied.end() && in_next == next.end()) return std::nullopt;
  update_result r;
  r.method = update_method::refused;
  r.status = update_status::not_supported;
  const bool new_graph = in_next != next.end();
  const std::size_t position = new_graph ? in_next->position : in_applied->position;
  if (new_graph) {
    const auto nodes = detail::graph_nodes(g.get());
    r.node = position < nodes.size() ? nodes[position] : nullptr;
    r.node_label = detail::node_name(access::state(g).get(), r.node);
  }
  r.explanation = fmt::format(
      "node {} of the {} graph is a conditional node Conveyor did not build: CUDA 13.0 cannot read its bodies back, "
      "so whether their kernels' thread-block clusters change cannot be checked (a whole-graph update reports new "
      "ones applied and launches keep the old ones); it needs a new instantiation (a conditional node made with "
      "conveyor::add_conditional or capture_conditional is updated in place)",
      position, new_graph ? "new" : "executable graph's");
  return r;
}

// Refused when the cluster attributes would change: a whole-graph update reports them applied and launches keep the
// old ones (kernels inside child graphs and conditional bodies too). Sets `next` to `g`'s attributes.
std::optional<update_result> refuse_cluster_change(detail::exec_state& state, const graph& g,
                                                   const detail::graph_snapshot* after,
                                                   std::vector<detail::kernel_attribute>& next) {
  if (!state.attributes)
    state.attributes = clusters_of(*state.current, state.current_exact && state.snapshot ? &*state.snapshot : nullptr);
  next = clusters_of(*access::state(g), after);
  if (auto refused = refuse_unreadable_bodies(*state.attributes, next, g)) return refused;
  const auto at = detail::first_attribute_difference(*state.attributes, next);
  if (!at) return std::nullopt;
  update_result r;
  r.method = update_method::refused;
  r.status = update_status::attributes_changed;
  const auto nodes = detail::graph_nodes(g.get());
  r.node = at->position < nodes.size() ? nodes[at->position] : nullptr;
  r.node_label = detail::node_name(access::state(g).get(), r.node);
  r.explanation = fmt::format("{} has other thread-block cluster attributes; a whole-graph update reports them "
                              "applied but launches keep the old ones, so it needs a new instantiation",
                              at->inner == 0 ? fmt::format("node {}", at->position)
                                             : fmt::format("kernel {} inside node {} (a child graph or conditional "
                                                           "body, depth first)",
                                                           at->inner, at->position));
  return r;
}

// The allocation and cluster guards compare by position. When the executable graph holds allocation nodes or either
// side has cluster attributes, and `g` would not be paired by position (CUDA pairs through dependencies: `g` was
// built or captured in another order than the source), the guards cannot vouch for the update: refused (a new
// instantiation applies it). `attributes`: `g`'s cluster attributes. Sets `paired` when `g` is known to pair by
// position (it was read for this).
std::optional<update_result> refuse_unpaired_guards(detail::exec_state& state, const graph& g,
                                                    const std::vector<detail::kernel_attribute>& attributes,
                                                    bool& paired) {
  const bool clusters = !attributes.empty() || !state.attributes->empty();
  if (state.alloc_positions.empty() && !clusters) return std::nullopt;
  const auto& applied = *access::state(g);
  paired = detail::pairs_by_position(state, applied);
  if (paired) return std::nullopt;
  update_result r;
  r.method = update_method::refused;
  r.status = clusters ? update_status::attributes_changed : update_status::parameters_changed;
  r.explanation = fmt::format("the new graph has its nodes in another creation order than the executable graph's, "
                              "which CUDA would pair through their dependencies, so the {} compared by position "
                              "cannot be checked; it needs a new instantiation",
                              clusters ? "thread-block cluster attributes" : "allocation nodes' addresses");
  return r;
}

// True when the guards below have nothing to compare, known without a read: the executable graph's allocation nodes
// were read and there are none, and neither side has thread-block cluster attributes (the executable graph's list and
// `g`'s known, and empty). Each guard would then pass without a side effect: whole_update skips them (the update of
// a small graph costs a few hundred nanoseconds; the guards' calls after a launch cost tens more).
bool nothing_to_guard(const detail::exec_state& state, const detail::graph_state& g) noexcept {
  return state.allocations_read && state.alloc_positions.empty() && state.attributes && state.attributes->empty() &&
         g.clusters && g.clusters->empty();
}

// The guards of a whole-graph update, in order: allocation addresses, cluster attributes (sets `attributes` to
// `g`'s), pairing by position (sets `paired`). The first refusal, or nullopt.
[[gnu::noinline]] std::optional<update_result> guard_whole_update(detail::exec_state& state, const graph& g,
                                                                  const detail::graph_snapshot* after,
                                                                  std::vector<detail::kernel_attribute>& attributes,
                                                                  bool& paired) {
  if (auto refused = refuse_other_allocations(state, g)) return refused;
  if (auto refused = refuse_cluster_change(state, g, after, attributes)) return refused;
  return refuse_unpaired_guards(state, g, attributes, paired);
}

// What CUDA's refusal of a whole-graph update of `state`'s executable graph to `g` says (`rc`, `info`), with the
// offending node's name. \throws cuda_error when `rc` is an error other than the refusal itself.
update_result refused_result(const detail::exec_state& state, const graph& g, cudaError_t rc,
                             const cudaGraphExecUpdateResultInfo& info) {
  update_result result;
  result.status = to_update_status(info.result);
  result.node = info.errorNode;
  result.from_node = info.errorFromNode;
  (void)cudaGetLastError();
  if (rc != cudaErrorGraphExecUpdateFailure && rc != cudaSuccess && result.status == update_status::success)
    throw cuda_error(rc, "cudaGraphExecUpdate", std::source_location::current());
  result.method = update_method::refused;
  if (result.status == update_status::success) result.status = update_status::error;
  if (info.errorNode != nullptr) result.node_label = detail::node_name(access::state(g).get(), info.errorNode);
  else if (info.errorFromNode != nullptr) result.node_label = detail::node_name(state.source.get(), info.errorFromNode);
  return result;
}

// "node 3 (axpy): arguments 1", for update results.
std::string change_line(const detail::graph_comparison& c, const detail::node_delta& d,
                        const detail::graph_state* names) {
  return fmt::format("node {} ({}): {}", d.position, detail::node_name(names, c.after[d.position]), d.diff.what);
}

// The first few changes by name (naming reads each node again: thousands would cost milliseconds).
std::string change_lines(const detail::graph_comparison& c, const detail::graph_state* names) {
  constexpr std::size_t named = 8;
  std::string out;
  for (std::size_t k = 0; k < c.changed.size() && k < named; ++k)
    out += (out.empty() ? "" : "; ") + change_line(c, c.changed[k], names);
  if (c.changed.size() > named) out += fmt::format("; and {} more", c.changed.size() - named);
  return out;
}

// The first change only a whole-graph update (settable false, or no per-node setter) or only a new instantiation
// (updatable false) can apply; null when every change can be set node by node.
const detail::node_delta* first_unsettable(const detail::graph_comparison& c, bool instantiation_only) {
  for (const auto& d : c.changed) {
    if (instantiation_only ? !d.diff.updatable
                           : (!d.diff.settable || detail::traits_of(d.kind).copy_to_exec == nullptr))
      return &d;
  }
  return nullptr;
}

// Marks every node of `c.after` that a per-node setter could have changed (kernel, copy, memset, host: the kinds with
// a copy_to_exec) as patched, so that set_changed_nodes sets it to the new graph's parameters whether or not it
// differs from `current`'s: after per-node setters the executable graph runs neither.
void mark_every_settable_node_patched(detail::exec_state& state, const detail::graph_comparison& c) {
  state.patched_flag.assign(c.after.size(), 0);
  state.patched.clear();
  for (std::size_t p = 0; p < c.after.size(); ++p) {
    if (detail::traits_of(detail::kind_of(c.after[p])).copy_to_exec == nullptr) continue;
    state.patched_flag[p] = 1;
    state.patched.push_back(p);
  }
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
  return std::make_shared<std::pair<std::shared_ptr<detail::graph_state>, std::shared_ptr<detail::resources>>>(
      state, state->keep);
}

// Gives `e` the graph applied node by node to own (exec_access::own_for_node, the slot of no node), when it holds
// something or replaces a graph that did.
void own_applied(graph_exec& e, const graph& g) {
  auto kept = applied_node_by_node(g);
  if (kept || detail::exec_access::state(e).owned.contains(nullptr))
    detail::exec_access::own_for_node(e, nullptr, std::move(kept));
}

} // namespace

bool graph_exec::set_changed_nodes(const graph& g, const detail::graph_comparison& c, update_result& out) {
  auto& state = *impl_;
  if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
  // The changed nodes, then the nodes patched by position (graphed's rebinding), which run other parameters than
  // the graph compared against: they are set to g's as well, changed or not.
  std::vector<std::size_t> positions;
  positions.reserve(c.changed.size() + state.patched.size());
  std::vector<std::uint8_t> listed(c.after.size(), 0);
  for (const auto& d : c.changed) {
    positions.push_back(d.position);
    listed[d.position] = 1;
  }
  for (std::size_t p : state.patched)
    if (p < c.after.size() && listed[p] == 0) positions.push_back(p);
  std::size_t set = 0;
  for (std::size_t p : positions) {
    const cudaGraphNode_t origin = state.origin_nodes.at(p);
    const node_kind kind = detail::kind_of(c.after[p]);
    const auto& traits = detail::traits_of(kind);
    const cudaError_t rc = traits.copy_to_exec == nullptr
                               ? cudaErrorNotSupported
                               : detail::cleared(traits.copy_to_exec(handle_, origin, c.after[p]));
    if (rc != cudaSuccess) {
      out.explanation = fmt::format("per-node update refused ({}) for node {} ({})", cudaGetErrorName(rc), p,
                                    detail::node_name(access::state(g).get(), c.after[p]));
      // Back to the parameters the executable graph held (those of the graph compared against).
      for (std::size_t k = 0; k < set; ++k) {
        const std::size_t q = positions[k];
        const auto& t = detail::traits_of(detail::kind_of(c.before[q]));
        if (t.copy_to_exec == nullptr ||
            detail::cleared(t.copy_to_exec(handle_, state.origin_nodes.at(q), c.before[q])) != cudaSuccess)
          state.current_exact = false;
      }
      return false;
    }
    ++set;
    if (kind == node_kind::host) own_for_node(origin, access::state(g)->keep); // it runs a callable of g's
    if (kind == node_kind::memcpy || kind == node_kind::memset)
      (void)detail::enable_if_zero_disabled(handle_, state, origin);
  }
  // The executable graph's CUDA user objects hold the resources of the graph it was instantiated from or last
  // updated to as a whole (cudaGraphExecUpdate swaps them), not those of a graph applied node by node, yet launches
  // queued while `g` is current use its keep_alive buffers, callables and child-graph copies: the executable graph
  // owns `g` (in the slot of no node) until a later graph replaces it, then releases it behind the last launch.
  own_applied(*this, g);
  out.method = update_method::per_node;
  out.nodes_set = set;
  const std::size_t restored = positions.size() - c.changed.size();
  const std::string changes = change_lines(c, access::state(g).get());
  out.explanation += (out.explanation.empty() || changes.empty() ? "" : "; ") + changes;
  if (restored > 0)
    out.explanation += fmt::format("{}{} patched node(s) set to the new graph's parameters",
                                   out.explanation.empty() ? "" : "; ", restored);
  return true;
}

update_result graph_exec::whole_update(const graph& g, const detail::graph_snapshot* after) {
  auto& state = *impl_;
  std::vector<detail::kernel_attribute> attributes; // g's cluster attributes (none when nothing to guard)
  bool paired = false;
  if (!nothing_to_guard(state, *access::state(g)))
    if (auto refused = guard_whole_update(state, g, after, attributes, paired)) return *refused;
  detail::attach_resources(*access::state(g)); // CUDA swaps the executable graph's references for g's
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t rc = cudaGraphExecUpdate(handle_, g.get(), &info);
  if (rc != cudaSuccess || info.result != cudaGraphExecUpdateSuccess)
    return after_refused_update(g, after, attributes, rc, info);
  update_result result;
  result.method = update_method::whole_graph;
  result.node = info.errorNode;
  result.from_node = info.errorFromNode;
  detail::hold_tokens_of(state, *access::state(g)); // CUDA swapped the user-object references
  // CUDA pairs the source's nodes, and those of a graph of its structure, by position.
  paired = paired || detail::known_structure(state, *access::state(g));
  retired_ = adopt_current(state, g, paired, paired);
  if (state.node_level) after_whole_update(handle_, state); // something owned or disabled node by node
  state.attributes = std::move(attributes);
  tracks_launches_ = false;
  return result;
}

[[gnu::noinline]] update_result graph_exec::after_refused_update(const graph& g, const detail::graph_snapshot* after,
                                                                 std::vector<detail::kernel_attribute>& attributes,
                                                                 cudaError_t rc,
                                                                 const cudaGraphExecUpdateResultInfo& info) {
  auto& state = *impl_;
  update_result result = refused_result(state, g, rc, info);
  if (result.status != update_status::topology_changed) return result;
  // CUDA pairs each node's dependencies by the order they were added: the same DAG with its dependencies added in
  // another order is refused. Where Conveyor's comparison proves the DAG the same, the change is set node by node.
  // CUDA's reason stays first in the explanation; what Conveyor found follows.
  result.explanation = "CUDA refused the whole-graph update (topology_changed: it pairs each node's dependencies in "
                       "the order they were added)";
  if (!detail::paired_by_position(state)) {
    result.explanation += fmt::format("; {}", detail::not_paired_by_position());
    return result;
  }
  std::optional<detail::graph_snapshot> read;
  if (after == nullptr) after = &read.emplace(detail::snapshot_graph(g.get()));
  if (!state.snapshot) state.snapshot = detail::snapshot_graph(state.current->handle);
  const auto c = detail::compare_snapshots(*state.snapshot, *after, {state.current.get(), access::state(g).get()});
  if (!c.same_topology) {
    result.explanation += fmt::format("; Conveyor's comparison: {}", c.topology_reason);
    return result;
  }
  if (const detail::node_delta* blocker = first_unsettable(c, false)) {
    result.explanation += fmt::format("; Conveyor's comparison found the same DAG, but {} cannot be set node by node",
                                      change_line(c, *blocker, access::state(g).get()));
    return result;
  }
  // After per-node setters the executable graph runs other parameters than `current`'s: every node a setter can
  // reach is set to g's, changed from `current` or not (as graphed's patched nodes are).
  if (!state.current_exact) mark_every_settable_node_patched(state, c);
  update_result per_node;
  per_node.nodes_changed = c.changed.size();
  per_node.explanation = result.explanation + "; Conveyor's comparison found the same DAG: set node by node";
  if (!set_changed_nodes(g, c, per_node)) {
    result.explanation = per_node.explanation;
    return result;
  }
  retired_ = adopt_current(state, g, true, detail::known_structure(state, *access::state(g)));
  state.snapshot = *after;
  state.attributes = std::move(attributes);
  return per_node;
}

update_result graph_exec::update(const graph& g, std::source_location where) {
  require_graph("update");
  const detail::api_scope scope("conveyor::graph_exec::update", where);
  (void)detail::collect();
  return whole_update(g, nullptr);
}

namespace detail {
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

update_result graph_exec::update_or_reinstantiate(const graph& g, std::source_location where) {
  require_graph("update_or_reinstantiate");
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

namespace {
// What update_incremental does once it has compared the graphs.
enum class incremental_step { nothing, per_node, whole_graph, reinstantiate };
} // namespace

update_result graph_exec::update_incremental(const graph& g, bool reinstantiate, std::source_location where) {
  require_graph("update_incremental");
  const detail::api_scope scope("conveyor::graph_exec::update_incremental", where);
  return incremental_update(g, nullptr, reinstantiate);
}

update_result graph_exec::incremental_update(const graph& g, detail::graph_snapshot* read, bool reinstantiate) {
  (void)detail::collect();
  auto& state = *impl_;
  update_result out;
  // 1. Compare g with the graph whose parameters the executable graph holds (read once, kept from the last update).
  incremental_step step = incremental_step::whole_graph;
  std::optional<detail::graph_snapshot> after;
  std::optional<detail::graph_comparison> c;
  if (!state.current_exact) {
    out.explanation = "parameters were changed by per-node setters since the last update";
  } else if (!detail::paired_by_position(state)) {
    out.explanation = detail::not_paired_by_position();
  } else {
    after = read != nullptr ? std::move(*read) : detail::snapshot_graph(g.get());
    after->fields.clear(); // kept with the executable graph: the comparison needs no fields
    if (!state.snapshot) state.snapshot = detail::snapshot_graph(state.current->handle);
    c = detail::compare_snapshots(*state.snapshot, *after, {state.current.get(), access::state(g).get()});
    out.nodes_changed = c->changed.size();
    const auto* names = access::state(g).get();
    if (!c->same_topology) {
      out.explanation = fmt::format("topology changed: {}", c->topology_reason);
      out.status = update_status::topology_changed;
      step = incremental_step::reinstantiate; // CUDA refuses a topology change
    } else if (c->changed.empty() && state.patched.empty()) {
      step = incremental_step::nothing;
    } else if (const auto* d = first_unsettable(*c, true)) {
      out.explanation = fmt::format("only a new instantiation applies {}", change_line(*c, *d, names));
      out.status = d->kind == node_kind::kernel ? update_status::attributes_changed : update_status::parameters_changed;
      out.node = c->after[d->position];
      out.node_label = detail::node_name(names, out.node);
      step = incremental_step::reinstantiate;
    } else if (const auto* b = first_unsettable(*c, false)) {
      out.explanation = fmt::format("not settable node by node: {}", change_line(*c, *b, names));
    } else {
      step = incremental_step::per_node;
    }
  }
  // 2. Apply.
  if (step == incremental_step::nothing) {
    own_applied(*this, g); // its parameters run now: owned until replaced, as above
    retired_ = adopt_current(state, g, true, detail::known_structure(state, *access::state(g)));
    state.snapshot = std::move(*after);
    out.method = update_method::none;
    return out;
  }
  if (step == incremental_step::per_node) {
    if (set_changed_nodes(g, *c, out)) {
      retired_ = adopt_current(state, g, true, detail::known_structure(state, *access::state(g)));
      state.snapshot = std::move(*after);
      return out;
    }
    step = incremental_step::whole_graph; // a setter failed: the executable graph holds its old parameters again
  }
  if (step == incremental_step::whole_graph) {
    update_result whole = whole_update(g, after ? &*after : nullptr);
    if (whole) {
      whole.nodes_changed = out.nodes_changed;
      if (!out.explanation.empty())
        whole.explanation = whole.explanation.empty() ? out.explanation : out.explanation + "; " + whole.explanation;
      return whole;
    }
    out.status = whole.status;
    out.node = whole.node;
    out.from_node = whole.from_node;
    out.node_label = whole.node_label;
    if (!whole.explanation.empty()) out.explanation += (out.explanation.empty() ? "" : "; ") + whole.explanation;
  }
  // 3. A new instantiation, the last resort.
  if (!reinstantiate) {
    out.method = update_method::refused;
    if (out.status == update_status::success) out.status = update_status::error;
    return out;
  }
  detail::refuse_reinstantiation_if_pinned(state, "update_incremental", out.explanation);
  graph_exec fresh = instantiate(g, without(state.flags, instantiate_flags::upload)); // first: exception-safe
  fresh.step_launches_ = step_launches_;
  *this = std::move(fresh);
  out.method = update_method::reinstantiated;
  return out;
}

void graph_exec::own_for_node(cudaGraphNode_t origin, std::shared_ptr<void> item) {
  impl_->node_level = true;
  auto& slot = impl_->owned[origin];
  detail::defer_release(std::exchange(slot, std::move(item)), impl_->last_launch);
  tracks_launches_ = true;
}

} // namespace conveyor
