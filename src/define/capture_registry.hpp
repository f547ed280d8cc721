#pragma once
// Internal (define layer): the graphs Conveyor is capturing into right now, and the model (graph_state) each belongs
// to, so that nodes added to a capture in progress (capture_nodes.hpp) are owned by the graph being captured: a
// capture_session registers its graph when the capture begins and removes it when the capture ends.

#include "model/graph_state.hpp"

#include <cuda_runtime_api.h>

#include <memory>

namespace conveyor::detail {

//! Records that `g`, the graph a capture_session captures into, belongs to `state`. Thread-safe.
void register_capture(cudaGraph_t g, std::shared_ptr<graph_state> state);
//! Forgets `g` when it is registered for `state`. Thread-safe; never throws.
void unregister_capture(cudaGraph_t g, const graph_state* state) noexcept;
//! The state registered for `g`, the graph a stream is capturing into; null when no capture_session captures into it
//! (a capture begun with the CUDA API itself). Thread-safe.
[[nodiscard]] std::shared_ptr<graph_state> captured_state(cudaGraph_t g);

} // namespace conveyor::detail
