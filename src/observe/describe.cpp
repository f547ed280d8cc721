#include "conveyor/observe/describe.hpp"

#include "conveyor/define/graph.hpp"
#include "conveyor/error.hpp"
#include "detail/compat.hpp"
#include "detail/kernel_node.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

namespace conveyor {

namespace {

std::string copy_kind_name(cudaMemcpyKind kind) {
  switch (kind) {
  case cudaMemcpyHostToHost: return "HtoH";
  case cudaMemcpyHostToDevice: return "HtoD";
  case cudaMemcpyDeviceToHost: return "DtoH";
  case cudaMemcpyDeviceToDevice: return "DtoD";
  default: return "default";
  }
}

void fill_parameters(node_description& d, cudaGraphNode_t n) {
  switch (d.kind) {
  case node_kind::kernel: {
    auto p = detail::read_kernel_node(n);
    if (!p) break; // the driver cannot read it: keep the kind only
    d.kernel_name = detail::kernel_name(*p);
    d.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
    d.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
    d.shared_bytes = p->sharedMemBytes;
    break;
  }
  case node_kind::memcpy: {
    cudaMemcpy3DParms p{};
    CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(n, &p));
    d.bytes = p.extent.width * std::max<std::size_t>(p.extent.height, 1) * std::max<std::size_t>(p.extent.depth, 1);
    d.copy_kind = copy_kind_name(p.kind);
    break;
  }
  case node_kind::memset: {
    cudaMemsetParams p{};
    CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(n, &p));
    d.bytes = p.width * p.elementSize * std::max<std::size_t>(p.height, 1);
    break;
  }
  case node_kind::mem_alloc: {
    cudaMemAllocNodeParams p{};
    CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(n, &p));
    d.bytes = p.bytesize;
    break;
  }
  default: break;
  }
}

graph_description describe_handle(cudaGraph_t g, const detail::graph_state* owner) {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetNodes(g, handles.data(), &count));
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  graph_description out;
  out.nodes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    index.emplace(handles[i], i);
    node_description d;
    d.id = i;
    cudaGraphNodeType type{};
    CONVEYOR_CHECK(cudaGraphNodeGetType(handles[i], &type));
    d.kind = to_node_kind(type);
    if (owner != nullptr)
      if (auto it = owner->labels.find(handles[i]); it != owner->labels.end()) d.label = it->second;
    fill_parameters(d, handles[i]);
    if (d.kind == node_kind::conditional && owner != nullptr) {
      if (auto it = owner->bodies.find(handles[i]); it != owner->bodies.end())
        for (const auto& body : it->second) d.bodies.push_back(describe_handle(body->handle, body.get()));
    }
    if (d.kind == node_kind::child_graph) {
      cudaGraph_t body = nullptr;
      CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(handles[i], &body));
      d.bodies.push_back(describe_handle(body, nullptr));
    }
    out.nodes.push_back(std::move(d));
  }
  std::size_t edges = 0;
  CONVEYOR_CHECK(detail::get_edges(g, nullptr, nullptr, &edges));
  std::vector<cudaGraphNode_t> from(edges);
  std::vector<cudaGraphNode_t> to(edges);
  if (edges > 0) CONVEYOR_CHECK(detail::get_edges(g, from.data(), to.data(), &edges));
  for (std::size_t i = 0; i < edges; ++i) out.edges.emplace_back(index.at(from[i]), index.at(to[i]));
  return out;
}

std::size_t count_nested(const graph_description& d) {
  std::size_t total = 0;
  for (const auto& n : d.nodes)
    for (const auto& body : n.bodies) total += body.nodes.size() + count_nested(body);
  return total;
}

} // namespace

std::string node_description::display_name() const {
  if (!label.empty()) return label;
  if (!kernel_name.empty()) return kernel_name;
  return std::string(to_string(kind));
}

graph_description describe(const graph& g) { return describe_handle(g.get(), g.state().get()); }

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
                                              "(the graph has {} nodes)", from, to, n));
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
