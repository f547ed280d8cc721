#include "conveyor/define/graph.hpp"

#include "conveyor/error.hpp"
#include "conveyor/runtime/device.hpp"
#include "cuda/check.hpp"
#include "cuda/compat.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"
#include "define/edges.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace conveyor {

namespace {

using detail::access;

// The refusal of graph::`call` on an empty (moved-from) graph, out of the builder calls' line.
[[noreturn, gnu::cold, gnu::noinline]] void throw_empty(const char* call) {
  detail::throw_empty_graph(fmt::format("conveyor::graph::{}", call).c_str());
}

// Refuses an empty (moved-from) graph, whose state `g` is null, in graph::`call`: one pointer test before a builder
// call's work.
inline void check_not_empty(const detail::graph_state* g, const char* call) {
  if (g == nullptr) [[unlikely]]
    throw_empty(call);
}

// Checks that the graph is not empty, that every dependency belongs to `g`, and that `kind` may be added to it
// (conditional bodies allow only some kinds), then returns the dependencies' CUDA handles (no copy, no allocation).
std::span<const cudaGraphNode_t> checked(const detail::graph_state* g, const node_list& deps, node_kind kind,
                                         const char* call) {
  check_not_empty(g, call);
  detail::check_not_lost(*g, call);
  if (!access::all_in(deps, g))
    throw std::invalid_argument(fmt::format("conveyor::graph::{}: a dependency belongs to another graph", call));
  if (deps.typed() && kind != node_kind::kernel)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph::{}: a programmatic or launch-completion dependency needs a kernel node at both ends, and "
        "{} nodes take full dependencies only",
        call, to_string(kind)));
  if (g->conditional_body && !detail::traits_of(kind).allowed_in_body)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph::{}: {} nodes are not allowed in a conditional node's body (CUDA allows kernel, memcpy, "
        "memset, empty, child-graph and conditional nodes there)",
        call, to_string(kind)));
  return deps.handles();
}

using typed_edges = std::vector<std::pair<cudaGraphNode_t, edge_type>>;

// A kernel node's dependencies split by edge type: the full ones (added with the node) and the typed ones (added after
// it, their ends checked here). A full edge from a kernel becomes programmatic for a launch_config::programmatic
// launch (`programmatic`).
std::pair<std::vector<cudaGraphNode_t>, typed_edges> split_by_type(const detail::graph_state* g, const node_list& deps,
                                                                   std::span<const cudaGraphNode_t> handles,
                                                                   bool programmatic) {
  std::vector<cudaGraphNode_t> full;
  typed_edges typed;
  for (std::size_t i = 0; i < deps.size(); ++i) {
    edge_type type = deps.type(i);
    if (type == edge_type::full && programmatic && detail::kind_of(handles[i]) == node_kind::kernel)
      type = edge_type::programmatic;
    if (type == edge_type::full) {
      full.push_back(handles[i]);
    } else {
      detail::check_edge_ends(g, handles[i], nullptr, type, "conveyor::graph::kernel");
      typed.emplace_back(handles[i], type);
    }
  }
  return {std::move(full), std::move(typed)};
}

// Adds the typed edges into the new kernel node `n`; when CUDA refuses one, `n` is removed again.
void add_typed_edges(const detail::graph_state* g, cudaGraphNode_t n, const typed_edges& typed) {
  try {
    for (const auto& [from, type] : typed) detail::add_edge(g, from, n, type, "conveyor::graph::kernel");
  } catch (...) {
    (void)cudaGraphDestroyNode(n);
    (void)cudaGetLastError();
    throw;
  }
}

// Refuses edge ends that are empty or belong to another graph than `g` (`call`: the member of graph asking).
void check_ends_owned(const graph& g, const node& from, const node& to, const char* call) {
  check_not_empty(access::state(g).get(), call);
  if (!g.owns(from) || !g.owns(to))
    throw std::invalid_argument(fmt::format("conveyor::graph::{}: a node is empty or belongs to another graph", call));
}

