#pragma once
// Internal (model layer): what Conveyor knows about a graph beyond CUDA's handle — node labels, the resources its
// nodes point into, the conditional nodes it built — and the attorney through which the library reaches the
// private parts of the public types.

#include "conveyor/define/graph.hpp"
#include "conveyor/define/node.hpp"

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <mutex>
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
  void add(std::shared_ptr<void> item) {
    std::lock_guard lock(mutex);
    items.push_back(std::move(item));
  }
};

//! A conditional node Conveyor built: its parameters (CUDA 13.0 has no call to read them back) and its bodies.
struct conditional_info {
  cudaGraphConditionalHandle handle = 0;
  cudaGraphConditionalNodeType type = cudaGraphCondTypeIf;
  unsigned size = 0;
  std::vector<std::shared_ptr<struct graph_state>> bodies;
};

//! The CUDA graph handle, node labels and the resources its nodes need. Destroys the handle when the last owner
//! (the graph, or an executable graph that still refers to its nodes) lets go.
struct graph_state {
  cudaGraph_t handle = nullptr;
  bool owned = true;
  std::unordered_map<cudaGraphNode_t, std::string> labels;
  std::shared_ptr<resources> keep = std::make_shared<resources>();
  //! The CUDA user object, owned by `handle`, that holds `keep` (attach_resources), so that executable graphs made
  //! from the graph keep it until their queued launches finish; null until attached.
  cudaUserObject_t keep_object = nullptr;
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

  graph_state() = default;
  graph_state(const graph_state&) = delete;
  graph_state& operator=(const graph_state&) = delete;
  ~graph_state();
};

//! Ties `state.keep` to `state.handle` with a CUDA user object (once, and only when it holds something: a graph
//! holding a user object costs every launch about 30 µs of completion tracking in CUDA): every executable graph
//! instantiated from the graph, or updated to it, then holds the resources until its last queued launch has
//! finished, and releases them without Conveyor waiting (cudaGraphRetainUserObject; CUDA Programming Guide, "CUDA
//! User Objects"). \throws cuda_error when the user object cannot be made.
void attach_resources(graph_state& state);

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

} // namespace conveyor::detail
