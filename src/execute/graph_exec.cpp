#include "conveyor/execute/graph_exec.hpp"

#include "execute/graph_exec_impl.hpp"

#include "cuda/driver.hpp"
#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <stdexcept>
#include <unordered_set>

namespace conveyor {

namespace {

using detail::access;

std::string_view to_string(cudaGraphInstantiateResult r) noexcept {
  switch (r) {
  case cudaGraphInstantiateSuccess: return "success";
  case cudaGraphInstantiateError: return "error (see the CUDA error)";
  case cudaGraphInstantiateInvalidStructure: return "invalid structure (a cycle, or a node kind not allowed here)";
  case cudaGraphInstantiateNodeOperationNotSupported: return "a node's operation is not supported";
  case cudaGraphInstantiateMultipleDevicesNotSupported: return "nodes on several devices are not supported";
  case cudaGraphInstantiateConditionalHandleUnused: return "a conditional handle is never set by any node";
  }
  return "unknown result";
}

// The first memory allocation node of `g` (top level), as "node 3 (mem_alloc)", or empty when it has none.
std::string first_allocation(const detail::graph_state& g) {
  try {
    const auto nodes = detail::graph_nodes(g.handle);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (detail::kind_of(nodes[i]) == node_kind::mem_alloc)
        return fmt::format("node {} ({})", i, detail::node_name(&g, nodes[i]));
  } catch (...) {}
  return {};
}

// The first conditional node of `g` ("node 3 (name)"), or empty.
std::string first_conditional(const detail::graph_state& g) {
  try {
    const auto nodes = detail::graph_nodes(g.handle);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (detail::kind_of(nodes[i]) == node_kind::conditional)
        return fmt::format("node {} ({})", i, detail::node_name(&g, nodes[i]));
  } catch (...) {}
  return {};
}

// Which CUDA rule an instantiation that failed broke, and the fix, when Conveyor can tell ("; ..."), else empty.
std::string instantiate_rule(const detail::graph_state& g, cudaError_t rc, cudaGraphInstantiateResult result,
                             cudaGraphNode_t offending) {
  if (result == cudaGraphInstantiateNodeOperationNotSupported && offending != nullptr) {
    node_kind kind = node_kind::other;
    try {
      kind = detail::kind_of(offending);
    } catch (...) {}
    if (kind == node_kind::mem_alloc || kind == node_kind::mem_free)
      return "; CUDA does not allow memory allocation or free nodes inside a conditional node's body (nor in a "
             "graph for device launch): a library call captured into the body allocated its workspace there "
             "(cuBLAS, cuBLASLt, cuSPARSE, CUB) or the body called cudaMallocAsync. Fix: give the library a "
             "preallocated workspace before capturing the body (cublasSetWorkspace; cusparse*_bufferSize, then a "
             "buffer allocated ahead), and allocate outside the conditional node";
  }
  if (rc == cudaErrorNotSupported || rc == cudaErrorInvalidValue)
    if (const std::string cond = first_conditional(g); !cond.empty())
      return fmt::format("; CUDA allows only one executable graph at a time of a graph that holds conditional nodes "
                         "({} is one: its condition handle belongs to one executable graph), and one exists. Fix: "
                         "destroy (or reset) the other executable graph first, update it in place "
                         "(graph_exec::update) instead of instantiating again, or build a second graph",
                         cond);
  if (rc == cudaErrorNotSupported)
    if (const std::string alloc = first_allocation(g); !alloc.empty())
      return fmt::format("; CUDA allows only one executable graph at a time of a graph that holds memory allocation "
                         "nodes ({} allocates), and one exists. Fix: destroy (or reset) the other executable graph "
                         "first, update it in place (graph_exec::update) instead of instantiating again, or build "
                         "or capture a second graph",
                         alloc);
  return {};
}

} // namespace

namespace detail {

// The allocation nodes of the source graph (positions, what they reserve) and those no mem_free node frees.
void read_allocations(exec_state& out) {
  if (out.allocations_read) return;
  const graph_state& state = *out.source;
  const instantiate_flags flags = out.flags;
  const auto nodes = detail::graph_nodes(state.handle);
  std::vector<std::size_t> positions;
  std::unordered_set<void*> freed;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const node_kind kind = detail::kind_of(nodes[i]);
    if (kind == node_kind::mem_alloc) positions.push_back(i);
    if (kind == node_kind::mem_free) freed.insert(detail::read_mem_free(nodes[i]));
  }
  for (std::size_t i : positions) {
    const auto a = detail::read_mem_alloc(nodes[i]);
    out.alloc_positions.push_back(i);
    out.allocs.push_back(a);
    if (!freed.contains(a.pointer) && !has_flag(flags, instantiate_flags::auto_free_on_launch))
      out.unfreed.push_back(fmt::format("node {} ({}) allocates {} B at {} and the graph never frees it", i,
                                        detail::node_name(&state, nodes[i]), a.bytes, a.pointer));
  }
  out.allocations_read = true;
}

void swap_held_tokens(exec_state& state, const graph_state& g) {
  auto next = g.held_tokens();
  for (const auto& t : next) hold(t);
  for (const auto& t : state.held) let_go(t);
  state.held = std::move(next);
}

bool paired_by_position(exec_state& state) {
  if (state.by_position || state.by_position_checked) return state.by_position;
  state.by_position = pairs_by_position(state, *state.current);
  state.current_structural = state.by_position;
  state.by_position_checked = true;
  return state.by_position;
}

bool pairs_by_position(exec_state& state, const graph_state& g) {
  if (known_structure(state, g)) return true;
  if (!state.source_structure) state.source_structure = structure_of(state.source->handle, state.source.get());
  return structure_of(g.handle, &g) == *state.source_structure;
}

std::string_view not_paired_by_position() noexcept {
  return "the graph last applied as a whole has its nodes in another creation order than the graph this executable "
         "graph was instantiated from (CUDA paired them through their dependencies), so its nodes cannot be matched "
         "by position";
}

void release_owned(exec_state& state) noexcept {
  try {
    for (auto& [node, item] : state.owned) defer_release(std::move(item), state.last_launch);
  } catch (...) {
    // Out of memory while queueing: what was not queued stays in `owned` until it is cleared below; the caller
    // holds no launch to protect it from then on, as without the queue.
  }
  state.owned.clear();
}

cudaError_t enable_if_zero_disabled(cudaGraphExec_t exec, exec_state& state, cudaGraphNode_t origin) noexcept {
  if (state.zero_disabled.erase(origin) == 0) return cudaSuccess;
  return cleared(cudaGraphNodeSetEnabled(exec, origin, 1U));
}

namespace {
// Node `position` of the graph `e` was instantiated from, or null when there is none.
cudaGraphNode_t origin_at(exec_state& state, std::size_t position) {
  if (state.origin_nodes.empty()) state.origin_nodes = graph_nodes(state.source->handle);
  return position < state.origin_nodes.size() ? state.origin_nodes[position] : nullptr;
}

void mark_patched(exec_state& state, std::size_t position) {
  if (state.patched_flag.size() <= position) state.patched_flag.resize(state.origin_nodes.size(), 0);
  if (state.patched_flag[position] != 0) return;
  state.patched_flag[position] = 1;
  state.patched.push_back(position);
}
} // namespace

namespace {
// Sets node `position` of `e` through `set(exec, origin node)` and marks it patched when CUDA accepts.
template <class Setter>
cudaError_t patch_node(graph_exec& e, std::size_t position, Setter set) {
  auto& state = exec_access::state(e);
  if (!state.by_position && !paired_by_position(state)) return cudaErrorInvalidValue; // position means nothing
  const cudaGraphNode_t origin = origin_at(state, position);
  if (origin == nullptr) return cudaErrorInvalidValue;
  const cudaError_t rc = set(exec_access::handle(e), origin);
  if (rc == cudaSuccess) mark_patched(state, position);
  return rc;
}
} // namespace

cudaError_t patch_fields(graph_exec& e, std::size_t position, node_fields& fields) {
  const auto set = traits_of(fields.kind).set_fields;
  if (set == nullptr || !fields.patchable) return cudaErrorInvalidValue;
  return patch_node(e, position,
                    [&](cudaGraphExec_t exec, cudaGraphNode_t origin) { return set(exec, origin, fields); });
}

const std::shared_ptr<graph_state>& current_graph(const graph_exec& e) noexcept {
  return exec_access::state(e).current;
}

} // namespace detail

