#pragma once
//! \file update_result.hpp
//! What the three update calls of graph_exec (update, update_or_reinstantiate, update_incremental)
//! report: one type — how the executable graph was brought up to date, or why it was refused and
//! which node was at fault.

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace conveyor {

//! CUDA's verdict on a whole-graph update (`cudaGraphExecUpdateResult`).
enum class update_status {
  success,                     //!< the update was applied (or none was tried)
  error,                       //!< invalid value (e.g. a graph on another device)
  topology_changed,            //!< nodes or edges were added or removed
  node_type_changed,           //!< a node changed kind
  function_changed,            //!< a kernel node's function changed
  parameters_changed,          //!< a parameter changed in a way that cannot be updated
  not_supported,               //!< something about the node is not updatable
  unsupported_function_change, //!< the function changed in an unsupported way
  attributes_changed,          //!< a node's attributes changed in an unsupported way
};

//! The status's name, e.g. "topology_changed". Never throws.
[[nodiscard]] std::string_view to_string(update_status status) noexcept;
//! Converts CUDA's result code. Never throws.
[[nodiscard]] update_status to_update_status(cudaGraphExecUpdateResult result) noexcept;

//! How an executable graph was brought to a new graph's parameters.
enum class update_method {
  none,        //!< the parameters were already equal: nothing was set
  per_node,    //!< only the changed nodes were set (cudaGraphExec*NodeSetParams)
  whole_graph, //!< cudaGraphExecUpdate with the whole graph
  //! the topology changed (or updating was refused): instantiated again and replaced
  reinstantiated,
  refused, //!< updating was refused and re-instantiation was not allowed: nothing changed
};

//! The method's name, e.g. "per_node". Never throws.
[[nodiscard]] std::string_view to_string(update_method method) noexcept;

//! The outcome of graph_exec::update, update_or_reinstantiate and update_incremental. A plain
//! value.
struct update_result {
  update_method method = update_method::none; //!< what was done
  //! CUDA's verdict on the whole-graph update, when one was tried
  update_status status = update_status::success;
  //! the offending node of the new graph when refused, or null
  cudaGraphNode_t node = nullptr;
  //! the node of the executable graph it was paired with, or null
  cudaGraphNode_t from_node = nullptr;
  //! the offending node's label, else "kind 'kernel name'", else empty
  std::string node_label;
  //! nodes whose parameters differed (update_incremental)
  std::size_t nodes_changed = 0;
  std::size_t nodes_set = 0; //!< nodes set one by one (per_node)
  //! the changes made, or why the cheaper methods were not used
  std::string explanation;

  //! True when the executable graph now runs the new graph's parameters (every method but refused).
  explicit operator bool() const noexcept { return method != update_method::refused; }
  //! True when a new executable graph replaced the old one.
  [[nodiscard]] bool reinstantiated() const noexcept {
    return method == update_method::reinstantiated;
  }
  //! One readable line, e.g. "update refused: topology_changed (nodes or dependencies were added or
  //! removed) at node 'relu1'" or "per_node: node 3 (axpy): arguments 1".
  [[nodiscard]] std::string reason() const;
};

} // namespace conveyor
