// The child-graph node kind: a nested graph (a copy made by CUDA when the node is added). Compared recursively;
// set on an executable graph with cudaGraphExecChildGraphNodeSetParams (same topology), which also takes over the
// nested graph's user-object references (what its nodes need) until queued launches finish.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor::detail {

namespace {

cudaGraph_t nested(cudaGraphNode_t n) {
  cudaGraph_t g = nullptr;
  CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(n, &g));
  return g;
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  const auto c = compare_graphs(nested(a), nested(b), {});
  if (!c.same_topology) return param_diff::change("child graph topology: " + c.topology_reason, false);
  if (c.changed.empty()) return param_diff::same();
  param_diff out = param_diff::change(fmt::format("{} node(s) of the child graph", c.changed.size()));
  for (const auto& d : c.changed) {
    out.comparable = out.comparable && d.diff.comparable;
    out.updatable = out.updatable && d.diff.updatable;
    out.settable = out.settable && d.diff.updatable && d.diff.comparable; // the child is set as a whole graph
    out.what += fmt::format("; child node {}: {}", d.position, d.diff.what);
  }
  return out;
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  cudaGraph_t g = nullptr;
  const cudaError_t rc = cudaGraphChildGraphNodeGetGraph(source, &g);
  return rc != cudaSuccess ? rc : cudaGraphExecChildGraphNodeSetParams(exec, target, g);
}

// Labels of the body graph Conveyor copied into a child-graph node, by position (CUDA's copy keeps the creation
// order), nested child graphs included.
void apply_labels(graph_description& d, const graph_state& body) {
  if (body.handle == nullptr) return;
  const auto nodes = graph_nodes(body.handle);
  if (nodes.size() != d.nodes.size()) return; // not the same graph any more: leave the kinds' names
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (d.nodes[i].label.empty())
      if (auto it = body.labels.find(nodes[i]); it != body.labels.end()) d.nodes[i].label = it->second;
    if (auto it = body.child_bodies.find(nodes[i]); it != body.child_bodies.end() && !d.nodes[i].bodies.empty())
      apply_labels(d.nodes[i].bodies[0], *it->second);
  }
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state* owner) {
  d.bodies.push_back(describe_graph(nested(n), nullptr));
  if (owner != nullptr)
    if (auto it = owner->child_bodies.find(n); it != owner->child_bodies.end())
      apply_labels(d.bodies.back(), *it->second);
}

cudaError_t read_embedded(cudaGraphNode_t n, cudaGraph_t* out) { return cudaGraphChildGraphNodeGetGraph(n, out); }

} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_child(cudaGraphNode_t n, const graph_state* owner, keep_saver& s, saved_node& out) {
  const graph_state* body = nullptr;
  if (owner != nullptr)
    if (auto it = owner->child_bodies.find(n); it != owner->child_bodies.end()) body = it->second.get();
  out.bodies.push_back(s.graph(nested(n), body));
}

cudaGraphNode_t load_child(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  cudaGraphNode_t node = nullptr;
  CONVEYOR_CHECK(cudaGraphAddChildGraphNode(&node, g, deps.data(), deps.size(), l.child_graph(n.bodies.at(0))));
  return node;
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  d.bodies.push_back(describe_saved_graph(n.bodies.at(0), f));
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto c = compare_saved_graphs(na.bodies.at(0), nb.bodies.at(0), ctx);
  if (!c.same_topology) return param_diff::change("child graph topology: " + c.topology_reason, false);
  if (c.changed.empty()) return param_diff::same();
  param_diff out = param_diff::change(fmt::format("{} node(s) of the child graph", c.changed.size()));
  for (const auto& d : c.changed) {
    out.updatable = out.updatable && d.diff.updatable;
    out.settable = out.settable && d.diff.updatable && d.diff.comparable;
    out.what += fmt::format("; child node {}: {}", d.position, d.diff.what);
  }
  return out;
}

} // namespace

extern const keep_facets child_graph_keep{
    .save = &save_child,
    .load = &load_child,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<std::monostate>,
};

extern const kind_traits child_graph_kind{
    .kind = node_kind::child_graph,
    .name = "child_graph",
    .allowed_in_body = true,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#d9d2e9",
    .compare = &compare,
    .copy_to_exec = &copy_to_exec,
    .describe = &describe,
    .embedded_graph = &read_embedded,
    .keep = &child_graph_keep,
};

cudaGraphNode_t add_child(cudaGraph_t g, node_handles deps, cudaGraph_t body) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddChildGraphNode(&n, g, deps.data(), deps.size(), body));
  return n;
}

} // namespace conveyor::detail