std::string to_string(instantiate_flags flags) {
  std::string out;
  auto add = [&](instantiate_flags f, const char* name) {
    if (has_flag(flags, f)) out += out.empty() ? name : fmt::format("|{}", name);
  };
  add(instantiate_flags::auto_free_on_launch, "auto_free_on_launch");
  add(instantiate_flags::upload, "upload");
  add(instantiate_flags::device_launch, "device_launch");
  add(instantiate_flags::use_node_priority, "use_node_priority");
  return out.empty() ? "none" : out;
}

std::size_t reclaim_resources(std::chrono::milliseconds timeout) noexcept {
  const std::size_t not_handed_over = detail::wait_for_releases(timeout);
  return detail::collect() + not_handed_over;
}

graph_exec instantiate(const graph& g, instantiate_flags flags, const stream* upload_stream,
                       std::source_location where) {
  const detail::api_scope scope("conveyor::instantiate", where);
  if (has_flag(flags, instantiate_flags::upload) && upload_stream == nullptr)
    throw std::invalid_argument("conveyor::instantiate: instantiate_flags::upload needs an upload stream");
  (void)detail::collect();
  const auto& state = access::state(g);
  if (!state || state->handle == nullptr)
    throw std::invalid_argument("conveyor::instantiate: an empty (moved-from) graph");
  detail::check_not_lost(*state, "conveyor::instantiate");
  detail::attach_resources(*state); // the executable graph holds them until its last launch has finished
  auto made = std::make_unique<detail::exec_state>();
  made->source = state;
  made->current = state;
  // What is instantiated, when known without a read (a later raw change to the source, or to a conditional body it
  // holds, is not what this executable graph runs); else read at the first whole-graph update.
  if (state->clusters) made->attributes = *state->clusters;
  made->flags = flags;
  made->uploaded = has_flag(flags, instantiate_flags::upload);
  cudaGraphInstantiateParams params{};
  params.flags = static_cast<unsigned long long>(flags);
  params.uploadStream = upload_stream != nullptr ? upload_stream->get() : nullptr;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiateWithParams(&exec, g.get(), &params);
  if (rc != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
    (void)cudaGetLastError();
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    throw cuda_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue,
                     fmt::format("cudaGraphInstantiateWithParams(flags={})", to_string(flags)),
                     std::source_location::current(),
                     fmt::format("instantiate result: {}; offending node: {}{}", to_string(params.result_out),
                                 detail::node_name(state.get(), params.errNode_out),
                                 instantiate_rule(*state, rc, params.result_out, params.errNode_out)));
  }
  detail::hold_tokens_of(*made, *state);
  return graph_exec(exec, std::move(made));
}

