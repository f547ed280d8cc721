#pragma once
//! \file description.hpp
//! Plain descriptions of a graph's nodes and edges: what each node does (kind, label, kernel name, launch shape and
//! attributes, copy sizes), the data behind the DOT and JSON exports. Plain values: testable without a GPU.

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

//! One node as exports show it. Fields that do not apply to the node's kind keep their defaults. A plain value.
struct node_description {
  std::size_t id = 0;                     //!< index in graph_description::nodes
  node_kind kind = node_kind::other;      //!< what the node does
  std::string label;                      //!< the user's label, or empty
  std::string kernel_name;                //!< kernel nodes: the function's name (`cuFuncGetName`)
  std::array<unsigned, 3> grid{0, 0, 0};  //!< kernel nodes: blocks per grid (x, y, z)
  std::array<unsigned, 3> block{0, 0, 0}; //!< kernel nodes: threads per block (x, y, z)
  std::size_t shared_bytes = 0;           //!< kernel nodes: dynamic shared memory, bytes
  std::vector<std::string> attributes;    //!< kernel nodes: launch attributes that differ from the default,
                                          //!< e.g. "cluster 2x1x1", "priority -5", "cooperative"
  std::size_t bytes = 0;                  //!< memcpy, memset and mem_alloc nodes: bytes moved, set or reserved
  std::string copy_kind;                  //!< memcpy nodes: "HtoD", "DtoH", "DtoD" or "HtoH" (for cudaMemcpyDefault
                                          //!< the direction the pointers give), or "default" when CUDA cannot tell
  std::vector<graph_description> bodies;  //!< child-graph and conditional nodes: the nested graph(s)
  std::vector<std::string> bindings;      //!< graphed::describe: the arguments patched into the node, e.g.
                                          //!< "argument 1 -> kernel parameter 2", "argument 0 +4096 B -> memcpy source"
  bool pageable_host = false;             //!< memcpy nodes: a host side is pageable memory (not pinned or managed):
                                          //!< the copy is staged through a driver buffer and cannot overlap
  std::vector<std::uint64_t> buffers;     //!< kernel, memcpy and memset nodes: start addresses of the
                                          //!< allocations CUDA maps (device, or pinned host memory) that the node's
                                          //!< arguments point into (cuMemGetAddressRange), sorted, distinct; empty
                                          //!< when none was found
  std::string conditional_type;           //!< conditional nodes Conveyor built: "if", "while" or "switch"
  //! The device the node runs on, for graphs whose nodes run on several devices: kernel nodes the device of their
  //! context (the device current when the node was added or captured); memset nodes the device of the memory they
  //! set; memcpy nodes the device of the destination, or of the source when the destination is host memory. -1 for
  //! nodes that run on no particular device (host, empty, event, child graph, ...) or when CUDA cannot tell.
  int device = -1;
  //! memcpy nodes between the memory of two devices (peer copies): the source's device; -1 otherwise.
  int source_device = -1;
  //! Set by the caller (conveyor::mark_fault, from a step-through run): what went wrong at this node. DOT draws the
  //! node red with the text, JSON gives it as "fault". Empty: none.
  std::string fault;

  //! The label if given, else the kernel name, else the kind's name: the name exports print first.
  [[nodiscard]] std::string display_name() const;
};

//! Nodes and edges of one graph; edges are (from, to) indices into `nodes`. A plain value.
struct graph_description {
  std::vector<node_description> nodes;                    //!< in creation order; node_description::id = index
  std::vector<std::pair<std::size_t, std::size_t>> edges; //!< dependencies as (from, to) indices into `nodes`
  //! The type of each edge, parallel to `edges` (describe fills one per edge; a description built by hand may leave
  //! it shorter: missing entries are full; entries beyond edges.size() are ignored). Read through edge_type_of.
  std::vector<edge_type> edge_types;
  bool captured = false;                    //!< made by stream capture (conveyor::capture / capture_into)
  bool captured_on_blocking_stream = false; //!< captured on a stream created without cudaStreamNonBlocking: it
                                            //!< synchronises with the legacy default stream
  //! The distinct devices the nodes run on (node_description::device >= 0), ascending, nested bodies included:
  //! more than one for a multi-device graph. Never throws except std::bad_alloc.
  [[nodiscard]] std::vector<int> devices() const;

  //! The type of edge `i` (full when edge_types has no entry for it). Never throws.
  [[nodiscard]] edge_type edge_type_of(std::size_t i) const noexcept {
    return i < edge_types.size() ? edge_types[i] : edge_type::full;
  }
};

} // namespace conveyor
