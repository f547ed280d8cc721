// The guards of a whole-graph update: the facts read here, the decision judge_whole_update's (update_state.hpp),
// the refusal written here, with its node and fix. Also the comparison helpers update() and update_incremental share.
#include "execute/update_guards.hpp"

#include "cuda/check.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace conveyor::detail {

namespace {

// The first allocation node of `g` that reserves another address or size than the executable graph's at its
// position (by position; a node of another kind there is CUDA's to refuse).
struct allocation_difference {
  std::size_t k = 0; // index into the executable graph's allocation nodes
  cudaGraphNode_t node = nullptr;
  allocation_params now{};
};

allocations compare_allocations(exec_state& state, const graph& g, allocation_difference& d) {
  read_allocations(state);
  const allocation_nodes& mine = *state.allocations;
  if (mine.positions.empty()) return allocations::none;
  const auto nodes = graph_nodes(g.get());
  for (std::size_t k = 0; k < mine.positions.size(); ++k) {
    const std::size_t i = mine.positions[k];
    if (i >= nodes.size() || kind_of(nodes[i]) != node_kind::mem_alloc) return allocations::same; // CUDA says
    const auto a = read_mem_alloc(nodes[i]);
    if (a.pointer == mine.params[k].pointer && a.bytes == mine.params[k].bytes) continue;
    d = {k, nodes[i], a};
    return allocations::other;
  }
  return allocations::same;
}

// The thread-block cluster attributes of `g`'s kernel nodes, those inside child graphs and conditional bodies
// included: those known without a read (graph_state::clusters), from `read` when `g` was read already, else read.
std::vector<kernel_attribute> clusters_of(const graph_state& g, const graph_snapshot* read) {
  if (g.clusters) return *g.clusters;
  if (read != nullptr) return cluster_attributes(*read, &g);
  return cluster_attributes(g.handle, &g);
}

// Where the cluster attributes differ, or which graph holds a conditional node whose bodies cannot be read.
struct cluster_difference {
  std::size_t position = 0;
  std::uint32_t inner = 0;
  bool in_new_graph = true;
};

// The cluster attributes of the kernel nodes the executable graph runs, read at the first need (from the snapshot
// of `current` when it still holds current's parameters).
const std::vector<kernel_attribute>& applied_clusters(exec_state& state) {
  if (!state.attributes) {
    const bool snapshot_is_current = state.st.nodes != overlay::changed && state.snapshot != nullptr;
    state.attributes = clusters_of(*state.current, snapshot_is_current ? state.snapshot.get() : nullptr);
  }
  return *state.attributes;
}

// The first conditional node whose bodies cannot be read, in the new graph's attributes `next` first, then in the
// executable graph's `applied`; false when there is none.
bool find_unreadable(const std::vector<kernel_attribute>& next, const std::vector<kernel_attribute>& applied,
                     cluster_difference& d) {
  const auto unreadable = [](const kernel_attribute& a) { return a.inner == unreadable_bodies; };
  const auto in_next = std::find_if(next.begin(), next.end(), unreadable);
  const auto in_applied = std::find_if(applied.begin(), applied.end(), unreadable);
  if (in_next == next.end() && in_applied == applied.end()) return false;
  d.in_new_graph = in_next != next.end();
  d.position = d.in_new_graph ? in_next->position : in_applied->position;
  return true;
}

clusters compare_clusters(exec_state& state, const graph& g, const graph_snapshot* after,
                          std::vector<kernel_attribute>& next, cluster_difference& d) {
  const std::vector<kernel_attribute>& applied = applied_clusters(state);
  next = clusters_of(*access::state(g), after);
  if (find_unreadable(next, applied, d)) return clusters::unreadable;
  if (const auto at = first_attribute_difference(applied, next)) {
    d = {at->position, at->inner, true};
    return clusters::other;
  }
  return next.empty() && applied.empty() ? clusters::none : clusters::same;
}

// A refusal of the update to `g` naming `node` (of `g`; null: none known, named "unknown node" as CUDA's refusals
// are) when `named`.
update_result refusal(const graph& g, update_status status, cudaGraphNode_t node, bool named, std::string explanation) {
  update_result r;
  r.method = update_method::refused;
  r.status = status;
  r.node = node;
  if (named) r.node_label = node_name(access::state(g).get(), node);
  r.explanation = std::move(explanation);
  return r;
}

// Node `position` of `g`, or null when it has fewer nodes.
cudaGraphNode_t node_at(const graph& g, std::size_t position) {
  const auto nodes = graph_nodes(g.get());
  return position < nodes.size() ? nodes[position] : nullptr;
}

update_result other_allocations(const exec_state& state, const graph& g, const allocation_difference& d) {
  const auto& mine = *state.allocations;
  const std::size_t i = mine.positions[d.k];
  return refusal(g, update_status::parameters_changed, d.node, true,
                 fmt::format("allocation node {} reserves {} B at {} where the executable graph has {} B at {}; "
                             "kernels of the new graph use that address, so it needs a new instantiation",
                             i, d.now.bytes, d.now.pointer, mine.params[d.k].bytes, mine.params[d.k].pointer));
}

update_result unreadable(const graph& g, const cluster_difference& d) {
  // A node of the executable graph's side is not named (it is not `g`'s): no read.
  update_result r =
      refusal(g, update_status::not_supported, d.in_new_graph ? node_at(g, d.position) : nullptr, d.in_new_graph,
              fmt::format("node {} of the {} graph is a conditional node Conveyor did not build: CUDA "
                          "13.0 cannot read its bodies back, so whether their kernels' thread-block "
                          "clusters change cannot be checked (a whole-graph update reports new ones "
                          "applied and launches keep the old ones); it needs a new instantiation (a "
                          "conditional node made with conveyor::add_conditional or capture_conditional "
                          "is updated in place)",
                          d.position, d.in_new_graph ? "new" : "executable graph's"));
  return r;
}

update_result cluster_change(const graph& g, const cluster_difference& d) {
  const std::string where = d.inner == 0 ? fmt::format("node {}", d.position)
                                         : fmt::format("kernel {} inside node {} (a child graph or conditional "
                                                       "body, depth first)",
                                                       d.inner, d.position);
  return refusal(g, update_status::attributes_changed, node_at(g, d.position), true,
                 fmt::format("{} has other thread-block cluster attributes; a whole-graph update reports them "
                             "applied but launches keep the old ones, so it needs a new instantiation",
                             where));
}

update_result unpaired(bool clusters) {
  update_result r;
  r.method = update_method::refused;
  r.status = clusters ? update_status::attributes_changed : update_status::parameters_changed;
  r.explanation = fmt::format("the new graph has its nodes in another creation order than the executable graph's, "
                              "which CUDA would pair through their dependencies, so the {} compared by position "
                              "cannot be checked; it needs a new instantiation",
                              clusters ? "thread-block cluster attributes" : "allocation nodes' addresses");
  return r;
}

} // namespace