graph_exec::graph_exec() noexcept = default;

graph_exec::graph_exec(cudaGraphExec_t handle, std::unique_ptr<detail::exec_state> state) noexcept :
    handle_(handle),
    step_launches_(detail::step_through_requested()),
    impl_(std::move(state)) {}

graph_exec::graph_exec(graph_exec&& other) noexcept :
    handle_(std::exchange(other.handle_, nullptr)),
    tracks_launches_(std::exchange(other.tracks_launches_, false)),
    launched_(std::exchange(other.launched_, false)),
    step_launches_(std::exchange(other.step_launches_, false)),
    retired_(std::exchange(other.retired_, false)),
    impl_(std::move(other.impl_)) {}

namespace detail {
bool step_through_requested() noexcept {
  static const bool requested = [] {
    const char* v = std::getenv("CONVEYOR_STEP_THROUGH");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }();
  return requested;
}
bool step_through_env() noexcept { return step_through_requested(); }
} // namespace detail

namespace {
// Destroys `handle` without waiting (CUDA finishes its queued launches and then releases the user-object references
// they hold) and hands what it owns itself to the release queue, behind the fence of its last launch.
void retire(cudaGraphExec_t handle, detail::exec_state* state) noexcept {
  if (handle != nullptr) (void)cudaGraphExecDestroy(handle);
  if (state != nullptr) {
    detail::release_owned(*state);
    for (const auto& t : state->held) detail::let_go(t);
    state->held.clear();
  }
  (void)cudaGetLastError();
}
} // namespace

