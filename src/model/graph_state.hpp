#pragma once
// Internal (model layer): what Conveyor knows about a graph beyond CUDA's handle — node labels, the resources its
// nodes point into, the conditional nodes it built — and the attorney through which the library reaches the
// private parts of the public types.

#include "conveyor/define/graph.hpp"
#include "conveyor/define/node.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kinds.hpp"

#include <cuda_runtime_api.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace conveyor::detail {

//! The host-node function CUDA calls: runs the std::function<void()> passed as user data.
inline void CUDART_CB invoke_host_callable(void* user_data) { (*static_cast<std::function<void()>*>(user_data))(); }

//! Objects that nodes point into and that must outlive every graph, executable graph and queued launch using them:
//! host-node callables, child graphs' own resources, user buffers attached with graph::keep_alive. Thread-safe.
struct resources {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> items;
  //! `items` is not empty: read without the lock by attach_resources, which every update and instantiation calls.
  std::atomic<bool> any{false};
  void add(std::shared_ptr<void> item) {
    std::lock_guard lock(mutex);
    items.push_back(std::move(item));
    any.store(true, std::memory_order_release);
  }
};

//! A conditional node Conveyor built: its parameters (CUDA 13.0 has no call to read them back) and its bodies.
struct conditional_info {
  cudaGraphConditionalHandle handle = 0;
  cudaGraphConditionalNodeType type = cudaGraphCondTypeIf;
  unsigned size = 0;
  std::vector<std::shared_ptr<struct graph_state>> bodies;
  unsigned default_value = 0; //!< the condition's value at a launch's start (with reset)
  bool reset = true;          //!< cudaGraphCondAssignDefault: reset at every launch
};

//! A pageable host buffer a copy node of a graph reads or writes, found when a capture ended
//! (host_memory_check::pageable): a replay reads or writes it when the copy runs, not when the capturing code ran.
struct pageable_access {
  std::size_t node = 0;  //!< position in creation order
  std::string node_name; //!< label or kind
  const void* address = nullptr;
  std::size_t bytes = 0;
  bool source = true; //!< the copy reads it (else writes it)
};

//! The CUDA graph handle, node labels and the resources its nodes need. Destroys the handle when the last owner
//! (the graph, or an executable graph that still refers to its nodes) lets go.
struct graph_state {
  cudaGraph_t handle = nullptr;
  bool owned = true;
  //! The thread-block cluster attributes its kernel nodes hold, those inside its child graphs and conditional bodies
  //! included (kernel_attribute, by creation-order position), when known without reading the graph: none for a graph
  //! the builder made (it sets none, and only appends nodes; a child graph whose body holds none adds none), read by
  //! the node walk that ends a capture (capture_session::finish, finish_into). Unknown (empty optional) for an
  //! adopted graph, after a capture whose checks were off, for a graph holding a child graph whose body has clusters
  //! or a conditional node (whose bodies may change after it was added): whole-graph updates then read them from the
  //! graph. Attributes set afterwards through a raw node handle (cudaGraphKernelNodeSetAttribute) are not seen here.
  //! Kept near the handle, in the same cache line: every whole-graph update reads both.
  std::optional<std::vector<kernel_attribute>> clusters = std::vector<kernel_attribute>{};
  std::shared_ptr<resources> keep = std::make_shared<resources>();
  //! The CUDA user object, owned by `handle`, that holds `keep` (attach_resources), so that executable graphs made
  //! from the graph keep it until their queued launches finish; null until attached. Written under `attach_mutex`
  //! (after `keep_token`), read without it by attach_resources' first check.
  std::atomic<cudaUserObject_t> keep_object{nullptr};
  //! Its token (held for the reference `handle` owns), and the tokens of the user objects that the child-graph
  //! copies and clones inside `handle` hold a reference to (held while `handle` lives): wait_for_releases waits for
  //! the payloads no Conveyor object references any more.
  std::shared_ptr<release_token> keep_token;
  std::vector<std::shared_ptr<release_token>> copied_tokens;
  std::unordered_map<cudaGraphNode_t, std::string> labels;
  //! Every token the CUDA graph holds a reference of (keep_token, if attached, and copied_tokens): what an
  //! executable graph instantiated from it, or updated to it as a whole, holds.
  [[nodiscard]] std::vector<std::shared_ptr<release_token>> held_tokens() const;
  std::mutex attach_mutex;
  //! True for the body graph of a conditional node: the builder refuses node kinds CUDA does not allow there.
  bool conditional_body = false;
  //! The conditional nodes of this graph that Conveyor built (for diff and exports; CUDA owns the body handles).
  std::unordered_map<cudaGraphNode_t, conditional_info> conditionals;
  //! Child-graph nodes Conveyor added (graph::child): the body graph they copy, whose labels (by position: CUDA's
  //! copy keeps the creation order) name the copy's nodes in descriptions.
  std::unordered_map<cudaGraphNode_t, std::shared_ptr<graph_state>> child_bodies;
  //! Made (or added to) by stream capture, and whether a capture stream synchronised with the legacy default stream
  //! (created without cudaStreamNonBlocking): for descriptions and the tuning doctor.
  bool captured = false;
  bool captured_on_blocking_stream = false;
  //! A capture into this graph, or into one of its conditional bodies, was invalidated. CUDA 13.0 (driver 580, H200)
  //! then frees the graph's definition itself: destroying it again returns an error for a graph and crashes for the
  //! parent of a body. A lost graph is never destroyed or used again (lose() and check_not_lost()).
  bool lost = false;
  //! For a conditional body: the graph holding its conditional node (lost with the body).
  std::weak_ptr<graph_state> parent;
  //! Pageable host buffers of its copy nodes, when a capture was asked to find them (capture_options::host_memory).
  std::vector<pageable_access> pageable;

