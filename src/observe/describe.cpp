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

graph_description describe(const graph& g) {
  const auto& state = detail::nonempty_state(g, "conveyor::describe");
  return detail::describe_graph(state->handle, state.get());
}

graph_description describe(const graph_exec& e) {
  if (e.get() == nullptr) throw std::invalid_argument("conveyor::describe: an empty (moved-from) executable graph");
  const auto& current = detail::current_graph(e);
  return detail::describe_graph(current->handle, current.get());
}

namespace {

// The successors of each node, and how many dependencies each has. \throws std::invalid_argument for an edge out of
// range.
struct adjacency {
  std::vector<std::vector<std::size_t>> successors;
  std::vector<std::size_t> indegree;
};

adjacency adjacency_of(const graph_description& d) {
  const std::size_t n = d.nodes.size();
  adjacency a{std::vector<std::vector<std::size_t>>(n), std::vector<std::size_t>(n, 0)};
  for (const auto& [from, to] : d.edges) {
    if (from >= n || to >= n)
      throw std::invalid_argument(fmt::format("conveyor::statistics: edge {} -> {} names a node out of range "
                                              "(the graph has {} nodes)",
                                              from, to, n));
    a.successors[from].push_back(to);
    ++a.indegree[to];
  }
  return a;
}

// Each node's level on the longest path to it (1 for a root), by Kahn's algorithm: level[v] = 1 + the largest level
// of its predecessors. \throws std::invalid_argument when the edges form a cycle.
// The nodes no edge leads into.
std::vector<std::size_t> roots_of(const adjacency& a) {
  std::vector<std::size_t> roots;
  for (std::size_t v = 0; v < a.indegree.size(); ++v)
    if (a.indegree[v] == 0) roots.push_back(v);
  return roots;
}

std::vector<std::size_t> levels_of(adjacency a) {
  const std::size_t n = a.indegree.size();
  std::vector<std::size_t> level(n, 1);
  std::vector<std::size_t> ready = roots_of(a);
  std::size_t visited = 0;
  while (!ready.empty()) {
    const std::size_t v = ready.back();
    ready.pop_back();
    ++visited;
    for (std::size_t w : a.successors[v]) {
      level[w] = std::max(level[w], level[v] + 1);
      if (--a.indegree[w] == 0) ready.push_back(w);
    }
  }
  if (visited != n) throw std::invalid_argument("conveyor::statistics: the edges form a cycle; a graph is a DAG");
  return level;
}

} // namespace

graph_statistics statistics(const graph_description& d) {
  graph_statistics s;
  s.nodes = d.nodes.size();
  s.edges = d.edges.size();
  s.nested_nodes = count_nested(d);
  for (const auto& node : d.nodes) {
    ++s.by_kind[node.kind];
    if (node.kind == node_kind::memcpy) s.memcpy_bytes += node.bytes;
  }
  std::unordered_map<std::size_t, std::size_t> per_level;
  for (const std::size_t l : levels_of(adjacency_of(d))) {
    s.depth = std::max(s.depth, l);
    s.width = std::max(s.width, ++per_level[l]);
  }
  return s;
}

} // namespace conveyor
