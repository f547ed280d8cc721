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

namespace {

template <class T>
void append(std::vector<unsigned char>& out, const T& value) {
  const auto* p = reinterpret_cast<const unsigned char*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
void append_word(std::vector<unsigned char>& out, T value) {
  append(out, value);
}

void image_kernel(cudaGraphNode_t n, node_image& img) {
  kernel_snapshot k = read_kernel_snapshot(n, false); // the kinds layer's reading of the argument bytes
  if (!k.readable || k.has_extra || !k.has_arguments || k.layout == nullptr) return;
  img.kernel = k.params;
  img.bytes = k.arguments.to_vector();
  img.fields.reserve(k.layout->size());
  for (const auto& [offset, bytes] : *k.layout)
    img.fields.emplace_back(static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(bytes));
  const auto& p = k.params;
  append_word(img.fixed, p.func);
  append_word(img.fixed, p.kern);
  append_word(img.fixed, p.ctx);
  for (unsigned v : {p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ, p.sharedMemBytes})
    append_word(img.fixed, v);
  img.patchable = true;
}

void image_memcpy(cudaGraphNode_t n, node_image& img) {
  cudaMemcpy3DParms p{};
  if (cleared(cudaGraphMemcpyNodeGetParams(n, &p)) != cudaSuccess) return;
  if (p.srcArray != nullptr || p.dstArray != nullptr) return;
  img.copy = p;
  append_word(img.bytes, reinterpret_cast<std::uint64_t>(p.srcPtr.ptr));
  append_word(img.bytes, reinterpret_cast<std::uint64_t>(p.dstPtr.ptr));
  img.fields = {{0U, 8U}, {8U, 8U}};
  for (std::size_t v : {p.srcPos.x, p.srcPos.y, p.srcPos.z, p.srcPtr.pitch, p.srcPtr.xsize, p.srcPtr.ysize,
                        p.dstPos.x, p.dstPos.y, p.dstPos.z, p.dstPtr.pitch, p.dstPtr.xsize, p.dstPtr.ysize,
                        p.extent.width, p.extent.height, p.extent.depth})
    append_word(img.fixed, v);
  append_word(img.fixed, static_cast<int>(p.kind));
  img.patchable = true;
}

void image_memset(cudaGraphNode_t n, node_image& img) {
  cudaMemsetParams p{};
  if (cleared(cudaGraphMemsetNodeGetParams(n, &p)) != cudaSuccess) return;
  img.fill = p;
  append_word(img.bytes, reinterpret_cast<std::uint64_t>(p.dst));
  img.fields = {{0U, 8U}};
  if (p.elementSize == 4) {
    append_word(img.bytes, p.value);
    img.fields.emplace_back(8U, 4U);
  } else {
    append_word(img.fixed, p.value);
  }
  for (std::size_t v : {p.pitch, p.width, p.height}) append_word(img.fixed, v);
  append_word(img.fixed, p.elementSize);
  img.patchable = true;
}

} // namespace

graph_image image_of(cudaGraph_t g, std::vector<cudaGraphNode_t>& nodes) {
  nodes = graph_nodes(g);
  graph_image out;
  out.nodes.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    node_image& img = out.nodes[i];
    img.kind = kind_of(nodes[i]);
    switch (img.kind) {
    case node_kind::kernel: image_kernel(nodes[i], img); break;
    case node_kind::memcpy: image_memcpy(nodes[i], img); break;
    case node_kind::memset: image_memset(nodes[i], img); break;
    default: break;
    }
  }
  return out;
}

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
    node_image& n = image.nodes[i];
    cudaError_t rc = cudaErrorInvalidValue;
    switch (n.kind) {
    case node_kind::kernel: {
      n.argument_pointers.resize(n.fields.size());
      for (std::size_t k = 0; k < n.fields.size(); ++k) n.argument_pointers[k] = n.bytes.data() + n.fields[k].first;
      CUDA_KERNEL_NODE_PARAMS p = n.kernel;
      p.kernelParams = n.argument_pointers.data();
      p.extra = nullptr;
      rc = patch_kernel(e, i, p);
      break;
    }
    case node_kind::memcpy: {
      cudaMemcpy3DParms p = n.copy;
      p.srcPtr.ptr = reinterpret_cast<void*>(read_word(n.bytes, 0, 8));
      p.dstPtr.ptr = reinterpret_cast<void*>(read_word(n.bytes, 8, 8));
      rc = patch_memcpy(e, i, p);
      break;
    }
    case node_kind::memset: {
      cudaMemsetParams p = n.fill;
      p.dst = reinterpret_cast<void*>(read_word(n.bytes, 0, 8));
      if (n.fields.size() > 1) p.value = static_cast<unsigned>(read_word(n.bytes, 8, 4));
      rc = patch_memset(e, i, p);
      break;
    }
    default: break;
    }
    if (rc != cudaSuccess) return rc;
    ++applied;
  }
  return cudaSuccess;
}

} // namespace conveyor::detail
