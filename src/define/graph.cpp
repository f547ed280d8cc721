#include "conveyor/define/graph.hpp"

#include "conveyor/error.hpp"
#include "detail/compat.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace conveyor {

namespace {

// Checks that every dependency belongs to `g` and returns their CUDA handles (no copy, no allocation).
std::span<const cudaGraphNode_t> handles_in(const detail::graph_state* g, const node_list& deps, const char* call) {
  if (!deps.all_in(g))
    throw std::invalid_argument(fmt::format("conveyor::graph::{}: a dependency belongs to another graph", call));
  return deps.handles();
}

// Conditional bodies may hold kernel, memcpy, memset, empty, child-graph and conditional nodes only.
void refuse_in_body(const detail::graph_state* g, const char* kind) {
  if (g->conditional_body)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph::{}: {} nodes are not allowed in a conditional node's body (CUDA allows kernel, memcpy, "
        "memset, empty, child-graph and conditional nodes there)",
        kind, kind));
}

} // namespace

graph::graph() : state_(std::make_shared<detail::graph_state>()) {
  CONVEYOR_CHECK(cudaGraphCreate(&state_->handle, 0));
}

graph graph::adopt(cudaGraph_t handle, ownership own) {
  auto state = std::make_shared<detail::graph_state>();
  state->handle = handle;
  state->owned = own == ownership::owned;
  return graph(std::move(state));
}

node graph::add_kernel(const node_list& deps, const launch_config& cfg, const void* function, void** arguments) {
  auto handles = handles_in(state_.get(), deps, "kernel");
  cudaKernelNodeParams params{};
  params.func = const_cast<void*>(function);
  params.gridDim = cfg.grid;
  params.blockDim = cfg.block;
  params.sharedMemBytes = static_cast<unsigned>(cfg.shared_bytes);
  params.kernelParams = arguments;
  params.extra = nullptr;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddKernelNode(&n, get(), handles.data(), handles.size(), &params));
  return {n, state_.get(), function, cfg};
}

node graph::memcpy(const node_list& deps, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  auto handles = handles_in(state_.get(), deps, "memcpy");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemcpyNode1D(&n, get(), handles.data(), handles.size(), dst, src, bytes, kind));
  return wrap(n);
}

node graph::memcpy_2d(const node_list& deps, void* dst, std::size_t dst_pitch, const void* src,
                      std::size_t src_pitch, std::size_t width_bytes, std::size_t height, cudaMemcpyKind kind) {
  if (dst_pitch < width_bytes || src_pitch < width_bytes)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph::memcpy_2d: pitch (dst {} B, src {} B) smaller than the row width {} B", dst_pitch,
        src_pitch, width_bytes));
  auto handles = handles_in(state_.get(), deps, "memcpy_2d");
  cudaMemcpy3DParms p{};
  p.srcPtr = cudaPitchedPtr{const_cast<void*>(src), src_pitch, width_bytes, height};
  p.dstPtr = cudaPitchedPtr{dst, dst_pitch, width_bytes, height};
  p.extent = cudaExtent{width_bytes, height, 1};
  p.kind = kind;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemcpyNode(&n, get(), handles.data(), handles.size(), &p));
  return wrap(n);
}

node graph::memset_2d(const node_list& deps, void* dst, std::size_t pitch, unsigned value, unsigned element_size,
                      std::size_t width, std::size_t height) {
  if (element_size != 1 && element_size != 2 && element_size != 4)
    throw std::invalid_argument(
        fmt::format("conveyor::graph::memset: element size {} B; CUDA memset nodes take 1, 2 or 4", element_size));
  auto handles = handles_in(state_.get(), deps, "memset");
  cudaMemsetParams p{};
  p.dst = dst;
  p.value = value;
  p.elementSize = element_size;
  p.width = width;
  p.height = height;
  p.pitch = height > 1 ? pitch : width * element_size;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemsetNode(&n, get(), handles.data(), handles.size(), &p));
  return wrap(n);
}

allocation graph::mem_alloc(const node_list& deps, std::size_t bytes) {
  refuse_in_body(state_.get(), "mem_alloc");
  auto handles = handles_in(state_.get(), deps, "mem_alloc");
  int device = 0;
  CONVEYOR_CHECK(cudaGetDevice(&device));
  cudaMemAllocNodeParams p{};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = device;
  p.bytesize = bytes;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemAllocNode(&n, get(), handles.data(), handles.size(), &p));
  return {wrap(n), p.dptr};
}

