#pragma once
//! \file graph_state.hpp
//! Internal: the state shared by a conveyor::graph, its nodes and the executable graphs made from it.

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

//! Objects that nodes point into and that must outlive every graph and executable graph using them: host-node
//! callables, child graphs' own resources, user buffers attached with graph::keep_alive.
struct resources {
  std::mutex mutex;
  std::vector<std::shared_ptr<void>> items;
  void add(std::shared_ptr<void> item) {
    std::lock_guard lock(mutex);
    items.push_back(std::move(item));
  }
};

//! The CUDA graph handle, node labels and the resources its nodes need. Destroys the handle when the last owner
//! (the graph, or an executable graph that still refers to its nodes) lets go.
struct graph_state {
  cudaGraph_t handle = nullptr;
  bool owned = true;
  std::unordered_map<cudaGraphNode_t, std::string> labels;
  std::shared_ptr<resources> keep = std::make_shared<resources>();
  //! True for the body graph of a conditional node: the builder refuses node kinds CUDA does not allow there.
  bool conditional_body = false;
  //! The body graphs of this graph's conditional nodes, for exports (CUDA owns the body handles).
  std::unordered_map<cudaGraphNode_t, std::vector<std::shared_ptr<graph_state>>> bodies;

  graph_state() = default;
  graph_state(const graph_state&) = delete;
  graph_state& operator=(const graph_state&) = delete;
  ~graph_state() {
    if (owned && handle != nullptr) (void)cudaGraphDestroy(handle);
  }
};

} // namespace conveyor::detail
