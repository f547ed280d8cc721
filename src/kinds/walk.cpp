#include "kinds/walk.hpp"

#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "cuda/driver.hpp"
#include "kinds/node_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace conveyor::detail {

namespace {

// Edges are read node by node (each node's dependencies with their edge data): cudaGraphGetEdges takes about 10 ms
// for 10,000 edges on driver 580 (H200), growing faster than the edge count, where one query per node stays linear.
static_assert(sizeof(CUgraphEdgeData) == sizeof(cudaGraphEdgeData), "the driver's and the runtime's edge data agree");

// A node's dependencies with their edge data: through the driver (a fraction of the runtime's cost, per node of
// every walk), the runtime's call where the driver's entry point is missing (and for its error).
cudaError_t dependencies_of(cudaGraphNode_t n, cudaGraphNode_t* deps, cudaGraphEdgeData* data, std::size_t* count) {
  const CUresult rc =
      driver::node_get_dependencies(reinterpret_cast<CUgraphNode>(n), reinterpret_cast<CUgraphNode*>(deps),
                                    reinterpret_cast<CUgraphEdgeData*>(data), count);
  if (rc == CUDA_SUCCESS) return cudaSuccess;
  return get_dependencies(n, deps, data, count);
}

// Node handle -> position in `nodes`. Dependencies of a graph read in creation order mostly name the nodes just
// before (a chain, a capture's joins), which are tried first; the sorted index for the others is made at the first
// miss only (sorting the handles of 10,000 nodes and bisecting for each edge cost about 0.1 us a node).
class node_positions {
public:
  explicit node_positions(const std::vector<cudaGraphNode_t>& nodes) : nodes_(nodes) {}

  // The position of `n`, a dependency of the node at `of`. \throws std::out_of_range when `n` is not in the graph.
  std::size_t operator()(cudaGraphNode_t n, std::size_t of) {
    constexpr std::size_t nearby = 4;
    for (std::size_t back = 1; back <= nearby && back <= of; ++back)
      if (nodes_[of - back] == n) return of - back;
    return far(n);
  }

private:
  std::size_t far(cudaGraphNode_t n) {
    if (sorted_.empty()) {
      sorted_.resize(nodes_.size());
      for (std::size_t i = 0; i < nodes_.size(); ++i) sorted_[i] = {nodes_[i], i};
      std::sort(sorted_.begin(), sorted_.end());
    }
    const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::pair<cudaGraphNode_t, std::size_t>{n, 0});
    if (it == sorted_.end() || it->first != n) throw std::out_of_range("a dependency outside the graph");
    return it->second;
  }

  const std::vector<cudaGraphNode_t>& nodes_;
  std::vector<std::pair<cudaGraphNode_t, std::size_t>> sorted_;
};

// Each node's dependencies as read, by position, in the order the driver lists them (the order they were added),
// through buffers kept from node to node.
class dependency_reader {
public:
  explicit dependency_reader(const std::vector<cudaGraphNode_t>& nodes) : position_(nodes) {}

  // Appends node `n`'s dependencies (`n` at position `at`) to `out`. \throws cuda_error when they cannot be read.
  void append(cudaGraphNode_t n, std::size_t at, std::vector<indexed_edge>& out) {
    std::size_t count = first_try;
    deps_.resize(first_try);
    data_.resize(first_try);
    CONVEYOR_CHECK(dependencies_of(n, deps_.data(), data_.data(), &count));
    if (count >= first_try) { // possibly more: ask how many, then read them all
      CONVEYOR_CHECK(dependencies_of(n, nullptr, nullptr, &count));
      deps_.resize(count);
      data_.resize(count);
      if (count > 0) CONVEYOR_CHECK(dependencies_of(n, deps_.data(), data_.data(), &count));
    }
    for (std::size_t k = 0; k < count; ++k)
      out.emplace_back(position_(deps_[k], at), at, data_[k].from_port, data_[k].to_port, data_[k].type);
  }

private:
  static constexpr std::size_t first_try = 32;
  node_positions position_;
  std::vector<cudaGraphNode_t> deps_;
  std::vector<cudaGraphEdgeData> data_;
};

// Appends node `at`'s dependencies to `out` in snapshot order: sorted among themselves by (from, ports, type), so
// that the order the driver lists them in (the order they were added) does not matter; with every node's in turn,
// the list is by the dependent node (`to`, in creation order), then the rest, and the whole needs no sort.
void append_sorted_dependencies(dependency_reader& reader, cudaGraphNode_t n, std::size_t at,
                                std::vector<indexed_edge>& out) {
  const std::size_t first = out.size();
  reader.append(n, at, out);
  if (out.size() - first < 2) return;
  const auto by_from = [](const indexed_edge& a, const indexed_edge& b) {
    return std::tie(std::get<0>(a), std::get<2>(a), std::get<3>(a), std::get<4>(a)) <
           std::tie(std::get<0>(b), std::get<2>(b), std::get<3>(b), std::get<4>(b));
  };
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_from);
}