graph_exec& graph_exec::operator=(graph_exec&& other) noexcept {
  if (this != &other) {
    retire(handle_, impl_.get());
    handle_ = std::exchange(other.handle_, nullptr);
    tracks_launches_ = std::exchange(other.tracks_launches_, false);
    launched_ = std::exchange(other.launched_, false);
    step_launches_ = std::exchange(other.step_launches_, false);
    retired_ = std::exchange(other.retired_, false);
    impl_ = std::move(other.impl_);
    (void)detail::collect();
  }
  return *this;
}

void graph_exec::require_graph(const char* call) const {
  if (!impl_)
    throw std::logic_error(fmt::format("conveyor::graph_exec::{}: this executable graph is empty (default-constructed, "
                                       "moved from or reset): assign the result of instantiate() to it first",
                                       call));
}

void graph_exec::reset() noexcept {
  retire(handle_, impl_.get());
  handle_ = nullptr;
  tracks_launches_ = false;
  launched_ = false;
  retired_ = false;
  impl_.reset();
  (void)detail::collect();
}

graph_exec::~graph_exec() {
  retire(handle_, impl_.get());
  impl_.reset();
  (void)detail::collect();
}

instantiate_flags graph_exec::flags() const noexcept { return impl_ ? impl_->flags : instantiate_flags::none; }

const std::vector<std::string>& graph_exec::unfreed_allocations() const noexcept {
  static const std::vector<std::string> none;
  if (!impl_) return none;
  try {
    detail::read_allocations(*impl_);
  } catch (...) {
    return none; // the graph could not be read: nothing to report
  }
  return impl_->unfreed;
}

void graph_exec::upload(const stream& s, std::source_location where) const {
  require_graph("upload");
  const detail::api_scope scope("conveyor::graph_exec::upload", where);
  CONVEYOR_CHECK(cudaGraphUpload(handle_, s.get()));
  if (impl_) impl_->uploaded = true;
}

exec_facts graph_exec::facts() const {
  exec_facts f;
  if (!impl_) return f;
  f.auto_free_on_launch = has_flag(impl_->flags, instantiate_flags::auto_free_on_launch);
  f.device_launch = has_flag(impl_->flags, instantiate_flags::device_launch);
  f.use_node_priority = has_flag(impl_->flags, instantiate_flags::use_node_priority);
  f.uploaded = impl_->uploaded;
  f.launched = impl_->launched;
  f.first_launch_before_upload = impl_->first_launch_before_upload;
  f.launched_on_legacy_stream = impl_->legacy_launch;
  f.unfreed_allocations = unfreed_allocations();
  f.allocations_read = impl_->allocations_read;
  if (impl_->launch_error != cudaSuccess) f.launch_error = cudaGetErrorName(impl_->launch_error);
  f.step_through = step_launches_;
  f.launched_at_instantiation = impl_->launched_at_instantiation;
  return f;
}