// The dependencies of `to`, each with its edge data.
std::pair<std::vector<cudaGraphNode_t>, std::vector<cudaGraphEdgeData>> incoming_edges(cudaGraphNode_t to) {
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_dependencies(to, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> deps(count);
  std::vector<cudaGraphEdgeData> data(count);
  if (count > 0) CONVEYOR_CHECK(detail::get_dependencies(to, deps.data(), data.data(), &count));
  deps.resize(count);
  data.resize(count);
  return {std::move(deps), std::move(data)};
}

[[noreturn]] void throw_unnamed_edge(const detail::graph_state* g, cudaGraphNode_t from, cudaGraphNode_t to,
                                     const cudaGraphEdgeData& data) {
  throw std::invalid_argument(fmt::format(
      "conveyor::graph::edge_type_between: the edge {} -> {} has ports {} -> {} and type {}, which Conveyor does "
      "not name",
      detail::node_name(g, from), detail::node_name(g, to), static_cast<int>(data.from_port),
      static_cast<int>(data.to_port), static_cast<int>(data.type)));
}

} // namespace

graph::graph() : state_(std::make_shared<detail::graph_state>()) {
  CONVEYOR_CHECK(cudaGraphCreate(&state_->handle, 0));
}

graph graph::adopt(cudaGraph_t handle, ownership own) {
  auto state = std::make_shared<detail::graph_state>();
  state->handle = handle;
  state->owned = own == ownership::owned;
  state->clusters.reset(); // made elsewhere: read at an update
  return graph(std::move(state));
}

cudaGraph_t graph::get() const noexcept { return state_ ? state_->handle : nullptr; }

void graph::note_raw_change() noexcept {
  if (state_) state_->clusters.reset(); // read again at the next whole-graph update
}

namespace {
// The graph object is going away while an executable graph still holds its definition (for node handles): the
// definition's resources are the graph's alone (executable graphs hold theirs through CUDA user objects and what
// they own node by node), so they go now. Conditional bodies share their parent's resources: left alone.
void let_go(std::shared_ptr<detail::graph_state>& state) noexcept {
  if (state && state.use_count() > 1 && !state->conditional_body) detail::release_resources(*state);
  state.reset();
}
} // namespace

