#pragma once
//! \file description.hpp
//! Plain descriptions of a graph's nodes and edges: what each node does (kind, label, kernel name,
//! launch shape and attributes, copy sizes), the data behind the DOT and JSON exports. Plain
//! values: testable without a GPU.

#include "conveyor/define/edge_type.hpp"
#include "conveyor/define/node_kind.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace conveyor {

struct graph_description;

//! One node as exports show it. Fields that do not apply to the node's kind keep their defaults. A
//! plain value.
struct node_description {
  std::size_t id = 0;                     //!< index in graph_description::nodes
  node_kind kind = node_kind::other;      //!< what the node does
  std::string label;                      //!< the user's label, or empty
  std::string kernel_name;                //!< kernel nodes: the function's name (`cuFuncGetName`)
  std::array<unsigned, 3> grid{0, 0, 0};  //!< kernel nodes: blocks per grid (x, y, z)
  std::array<unsigned, 3> block{0, 0, 0}; //!< kernel nodes: threads per block (x, y, z)
  std::size_t shared_bytes = 0;           //!< kernel nodes: dynamic shared memory, bytes
  //! kernel nodes: launch attributes that differ from the default,
  std::vector<std::string> attributes;
  // !< e.g. "cluster 2x1x1", "priority -5", "cooperative"
  //! memcpy, memset and mem_alloc nodes: bytes moved, set or reserved
  std::size_t bytes = 0;
  //! memcpy nodes: "HtoD", "DtoH", "DtoD" or "HtoH" (for cudaMemcpyDefault
  std::string copy_kind;
  // !< the direction the pointers give), or "default" when
  // CUDA cannot tell
  //! child-graph and conditional nodes: the nested graph(s)
  std::vector<graph_description> bodies;
  //! graphed::describe: the arguments patched into the node, e.g.
  std::vector<std::string> bindings;
  // !< "argument 1 -> kernel parameter 2", "argument 0
  // +4096 B -> memcpy source"
  //! memcpy nodes: a host side is pageable memory (not pinned or managed):
  bool pageable_host = false;
  // !< the copy is staged through a driver buffer and
  // cannot overlap
  //! kernel, memcpy and memset nodes: start addresses of the
  std::vector<std::uint64_t> buffers;
  // !< allocations CUDA maps (device, or pinned host
  // memory) that the node's !< arguments point into
  // (cuMemGetAddressRange), sorted, distinct; empty !< when
  // none was found
  //! conditional nodes Conveyor built: "if", "while" or "switch"
  std::string conditional_type;
  //! The device the node runs on, for graphs whose nodes run on several devices: kernel nodes the
  //! device of their context (the device current when the node was added or captured); memset nodes
  //! the device of the memory they set; memcpy nodes the device of the destination, or of the
  //! source when the destination is host memory. -1 for nodes that run on no particular device
  //! (host, empty, event, child graph, ...) or when CUDA cannot tell.
  int device = -1;
  //! memcpy nodes between the memory of two devices (peer copies): the source's device; -1
  //! otherwise.
  int source_device = -1;
  //! Set by the caller (conveyor::mark_fault, from a step-through run): what went wrong at this
  //! node. DOT draws the node red with the text, JSON gives it as "fault". Empty: none.
  std::string fault;

  //! The label if given, else the kernel name, else the kind's name: the name exports print first.
  [[nodiscard]] std::string display_name() const;
};

//! Nodes and edges of one graph; edges are (from, to) indices into `nodes`. A plain value.
struct graph_description {
  //! in creation order; node_description::id = index
  std::vector<node_description> nodes;
  //! dependencies as (from, to) indices into `nodes`
  std::vector<std::pair<std::size_t, std::size_t>> edges;
  //! The type of each edge, parallel to `edges` (describe fills one per edge; a description built
  //! by hand may leave it shorter: missing entries are full; entries beyond edges.size() are
  //! ignored). Read through edge_type_of.
  std::vector<edge_type> edge_types;
  //! made by stream capture (conveyor::capture / capture_into)
  bool captured = false;
  //! captured on a stream created without cudaStreamNonBlocking: it
  bool captured_on_blocking_stream = false;
  // !< synchronises with the legacy default stream
  //! The distinct devices the nodes run on (node_description::device >= 0), ascending, nested
  //! bodies included: more than one for a multi-device graph. Never throws except std::bad_alloc.
  [[nodiscard]] std::vector<int> devices() const;

  //! The type of edge `i` (full when edge_types has no entry for it). Never throws.
  [[nodiscard]] edge_type edge_type_of(std::size_t i) const noexcept {
    return i < edge_types.size() ? edge_types[i] : edge_type::full;
  }
};

} // namespace conveyor