void graph_exec::after_launch(cudaError_t rc, const stream& s, const std::source_location& where) const {
  const detail::api_scope scope("conveyor::graph_exec::launch", where);
  require_graph("launch");
  if (rc != cudaSuccess) {
    impl_->launch_error = rc;
    std::string context;
    if (rc == cudaErrorInvalidValue && !unfreed_allocations().empty()) {
      context = "the graph allocates memory it never frees, and a graph cannot be launched again while the memory "
                "of its previous launch is still allocated: ";
      for (std::size_t i = 0; i < impl_->unfreed.size(); ++i) context += (i == 0 ? "" : "; ") + impl_->unfreed[i];
      context += ". Fix: free it after each launch (cudaFreeAsync on the stream, or a mem_free node in the graph), "
                 "or instantiate with instantiate_flags::auto_free_on_launch";
    }
    detail::throw_cuda(rc, "cudaGraphLaunch", context);
  }
  if (!launched_) {
    launched_ = true;
    impl_->launched = true;
    impl_->first_launch_before_upload = !impl_->uploaded;
  }
  if (s.get() == nullptr || s.get() == cudaStreamLegacy) impl_->legacy_launch = true;
  if (tracks_launches_) impl_->last_launch = detail::fence::record(s.get());
  if (retired_) { // the launch is queued: the GPU runs it while the replaced definitions are destroyed
    retired_ = false;
    impl_->retired.clear();
  }
}

// ---- per-node setters ----------------------------------------------------------------------------------------

namespace {

// Why a per-node change that needs positions cannot be made (paired_by_position is false).
[[noreturn]] void refuse_unpaired(const node& n, bool of_current) {
  throw std::logic_error(fmt::format(
      "conveyor::graph_exec: {}{}. Nothing was changed. {}",
      of_current ? fmt::format("node {} belongs to the graph last applied by a whole-graph update, and ",
                               detail::node_name(access::owner(n), n.get()))
                 : fmt::format("node {} belongs to the graph this executable graph was instantiated from, which a "
                               "whole-graph update replaced (or step-through launches follow per-node changes by "
                               "position), and ",
                               detail::node_name(access::owner(n), n.get())),
      detail::not_paired_by_position(),
      "Update to a graph built or captured in the same order as the source first (or instantiate the new graph)"));
}

// The node of the instantiation graph that `n` (of it, or of the graph last applied by an update) stands for.
// `stepping`: step-through launches follow per-node changes on a copy of `current` by position.
// \throws std::logic_error when that needs positions and the graph last applied is not paired by them.
cudaGraphNode_t origin_of(detail::exec_state& state, const node& n, bool stepping) {
  const auto* owner = access::owner(n);
  const bool of_current = owner != state.source.get() && owner == state.current.get();
  // A node of the source after a whole-graph update that CUDA paired through dependencies: the executable graph's
  // node it names may now run another node's work of the graph applied, so setting it would reach that work.
  const bool of_replaced_source = owner == state.source.get() && state.current != state.source;
  if ((of_current || stepping || of_replaced_source) && !detail::paired_by_position(state))
    refuse_unpaired(n, of_current);
  if (!of_current) return n.get();
  if (state.to_origin.empty()) {
    if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
    const auto nodes = detail::graph_nodes(state.current->handle);
    state.node_level = true;
    for (std::size_t i = 0; i < nodes.size() && i < state.origin_nodes.size(); ++i)
      state.to_origin.emplace(nodes[i], state.origin_nodes[i]);
  }
  auto it = state.to_origin.find(n.get());
  return it != state.to_origin.end() ? it->second : n.get();
}

// The node of the graph applied last (`current`) that node `origin` of the executable graph runs the parameters of:
// the same position (origin_of has checked that the nodes pair by position).
cudaGraphNode_t applied_node(detail::exec_state& state, cudaGraphNode_t origin) {
  if (state.current == state.source) return origin;
  if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
  const auto at = std::find(state.origin_nodes.begin(), state.origin_nodes.end(), origin);
  const auto nodes = detail::graph_nodes(state.current->handle);
  const auto position = static_cast<std::size_t>(at - state.origin_nodes.begin());
  if (position >= nodes.size()) throw std::logic_error("conveyor::graph_exec: a node outside the executable graph");
  return nodes[position];
}

// The one error check of the setters: names the node.
void check_node(cudaError_t rc, std::string_view call, const node& n,
                std::source_location where = std::source_location::current()) {
  detail::check_with(
      rc, call, [&] { return fmt::format("node {}", detail::node_name(access::owner(n), n.get())); }, where);
}

} // namespace

