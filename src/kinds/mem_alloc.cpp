// The memory-allocation node kind: every field of cudaMemAllocNodeParams compared, including the address the
// node reserves (kernels of the graph embed it). CUDA has no per-node setter for it, and an executable graph
// keeps the address it was instantiated with: a changed allocation needs a new instantiation (graph_exec::update
// refuses it before asking CUDA).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace conveyor::detail {

namespace {
bool same_pool(const cudaMemPoolProps& x, const cudaMemPoolProps& y) {
  return std::tie(x.allocType, x.handleTypes, x.location.type, x.location.id, x.maxSize, x.usage) ==
         std::tie(y.allocType, y.handleTypes, y.location.type, y.location.id, y.maxSize, y.usage);
}

bool same_access_desc(const cudaMemAccessDesc& a, const cudaMemAccessDesc& b) {
  return a.location.type == b.location.type && a.location.id == b.location.id && a.flags == b.flags;
}

// The peer access of the two allocations: the same count, each description the same.
bool same_access(const cudaMemAllocNodeParams& pa, const cudaMemAllocNodeParams& pb) {
  return pa.accessDescCount == pb.accessDescCount &&
         std::equal(pa.accessDescs, pa.accessDescs + pa.accessDescCount, pb.accessDescs, same_access_desc);
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  cudaMemAllocNodeParams pa{};
  cudaMemAllocNodeParams pb{};
  CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(a, &pa));
  CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(b, &pb));
  std::vector<std::string> what;
  if (pa.bytesize != pb.bytesize) what.push_back(fmt::format("size {} -> {} B", pa.bytesize, pb.bytesize));
  if (pa.dptr != pb.dptr) what.push_back(fmt::format("address {} -> {}", pa.dptr, pb.dptr));
  if (!same_pool(pa.poolProps, pb.poolProps)) what.emplace_back("pool properties");
  if (!same_access(pa, pb)) what.emplace_back("peer access");
  // No per-node setter; and the executable graph keeps the addresses it reserved at instantiation, which the new
  // graph's kernels do not use: only a new instantiation is safe.
  return param_diff::listed("allocation", what, false, false);
}
void describe(cudaGraphNode_t n, node_description& d, const graph_state*) { d.bytes = read_mem_alloc(n).bytes; }
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_mem_alloc(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  cudaMemAllocNodeParams p{};
  CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(n, &p));
  if (p.poolProps.location.type != cudaMemLocationTypeDevice || p.poolProps.allocType != cudaMemAllocationTypePinned)
    s.refuse("its pool is not device memory of the ordinary (pinned) allocation type",
             "allocate device memory (graph::mem_alloc, cudaMallocAsync in a capture)");
  saved_mem_alloc_node a;
  a.device = p.poolProps.location.id;
  a.buffer = s.allocation(p.dptr, p.bytesize, a.device);
  for (std::size_t i = 0; i < p.accessDescCount; ++i)
    a.access.emplace_back(p.accessDescs[i].location.id, p.accessDescs[i].flags == cudaMemAccessFlagsProtRead);
  a.usage = p.poolProps.usage;
  out.parameters = std::move(a);
}

cudaGraphNode_t load_mem_alloc(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  const auto& a = std::get<saved_mem_alloc_node>(n.parameters);
  std::vector<cudaMemAccessDesc> access;
  for (const auto& [device, read_only] : a.access) {
    cudaMemAccessDesc d{};
    d.location.type = cudaMemLocationTypeDevice;
    d.location.id = device;
    d.flags = read_only ? cudaMemAccessFlagsProtRead : cudaMemAccessFlagsProtReadWrite;
    access.push_back(d);
  }
  const auto bytes = l.allocation_bytes(a.buffer);
  auto [node, pointer] = add_mem_alloc(g, deps, bytes, a.device, access, a.usage);
  l.allocated(a.buffer, pointer);
  return node;
}

void describe_saved(const saved_node& n, const graph_file& f, node_description& d) {
  const auto& a = std::get<saved_mem_alloc_node>(n.parameters);
  d.bytes = f.buffers[a.buffer].bytes;
  d.device = a.device;
}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const auto& a = std::get<saved_mem_alloc_node>(na.parameters);
  const auto& b = std::get<saved_mem_alloc_node>(nb.parameters);
  std::vector<std::string> what;
  const auto bytes_a = ctx.before->buffers[a.buffer].bytes;
  const auto bytes_b = ctx.after->buffers[b.buffer].bytes;
  if (bytes_a != bytes_b) what.push_back(fmt::format("size {} -> {} B", bytes_a, bytes_b));
  if (a.device != b.device) what.push_back(fmt::format("device {} -> {}", a.device, b.device));
  if (a.usage != b.usage) what.emplace_back("pool properties");
  if (a.access != b.access) what.emplace_back("peer access");
  return param_diff::listed("allocation", what, false, false);
}

} // namespace

extern const keep_facets mem_alloc_keep{
    .save = &save_mem_alloc,
    .load = &load_mem_alloc,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_mem_alloc_node>,
};

extern const kind_traits mem_alloc_kind{
    .kind = node_kind::mem_alloc,
    .name = "mem_alloc",
    .allowed_in_body = false,
    .allowed_in_child = false,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#fce5cd",
    .shows = shows_bytes,
    .device_launch =
        {.refusal = "a memory allocation node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and "
                    "child-graph nodes)",
         .fix = "allocate before instantiating (cudaMalloc, or cudaMallocAsync outside the graph) and pass the "
                "pointer; free after the last launch"},
    .compare = &compare,
    .describe = &describe,
    .keep = &mem_alloc_keep,
};

std::pair<cudaGraphNode_t, void*> add_mem_alloc(cudaGraph_t g, node_handles deps, std::size_t bytes, int device,
                                                std::span<const cudaMemAccessDesc> access, unsigned short usage) {
  cudaMemAllocNodeParams p{};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = device;
  p.poolProps.usage = usage;
  p.accessDescs = access.empty() ? nullptr : access.data();
  p.accessDescCount = access.size();
  p.bytesize = bytes;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemAllocNode(&n, g, deps.data(), deps.size(), &p));
  return {n, p.dptr};
}

allocation_params read_mem_alloc(cudaGraphNode_t node) {
  cudaMemAllocNodeParams p{};
  CONVEYOR_CHECK(cudaGraphMemAllocNodeGetParams(node, &p));
  return {p.dptr, p.bytesize};
}

} // namespace conveyor::detail
