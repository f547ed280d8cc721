#pragma once
// Internal (define layer): what a capture checks when it ends (capture_options) — host memory of stack frames that
// returned, pageable host buffers, and work that escaped the capture on a default stream.

#include "conveyor/define/capture.hpp"
#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conveyor::detail {

//! The part of the calling thread's stack below `frame` (down to the stack's lowest address): the frames of the
//! functions called after the caller reached `frame` — gone once they returned. Empty when the stack cannot be read.
struct returned_frames {
  std::uintptr_t low = 0;
  std::uintptr_t high = 0;
  [[nodiscard]] bool holds(const void* p) const noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= low && a < high;
  }
};

//! The returned frames below `frame` on the calling thread's stack (pthread_getattr_np, read once per thread).
[[nodiscard]] returned_frames frames_below(std::uintptr_t frame) noexcept;

//! Checks nodes `first` .. end (creation order) of `g` (child graphs recursively), just captured: in a conditional
//! node's body (`owner->conditional_body`) a kind CUDA does not allow there (a library's workspace allocation) is
//! refused; as `check` asks, a copy's source or destination, or a host function's data pointer, in `gone` is
//! refused; with host_memory_check::pageable each other pageable host buffer of a copy is recorded in
//! `owner->pageable` (when `owner` is given), with refuse_pageable it is refused. The thread-block cluster attributes
//! of the kernel nodes walked are appended to `owner->clusters` where it is known (the nodes before `first` were
//! known), so that whole-graph updates need not read the graph again; it is made unknown where the walk does not run
//! (`check` off, not a body) or throws.
//! \throws std::invalid_argument naming the node, what is wrong and the fix; cuda_error when a node cannot be read.
void check_captured_nodes(cudaGraph_t g, std::size_t first, const graph_state* names, graph_state* owner,
                          const returned_frames& gone, host_memory_check check);

} // namespace conveyor::detail