namespace {

// The step-through shadow's node standing for `origin` (a node of the graph the executable graph was instantiated
// from): the shadow, a clone of the graph the executable graph holds, made at the first per-node change.
cudaGraphNode_t shadow_node(detail::exec_state& state, cudaGraphNode_t origin) {
  if (!state.shadow) {
    auto shadow = std::make_shared<detail::graph_state>();
    detail::check_with(cudaGraphClone(&shadow->handle, state.current->handle), "cudaGraphClone", [] {
      return std::string("a step-through copy of an executable graph changed by per-node setters");
    });
    shadow->keep = state.current->keep;
    shadow->clusters.reset(); // a clone: its cluster attributes are not known by position (read if ever needed)
    for (const auto& [node, label] : state.current->labels) {
      cudaGraphNode_t copy = nullptr;
      if (cudaGraphNodeFindInClone(&copy, node, shadow->handle) == cudaSuccess) shadow->labels.emplace(copy, label);
    }
    state.shadow = std::move(shadow);
  }
  cudaGraphNode_t copy = nullptr;
  CONVEYOR_CHECK(cudaGraphNodeFindInClone(&copy, applied_node(state, origin), state.shadow->handle));
  return copy;
}

} // namespace

void graph_exec::shadow_change(cudaGraphNode_t origin, const std::function<cudaError_t(cudaGraphNode_t)>& set,
                               bool enabled) {
  if (!step_launches_) return;
  const cudaGraphNode_t copy = shadow_node(*impl_, origin);
  if (!enabled) {
    impl_->node_level = true;
    impl_->shadow_disabled.insert(copy);
    return;
  }
  impl_->shadow_disabled.erase(copy);
  if (set) CONVEYOR_CHECK(set(copy));
}

void graph_exec::set_kernel_raw(const node& n, const launch_config& cfg, const void* function, void** arguments) {
  require_graph("set_kernel");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(detail::set_exec_kernel(handle_, origin, cfg, function, arguments), "cudaGraphExecKernelNodeSetParams", n);
  impl_->current_exact = false;
  impl_->node_level = true;
  impl_->configs.insert_or_assign(origin, detail::kernel_setting{function, cfg});
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_kernel(c, cfg, function, arguments); });
}

void graph_exec::set_kernel_args_raw(const node& n, const void* function, void** arguments) {
  require_graph("set_kernel_args");
  auto& state = *impl_;
  const cudaGraphNode_t origin = origin_of(state, n, step_launches_);
  // set_kernel's, else the handle's own (graph::kernel made it), else the node's, read once (from the graph it
  // belongs to: the current one unless the caller kept a node of an older graph).
  // The launch shape is that of the node whose parameters the executable graph runs now: `n` itself when it
  // belongs to the graph applied last, else that graph's node at the same position (an update may have changed the
  // grid or the shared memory since `n` was made).
  detail::kernel_setting now;
  const bool of_applied = access::owner(n) == state.current.get();
  if (auto it = state.configs.find(origin); !state.configs.empty() && it != state.configs.end()) now = it->second;
  else if (of_applied && n.kernel_function() != nullptr) now = {n.kernel_function(), n.kernel_config()};
  else if (auto r = state.read.find(origin); r != state.read.end()) now = r->second;
  else {
    const cudaGraphNode_t runs = of_applied ? n.get() : applied_node(state, origin);
    state.node_level = true;
    now = state.read.emplace(origin, detail::read_kernel_setting(runs)).first->second;
  }
  if (now.function != nullptr && now.function != function) // the runtime may not report a fresh node's function
    throw std::invalid_argument(fmt::format("conveyor::graph_exec::set_kernel_args: node {} runs another kernel; "
                                            "use set_kernel to change the function",
                                            detail::node_name(access::owner(n), n.get())));
  check_node(detail::set_exec_kernel(handle_, origin, now.config, function, arguments),
             "cudaGraphExecKernelNodeSetParams", n);
  state.current_exact = false;
  shadow_change(origin,
                [&](cudaGraphNode_t c) { return detail::set_graph_kernel(c, now.config, function, arguments); });
}

