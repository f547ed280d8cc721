// Graph files through the kind table, with no GPU: saved graphs described and compared node by node (each kind's
// keep facets, kinds/keep.hpp), and the text of a saved address.
#include "kinds/keep.hpp"

#include "kinds/kind.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace conveyor::detail {

std::string saved_address_text(const saved_address& a, const graph_file& file) {
  if (a.is_null()) return "null";
  const std::string name =
      a.buffer < file.buffers.size() ? file.buffers[a.buffer].name : fmt::format("buffer {}", a.buffer);
  return a.offset == 0 ? fmt::format("'{}'", name) : fmt::format("'{}' +{}", name, a.offset);
}

namespace {

// A node's dependencies as a sorted list: the same DAG compares equal whatever order its edges were added in.
std::vector<std::tuple<std::uint32_t, int, int, int>> sorted_dependencies(const saved_node& n) {
  std::vector<std::tuple<std::uint32_t, int, int, int>> out;
  for (const auto& d : n.dependencies) out.emplace_back(d.from, d.from_port, d.to_port, d.type);
  std::sort(out.begin(), out.end());
  return out;
}

std::string node_text(const saved_node& n, std::size_t i) {
  return n.label.empty() ? fmt::format("node {} ({})", i, to_string(n.kind))
                         : fmt::format("node {} ({} '{}')", i, to_string(n.kind), n.label);
}

// Empty when the two graphs have the same topology, else why not.
std::string topology_difference(const saved_graph& a, const saved_graph& b) {
  if (a.nodes.size() != b.nodes.size()) return fmt::format("node count {} -> {}", a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    if (a.nodes[i].kind != b.nodes[i].kind)
      return fmt::format("{}: {} -> {}", node_text(b.nodes[i], i), to_string(a.nodes[i].kind),
                         to_string(b.nodes[i].kind));
    if (a.nodes[i].bodies.size() != b.nodes[i].bodies.size())
      return fmt::format("{}: {} -> {} nested graphs", node_text(b.nodes[i], i), a.nodes[i].bodies.size(),
                         b.nodes[i].bodies.size());
    if (sorted_dependencies(a.nodes[i]) != sorted_dependencies(b.nodes[i]))
      return fmt::format("{}: its dependencies (or their edge types) differ", node_text(b.nodes[i], i));
  }
  return {};
}

edge_type edge_type_of(const saved_dependency& d) {
  cudaGraphEdgeData data{};
  data.from_port = d.from_port;
  data.to_port = d.to_port;
  data.type = d.type;
  return from_edge_data(data).value_or(edge_type::full);
}

} // namespace

saved_comparison compare_saved_graphs(const saved_graph& before, const saved_graph& after, const saved_context& ctx) {
  saved_comparison out;
  out.topology_reason = topology_difference(before, after);
  out.same_topology = out.topology_reason.empty();
  if (!out.same_topology) return out;
  for (std::size_t i = 0; i < before.nodes.size(); ++i) {
    const keep_facets* facets = traits_of(before.nodes[i].kind).keep;
    if (facets == nullptr || facets->compare == nullptr) continue; // a kind no file holds (graph_file_check)
    param_diff d = facets->compare(before.nodes[i], after.nodes[i], ctx);
    if (d.differs) out.changed.push_back({i, before.nodes[i].kind, std::move(d)});
  }
  return out;
}

graph_description describe_saved_graph(const saved_graph& g, const graph_file& file) {
  graph_description d;
  d.captured = g.captured;
  d.nodes.resize(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const saved_node& n = g.nodes[i];
    node_description& nd = d.nodes[i];
    nd.id = i;
    nd.kind = n.kind;
    nd.label = n.label;
    if (const keep_facets* facets = traits_of(n.kind).keep; facets != nullptr && facets->describe != nullptr)
      facets->describe(n, file, nd);
    for (const auto& dep : n.dependencies) {
      d.edges.emplace_back(dep.from, i);
      d.edge_types.push_back(edge_type_of(dep));
    }
  }
  return d;
}

} // namespace conveyor::detail
