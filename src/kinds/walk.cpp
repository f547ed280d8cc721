#include "kinds/walk.hpp"

#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "kinds/node_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace conveyor::detail {

namespace {

// An edge as (from index, to index, from port, to port, dependency type): the type and ports make programmatic and
// launch-completion edges differ from full dependencies.
using indexed_edge = std::tuple<std::size_t, std::size_t, int, int, int>;

std::vector<indexed_edge> indexed_edges(cudaGraph_t g, const std::vector<cudaGraphNode_t>& nodes) {
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  index.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], i);
  std::size_t count = 0;
  CONVEYOR_CHECK(get_edges(g, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count);
  std::vector<cudaGraphNode_t> to(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) CONVEYOR_CHECK(get_edges(g, from.data(), to.data(), data.data(), &count));
  std::vector<indexed_edge> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    out.emplace_back(index.at(from[i]), index.at(to[i]), data[i].from_port, data[i].to_port, data[i].type);
  std::sort(out.begin(), out.end());
  return out;
}

std::string edge_difference(const std::vector<indexed_edge>& a, const std::vector<indexed_edge>& b) {
  auto strip = [](const std::vector<indexed_edge>& edges) {
    std::vector<std::pair<std::size_t, std::size_t>> out;
    for (const auto& e : edges) out.emplace_back(std::get<0>(e), std::get<1>(e));
    std::sort(out.begin(), out.end());
    return out;
  };
  if (strip(a) != strip(b)) return "dependencies differ";
  return "dependency types differ (programmatic or launch-completion edges)";
}

} // namespace

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g) {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

graph_comparison compare_graphs(cudaGraph_t before, cudaGraph_t after, const compare_context& ctx) {
  graph_comparison out;
  out.before = graph_nodes(before);
  out.after = graph_nodes(after);
  if (out.before.size() != out.after.size()) {
    out.same_topology = false;
    out.topology_reason = fmt::format("node count {} -> {}", out.before.size(), out.after.size());
    return out;
  }
  std::vector<node_kind> kinds(out.after.size());
  for (std::size_t i = 0; i < out.after.size(); ++i) {
    const node_kind was = kind_of(out.before[i]);
    kinds[i] = kind_of(out.after[i]);
    if (was != kinds[i]) {
      out.same_topology = false;
      out.topology_reason = fmt::format("node {} ({}): {} -> {}", i, node_name(ctx.after, out.after[i]),
                                        to_string(was), to_string(kinds[i]));
      return out;
    }
  }
  const auto edges_before = indexed_edges(before, out.before);
  const auto edges_after = indexed_edges(after, out.after);
  if (edges_before != edges_after) {
    out.same_topology = false;
    out.topology_reason = edge_difference(edges_before, edges_after);
    return out;
  }
  for (std::size_t i = 0; i < out.after.size(); ++i) {
    param_diff d = traits_of(kinds[i]).compare(out.before[i], out.after[i], ctx);
    if (d.differs) out.changed.push_back({i, kinds[i], std::move(d)});
  }
  return out;
}

graph_description describe_graph(cudaGraph_t g, const graph_state* owner) {
  const auto handles = graph_nodes(g);
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  index.reserve(handles.size());
  graph_description out;
  out.nodes.reserve(handles.size());
  for (std::size_t i = 0; i < handles.size(); ++i) {
    index.emplace(handles[i], i);
    node_description d;
    d.id = i;
    d.kind = kind_of(handles[i]);
    if (owner != nullptr)
      if (auto it = owner->labels.find(handles[i]); it != owner->labels.end()) d.label = it->second;
    traits_of(d.kind).describe(handles[i], d, owner);
    out.nodes.push_back(std::move(d));
  }
  std::size_t count = 0;
  CONVEYOR_CHECK(get_edges(g, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count);
  std::vector<cudaGraphNode_t> to(count);
  if (count > 0) CONVEYOR_CHECK(get_edges(g, from.data(), to.data(), &count));
  for (std::size_t i = 0; i < count; ++i) out.edges.emplace_back(index.at(from[i]), index.at(to[i]));
  return out;
}

} // namespace conveyor::detail