node graph::mem_free(const node_list& deps, void* pointer) {
  refuse_in_body(state_.get(), "mem_free");
  auto handles = handles_in(state_.get(), deps, "mem_free");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemFreeNode(&n, get(), handles.data(), handles.size(), pointer));
  return wrap(n);
}

node graph::add_host(const node_list& deps, std::shared_ptr<std::function<void()>> callable) {
  refuse_in_body(state_.get(), "host");
  auto handles = handles_in(state_.get(), deps, "host");
  cudaHostNodeParams p{};
  p.fn = &detail::invoke_host_callable;
  p.userData = callable.get();
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddHostNode(&n, get(), handles.data(), handles.size(), &p));
  keep_alive(std::move(callable));
  return wrap(n);
}

node graph::child(const node_list& deps, const graph& body) {
  if (body.has_conditional())
    throw std::invalid_argument("conveyor::graph::child: the body holds a conditional node, and CUDA does not allow a "
                                "graph with conditional nodes as a child graph; add the conditional to this graph");
  auto handles = handles_in(state_.get(), deps, "child");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddChildGraphNode(&n, get(), handles.data(), handles.size(), body.get()));
  keep_alive(body.state_->keep);
  return wrap(n);
}

node graph::empty(const node_list& deps) {
  auto handles = handles_in(state_.get(), deps, "empty");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEmptyNode(&n, get(), handles.data(), handles.size()));
  return wrap(n);
}

node graph::event_record(const node_list& deps, const event& e) {
  refuse_in_body(state_.get(), "event_record");
  auto handles = handles_in(state_.get(), deps, "event_record");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventRecordNode(&n, get(), handles.data(), handles.size(), e.get()));
  return wrap(n);
}

node graph::event_wait(const node_list& deps, const event& e) {
  refuse_in_body(state_.get(), "event_wait");
  auto handles = handles_in(state_.get(), deps, "event_wait");
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddEventWaitNode(&n, get(), handles.data(), handles.size(), e.get()));
  return wrap(n);
}

graph graph::clone() const {
  if (has_conditional())
    throw std::invalid_argument("conveyor::graph::clone: the graph holds a conditional node, and CUDA cannot clone "
                                "graphs with conditional nodes; build the graph again instead");
  cudaGraph_t copy = nullptr;
  CONVEYOR_CHECK(cudaGraphClone(&copy, get()));
  graph out = adopt(copy);
  out.state_->keep = state_->keep;
  for (const auto& [original, text] : state_->labels) {
    cudaGraphNode_t cloned = nullptr;
    if (cudaGraphNodeFindInClone(&cloned, original, copy) == cudaSuccess)
      out.state_->labels.emplace(cloned, text);
    else
      (void)cudaGetLastError();
  }
  return out;
}

bool graph::has_conditional() const {
  if (!state_->bodies.empty()) return true;
  for (const node& n : nodes())
    if (n.kind() == node_kind::conditional) return true;
  return false;
}

std::size_t graph::node_count() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(get(), nullptr, &count));
  return count;
}

std::size_t graph::edge_count() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_edges(get(), nullptr, nullptr, &count));
  return count;
}

std::vector<node> graph::nodes() const {
  std::size_t count = node_count();
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetNodes(get(), handles.data(), &count));
  std::vector<node> out;
  out.reserve(count);
  for (auto* h : handles) out.push_back(wrap(h));
  return out;
}

std::vector<node> graph::root_nodes() const {
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetRootNodes(get(), nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetRootNodes(get(), handles.data(), &count));
  std::vector<node> out;
  for (auto* h : handles) out.push_back(wrap(h));
  return out;
}

std::vector<std::pair<node, node>> graph::edges() const {
  std::size_t count = edge_count();
  std::vector<cudaGraphNode_t> from(count);
  std::vector<cudaGraphNode_t> to(count);
  if (count > 0) CONVEYOR_CHECK(detail::get_edges(get(), from.data(), to.data(), &count));
  std::vector<std::pair<node, node>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.emplace_back(wrap(from[i]), wrap(to[i]));
  return out;
}

} // namespace conveyor
