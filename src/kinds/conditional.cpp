// The conditional node kind (IF, IF/ELSE, WHILE, SWITCH). CUDA 13.0 cannot read a conditional node's parameters
// back, so they are compared from what Conveyor recorded when it built the node (graph_state::conditionals):
// handle, type, body count, and each body graph recursively. A conditional node Conveyor did not build is not
// comparable. CUDA has no per-node setter for it: a whole-graph update applies what it can (bodies' parameters).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor::detail {

namespace {

// What two conditional nodes' bodies differ in, "; " between the findings; whether every change is comparable and
// whether a whole-graph update applies them all.
struct body_findings {
  std::string what;
  bool comparable = true;
  bool updatable = true;
};

void add_finding(body_findings& f, const std::string& text) { f.what += (f.what.empty() ? "" : "; ") + text; }

// Body `i`'s comparison (compare_graphs or compare_saved_graphs) as findings: its topology, or each changed node.
template <class Comparison>
void add_body_findings(std::size_t i, const Comparison& c, body_findings& f) {
  if (!c.same_topology) {
    add_finding(f, fmt::format("body {} topology: {}", i, c.topology_reason));
    return;
  }
  for (const auto& d : c.changed) {
    f.comparable = f.comparable && d.diff.comparable;
    f.updatable = f.updatable && d.diff.updatable;
    add_finding(f, fmt::format("body {} node {}: {}", i, d.position, d.diff.what));
  }
}

// No per-node setter for a conditional node: a change is left to a whole-graph update.
param_diff from_findings(body_findings f) {
  if (f.what.empty()) return param_diff::same();
  return {true, f.comparable, false, f.updatable, std::move(f.what)};
}

// The condition handles and the bodies, body by body, of two conditional nodes of one type and body count.
body_findings compare_bodies(const conditional_info& a, const conditional_info& b) {
  body_findings f;
  if (a.handle != b.handle) f.what = "condition handle";
  for (std::size_t i = 0; i < a.bodies.size() && i < b.bodies.size(); ++i)
    add_body_findings(
        i, compare_graphs(a.bodies[i]->handle, b.bodies[i]->handle, {a.bodies[i].get(), b.bodies[i].get()}), f);
  return f;
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context& ctx) {
  const conditional_info* ia = recorded_conditional(ctx.before, a);
  const conditional_info* ib = recorded_conditional(ctx.after, b);
  if (ia == nullptr || ib == nullptr)
    return param_diff::unknown("conditional node not built by Conveyor (parameters not readable: not comparable)");
  if (ia->type != ib->type || ia->size != ib->size)
    return param_diff::change(fmt::format("conditional type {}/{} bodies -> {}/{} bodies", static_cast<int>(ia->type),
                                          ia->size, static_cast<int>(ib->type), ib->size),
                              false);
  return from_findings(compare_bodies(*ia, *ib));
}

std::string_view type_name(int type) {
  return type == cudaGraphCondTypeWhile ? "while" : type == cudaGraphCondTypeIf ? "if" : "switch";
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state* owner) {
  if (const conditional_info* info = recorded_conditional(owner, n)) {
    d.conditional_type = std::string(type_name(info->type));
    for (const auto& body : info->bodies) d.bodies.push_back(describe_graph(body->handle, body.get()));
  }
}

} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_conditional(cudaGraphNode_t n, const graph_state* owner, keep_saver& s, saved_node& out) {
  const conditional_info* info = recorded_conditional(owner, n);
  if (info == nullptr)
    s.refuse("a conditional node Conveyor did not build: CUDA cannot read its parameters or bodies back",
             "build it with conveyor::add_conditional or capture it with capture_conditional");
  saved_conditional_node c;
  c.type = static_cast<int>(info->type);
  c.size = info->size;
  c.condition = s.condition(*info);
  out.parameters = c;
  for (const auto& body : info->bodies) out.bodies.push_back(s.graph(body->handle, body.get()));
}

cudaGraphNode_t load_conditional(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  const auto& c = std::get<saved_conditional_node>(n.parameters);
  auto [node, bodies] =
      add_conditional(g, deps, l.condition(c.condition), static_cast<cudaGraphConditionalNodeType>(c.type), c.size);
  l.conditional_added(node, n, bodies);
  return node;
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  d.conditional_type = std::string(type_name(std::get<saved_conditional_node>(n.parameters).type));
  for (const auto& body : n.bodies) d.bodies.push_back(describe_saved_graph(body, f));
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = std::get<saved_conditional_node>(na.parameters);
  const auto& b = std::get<saved_conditional_node>(nb.parameters);
  if (a.type != b.type || a.size != b.size)
    return param_diff::change(
        fmt::format("conditional {}/{} bodies -> {}/{} bodies", type_name(a.type), a.size, type_name(b.type), b.size),
        false);
  body_findings f;
  if (a.condition != b.condition) f.what = "condition handle";
  for (std::size_t i = 0; i < na.bodies.size() && i < nb.bodies.size(); ++i) {
    const auto c = compare_saved_graphs(na.bodies[i], nb.bodies[i], ctx);
    if (!c.same_topology) f.updatable = false;
    add_body_findings(i, c, f);
  }
  f.comparable = true; // a saved comparison is always comparable: the file holds every parameter
  return from_findings(std::move(f));
}

} // namespace

extern const keep_facets conditional_keep{
    .save = &save_conditional,
    .load = &load_conditional,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_conditional_node>,
};

extern const kind_traits conditional_kind_traits{
    .kind = node_kind::conditional,
    .name = "conditional",
    .allowed_in_body = true,
    .allowed_in_child = false,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#d9d2e9",
    .device_launch =
        {.refusal = "a conditional node (IF / WHILE / SWITCH) cannot be in a device graph (CUDA allows only kernel, "
                    "memcpy, memset and child-graph nodes)",
         .fix = "decide on the device with launches of other device graphs instead (conveyor::device::launch_graph, "
                "tail_launch; a loop: conveyor::device::add_relaunch), or keep the conditional node in a host graph"},
    .compare = &compare,
    .describe = &describe,
    .keep = &conditional_keep,
};

std::pair<cudaGraphNode_t, std::vector<cudaGraph_t>> add_conditional(cudaGraph_t g, node_handles deps,
                                                                     cudaGraphConditionalHandle handle,
                                                                     cudaGraphConditionalNodeType type, unsigned size) {
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = type;
  params.conditional.size = size;
  cudaGraphNode_t n = nullptr;
  const cudaError_t rc = cudaGraphAddNode(&n, g, deps.data(), nullptr, deps.size(), &params);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphAddNode(conditional)", std::source_location::current(),
                     "is the condition handle made for this graph?");
  }
  return {n, std::vector<cudaGraph_t>(params.conditional.phGraph_out, params.conditional.phGraph_out + size)};
}

} // namespace conveyor::detail
