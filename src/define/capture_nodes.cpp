// Nodes added to a stream capture in progress (conveyor/define/capture_nodes.hpp): the capture's graph and next
// dependencies read with cudaStreamGetCaptureInfo, the node added to that graph, the stream's dependencies set to it
// with cudaStreamUpdateCaptureDependencies. What the node needs is owned by the captured graph's model (registered by
// the capture_session, define/capture_registry.hpp) or, for a capture Conveyor did not begin, by a CUDA user object.
#include "conveyor/define/capture_nodes.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"
#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "cuda/lifetime.hpp"
#include "define/capture_registry.hpp"
#include "define/conditional_record.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace conveyor::detail {

namespace {

// Where the next node captured on a stream goes: the graph, its dependencies with their edge data (copied out of
// CUDA's arrays), and the graph's model when a capture_session began the capture.
struct capture_point_info {
  cudaGraph_t graph = nullptr;
  std::vector<cudaGraphNode_t> deps;
  std::vector<cudaGraphEdgeData> data; // one per dependency
  std::shared_ptr<graph_state> state;  // null: a capture Conveyor did not begin
};

// Refuses a stream that is not capturing, or whose capture was invalidated (`call`: the function asking).
void check_capturing(cudaStreamCaptureStatus status, const char* call) {
  if (status == cudaStreamCaptureStatusNone)
    throw std::logic_error(fmt::format(
        "{}: the stream is not capturing, so there is no graph to add the node to. Call it while the stream is "
        "captured (inside conveyor::capture, capture_into, a capture_session or a graphed callable); outside a "
        "capture, add the node to a graph with its builder (graph::host, graph::kernel, add_conditional)",
        call));
  if (status == cudaStreamCaptureStatusInvalidated)
    throw cuda_error(cudaErrorStreamCaptureInvalidated, call, std::source_location::current(),
                     "the capture on this stream was invalidated by an earlier illegal call; end it and capture again");
}

// Copies CUDA's `count` dependencies and their edge data (either may be null) into `out`: one edge data per
// dependency, a full edge where CUDA gave none.
void copy_dependencies(capture_point_info& out, const cudaGraphNode_t* deps, const cudaGraphEdgeData* data,
                       std::size_t count) {
  if (count != 0 && deps != nullptr) out.deps.assign(deps, deps + count);
  if (count != 0 && data != nullptr) out.data.assign(data, data + count);
  out.data.resize(out.deps.size(), cudaGraphEdgeData{});
}

capture_point_info point_of(const stream& s, const char* call) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  capture_point_info out;
  const cudaGraphNode_t* deps = nullptr;
  const cudaGraphEdgeData* data = nullptr;
  std::size_t count = 0;
  check_with(capture_point(s.get(), &status, nullptr, &out.graph, &deps, &data, &count), "cudaStreamGetCaptureInfo",
             [&] { return std::string(call); });
  check_capturing(status, call);
  copy_dependencies(out, deps, data, count);
  out.state = captured_state(out.graph);
  if (out.state) check_not_lost(*out.state, call);
  return out;
}

bool full_edge(const cudaGraphEdgeData& d) noexcept {
  return d.type == cudaGraphDependencyTypeDefault && d.from_port == 0 && d.to_port == 0;
}

// Makes `n` the only dependency of the next node captured on `s`; removes `n` from its graph again when CUDA refuses.
void advance(const stream& s, cudaGraphNode_t n, const char* call) {
  cudaGraphNode_t next[] = {n};
  const cudaError_t rc = set_capture_dependencies(s.get(), next, 1);
  if (rc == cudaSuccess) return;
  (void)cudaGetLastError();
  (void)cleared(cudaGraphDestroyNode(n));
  throw cuda_error(rc, "cudaStreamUpdateCaptureDependencies", std::source_location::current(),
                   fmt::format("{}: making the new node the stream's next dependency", call));
}

// Keeps `item` alive as long as the graph being captured at `p` and every executable graph made from it: in its
// model's resources (attached as a user object when it is instantiated), or, for a capture Conveyor did not begin,
// through a CUDA user object of its own retained by the graph (its token stays held: the graph is the caller's).
void keep_for(const capture_point_info& p, std::shared_ptr<void> item) {
  if (p.state) {
    p.state->keep->add(std::move(item));
    return;
  }
  auto [object, token] = make_user_object(std::move(item));
  const cudaError_t rc = cudaGraphRetainUserObject(p.graph, object, 1, cudaGraphUserObjectMove);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaUserObjectRelease(object, 1);
    let_go(token);
    throw_cuda(rc, "cudaGraphRetainUserObject", "tying a host callable to the graph being captured");
  }
}

