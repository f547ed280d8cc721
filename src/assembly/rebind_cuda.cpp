// Rebinding's CUDA side: images of CUDA graphs, allocation ranges, patches applied to executable graphs.
#include "assembly/rebind_cuda.hpp"

#include "cuda/check.hpp"
#include "cuda/driver.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"

#include <algorithm>
#include <cstring>

namespace conveyor::detail {

graph_image image_of(cudaGraph_t g, std::vector<cudaGraphNode_t>& nodes) {
  nodes = graph_nodes(g);
  graph_image out;
  out.nodes.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    node_image& img = out.nodes[i];
    img.kind = kind_of(nodes[i]);
    if (const auto read = traits_of(img.kind).read_fields) read(nodes[i], img);
  }
  return out;
}

graph_image image_of(graph_snapshot& snapshot) { return graph_image{std::move(snapshot.fields)}; }

std::vector<std::size_t> other_changes(const std::vector<cudaGraphNode_t>& before,
                                       const std::vector<cudaGraphNode_t>& after, const graph_image& image,
                                       const compare_context& ctx) {
  std::vector<std::size_t> out;
  if (before.size() != after.size() || after.size() != image.nodes.size()) return out; // the topology check says it
  for (std::size_t i = 0; i < after.size(); ++i) {
    const node_image& img = image.nodes[i];
    if (img.patchable) continue;
    if (kind_of(before[i]) != img.kind) continue; // a kind change: the topology check says it
    if (traits_of(img.kind).compare(before[i], after[i], ctx).differs) out.push_back(i);
  }
  return out;
}

range_query device_ranges() {
  return [](std::uint64_t address) -> std::optional<std::pair<std::uint64_t, std::uint64_t>> {
    CUdeviceptr base = 0;
    std::size_t size = 0;
    if (driver::mem_get_address_range(&base, &size, static_cast<CUdeviceptr>(address)) != CUDA_SUCCESS || size == 0)
      return std::nullopt;
    return std::make_pair(static_cast<std::uint64_t>(base), static_cast<std::uint64_t>(size));
  };
}

cudaError_t apply_patch(graph_exec& e, graph_image& image, const std::vector<std::size_t>& nodes,
                        std::size_t& applied) {
  applied = 0;
  for (std::size_t i : nodes) {
    if (const cudaError_t rc = patch_fields(e, i, image.nodes[i]); rc != cudaSuccess) return rc;
    ++applied;
  }
  return cudaSuccess;
}

} // namespace conveyor::detail