  graph_state() = default;
  graph_state(const graph_state&) = delete;
  graph_state& operator=(const graph_state&) = delete;
  ~graph_state();
};

//! Marks `state` lost (graph_state::lost), with the graphs that hold it as a conditional body. Never throws.
void lose(graph_state& state) noexcept;
//! \throws std::logic_error naming `call` when `state` is lost: a capture into the graph was invalidated and CUDA
//!         freed its definition.
void check_not_lost(const graph_state& state, const char* call);

void attach_resources_locked(graph_state& state); // attach_resources past its first check (graph_state.cpp)

//! Ties `state.keep` to `state.handle` with a CUDA user object (once, and only when it holds something: a graph
//! holding a user object costs every launch about 30 µs of completion tracking in CUDA): every executable graph
//! instantiated from the graph, or updated to it, then holds the resources until its last queued launch has
//! finished, and releases them without Conveyor waiting (cudaGraphRetainUserObject; CUDA Programming Guide, "CUDA
//! User Objects"). \throws cuda_error when the user object cannot be made.
inline void attach_resources(graph_state& state) {
  // Inline and without a lock in the common cases, attached already or holding nothing (every update and
  // instantiation calls it: the whole-graph update of a small graph costs a few hundred nanoseconds, and each call
  // out of line after a launch costs a few); the locked checks decide the rest.
  if (state.keep_object.load(std::memory_order_acquire) != nullptr || !state.keep->any.load(std::memory_order_acquire))
    return;
  attach_resources_locked(state);
}

//! Drops `state`'s resources: its own references (the user object the CUDA graph holds, and `keep`), for a definition
//! only executable graphs still refer to (for their node handles) once its graph object is gone. Executable graphs
//! and their queued launches keep what they use through their own user-object references. Never throws.
void release_resources(graph_state& state) noexcept;

//! The attorney: the one way the library reaches the private parts of graph, node and node_list.
struct access {
  static const std::shared_ptr<graph_state>& state(const graph& g) noexcept { return g.state_; }
  static graph make_graph(std::shared_ptr<graph_state> state) noexcept { return graph(std::move(state)); }
  static graph_state* owner(const node& n) noexcept { return n.owner_; }
  static node make_node(cudaGraphNode_t handle, graph_state* owner) noexcept { return {handle, owner}; }
  static node make_kernel_node(cudaGraphNode_t handle, graph_state* owner, const void* function,
                               const launch_config& cfg) noexcept {
    return {handle, owner, function, cfg};
  }
  //! True when every node of `deps` belongs to the graph whose state is `owner`.
  static bool all_in(const node_list& deps, const graph_state* owner) noexcept {
    for (std::size_t i = 0; i < deps.size(); ++i)
      if (deps[i].owner_ != owner) return false;
    return true;
  }
};

//! \throws std::invalid_argument "`call`: an empty (moved-from) graph", naming `argument` when given (the one of two
//!         graphs: "(before)"). Out of line and cold: the check before it (nonempty_state) is one pointer test, on
//!         paths timed in nanoseconds (graph_exec::update).
[[noreturn, gnu::cold, gnu::noinline]] void throw_empty_graph(const char* call, const char* argument = nullptr);

//! The state of `g`, checked first by every public call that uses it: a moved-from graph holds none.
//! \throws std::invalid_argument (throw_empty_graph) for an empty (moved-from) graph.
inline const std::shared_ptr<graph_state>& nonempty_state(const graph& g, const char* call,
                                                          const char* argument = nullptr) {
  const auto& state = access::state(g);
  if (state == nullptr) [[unlikely]]
    throw_empty_graph(call, argument);
  return state;
}

} // namespace conveyor::detail
