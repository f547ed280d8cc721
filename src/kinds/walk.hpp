#pragma once
// Internal (kinds layer): walking whole graphs through the kind table — comparing two graphs node by node (the
// basis of diff, update_incremental and the child-graph kind's own comparison), describing one, and the one walk into
// the graphs a node embeds (child graphs, conditional bodies) that every walk of nested graphs goes through.

#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace conveyor::detail {

//! One graph embedded in a node (for_each_embedded): a child-graph node's graph, or one body of a conditional node.
struct embedded_graph {
  cudaGraph_t handle = nullptr;
  //! Conveyor's state of it (labels, conditional nodes): a conditional body's own; null for a child graph's (a copy
  //! CUDA made, whose node handles no state of Conveyor's records).
  const graph_state* state = nullptr;
  //! For a child graph: the state of the graph Conveyor copied into the node (graph_state::child_bodies of the
  //! state the walk was given), whose labels name the copy's nodes by position; null otherwise.
  const graph_state* copied_from = nullptr;
  //! The body's index: 0 for a child graph; for a conditional node, its body (IF: 0 then, 1 else; SWITCH: the case).
  std::size_t body = 0;
};

//! Whether nodes of `kind` embed graphs that for_each_embedded walks into: a child graph (its kind's embedded_graph
//! facet), a conditional node's bodies.
[[nodiscard]] bool embeds_graphs(node_kind kind) noexcept;

//! The conditional node `n` as `state` recorded it when Conveyor built it (graph_state::conditionals: condition,
//! type, bodies), or null: `state` is null, or `n` is not a conditional node it records. Never throws.
[[nodiscard]] const conditional_info* recorded_conditional(const graph_state* state, cudaGraphNode_t n) noexcept;

//! The graph of node `n`, whose kind has an embedded_graph facet (a child graph: cudaGraphChildGraphNodeGetGraph,
//! CUDA's copy, owned by the node), with the state it was copied from when `state` records it. \throws cuda_error
//! naming cudaGraphChildGraphNodeGetGraph, with `context` (which node), when the graph cannot be read.
[[nodiscard]] embedded_graph embedded_copy(cudaGraphNode_t n, node_kind kind, const graph_state* state,
                                           std::string_view context = {});

//! The walk into the graphs node `n` (of kind `kind`, in a graph whose state is `state`, or null) embeds: calls
//! `visit(const embedded_graph&)` for each, in order — a child graph's (read from CUDA: embedded_copy), or each body
//! of a conditional node `state` records, by index (from Conveyor's record: CUDA 13.0 cannot read a conditional
//! node's parameters back, so cudaGraphNodeGetParams is not called). Nothing for other kinds. Returns false for a
//! conditional node `state` does not record (one Conveyor did not build, or one inside a child graph's copy: its
//! bodies are unknown and nothing is visited), true otherwise. `visit` may recurse (with the visited graph's state).
//! \throws cuda_error naming cudaGraphChildGraphNodeGetGraph, with `context`, when a child graph cannot be read;
//! whatever `visit` throws. Not synchronised: like the CUDA graph calls it makes, it must not overlap a change to
//! `n`'s graph or to `state` on another thread.
template <typename Visit>
bool for_each_embedded(cudaGraphNode_t n, node_kind kind, const graph_state* state, Visit&& visit,
                       std::string_view context = {}) {
  if (traits_of(kind).embedded_graph != nullptr) {
    visit(embedded_copy(n, kind, state, context));
    return true;
  }
  const conditional_info* info = recorded_conditional(state, n);
  if (info == nullptr) return kind != node_kind::conditional;
  for (std::size_t b = 0; b < info->bodies.size(); ++b)
    visit(embedded_graph{info->bodies[b]->handle, info->bodies[b].get(), nullptr, b});
  return true;
}

//! One node whose parameters differ, by position in creation order.
struct node_delta {
  std::size_t position = 0;
  node_kind kind = node_kind::other;
  param_diff diff;
};

//! Two graphs compared: topology (node count, kinds, edges with their types) first, then every node.
struct graph_comparison {
  bool same_topology = true;
  std::string topology_reason;
  std::vector<node_delta> changed;
  std::vector<cudaGraphNode_t> before; //!< nodes of `before`, creation order
  std::vector<cudaGraphNode_t> after;  //!< nodes of `after`, creation order
};

//! An edge as (from index, to index, from port, to port, dependency type); a snapshot lists them by `to`, then by
//! the rest (one order for the same DAG, whatever order its dependencies were added in).
using indexed_edge = std::tuple<std::size_t, std::size_t, int, int, int>;

//! A graph read once, for comparisons (diff, the updates) and for rebinding: nodes in creation order with their
//! kinds, edges by index, every kernel node's parameters and attributes (other kinds are compared through their
//! handles, which stay valid while the graph does), and, when asked for, every node's patchable fields.
struct graph_snapshot {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<node_kind> kinds;
  std::vector<indexed_edge> edges;
  std::vector<kernel_snapshot> kernels; //!< by position; unread (readable false) for other kinds
  //! By position, read with `with_fields` (kernel fields from `kernels`, no second read): what rebinding learns
  //! from and patches (kind_traits::read_fields); empty otherwise. A reader may move them out.
  std::vector<node_fields> fields;
};