using typed_edges = std::vector<std::pair<cudaGraphNode_t, cudaGraphEdgeData>>;

// The capture point's dependencies split by edge: full ones (added with the kernel node) and typed ones (added after
// it). A full edge from a kernel becomes programmatic for a launch_config::programmatic launch (`programmatic`).
std::pair<std::vector<cudaGraphNode_t>, typed_edges> split_by_type(const capture_point_info& p, bool programmatic) {
  std::vector<cudaGraphNode_t> full;
  typed_edges typed;
  for (std::size_t i = 0; i < p.deps.size(); ++i) {
    cudaGraphEdgeData d = p.data[i];
    if (full_edge(d) && programmatic && kind_of(p.deps[i]) == node_kind::kernel)
      d = to_edge_data(edge_type::programmatic);
    if (full_edge(d)) full.push_back(p.deps[i]);
    else typed.emplace_back(p.deps[i], d);
  }
  return {std::move(full), std::move(typed)};
}

// Adds the typed edges into the new kernel node `n` of `g`; when CUDA refuses one, `n` is removed again.
void add_typed_edges(cudaGraph_t g, cudaGraphNode_t n, const typed_edges& typed, const char* call) {
  for (const auto& [from, d] : typed) {
    const cudaError_t rc = add_dependencies(g, &from, &n, &d, 1);
    if (rc != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cleared(cudaGraphDestroyNode(n));
      throw cuda_error(rc, "cudaGraphAddDependencies", std::source_location::current(),
                       fmt::format("{}: a typed edge (type {}, port {}) into the new kernel node", call,
                                   static_cast<int>(d.type), static_cast<int>(d.from_port)));
    }
  }
}

// A stream of each device, per thread, for capture_into's side captures (side_stream).
struct pooled {
  int device = 0;
  std::unique_ptr<stream> side;
};

// A stream of the pool on `device`, other than `s`, that is not capturing; null when there is none.
const stream* idle_side_stream(const std::vector<pooled>& pool, int device, const stream& s) {
  for (const pooled& p : pool) {
    if (p.device != device || p.side->get() == s.get()) continue;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cleared(cudaStreamIsCapturing(p.side->get(), &status)) == cudaSuccess && status == cudaStreamCaptureStatusNone)
      return p.side.get();
  }
  return nullptr;
}

// Labels the allocation and free nodes of `nodes` from `first` on with `call` (what allocated or freed them).
void label_memory_nodes(graph_state& state, const std::vector<cudaGraphNode_t>& nodes, std::size_t first,
                        const std::string& call) {
  for (std::size_t i = first; i < nodes.size(); ++i) {
    const node_kind kind = kind_of(nodes[i]);
    if (kind == node_kind::mem_alloc) state.labels[nodes[i]] = call + ": allocation";
    if (kind == node_kind::mem_free) state.labels[nodes[i]] = call + ": free";
  }
}

} // namespace

node capture_add_host(const stream& s, std::shared_ptr<std::function<void()>> callable) {
  constexpr const char* call = "conveyor::capture_host";
  const capture_point_info p = point_of(s, call);
  if (p.state && p.state->conditional_body)
    throw std::invalid_argument(fmt::format(
        "{}: the stream is capturing into a conditional node's body, and CUDA allows no host node there (kernel, "
        "memcpy, memset, empty, child-graph and conditional nodes only). Fix: add the host node before or after the "
        "conditional node, on the stream capturing the graph that holds it",
        call));
  std::function<void()>* fn = callable.get();
  keep_for(p, std::move(callable));
  const cudaGraphNode_t n = add_host(p.graph, p.deps, fn); // full edges: a host node takes no other type
  advance(s, n, call);
  return access::make_node(n, p.state.get());
}

node capture_add_kernel(const stream& s, const launch_config& cfg, const void* function, void** arguments) {
  constexpr const char* call = "conveyor::capture_kernel";
  const capture_point_info p = point_of(s, call);
  const auto [full, typed] = split_by_type(p, cfg.programmatic);
  const cudaGraphNode_t n = add_kernel(p.graph, full, cfg, function, arguments);
  add_typed_edges(p.graph, n, typed, call);
  advance(s, n, call);
  return access::make_kernel_node(n, p.state.get(), function, cfg);
}

