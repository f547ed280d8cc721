#pragma once
//! \file conditional.hpp
//! Conditional nodes (CUDA 12.4+: IF, WHILE; 12.8+: IF/ELSE with two bodies, SWITCH): control flow
//! that runs on the GPU, with the condition set by a kernel (`conveyor::set_condition` in
//! conditional_device.cuh).

#include "conveyor/define/graph.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace conveyor {

//! The kinds of conditional node (`cudaGraphConditionalNodeType`, and the IF body count).
enum class conditional_kind {
  if_then, //!< one body, run when the condition is non-zero (cudaGraphCondTypeIf, size 1)
  //! two bodies: [0] when non-zero, [1] when zero (cudaGraphCondTypeIf, size 2; CUDA 12.8+)
  if_then_else,
  while_loop, //!< one body, run again while the condition is non-zero (cudaGraphCondTypeWhile)
  //! n bodies: body [c] runs when the condition equals c, none when c >= n (CUDA 12.8+)
  switch_case,
};

//! Whether a launch starts a condition at its default value (the choice CUDA leaves to
//! cudaGraphConditionalHandleCreate's flags, made explicit in every make_condition call).
enum class condition_reset : std::uint8_t {
  //! cudaGraphCondAssignDefault: every launch starts with the default value.
  each_launch,
  //! CUDA's default (flags 0): a launch sets no value; the condition holds what a kernel last set,
  //! and a kernel of the graph must set it before a conditional node reads it (CUDA promises no
  //! value before that).
  never,
};

//! The condition value of a conditional node, set from device code with
//! `conveyor::set_condition(handle, value)` (`cudaGraphSetConditional`). A plain value.
struct condition {
  cudaGraphConditionalHandle handle = 0; //!< pass this to kernels by value
  cudaGraph_t graph = nullptr;           //!< the graph the handle was made for
  //! the value at the start of each launch, with condition_reset::each_launch
  unsigned default_value = 0;
  //! condition_reset::each_launch (cudaGraphCondAssignDefault)
  bool reset_each_launch = true;
};

//! A conditional node, its condition, and its body graphs (owned by the node; build them with the
//! same builder or capture into them with capture_into). What a body may hold (CUDA's rules,
//! cudaConditionalNodeParams):
//! - kernel, memcpy, memset, empty, child-graph and conditional nodes only — no host, event,
//!   external-semaphore or memory allocation/free nodes; the builder refuses them with
//!   std::invalid_argument, and capture_into refuses a capture that made one (a library that
//!   allocates its workspace while captured: give it a preallocated one);
//! - copies between device memory, or with pinned host memory (no pageable host memory, no CUDA
//!   arrays in copies of a body that device-side launch will run);
//! - kernels of the one device context of the parent graph, at any depth. Thread safety: the
//!   bodies are parts of the parent graph: build them from the thread that builds the parent.
struct conditional_node {
  conveyor::node node;      //!< the cudaGraphNodeTypeConditional node
  conveyor::condition cond; //!< its condition handle
  //! 1 (if_then, while_loop), 2 (if_then_else) or n (switch_case) body graphs
  std::vector<graph> bodies;
};

//! Creates a condition handle for `g` (`cudaGraphConditionalHandleCreate`).
//! \param g the graph that will hold the conditional node using the handle
//! \param default_value the value every launch starts with, with
//!        condition_reset::each_launch; ignored with never
//! \param reset condition_reset::each_launch (cudaGraphCondAssignDefault: each launch starts
//!        at default_value) or never (CUDA's default: a kernel must set the value before a
//!        conditional node reads it)
//! \throws cuda_error when the runtime or driver lacks conditional nodes (CUDA < 12.4) or
//!         creation fails; std::invalid_argument for an empty (moved-from) graph.
[[nodiscard]] condition make_condition(graph& g, unsigned default_value, condition_reset reset);

//! Adds a conditional node of `kind` controlled by `cond` (a handle made for this graph) to `g`
//! (`cudaGraphAddNode` with cudaConditionalNodeParams). `cases` is the number of bodies of a
//! switch_case (ignored otherwise). A graph holding a conditional node can have only one executable
//! graph at a time (CUDA's rule): destroy the previous one before instantiating again.
//! \throws std::invalid_argument for a switch with 0 cases, a handle made for another
//!         graph, or an empty (moved-from) graph; cuda_error naming the required version when
//!         the toolkit or driver is too old (IF/WHILE need 12.4, IF/ELSE and SWITCH 12.8), or
//!         when CUDA rejects the node.
[[nodiscard]] conditional_node add_conditional(graph& g, const node_list& deps,
                                               conditional_kind kind, const condition& cond,
                                               unsigned cases = 0);

//! The CUDA version (as 12040 = 12.4) a conditional kind needs.
[[nodiscard]] int required_cuda_version(conditional_kind kind) noexcept;

} // namespace conveyor
