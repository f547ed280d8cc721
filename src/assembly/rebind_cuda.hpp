#pragma once
// Internal (assembly layer): rebinding's side that talks to CUDA — images of CUDA graphs, allocation ranges, and
// patches applied to executable graphs (see rebind.hpp for the logic).

#include "assembly/rebind.hpp"
#include "conveyor/execute/graph_exec.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace conveyor::detail {

//! The image of `g` (kernel argument bytes, copy and memset fields, what must stay fixed), and its nodes in creation
//! order in `nodes`. \throws cuda_error when the graph cannot be read.
[[nodiscard]] graph_image image_of(cudaGraph_t g, std::vector<cudaGraphNode_t>& nodes);

//! The image of a graph read into `snapshot` with its fields (snapshot_graph(g, true)): its fields, moved out.
[[nodiscard]] graph_image image_of(graph_snapshot& snapshot);

//! Positions of the nodes rebind does not image (not patchable) whose parameters differ between `before` and
//! `after` (same count and kinds), compared through the kind table. \throws cuda_error when a node cannot be read.
[[nodiscard]] std::vector<std::size_t> other_changes(const std::vector<cudaGraphNode_t>& before,
                                                     const std::vector<cudaGraphNode_t>& after,
                                                     const graph_image& image, const compare_context& ctx);

//! Allocation ranges of device addresses (cuMemGetAddressRange).
[[nodiscard]] range_query device_ranges();

//! Sets nodes `nodes` of `e` to their fields in `image` (patch_fields: each kind's set_fields); returns the first
//! error, with `applied` nodes set before it. Never throws, but for std::bad_alloc.
cudaError_t apply_patch(graph_exec& e, graph_image& image, const std::vector<std::size_t>& nodes, std::size_t& applied);

} // namespace conveyor::detail
