#include "conveyor/execute/graph_diff.hpp"

#include "conveyor/error.hpp"
#include "detail/compat.hpp"
#include "detail/diff.hpp"
#include "detail/kernel_node.hpp"
#include "detail/node_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace conveyor::detail {

namespace {

bool same_pitched(const cudaPitchedPtr& a, const cudaPitchedPtr& b) {
  return a.ptr == b.ptr && a.pitch == b.pitch && a.xsize == b.xsize && a.ysize == b.ysize;
}
bool same_pos(const cudaPos& a, const cudaPos& b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

// What differs between two nodes of the same kind, or empty when nothing does.
std::string node_change(cudaGraphNode_t a, cudaGraphNode_t b, cudaGraphNodeType type);

std::string child_change(cudaGraphNode_t a, cudaGraphNode_t b) {
  cudaGraph_t ga = nullptr;
  cudaGraph_t gb = nullptr;
  CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(a, &ga));
  CONVEYOR_CHECK(cudaGraphChildGraphNodeGetGraph(b, &gb));
  auto d = diff_handles(ga, gb, nullptr).diff;
  if (!d.same_topology) return "child graph topology: " + d.topology_reason;
  return d.changed.empty() ? std::string{} : fmt::format("{} node(s) of the child graph", d.changed.size());
}

std::string node_change(cudaGraphNode_t a, cudaGraphNode_t b, cudaGraphNodeType type) {
  switch (type) {
  case cudaGraphNodeTypeKernel: {
    auto pa = read_kernel_node(a);
    auto pb = read_kernel_node(b);
    if (!pa || !pb) return "kernel parameters unreadable";
    if (pa->func != pb->func || pa->kern != pb->kern) return "function";
    if (pa->gridDimX != pb->gridDimX || pa->gridDimY != pb->gridDimY || pa->gridDimZ != pb->gridDimZ ||
        pa->blockDimX != pb->blockDimX || pa->blockDimY != pb->blockDimY || pa->blockDimZ != pb->blockDimZ ||
        pa->sharedMemBytes != pb->sharedMemBytes)
      return "launch shape";
    auto same = same_launch(*pa, *pb);
    if (!same) return "arguments (not comparable)";
    return *same ? std::string{} : "arguments";
  }
  case cudaGraphNodeTypeMemcpy: {
    cudaMemcpy3DParms pa{};
    cudaMemcpy3DParms pb{};
    CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(a, &pa));
    CONVEYOR_CHECK(cudaGraphMemcpyNodeGetParams(b, &pb));
    bool same = pa.srcArray == pb.srcArray && pa.dstArray == pb.dstArray && same_pos(pa.srcPos, pb.srcPos) &&
                same_pos(pa.dstPos, pb.dstPos) && same_pitched(pa.srcPtr, pb.srcPtr) &&
                same_pitched(pa.dstPtr, pb.dstPtr) && pa.extent.width == pb.extent.width &&
                pa.extent.height == pb.extent.height && pa.extent.depth == pb.extent.depth && pa.kind == pb.kind;
    return same ? std::string{} : "copy";
  }
  case cudaGraphNodeTypeMemset: {
    cudaMemsetParams pa{};
    cudaMemsetParams pb{};
    CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(a, &pa));
    CONVEYOR_CHECK(cudaGraphMemsetNodeGetParams(b, &pb));
    bool same = pa.dst == pb.dst && pa.pitch == pb.pitch && pa.value == pb.value &&
                pa.elementSize == pb.elementSize && pa.width == pb.width && pa.height == pb.height;
    return same ? std::string{} : "memset";
  }
  case cudaGraphNodeTypeHost: {
    cudaHostNodeParams pa{};
    cudaHostNodeParams pb{};
    CONVEYOR_CHECK(cudaGraphHostNodeGetParams(a, &pa));
    CONVEYOR_CHECK(cudaGraphHostNodeGetParams(b, &pb));
    return pa.fn == pb.fn && pa.userData == pb.userData ? std::string{} : "host function";
  }
  case cudaGraphNodeTypeEventRecord: {
    cudaEvent_t ea = nullptr;
    cudaEvent_t eb = nullptr;
    CONVEYOR_CHECK(cudaGraphEventRecordNodeGetEvent(a, &ea));
    CONVEYOR_CHECK(cudaGraphEventRecordNodeGetEvent(b, &eb));
    return ea == eb ? std::string{} : "event";
  }
  case cudaGraphNodeTypeWaitEvent: {
    cudaEvent_t ea = nullptr;
    cudaEvent_t eb = nullptr;
    CONVEYOR_CHECK(cudaGraphEventWaitNodeGetEvent(a, &ea));
    CONVEYOR_CHECK(cudaGraphEventWaitNodeGetEvent(b, &eb));
    return ea == eb ? std::string{} : "event";
  }
  case cudaGraphNodeTypeGraph: return child_change(a, b);
  case cudaGraphNodeTypeMemAlloc: {
    cudaMemAllocNodeParams pa{};
    cudaMemAllocNodeParams pb{};
    CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(a, &pa));
    CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(b, &pb));
    return pa.bytesize == pb.bytesize ? std::string{} : "allocation size";
  }
  case cudaGraphNodeTypeMemFree: {
    void* pa = nullptr;
    void* pb = nullptr;
    CONVEYOR_CHECK(cudaGraphMemFreeNodeGetParams(a, &pa));
    CONVEYOR_CHECK(cudaGraphMemFreeNodeGetParams(b, &pb));
    return pa == pb ? std::string{} : "freed pointer";
  }
  case cudaGraphNodeTypeEmpty: return {};
  default: return "parameters not comparable";
  }
}