namespace {

// The refusal `verdict` stands for (nullopt: apply), with the differences the guards found.
std::optional<update_result> refusal_for(guard_verdict verdict, const exec_state& state, const graph& g,
                                         const allocation_difference& alloc, const cluster_difference& cluster) {
  switch (verdict) {
  case guard_verdict::apply: return std::nullopt;
  case guard_verdict::other_allocations: return other_allocations(state, g, alloc);
  case guard_verdict::unreadable_bodies: return unreadable(g, cluster);
  case guard_verdict::cluster_change: return cluster_change(g, cluster);
  case guard_verdict::unpaired_clusters: return unpaired(true);
  case guard_verdict::unpaired_allocations: return unpaired(false);
  }
  return std::nullopt;
}

} // namespace

std::optional<update_result> guard_whole_update(exec_state& state, const graph& g, const graph_snapshot* after,
                                                std::vector<kernel_attribute>& attributes, bool& paired) {
  guard_facts f;
  allocation_difference alloc;
  cluster_difference cluster;
  f.allocs = compare_allocations(state, g, alloc);
  if (f.allocs != allocations::other) f.cluster = compare_clusters(state, g, after, attributes, cluster);
  // Pairing is read only when everything else lets the update through and something compared by position exists.
  if (judge_whole_update(f) == guard_verdict::apply && (f.allocs != allocations::none || f.cluster != clusters::none))
    f.pairs_by_position = paired = pairs_by_position(state, *access::state(g));
  return refusal_for(judge_whole_update(f), state, g, alloc, cluster);
}

update_result refused_result(const exec_state& state, const graph& g, cudaError_t rc,
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
  if (info.errorNode != nullptr) result.node_label = node_name(access::state(g).get(), info.errorNode);
  else if (info.errorFromNode != nullptr) result.node_label = node_name(state.source.get(), info.errorFromNode);
  return result;
}

comparison_facts facts_of(const graph_comparison& c, bool patched) noexcept {
  return {.same_topology = c.same_topology,
          .any_change = !c.changed.empty(),
          .any_patched = patched,
          .instantiation_only = first_unsettable(c, true) != nullptr,
          .whole_graph_only = first_unsettable(c, false) != nullptr};
}

std::pair<graph_comparison, comparison_facts> compare_with_current(exec_state& state, const graph_snapshot& after,
                                                                   const graph_state* names) {
  if (!state.snapshot) state.snapshot = std::make_unique<graph_snapshot>(snapshot_graph(state.current->handle));
  graph_comparison c = compare_snapshots(*state.snapshot, after, {state.current.get(), names});
  const comparison_facts facts = facts_of(c, !state.over.patched.empty());
  return {std::move(c), facts};
}

std::string change_line(const graph_comparison& c, const node_delta& d, const graph_state* names) {
  return fmt::format("node {} ({}): {}", d.position, node_name(names, c.after[d.position]), d.diff.what);
}

std::string change_lines(const graph_comparison& c, const graph_state* names) {
  constexpr std::size_t named = 8;
  std::string out;
  for (std::size_t k = 0; k < c.changed.size() && k < named; ++k)
    out += (out.empty() ? "" : "; ") + change_line(c, c.changed[k], names);
  if (c.changed.size() > named) out += fmt::format("; and {} more", c.changed.size() - named);
  return out;
}

const node_delta* first_unsettable(const graph_comparison& c, bool instantiation_only) noexcept {
  for (const auto& d : c.changed) {
    if (instantiation_only ? !d.diff.updatable : (!d.diff.settable || traits_of(d.kind).copy_to_exec == nullptr))
      return &d;
  }
  return nullptr;
}

void mark_every_settable_node_patched(exec_state& state, const graph_comparison& c) {
  state.over.patched_flag.assign(c.after.size(), 0);
  state.over.patched.clear();
  for (std::size_t p = 0; p < c.after.size(); ++p) {
    if (traits_of(kind_of(c.after[p])).copy_to_exec == nullptr) continue;
    state.over.patched_flag[p] = 1;
    state.over.patched.push_back(p);
  }
}

} // namespace conveyor::detail
