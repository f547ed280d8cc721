#include "conveyor/observe/describe.hpp"

#include "conveyor/define/graph.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace conveyor {

namespace {

std::size_t count_nested(const graph_description& d) {
  std::size_t total = 0;
  for (const auto& n : d.nodes)
    for (const auto& body : n.bodies) total += body.nodes.size() + count_nested(body);
  return total;
}

} // namespace

graph_description describe(const graph& g) { return detail::describe_graph(g.get(), detail::access::state(g).get()); }

graph_description describe(const graph_exec& e) {
  if (e.get() == nullptr) throw std::invalid_argument("conveyor::describe: an empty (moved-from) executable graph");
  const auto& current = detail::current_graph(e);
  return detail::describe_graph(current->handle, current.get());
}

graph_statistics statistics(const graph_description& d) {
  graph_statistics s;
  const std::size_t n = d.nodes.size();
  s.nodes = n;
  s.edges = d.edges.size();
  s.nested_nodes = count_nested(d);
  for (const auto& node : d.nodes) {
    ++s.by_kind[node.kind];
    if (node.kind == node_kind::memcpy) s.memcpy_bytes += node.bytes;
  }
  // Longest path by Kahn's algorithm: level[v] = 1 + max level of its predecessors.
  std::vector<std::vector<std::size_t>> successors(n);
  std::vector<std::size_t> indegree(n, 0);
  for (const auto& [from, to] : d.edges) {
    if (from >= n || to >= n)
      throw std::invalid_argument(fmt::format("conveyor::statistics: edge {} -> {} names a node out of range "
                                              "(the graph has {} nodes)",
                                              from, to, n));
    successors[from].push_back(to);
    ++indegree[to];
  }
  std::vector<std::size_t> level(n, 1);
  std::vector<std::size_t> ready;
  for (std::size_t v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push_back(v);
  std::size_t visited = 0;
  while (!ready.empty()) {
    std::size_t v = ready.back();
    ready.pop_back();
    ++visited;
    for (std::size_t w : successors[v]) {
      level[w] = std::max(level[w], level[v] + 1);
      if (--indegree[w] == 0) ready.push_back(w);
    }
  }
  if (visited != n) throw std::invalid_argument("conveyor::statistics: the edges form a cycle; a graph is a DAG");
  std::unordered_map<std::size_t, std::size_t> per_level;
  for (std::size_t v = 0; v < n; ++v) {
    s.depth = std::max(s.depth, level[v]);
    s.width = std::max(s.width, ++per_level[level[v]]);
  }
  return s;
}

} // namespace conveyor