std::vector<std::pair<std::size_t, std::size_t>> indexed_edges(cudaGraph_t g,
                                                               const std::vector<cudaGraphNode_t>& nodes) {
  std::unordered_map<cudaGraphNode_t, std::size_t> index;
  for (std::size_t i = 0; i < nodes.size(); ++i) index.emplace(nodes[i], i);
  std::size_t count = 0;
  CONVEYOR_CHECK(get_edges(g, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count);
  std::vector<cudaGraphNode_t> to(count);
  if (count > 0) CONVEYOR_CHECK(get_edges(g, from.data(), to.data(), &count));
  std::vector<std::pair<std::size_t, std::size_t>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(index.at(from[i]), index.at(to[i]));
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t g) {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetNodes(g, nodes.data(), &count));
  return nodes;
}

handle_diff diff_handles(cudaGraph_t before, cudaGraph_t after, const graph_state* labels) {
  handle_diff out;
  out.before = graph_nodes(before);
  out.after = graph_nodes(after);
  auto& d = out.diff;
  d.nodes = out.after.size();
  if (out.before.size() != out.after.size()) {
    d.same_topology = false;
    d.topology_reason = fmt::format("node count {} -> {}", out.before.size(), out.after.size());
    return out;
  }
  std::vector<cudaGraphNodeType> types(out.after.size());
  for (std::size_t i = 0; i < out.after.size(); ++i) {
    cudaGraphNodeType ta{};
    CONVEYOR_CHECK(cudaGraphNodeGetType(out.before[i], &ta));
    CONVEYOR_CHECK(cudaGraphNodeGetType(out.after[i], &types[i]));
    if (ta != types[i]) {
      d.same_topology = false;
      d.topology_reason = fmt::format("node {} ({}): {} -> {}", i, node_name(labels, out.after[i]),
                                      to_string(to_node_kind(ta)), to_string(to_node_kind(types[i])));
      return out;
    }
  }
  if (indexed_edges(before, out.before) != indexed_edges(after, out.after)) {
    d.same_topology = false;
    d.topology_reason = "dependencies differ";
    return out;
  }
  for (std::size_t i = 0; i < out.after.size(); ++i) {
    std::string what = node_change(out.before[i], out.after[i], types[i]);
    if (what.empty()) continue;
    d.changed.push_back(i);
    d.changes.push_back(fmt::format("node {} ({}): {}", i, node_name(labels, out.after[i]), what));
  }
  return out;
}

} // namespace conveyor::detail

namespace conveyor {

graph_diff diff(const graph& before, const graph& after) {
  return detail::diff_handles(before.get(), after.get(), after.state().get()).diff;
}

} // namespace conveyor