// Every edge of the graph whose nodes are `nodes`, by index, in snapshot order (append_sorted_dependencies).
std::vector<indexed_edge> indexed_edges(const std::vector<cudaGraphNode_t>& nodes) {
  dependency_reader reader(nodes);
  std::vector<indexed_edge> out;
  out.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) append_sorted_dependencies(reader, nodes[i], i, out);
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

bool embeds_graphs(node_kind kind) noexcept {
  return traits_of(kind).embedded_graph != nullptr || kind == node_kind::conditional;
}

const conditional_info* recorded_conditional(const graph_state* state, cudaGraphNode_t n) noexcept {
  if (state == nullptr) return nullptr;
  const auto it = state->conditionals.find(n);
  return it == state->conditionals.end() ? nullptr : &it->second;
}

embedded_graph embedded_copy(cudaGraphNode_t n, node_kind kind, const graph_state* state, std::string_view context) {
  embedded_graph out;
  check_with(traits_of(kind).embedded_graph(n, &out.handle), "cudaGraphChildGraphNodeGetGraph",
             [&] { return context; });
  if (state != nullptr)
    if (const auto it = state->child_bodies.find(n); it != state->child_bodies.end())
      out.copied_from = it->second.get();
  return out;
}

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g) {
  // Through the driver (cuGraphGetNodes): a fraction of the runtime's cost on large graphs; the runtime's call where
  // the driver refuses, for its error.
  const auto cu = reinterpret_cast<CUgraph>(g);
  std::size_t count = 0;
  if (driver::graph_get_nodes(cu, nullptr, &count) != CUDA_SUCCESS)
    CONVEYOR_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && driver::graph_get_nodes(cu, reinterpret_cast<CUgraphNode*>(nodes.data()), &count) != CUDA_SUCCESS)
    CONVEYOR_CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

graph_structure structure_of(cudaGraph_t g, const graph_state* state) {
  const auto nodes = graph_nodes(g);
  dependency_reader reader(nodes);
  graph_structure out;
  out.kinds.reserve(nodes.size());
  out.edges.reserve(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const node_kind kind = kind_of(nodes[i]);
    out.kinds.push_back(kind);
    reader.append(nodes[i], i, out.edges);
    // A conditional node whose bodies cannot be read adds none (whole-graph updates of its graph are refused).
    (void)for_each_embedded(nodes[i], kind, state,
                            [&](const embedded_graph& e) { out.embedded.push_back(structure_of(e.handle, e.state)); });
  }
  return out;
}

graph_snapshot snapshot_graph(cudaGraph_t g, bool with_fields) {
  graph_snapshot out;
  out.nodes = graph_nodes(g);
  out.kinds.reserve(out.nodes.size());
  out.kernels.reserve(out.nodes.size()); // each made where it is read: one pass over fresh memory, not two
  out.edges.reserve(out.nodes.size());
  if (with_fields) out.fields.resize(out.nodes.size());
  // Node by node, every read of one node before the next (the driver's record of a node is reached once: reading
  // one kind of value over all nodes, then the next, costs more on large graphs). The type and ports make
  // programmatic and launch-completion edges differ from full dependencies.
  dependency_reader reader(out.nodes);
  for (std::size_t i = 0; i < out.nodes.size(); ++i) {
    const node_kind kind = kind_of(out.nodes[i]);
    out.kinds.push_back(kind);
    kernel_snapshot& kernel = out.kernels.emplace_back();
    if (kind == node_kind::kernel) read_kernel_snapshot_into(out.nodes[i], kernel);
    append_sorted_dependencies(reader, out.nodes[i], i, out.edges);
    if (!with_fields) continue;
    out.fields[i].kind = kind;
    if (kind == node_kind::kernel) kernel_fields(out.kernels[i], out.fields[i]);
    else if (const auto read = traits_of(kind).read_fields) read(out.nodes[i], out.fields[i]);
  }
  return out;
}

