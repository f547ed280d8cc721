#pragma once
// Internal (kinds layer): everything Conveyor knows about each node kind, one table entry per node_kind, each
// defined in one file (kinds/<kind>.cpp): its name, whether a conditional body or a device-launched graph may hold
// it, how to compare two nodes of it, set it on an executable graph, describe and draw it, read and patch the
// fields rebinding uses, and the host memory it holds. The builder and setter calls of each
// kind live in the same file (declared in kinds/kinds.hpp). docs/architecture.md has the map.

#include "conveyor/define/description.hpp"
#include "conveyor/define/node_kind.hpp"
#include "kinds/fields.hpp"
#include "kinds/keep.hpp"
#include "model/graph_state.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <vector>

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
  //! The findings of one comparison as "label: first, second", or the same when there are none.
  [[nodiscard]] static param_diff listed(std::string_view label, const std::vector<std::string>& what,
                                         bool settable = true, bool updatable = true) {
    if (what.empty()) return same();
    std::string text(label);
    text += ": ";
    for (std::size_t i = 0; i < what.size(); ++i) text += (i == 0 ? "" : ", ") + what[i];
    return change(std::move(text), settable, updatable);
  }
};

//! The model's knowledge of the two graphs whose nodes are compared (either may be null: a graph Conveyor did not
//! build, e.g. the copy inside a child-graph node).
struct compare_context {
  const graph_state* before = nullptr;
  const graph_state* after = nullptr;
};

//! Whether CUDA allows a kind in a graph launched from the device (instantiate_for_device), and if not, why and what
//! to do instead. Both empty: allowed.
struct device_launch_rule {
  std::string_view refusal; //!< the rule the kind breaks, for the violation's text
  std::string_view fix;     //!< what to do instead
};

//! One host address a node holds: a copy's host side, a host function's data pointer (the capture checks).
struct host_address {
  const void* address = nullptr;
  std::size_t bytes = 0; //!< bytes the node moves through it (0: unknown, a host function's data)
  std::string_view role; //!< "source", "destination", "data pointer"
  bool copied = false;   //!< a copy moves bytes through it (pageable memory matters)
};

//! Bits of kind_traits::shows: the fields of a node_description a kind's nodes fill, which the exports show (DOT
//! labels, JSON).
inline constexpr unsigned shows_launch = 1U;    //!< kernel name, grid, block, dynamic shared memory, attributes
inline constexpr unsigned shows_bytes = 2U;     //!< the bytes copied, set or allocated
inline constexpr unsigned shows_copy_kind = 4U; //!< the direction of a copy ("HtoD", ...)

//! One node kind's table entry: everything Conveyor knows about the kind, defined in the kind's own file
//! (kinds/<kind>.cpp) with designated initialisers. Optional facets are null where the kind has nothing to say.
struct kind_traits {
  node_kind kind;
  std::string_view name;
  //! CUDA allows this kind inside a conditional node's body.
  bool allowed_in_body;
  //! CUDA allows this kind inside a child graph (not conditional nodes nor memory allocation or free nodes).
  bool allowed_in_child = true;
  //! graph has a typed builder call for the kind.
  bool has_builder;
  //! compare reads and compares every parameter (false: it always answers "not comparable").
  bool comparable;
  //! Work the GPU does (kernel, copy, memset): what a graph launched from the device may hold besides child graphs,
  //! what "work nodes" counts.
  bool work = false;
  //! Fill colour of the kind's nodes in DOT exports ("#rrggbb").
  std::string_view dot_colour = "#eeeeee";
  //! The description fields the exports show for the kind's nodes (shows_launch, shows_bytes, shows_copy_kind).
  unsigned shows = 0;
  //! Why CUDA refuses the kind in a device-launched graph, and the fix (empty: allowed).
  device_launch_rule device_launch{};
  //! The device-launch rule node `n` breaks that only its CUDA graph shows, not its description (a copy involving a
  //! CUDA array; a kernel node of another context than `ctx`, the current one, not checked when null), or an empty
  //! rule. \throws cuda_error naming the node by `where` when the node cannot be read. Null: nothing to check.
  device_launch_rule (*device_launch_check)(cudaGraphNode_t n, CUcontext ctx, std::string_view where) = nullptr;
  //! Compares the parameters CUDA runs two nodes of this kind with, every field of them.
  param_diff (*compare)(cudaGraphNode_t before, cudaGraphNode_t after, const compare_context& ctx) = nullptr;
  //! Sets node `target` of `exec` to the parameters of `source` (a node of this kind in another graph), returning
  //! CUDA's error; null when CUDA has no per-node setter for the kind (then only a whole-graph update applies it).
  cudaError_t (*copy_to_exec)(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) = nullptr;
  //! Fills the kind's fields of `d` (kernel name, shape and attributes; sizes; nested graphs). `owner` is the state
  //! of the graph holding `n`, or null.
  void (*describe)(cudaGraphNode_t n, node_description& d, const graph_state* owner) = nullptr;
  //! Reads the node's patchable fields (kinds/fields.hpp: kernel arguments, copy and memset pointers, a memset value)
  //! into `out`; `out.patchable` stays false when they cannot be read. Null: the kind holds none.
  void (*read_fields)(cudaGraphNode_t n, node_fields& out) = nullptr;
  //! Sets node `origin` of `exec` to `f` (read by read_fields, its `bytes` patched), returning CUDA's error
  //! (cuGraphExecKernelNodeSetParams, cudaGraphExecMemcpyNodeSetParams, cudaGraphExecMemsetNodeSetParams).
  cudaError_t (*set_fields)(cudaGraphExec_t exec, cudaGraphNode_t origin, node_fields& f) = nullptr;
  //! The name of field `k` of a node of the kind: "kernel parameter 2", "memcpy source", ...
  std::string (*field_name)(std::size_t k) = nullptr;
  //! Appends the host addresses the node holds (the capture checks: memory of returned stack frames, pageable
  //! memory); returns CUDA's error when the node cannot be read. Null: none.
  cudaError_t (*host_addresses)(cudaGraphNode_t n, std::vector<host_address>& out) = nullptr;
  //! The graph embedded in the node that the capture checks walk as well (a child graph's copy); CUDA's error when
  //! it cannot be read. Null: none.
  cudaError_t (*embedded_graph)(cudaGraphNode_t n, cudaGraph_t* out) = nullptr;
  //! Adds a node with `n`'s parameters (kernel attributes included) to `target`, without dependencies, into `*out`
  //! (step-through runs each node as a graph of its own); CUDA's error when it cannot. Null: the kind cannot run
  //! apart from its graph (allocation nodes, whose addresses are the executable graph's; conditional and
  //! child-graph nodes, which step-through steps into).
  cudaError_t (*add_copy)(cudaGraphNode_t n, cudaGraph_t target, cudaGraphNode_t* out) = nullptr;
  //! Graph files (kinds/keep.hpp): how the kind is saved, loaded, described and compared offline, or why it is
  //! refused at save. Null: refused, as a kind this version cannot save.
  const keep_facets* keep = nullptr;
};

//! The table entry of `kind` (an array by CUDA's value, checked at compile time against all_node_kinds; other's entry
//! for an unknown value).
[[nodiscard]] const kind_traits& traits_of(node_kind kind) noexcept;

//! The kind of node `n` (`cudaGraphNodeGetType`). \throws cuda_error when the handle is invalid.
[[nodiscard]] node_kind kind_of(cudaGraphNode_t n);

} // namespace conveyor::detail
