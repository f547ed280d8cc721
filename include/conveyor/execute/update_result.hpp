#pragma once
//! \file update_result.hpp
//! What graph_exec::update reports: success, or why `cudaGraphExecUpdate` refused and which node was at fault.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor {

//! Why a whole-graph update failed (`cudaGraphExecUpdateResult`).
enum class update_status {
  success,                     //!< the executable graph now runs the new graph's parameters
  error,                       //!< invalid value (e.g. a graph on another device)
  topology_changed,            //!< nodes or edges were added or removed
  node_type_changed,           //!< a node changed kind
  function_changed,            //!< a kernel node's function changed
  parameters_changed,          //!< a parameter changed in a way that cannot be updated
  not_supported,               //!< something about the node is not updatable
  unsupported_function_change, //!< the function changed in an unsupported way
  attributes_changed,          //!< a node's attributes changed in an unsupported way
};

//! The status's name, e.g. "topology_changed".
[[nodiscard]] std::string_view to_string(update_status status) noexcept;
//! Converts CUDA's result code.
[[nodiscard]] update_status to_update_status(cudaGraphExecUpdateResult result) noexcept;

//! The outcome of graph_exec::update: the status, the offending node of the new graph (null when CUDA named none)
//! and its label or kernel name, and a readable reason.
struct update_result {
  update_status status = update_status::success; //!< success, or why CUDA refused
  cudaGraphNode_t node = nullptr;      //!< offending node in the new graph, or null
  cudaGraphNode_t from_node = nullptr; //!< the node of the executable graph it was paired with, or null
  std::string node_label;              //!< the node's label, else "kind 'kernel name'", else empty

  //! True on success.
  explicit operator bool() const noexcept { return status == update_status::success; }
  //! One readable line, e.g. "update refused: topology_changed at node 'relu1' (kernel bias_relu)".
  [[nodiscard]] std::string reason() const;
};

//! How graph_exec::update_incremental brought the executable graph up to date.
enum class update_method {
  none,           //!< the parameters were already equal: nothing was set
  per_node,       //!< only the changed nodes were set (cudaGraphExec*NodeSetParams)
  whole_graph,    //!< cudaGraphExecUpdate with the whole graph
  reinstantiated, //!< the topology changed (or updating was refused): instantiated again
  refused,        //!< updating was refused and re-instantiation was not allowed: nothing changed
};

//! The method's name, e.g. "per_node".
[[nodiscard]] std::string_view to_string(update_method method) noexcept;

//! The outcome of graph_exec::update_incremental.
struct incremental_update {
  update_method method = update_method::none; //!< what was done
  std::size_t nodes_set = 0;                   //!< nodes set one by one (per_node)
  std::size_t nodes_changed = 0;               //!< nodes whose parameters differed
  std::string reason;                          //!< why the cheaper methods were not used, or the changes made
  update_result update;                        //!< the whole-graph attempt, when one was made
};

//! The outcome of graph_exec::update_or_reinstantiate.
struct update_outcome {
  bool reinstantiated = false; //!< true when the update was refused and the graph instantiated again
  update_result update;        //!< the update attempt and, when refused, why
};

} // namespace conveyor