graph& graph::operator=(graph&& other) noexcept {
  if (this != &other) {
    let_go(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

graph::~graph() { let_go(state_); }

node graph::wrap(cudaGraphNode_t handle) const noexcept { return access::make_node(handle, state_.get()); }

bool graph::owns(const node& n) const noexcept { return n && access::owner(n) == state_.get(); }

void graph::keep_alive(std::shared_ptr<void> item) {
  check_not_empty(state_.get(), "keep_alive");
  state_->keep->add(std::move(item));
}

node graph::add_kernel(const node_list& deps, const launch_config& cfg, const void* function, void** arguments) {
  auto handles = checked(state_.get(), deps, node_kind::kernel, "kernel");
  if (!deps.typed() && !cfg.programmatic) {
    cudaGraphNode_t n = detail::add_kernel(get(), handles, cfg, function, arguments);
    return access::make_kernel_node(n, state_.get(), function, cfg);
  }
  // Typed dependencies: the node is added after its full ones, then each typed edge (ends checked first, so that a
  // refused edge leaves nothing behind but what CUDA refuses itself, which removes the node again).
  const auto [full, typed] = split_by_type(state_.get(), deps, handles, cfg.programmatic);
  cudaGraphNode_t n = detail::add_kernel(get(), full, cfg, function, arguments);
  add_typed_edges(state_.get(), n, typed);
  return access::make_kernel_node(n, state_.get(), function, cfg);
}

void graph::set_edge_type(const node& from, const node& to, edge_type type) {
  check_ends_owned(*this, from, to, "set_edge_type");
  const auto current = edge_type_between(from, to);
  if (!current)
    throw std::invalid_argument(fmt::format("conveyor::graph::set_edge_type: there is no edge {} -> {}",
                                            detail::node_name(state_.get(), from.get()),
                                            detail::node_name(state_.get(), to.get())));
  if (*current == type) return;
  detail::check_edge_ends(state_.get(), from.get(), to.get(), type, "conveyor::graph::set_edge_type");
  const cudaGraphNode_t a = from.get();
  const cudaGraphNode_t b = to.get();
  const cudaGraphEdgeData old_data = to_edge_data(*current);
  CONVEYOR_CHECK(detail::remove_dependencies(get(), &a, &b, &old_data, 1));
  try {
    detail::add_edge(state_.get(), a, b, type, "conveyor::graph::set_edge_type");
  } catch (...) {
    (void)detail::cleared(detail::add_dependencies(get(), &a, &b, &old_data, 1)); // put the old edge back
    throw;
  }
}

std::optional<edge_type> graph::edge_type_between(const node& from, const node& to) const {
  check_ends_owned(*this, from, to, "edge_type_between");
  const auto [deps, data] = incoming_edges(to.get());
  for (std::size_t i = 0; i < deps.size(); ++i)
    if (deps[i] == from.get()) {
      if (auto t = from_edge_data(data[i])) return t;
      throw_unnamed_edge(state_.get(), from.get(), to.get(), data[i]);
    }
  return std::nullopt;
}

node graph::memcpy(const node_list& deps, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  auto handles = checked(state_.get(), deps, node_kind::memcpy, "memcpy");
  return wrap(detail::add_memcpy_1d(get(), handles, dst, src, bytes, kind));
}

node graph::memcpy_2d(const node_list& deps, void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                      std::size_t width_bytes, std::size_t height, cudaMemcpyKind kind) {
  if (dst_pitch < width_bytes || src_pitch < width_bytes)
    throw std::invalid_argument(
        fmt::format("conveyor::graph::memcpy_2d: pitch (dst {} B, src {} B) smaller than the row width {} B", dst_pitch,
                    src_pitch, width_bytes));
  auto handles = checked(state_.get(), deps, node_kind::memcpy, "memcpy_2d");
  return wrap(detail::add_memcpy_2d(get(), handles, dst, dst_pitch, src, src_pitch, width_bytes, height, kind));
}

void graph::throw_wide_memset(std::size_t bytes) {
  throw std::invalid_argument(fmt::format(
      "conveyor::graph::memset: CUDA's memset nodes set elements of 1, 2 or 4 bytes, and this {}-byte value's two "
      "4-byte halves differ, so no 4-byte pattern writes it; set it with a kernel, or copy it from a buffer filled "
      "once",
      bytes));
}

node graph::memset_2d(const node_list& deps, void* dst, std::size_t pitch, unsigned value, unsigned element_size,
                      std::size_t width, std::size_t height) {
  if (element_size != 1 && element_size != 2 && element_size != 4)
    throw std::invalid_argument(
        fmt::format("conveyor::graph::memset: element size {} B; CUDA memset nodes take 1, 2 or 4", element_size));
  if (height > 1 && pitch < width * element_size)
    throw std::invalid_argument(fmt::format("conveyor::graph::memset_2d: pitch {} B smaller than the row width {} B",
                                            pitch, width * element_size));
  auto handles = checked(state_.get(), deps, node_kind::memset, "memset");
  return wrap(detail::add_memset(get(), handles, dst, pitch, value, element_size, width, height));
}

namespace {
// Refuses an allocation on a device that is not visible (`count` are).
void check_allocation_device(int device, int count) {
  if (device >= count)
    throw std::invalid_argument(fmt::format("conveyor::graph::mem_alloc: device {} asked for, but {} CUDA device(s) "
                                            "are visible",
                                            device, count));
}

// Refuses a peer of an allocation on `device` that is not another visible device (`count` are) named once in `peers`,
// or that cannot access `device`'s memory.
void check_peer(const allocation_access& peer, const std::vector<allocation_access>& peers, int device, int count) {
  const auto named = [&](const allocation_access& a) { return a.device == peer.device; };
  if (peer.device < 0 || peer.device >= count || peer.device == device ||
      std::count_if(peers.begin(), peers.end(), named) > 1)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph::mem_alloc: peer device {} for an allocation on device {}: a peer must be another visible "
        "device ({} visible), named once",
        peer.device, device, count));
  int possible = 0;
  CONVEYOR_CHECK(cudaDeviceCanAccessPeer(&possible, peer.device, device));
  if (possible == 0)
    throw std::invalid_argument(fmt::format("conveyor::graph::mem_alloc: device {} cannot access device {}'s memory "
                                            "(no peer path: cudaDeviceCanAccessPeer); copy between them instead",
                                            peer.device, device));
}

cudaMemAccessDesc access_of(const allocation_access& peer) {
  cudaMemAccessDesc d{};
  d.location.type = cudaMemLocationTypeDevice;
  d.location.id = peer.device;
  d.flags = peer.read_only ? cudaMemAccessFlagsProtRead : cudaMemAccessFlagsProtReadWrite;
  return d;
}

// The access descriptors of the peers of an allocation on `device`, each checked (check_peer).
std::vector<cudaMemAccessDesc> peer_descriptors(const std::vector<allocation_access>& peers, int device, int count) {
  std::vector<cudaMemAccessDesc> access;
  for (const allocation_access& peer : peers) {
    check_peer(peer, peers, device, count);
    access.push_back(access_of(peer));
  }
  return access;
}
} // namespace

allocation graph::mem_alloc(const node_list& deps, std::size_t bytes, const allocation_options& options) {
  auto handles = checked(state_.get(), deps, node_kind::mem_alloc, "mem_alloc");
  int device = options.device;
  if (device < 0) CONVEYOR_CHECK(cudaGetDevice(&device));
  const int count = device_count();
  check_allocation_device(device, count);
  const std::vector<cudaMemAccessDesc> access = peer_descriptors(options.peers, device, count);
  auto [n, pointer] = detail::add_mem_alloc(get(), handles, bytes, device, access, options.usage);
  return {wrap(n), pointer};
}

allocation graph::mem_alloc(const node_list& deps, std::size_t bytes) {
  return mem_alloc(deps, bytes, allocation_options{});
}

node graph::mem_free(const node_list& deps, void* pointer) {
  auto handles = checked(state_.get(), deps, node_kind::mem_free, "mem_free");
  return wrap(detail::add_mem_free(get(), handles, pointer));
}

node graph::add_host(const node_list& deps, std::shared_ptr<std::function<void()>> callable) {
  auto handles = checked(state_.get(), deps, node_kind::host, "host");
  cudaGraphNode_t n = detail::add_host(get(), handles, callable.get());
  keep_alive(std::move(callable));
  return wrap(n);
}

namespace {
// The first memory allocation or free node of `g` ("node 2 (name)"), or empty.
std::string first_memory_node(const detail::graph_state& g) {
  try {
    const auto nodes = detail::graph_nodes(g.handle);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (const node_kind k = detail::kind_of(nodes[i]); k == node_kind::mem_alloc || k == node_kind::mem_free)
        return fmt::format("node {} ({})", i, detail::node_name(&g, nodes[i]));
  } catch (...) {}
  return {};
}

// Why CUDA refused `body` as a child graph, when Conveyor can tell, else empty.
std::string child_rule(const detail::graph_state& body, cudaError_t rc) {
  if (rc != cudaErrorNotSupported && rc != cudaErrorInvalidValue) return {};
  const std::string memory = first_memory_node(body);
  if (memory.empty()) return {};
  return fmt::format("conveyor::graph::child: CUDA does not allow a graph that holds memory allocation or free nodes "
                     "as a child graph ({} of the body is one). Fix: add the allocation and the free to this graph "
                     "around the child (graph::mem_alloc, graph::mem_free), or allocate outside the graph",
                     memory);
}

// What `parent` takes on with a node holding CUDA's copy of `body`. The copy's kernels count among the parent's
// cluster attributes (a whole-graph update keeps old clusters at any depth): known to be none when the body holds
// none, else read at an update. The copy holds a reference of each of the body's release tokens.
void take_copy_of(detail::graph_state& parent, detail::graph_state& body) {
  if (!body.clusters || !body.clusters->empty()) parent.clusters.reset();
  for (auto& token : body.held_tokens()) { // the copy holds a reference of each
    detail::hold(token);
    parent.copied_tokens.push_back(std::move(token));
  }
}

// Whether `keep` holds anything.
bool holds_resources(detail::resources& keep) {
  std::lock_guard lock(keep.mutex);
  return !keep.items.empty();
}

// Whether `g` names nodes of its own (labels, or child graphs' bodies), for descriptions.
bool names_nodes(const detail::graph_state& g) noexcept { return !g.labels.empty() || !g.child_bodies.empty(); }
} // namespace

node graph::child(const node_list& deps, const graph& body) {
  check_not_empty(state_.get(), "child");
  (void)detail::nonempty_state(body, "conveyor::graph::child", "body");
  if (body.has_conditional())
    throw std::invalid_argument("conveyor::graph::child: the body holds a conditional node, and CUDA does not allow a "
                                "graph with conditional nodes as a child graph; add the conditional to this graph");
  auto handles = checked(state_.get(), deps, node_kind::child_graph, "child");
  // The copy CUDA makes takes over the body's user-object reference: per-node updates of the child keep it alive.
  // A body without resources needs neither (nor does the parent: its copy of the body points into nothing).
  detail::attach_resources(*body.state_);
  cudaGraphNode_t n = nullptr;
  if (const cudaError_t rc = cudaGraphAddChildGraphNode(&n, get(), handles.data(), handles.size(), body.get());
      rc != cudaSuccess)
    detail::throw_cuda(rc, "cudaGraphAddChildGraphNode", child_rule(*body.state_, rc));
  take_copy_of(*state_, *body.state_); // before anything below can throw
  if (holds_resources(*body.state_->keep)) keep_alive(body.state_->keep);
  if (names_nodes(*body.state_)) state_->child_bodies[n] = body.state_;
  return wrap(n);
}

node graph::empty(const node_list& deps) {
  auto handles = checked(state_.get(), deps, node_kind::empty, "empty");
  return wrap(detail::add_empty(get(), handles));
}

node graph::event_record(const node_list& deps, const event& e) {
  auto handles = checked(state_.get(), deps, node_kind::event_record, "event_record");
  return wrap(detail::add_event_record(get(), handles, e.get()));
}

node graph::event_wait(const node_list& deps, const event& e) {
  auto handles = checked(state_.get(), deps, node_kind::event_wait, "event_wait");
  return wrap(detail::add_event_wait(get(), handles, e.get()));
}

namespace {
// The edge data of typed dependencies (kernel nodes only, checked by `checked`), their ends checked; empty when all
// are full.
std::vector<cudaGraphEdgeData> typed_edge_data(const detail::graph_state* g, const node_list& deps,
                                               std::span<const cudaGraphNode_t> handles) {
  std::vector<cudaGraphEdgeData> data;
  if (!deps.typed()) return data;
  data.reserve(deps.size());
  for (std::size_t i = 0; i < deps.size(); ++i) {
    detail::check_edge_ends(g, handles[i], nullptr, deps.type(i), "conveyor::graph::add_node");
    data.push_back(to_edge_data(deps.type(i)));
  }
  return data;
}
} // namespace

node graph::add_node(const node_list& deps, cudaGraphNodeParams& params) {
  auto handles = checked(state_.get(), deps, to_node_kind(params.type), "add_node");
  // Typed dependencies (kernel nodes only, checked above) go in as CUDA's edge data, so that the node and all its
  // edges are added at once or not at all.
  const std::vector<cudaGraphEdgeData> data = typed_edge_data(state_.get(), deps, handles);
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(
      detail::add_node(&n, get(), handles.data(), data.empty() ? nullptr : data.data(), handles.size(), &params));
  // A child graph or conditional node added this way holds kernels whose cluster attributes are not known here:
  // read at each whole-graph update (conditional bodies filled later through the handles CUDA returns included).
  if (params.type == cudaGraphNodeTypeGraph || params.type == cudaGraphNodeTypeConditional) state_->clusters.reset();
  return wrap(n);
}

namespace {
// Why CUDA refused to clone `g`, when Conveyor can tell, else empty.
std::string clone_rule(const detail::graph_state& g, cudaError_t rc) {
  if (rc != cudaErrorNotSupported) return {};
  const std::string memory = first_memory_node(g);
  if (memory.empty()) return {};
  return fmt::format("CUDA cannot clone a graph that holds memory allocation or free nodes ({}): build or capture "
                     "the graph again instead of cloning it",
                     memory);
}

// The clone `to`'s references, as `from` holds them: one of the user object holding the shared resources, when there
// is one, and one of each release token of the child-graph copies.
void hold_references(const detail::graph_state& from, detail::graph_state& to) {
  if (to.keep_object != nullptr) detail::hold(to.keep_token);
  to.copied_tokens = from.copied_tokens; // and to those of its child-graph copies
  for (const auto& token : to.copied_tokens) detail::hold(token);
}

// The labels of `from`'s nodes, on their copies in the clone `copy` (whose model is `to`).
void copy_labels(const detail::graph_state& from, detail::graph_state& to, cudaGraph_t copy) {
  for (const auto& [original, text] : from.labels) {
    cudaGraphNode_t cloned = nullptr;
    if (cudaGraphNodeFindInClone(&cloned, original, copy) == cudaSuccess) to.labels.emplace(cloned, text);
    else (void)cudaGetLastError();
  }
}
} // namespace

graph graph::clone() const {
  check_not_empty(state_.get(), "clone");
  if (has_conditional())
    throw std::invalid_argument("conveyor::graph::clone: the graph holds a conditional node, and CUDA cannot clone "
                                "graphs with conditional nodes; build the graph again instead");
  cudaGraph_t copy = nullptr;
  std::shared_ptr<detail::resources> keep;
  cudaUserObject_t keep_object = nullptr;
  std::shared_ptr<detail::release_token> keep_token;
  {
    // The clone copies the user-object references held now: read with them, under the same lock.
    std::lock_guard lock(state_->attach_mutex);
    const cudaError_t rc = cudaGraphClone(&copy, get());
    if (rc != cudaSuccess) detail::throw_cuda(rc, "cudaGraphClone", clone_rule(*state_, rc));
    keep = state_->keep;
    keep_object = state_->keep_object;
    keep_token = state_->keep_token;
  }
  graph out = adopt(copy);
  out.state_->keep = std::move(keep);
  out.state_->keep_token = std::move(keep_token);
  out.state_->keep_object = keep_object; // the clone holds its own reference to the same user object
  if (state_->clusters && state_->clusters->empty()) out.state_->clusters.emplace(); // none (positions aside)
  out.state_->captured = state_->captured;
  hold_references(*state_, *out.state_);
  copy_labels(*state_, *out.state_, copy);
  return out;
}

bool graph::has_conditional() const {
  check_not_empty(state_.get(), "has_conditional");
  if (!state_->conditionals.empty()) return true;
  const std::vector<node> all = nodes();
  return std::any_of(all.begin(), all.end(), [](const node& n) { return n.kind() == node_kind::conditional; });
}

std::size_t graph::node_count() const {
  check_not_empty(state_.get(), "node_count");
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetNodes(get(), nullptr, &count));
  return count;
}

std::size_t graph::edge_count() const {
  check_not_empty(state_.get(), "edge_count");
  std::size_t count = 0;
  CONVEYOR_CHECK(detail::get_edges(get(), nullptr, nullptr, &count));
  return count;
}

std::vector<node> graph::nodes() const {
  check_not_empty(state_.get(), "nodes");
  std::size_t count = node_count();
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetNodes(get(), handles.data(), &count));
  std::vector<node> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) out.push_back(wrap(handles[i]));
  return out;
}

std::vector<node> graph::root_nodes() const {
  check_not_empty(state_.get(), "root_nodes");
  std::size_t count = 0;
  CONVEYOR_CHECK(cudaGraphGetRootNodes(get(), nullptr, &count));
  std::vector<cudaGraphNode_t> handles(count);
  if (count > 0) CONVEYOR_CHECK(cudaGraphGetRootNodes(get(), handles.data(), &count));
  std::vector<node> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(wrap(handles[i]));
  return out;
}

std::vector<std::pair<node, node>> graph::edges() const {
  check_not_empty(state_.get(), "edges");
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
