// The executable graph's life: construction, moves, destruction behind queued launches, upload, launch and what it
// records (exec_facts), the allocation nodes of its source, pairing by position (transition::pairing_read).
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

using detail::access;

namespace detail {

namespace {

// The positions of `nodes`' allocation nodes, and the pointers their free nodes free.
std::pair<std::vector<std::size_t>, std::unordered_set<void*>>
allocs_and_frees(const std::vector<cudaGraphNode_t>& nodes) {
  std::pair<std::vector<std::size_t>, std::unordered_set<void*>> out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const node_kind kind = detail::kind_of(nodes[i]);
    if (kind == node_kind::mem_alloc) out.first.push_back(i);
    if (kind == node_kind::mem_free) out.second.insert(detail::read_mem_free(nodes[i]));
  }
  return out;
}

} // namespace

// The allocation nodes of the source graph (positions, what they reserve) and those no mem_free node frees.
void read_allocations(exec_state& out) {
  if (out.allocations) return;
  const graph_state& state = *out.source;
  const bool freed_at_launch = has_flag(out.flags, instantiate_flags::auto_free_on_launch);
  const auto nodes = detail::graph_nodes(state.handle);
  const auto [positions, freed] = allocs_and_frees(nodes);
  allocation_nodes found;
  for (std::size_t i : positions) {
    const auto a = detail::read_mem_alloc(nodes[i]);
    found.positions.push_back(i);
    found.params.push_back(a);
    if (!freed.contains(a.pointer) && !freed_at_launch)
      found.unfreed.push_back(fmt::format("node {} ({}) allocates {} B at {} and the graph never frees it", i,
                                          detail::node_name(&state, nodes[i]), a.bytes, a.pointer));
  }
  out.allocations = std::move(found);
}

void swap_held_tokens(exec_state& state, const graph_state& g) {
  auto next = g.held_tokens();
  for (const auto& t : next) hold(t);
  for (const auto& t : state.held) let_go(t);
  state.held = std::move(next);
}

bool paired_by_position(exec_state& state) {
  const by_position answer = goes_by_position(state.st.pair);
  if (answer != by_position::read_first) return answer == by_position::yes;
  apply(state, transition::pairing_read, {.same_structure = pairs_by_position(state, *state.current)});
  return goes_by_position(state.st.pair) == by_position::yes;
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
    for (auto& [node, item] : state.over.owned) defer_release(std::move(item), state.over.last_launch);
  } catch (...) {
    // Out of memory while queueing: what was not queued stays in `owned` until it is cleared below; the caller
    // holds no launch to protect it from then on, as without the queue.
  }
  state.over.owned.clear();
}

cudaError_t enable_if_zero_disabled(cudaGraphExec_t exec, exec_state& state, cudaGraphNode_t origin) noexcept {
  if (state.over.zero_disabled.erase(origin) == 0) return cudaSuccess;
  return cleared(cudaGraphNodeSetEnabled(exec, origin, 1U));
}

} // namespace detail

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
  return impl_->allocations->unfreed;
}

void graph_exec::upload(const stream& s, std::source_location where) const {
  require_graph("upload");
  const detail::api_scope scope("conveyor::graph_exec::upload", where);
  CONVEYOR_CHECK(cudaGraphUpload(handle_, s.get()));
  if (impl_) ++impl_->uploads;
}

exec_facts graph_exec::facts() const {
  exec_facts f;
  if (!impl_) return f;
  f.auto_free_on_launch = has_flag(impl_->flags, instantiate_flags::auto_free_on_launch);
  f.device_launch = has_flag(impl_->flags, instantiate_flags::device_launch);
  f.use_node_priority = has_flag(impl_->flags, instantiate_flags::use_node_priority);
  f.uploaded = impl_->uploads > 0;
  f.launched = impl_->first != detail::first_launch::not_yet;
  f.first_launch_before_upload =
      impl_->first == detail::first_launch::before_upload || impl_->first == detail::first_launch::at_instantiation;
  f.launched_on_legacy_stream = impl_->legacy_launch;
  f.unfreed_allocations = unfreed_allocations();
  f.allocations_read = impl_->allocations.has_value();
  if (impl_->launch_error != cudaSuccess) f.launch_error = cudaGetErrorName(impl_->launch_error);
  f.step_through = step_launches_;
  f.launched_at_instantiation = impl_->first == detail::first_launch::at_instantiation;
  return f;
}

namespace {

// Why a launch refused with cudaErrorInvalidValue was refused when the graph allocates memory it never frees (the
// allocation of its previous launch is still live), and the fix; empty otherwise.
std::string unfreed_context(const graph_exec& e, cudaError_t rc) {
  if (rc != cudaErrorInvalidValue) return {};
  const std::vector<std::string>& unfreed = e.unfreed_allocations();
  if (unfreed.empty()) return {};
  std::string context = "the graph allocates memory it never frees, and a graph cannot be launched again while the "
                        "memory of its previous launch is still allocated: ";
  for (std::size_t i = 0; i < unfreed.size(); ++i) context += (i == 0 ? "" : "; ") + unfreed[i];
  return context + ". Fix: free it after each launch (cudaFreeAsync on the stream, or a mem_free node in the graph), "
                   "or instantiate with instantiate_flags::auto_free_on_launch";
}

} // namespace

void graph_exec::after_launch(cudaError_t rc, const stream& s, const std::source_location& where) const {
  const detail::api_scope scope("conveyor::graph_exec::launch", where);
  require_graph("launch");
  if (rc != cudaSuccess) {
    impl_->launch_error = rc;
    detail::throw_cuda(rc, "cudaGraphLaunch", unfreed_context(*this, rc));
  }
  if (!launched_) {
    launched_ = true;
    impl_->first = detail::after_launch(impl_->first, impl_->uploads);
  }
  if (s.get() == nullptr || s.get() == cudaStreamLegacy) impl_->legacy_launch = true;
  if (tracks_launches_) impl_->over.last_launch = detail::fence::record(s.get());
  if (retired_) { // the launch is queued: the GPU runs it while the replaced definitions are destroyed
    retired_ = false;
    impl_->retired.clear();
  }
}

} // namespace conveyor