namespace {

void append_nested_clusters(cudaGraph_t g, const graph_state* state, std::size_t position, std::uint32_t& inner,
                            std::vector<kernel_attribute>& out);

// The kernels inside node `n` (a child graph, or a conditional node `state` records), numbered on from `inner`; for
// a conditional node Conveyor did not record, whose bodies cannot be read, the marker unreadable_bodies.
void append_embedded(cudaGraphNode_t n, node_kind kind, const graph_state* state, std::size_t position,
                     std::uint32_t& inner, std::vector<kernel_attribute>& out) {
  const bool readable = for_each_embedded(n, kind, state, [&](const embedded_graph& e) {
    append_nested_clusters(e.handle, e.state, position, inner, out);
  });
  if (!readable) out.push_back({position, unreadable_bodies, cudaLaunchAttributeIgnore, {}});
}

void append_nested_clusters(cudaGraph_t g, const graph_state* state, std::size_t position, std::uint32_t& inner,
                            std::vector<kernel_attribute>& out) {
  for (cudaGraphNode_t n : graph_nodes(g)) {
    const node_kind kind = kind_of(n);
    if (kind == node_kind::kernel) read_cluster_attributes(n, position, out, ++inner);
    else append_embedded(n, kind, state, position, inner, out);
  }
}

} // namespace

void append_embedded_cluster_attributes(cudaGraphNode_t n, node_kind kind, const graph_state* state,
                                        std::size_t position, std::vector<kernel_attribute>& out) {
  std::uint32_t inner = 0;
  append_embedded(n, kind, state, position, inner, out);
}

std::vector<kernel_attribute> cluster_attributes(cudaGraph_t g, const graph_state* state) {
  const auto nodes = graph_nodes(g);
  std::vector<kernel_attribute> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const node_kind kind = kind_of(nodes[i]);
    if (kind == node_kind::kernel) read_cluster_attributes(nodes[i], i, out);
    else append_embedded_cluster_attributes(nodes[i], kind, state, i, out);
  }
  return out;
}

std::vector<kernel_attribute> cluster_attributes(const graph_snapshot& s, const graph_state* state) {
  std::vector<kernel_attribute> out;
  for (std::size_t i = 0; i < s.kinds.size(); ++i) {
    if (s.kinds[i] == node_kind::kernel) append_cluster_attributes(i, s.kernels[i], out);
    else append_embedded_cluster_attributes(s.nodes[i], s.kinds[i], state, i, out);
  }
  return out;
}

graph_comparison compare_snapshots(const graph_snapshot& before, const graph_snapshot& after,
                                   const compare_context& ctx) {
  graph_comparison out;
  out.before = before.nodes;
  out.after = after.nodes;
  if (out.before.size() != out.after.size()) {
    out.same_topology = false;
    out.topology_reason = fmt::format("node count {} -> {}", out.before.size(), out.after.size());
    return out;
  }
  for (std::size_t i = 0; i < out.after.size(); ++i)
    if (before.kinds[i] != after.kinds[i]) {
      out.same_topology = false;
      out.topology_reason = fmt::format("node {} ({}): {} -> {}", i, node_name(ctx.after, out.after[i]),
                                        to_string(before.kinds[i]), to_string(after.kinds[i]));
      return out;
    }
  if (before.edges != after.edges) {
    out.same_topology = false;
    out.topology_reason = edge_difference(before.edges, after.edges);
    return out;
  }
  for (std::size_t i = 0; i < out.after.size(); ++i) {
    const node_kind kind = after.kinds[i];
    param_diff d = kind == node_kind::kernel ? compare_kernel_snapshots(before.kernels[i], after.kernels[i])
                                             : traits_of(kind).compare(out.before[i], out.after[i], ctx);
    if (d.differs) out.changed.push_back({i, kind, std::move(d)});
  }
  return out;
}

graph_comparison compare_graphs(cudaGraph_t before, cudaGraph_t after, const compare_context& ctx) {
  return compare_snapshots(snapshot_graph(before), snapshot_graph(after), ctx);
}

graph_description describe_graph(cudaGraph_t g, const graph_state* owner) {
  const auto handles = graph_nodes(g);
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  index.reserve(handles.size());
  graph_description out;
  if (owner != nullptr) {
    out.captured = owner->captured;
    out.captured_on_blocking_stream = owner->captured_on_blocking_stream;
  }
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
  // Node by node, with edge data (see indexed_edges), sorted by (from, to) for the exports.
  auto edges = indexed_edges(handles);
  std::sort(edges.begin(), edges.end());
  for (const auto& [from, to, from_port, to_port, type] : edges) {
    out.edges.emplace_back(from, to);
    cudaGraphEdgeData data{};
    data.from_port = static_cast<unsigned char>(from_port);
    data.to_port = static_cast<unsigned char>(to_port);
    data.type = static_cast<cudaGraphDependencyType>(type);
    out.edge_types.push_back(from_edge_data(data).value_or(edge_type::programmatic));
  }
  return out;
}

} // namespace conveyor::detail