//! Reads `g` into a snapshot, with every node's patchable fields when `with_fields`. \throws cuda_error when the
//! graph cannot be read.
[[nodiscard]] graph_snapshot snapshot_graph(cudaGraph_t g, bool with_fields = false);

//! The thread-block cluster attributes (read_cluster_attributes) of every kernel node of `g`, those inside its child
//! graphs and conditional bodies included (kernel_attribute::inner): what a whole-graph update reports applied and
//! does not apply, at any depth (H200, driver 580). `state` is `g`'s, for the bodies of the conditional nodes Conveyor
//! built, or null (CUDA 13.0 cannot read a conditional node's bodies back: another conditional node gets the marker
//! kernel_attribute::inner == unreadable_bodies instead). One type read per node, one attribute read per kernel node without clusters. \throws cuda_error when a
//! node cannot be read.
[[nodiscard]] std::vector<kernel_attribute> cluster_attributes(cudaGraph_t g, const graph_state* state);

//! The same, from a snapshot of the graph whose state is `state` (the top-level kernels from the snapshot; child
//! graphs and conditional bodies read). \throws cuda_error when an embedded graph cannot be read.
[[nodiscard]] std::vector<kernel_attribute> cluster_attributes(const graph_snapshot& s, const graph_state* state);

//! The cluster attributes of the kernels inside node `n` of kind `kind` at `position` (a child graph, or a conditional
//! node `state` records; the unreadable_bodies marker for another conditional node; nothing for other kinds),
//! appended to `out`. \throws cuda_error when a graph cannot be read.
void append_embedded_cluster_attributes(cudaGraphNode_t n, node_kind kind, const graph_state* state,
                                        std::size_t position, std::vector<kernel_attribute>& out);

//! Compares two snapshots as compare_graphs does: topology first, then every node (kernel nodes from the snapshots,
//! others through the kind table). \throws cuda_error when a node cannot be read.
[[nodiscard]] graph_comparison compare_snapshots(const graph_snapshot& before, const graph_snapshot& after,
                                                 const compare_context& ctx);

//! A graph's structure as cudaGraphExecUpdate pairs it: each node's kind in creation order, and each node's
//! dependencies (by position, with their edge data) in the order the driver lists them, the order they were added.
//! cudaGraphExecUpdate pairs nodes through their dependencies in that order, not by creation order: for two graphs
//! of equal structure it pairs them by position.
struct graph_structure {
  std::vector<node_kind> kinds;
  std::vector<indexed_edge> edges; //!< node by node, each node's dependencies in the driver's order
  //! The structures of the graphs its nodes embed, in node order: a child graph's, the bodies of each conditional
  //! node Conveyor recorded (CUDA pairs the nodes inside them too; the cluster guard compares them by position).
  std::vector<graph_structure> embedded;
  friend bool operator==(const graph_structure&, const graph_structure&) = default;
};

//! Reads `g`'s structure (node list, kinds, dependencies), with those of the graphs it embeds; `state` is `g`'s (for
//! its conditional nodes' bodies), or null. \throws cuda_error when a graph cannot be read.
[[nodiscard]] graph_structure structure_of(cudaGraph_t g, const graph_state* state);

//! Nodes of `g` in creation order (`cudaGraphGetNodes`). \throws cuda_error.
[[nodiscard]] std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g);

//! Compares `before` with `after`, pairing nodes by position. \throws cuda_error when a graph cannot be read.
[[nodiscard]] graph_comparison compare_graphs(cudaGraph_t before, cudaGraph_t after, const compare_context& ctx);

//! Describes `g`: every node through its kind's entry (nested graphs recursively), labels from `owner`, edges.
//! \throws cuda_error when a query fails.
[[nodiscard]] graph_description describe_graph(cudaGraph_t g, const graph_state* owner);

//! Two saved graphs compared as compare_graphs compares live ones: topology (node count, kinds, each node's
//! dependencies with their edge data, whatever order they were added in), then every node through its kind's
//! keep facets (kinds/keep.hpp). Plain: no GPU.
struct saved_comparison {
  bool same_topology = true;
  std::string topology_reason;
  std::vector<node_delta> changed;
};
[[nodiscard]] saved_comparison compare_saved_graphs(const saved_graph& before, const saved_graph& after,
                                                    const saved_context& ctx);

//! Describes saved graph `g` of `file` as describe_graph describes a live one (kinds, labels, kernel names, shapes,
//! sizes, nested graphs, edges). Plain: no GPU.
[[nodiscard]] graph_description describe_saved_graph(const saved_graph& g, const graph_file& file);

} // namespace conveyor::detail