void check_body_count(conditional_kind kind, std::size_t bodies) {
  const std::size_t wanted = kind == conditional_kind::if_then_else ? 2 : 1;
  if (kind == conditional_kind::switch_case ? bodies >= 1 : bodies == wanted) return;
  throw std::invalid_argument(
      fmt::format("conveyor::capture_conditional: {} body callable(s) given; an if_then and a while_loop take 1, an "
                  "if_then_else 2 (then, else), a switch_case one per case",
                  bodies));
}

const stream& side_stream(const stream& s) {
  thread_local std::vector<pooled> pool;
  const int device = s.device();
  if (const stream* idle = idle_side_stream(pool, device, s)) return *idle;
  // Creating a stream is not a capture's business: the thread's capture mode is relaxed for it, then restored.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  CONVEYOR_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  try {
    const device_guard on(device);
    pool.push_back({device, std::make_unique<stream>()});
  } catch (...) {
    (void)cudaThreadExchangeStreamCaptureMode(&mode);
    throw;
  }
  CONVEYOR_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  return *pool.back().side;
}

} // namespace conveyor::detail

namespace conveyor {

void capture_keep_alive(const stream& s, std::shared_ptr<void> item) {
  detail::keep_for(detail::point_of(s, "conveyor::capture_keep_alive"), std::move(item));
}

capture_scope::capture_scope(const stream& s, std::string call) : call_(std::move(call)) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t g = nullptr;
  if (detail::cleared(detail::capture_point(s.get(), &status, nullptr, &g, nullptr, nullptr, nullptr)) != cudaSuccess ||
      status != cudaStreamCaptureStatusActive || !detail::captured_state(g))
    return;
  std::size_t count = 0;
  if (detail::cleared(cudaGraphGetNodes(g, nullptr, &count)) != cudaSuccess) return;
  graph_ = g;
  before_ = count;
}

capture_scope::~capture_scope() {
  if (graph_ == nullptr) return;
  try {
    const auto state = detail::captured_state(graph_); // null once the capture ended
    if (!state) return;
    detail::label_memory_nodes(*state, detail::graph_nodes(graph_), before_, call_);
  } catch (...) { // a node that cannot be read: left unlabelled
    (void)cudaGetLastError();
  }
}

condition capture_condition(const stream& s, unsigned default_value, condition_reset reset) {
  constexpr const char* call = "conveyor::capture_condition";
  (void)detail::conditional_shape_of(conditional_kind::if_then, 1, call); // the toolkit and driver have conditionals
  const detail::capture_point_info p = detail::point_of(s, call);
  condition c;
  c.graph = p.graph;
  c.default_value = default_value;
  c.reset_each_launch = reset == condition_reset::each_launch;
  CONVEYOR_CHECK(cudaGraphConditionalHandleCreate(
      &c.handle, p.graph, default_value, c.reset_each_launch ? static_cast<unsigned>(cudaGraphCondAssignDefault) : 0U));
  return c;
}

conditional_node capture_conditional(const stream& s, conditional_kind kind, const condition& cond, unsigned cases) {
  constexpr const char* call = "conveyor::capture_conditional";
  const auto shape = detail::conditional_shape_of(kind, cases, call);
  const detail::capture_point_info p = detail::point_of(s, call);
  if (!p.state)
    throw std::logic_error(fmt::format(
        "{}: the capture on this stream was not begun by Conveyor (a cudaStreamBeginCapture of its own), so the "
        "conditional node's bodies would belong to no graph Conveyor knows. Begin it with conveyor::capture, "
        "capture_into or a capture_session",
        call));
  if (cond.graph != p.graph)
    throw std::invalid_argument(
        fmt::format("{}: the condition was made for another graph than the one being captured; make it with "
                    "conveyor::capture_condition on the capturing stream",
                    call));
  // A conditional node takes full dependencies only (CUDA allows other edge types only between kernels).
  auto [n, bodies] = detail::add_conditional(p.graph, p.deps, cond.handle, shape.type, shape.size);
  detail::advance(s, n, call);
  return detail::record_conditional(p.state, n, bodies, cond, shape);
}

} // namespace conveyor