void graph_exec::set_memcpy(const node& n, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  require_graph("set_memcpy");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  impl_->current_exact = false;
  if (bytes == 0) { // CUDA has no zero-size copy: the copy does nothing
    check_node(cudaGraphNodeSetEnabled(handle_, origin, 0U), "cudaGraphNodeSetEnabled(memcpy of 0 bytes)", n);
    impl_->node_level = true;
    impl_->zero_disabled.insert(origin);
    shadow_change(origin, {}, false);
    return;
  }
  check_node(detail::set_exec_memcpy_1d(handle_, origin, dst, src, bytes, kind), "cudaGraphExecMemcpyNodeSetParams1D",
             n);
  check_node(detail::enable_if_zero_disabled(handle_, *impl_, origin), "cudaGraphNodeSetEnabled", n);
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_memcpy_1d(c, dst, src, bytes, kind); });
}

void graph_exec::set_memset_raw(const node& n, void* dst, unsigned value, unsigned element_size, std::size_t count) {
  require_graph("set_memset");
  if (element_size != 1 && element_size != 2 && element_size != 4)
    throw std::invalid_argument(fmt::format(
        "conveyor::graph_exec::set_memset: element size {} B; CUDA memset nodes take 1, 2 or 4", element_size));
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  impl_->current_exact = false;
  if (count == 0) {
    check_node(cudaGraphNodeSetEnabled(handle_, origin, 0U), "cudaGraphNodeSetEnabled(memset of 0 elements)", n);
    impl_->node_level = true;
    impl_->zero_disabled.insert(origin);
    shadow_change(origin, {}, false);
    return;
  }
  check_node(detail::set_exec_memset(handle_, origin, dst, value, element_size, count),
             "cudaGraphExecMemsetNodeSetParams", n);
  check_node(detail::enable_if_zero_disabled(handle_, *impl_, origin), "cudaGraphNodeSetEnabled", n);
  shadow_change(origin,
                [&](cudaGraphNode_t c) { return detail::set_graph_memset(c, dst, value, element_size, count); });
}

void graph_exec::set_host_raw(const node& n, std::shared_ptr<std::function<void()>> callable) {
  require_graph("set_host");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(detail::set_exec_host(handle_, origin, callable.get()), "cudaGraphExecHostNodeSetParams", n);
  impl_->current_exact = false;
  shadow_change(origin, [&](cudaGraphNode_t c) { return detail::set_graph_host(c, callable.get()); });
  own_for_node(origin, std::move(callable));
}

void graph_exec::set_enabled(const node& n, bool enabled) {
  require_graph("set_enabled");
  const cudaGraphNode_t origin = origin_of(*impl_, n, step_launches_);
  check_node(cudaGraphNodeSetEnabled(handle_, origin, enabled ? 1U : 0U), "cudaGraphNodeSetEnabled", n);
  impl_->zero_disabled.erase(origin); // the user's choice now
  shadow_change(origin, {}, enabled);
}

} // namespace conveyor
