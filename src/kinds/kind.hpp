#pragma once
// Internal (kinds layer): everything Conveyor knows about each node kind, one table entry per node_kind, each
// defined in one file (kinds/<kind>.cpp): its name, whether a conditional body may hold it, how to compare two
// nodes of it, how to set it on an executable graph, and how to describe it. The builder and setter calls of each
// kind live in the same file (declared in kinds/kinds.hpp). docs/architecture.md has the map.

#include "conveyor/define/description.hpp"
#include "conveyor/define/node_kind.hpp"
#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

namespace conveyor::detail {

//! What differs between two nodes of one kind.
struct param_diff {
  bool differs = false;   //!< the nodes would run differently (or cannot be compared)
  bool comparable = true; //!< false: the parameters could not be read or compared; counted as differing
  bool settable = true;   //!< a per-node setter on the executable graph can apply the new parameters
  bool updatable = true;  //!< a whole-graph update applies them (false: only a new instantiation does)
  std::string what;       //!< readable: "arguments", "attributes: cluster 1x1x1 -> 2x1x1", ...

  [[nodiscard]] static param_diff same() { return {}; }
  [[nodiscard]] static param_diff change(std::string what, bool settable = true, bool updatable = true) {
    return {true, true, settable, updatable, std::move(what)};
  }
  //! Not comparable: counted as changed; left to a whole-graph update, which CUDA checks.
  [[nodiscard]] static param_diff unknown(std::string why) { return {true, false, false, true, std::move(why)}; }
};

//! The model's knowledge of the two graphs whose nodes are compared (either may be null: a graph Conveyor did not
//! build, e.g. the copy inside a child-graph node).
struct compare_context {
  const graph_state* before = nullptr;
  const graph_state* after = nullptr;
};

//! One node kind's table entry.
struct kind_traits {
  node_kind kind;
  std::string_view name;
  //! CUDA allows this kind inside a conditional node's body.
  bool allowed_in_body;
  //! graph has a typed builder call for the kind.
  bool has_builder;
  //! compare reads and compares every parameter (false: it always answers "not comparable").
  bool comparable;
  //! Compares the parameters CUDA runs two nodes of this kind with, every field of them.
  param_diff (*compare)(cudaGraphNode_t before, cudaGraphNode_t after, const compare_context& ctx);
  //! Sets node `target` of `exec` to the parameters of `source` (a node of this kind in another graph), returning
  //! CUDA's error; null when CUDA has no per-node setter for the kind (then only a whole-graph update applies it).
  cudaError_t (*copy_to_exec)(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source);
  //! Fills the kind's fields of `d` (kernel name, shape and attributes; sizes; nested graphs). `owner` is the state
  //! of the graph holding `n`, or null.
  void (*describe)(cudaGraphNode_t n, node_description& d, const graph_state* owner);
};

//! The table entry of `kind` (a switch over every node_kind without a default: the compiler names a missing kind).
[[nodiscard]] const kind_traits& traits_of(node_kind kind) noexcept;

//! The kind of node `n` (`cudaGraphNodeGetType`). \throws cuda_error when the handle is invalid.
[[nodiscard]] node_kind kind_of(cudaGraphNode_t n);

} // namespace conveyor::detail
