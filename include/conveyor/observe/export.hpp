#pragma once
//! \file export.hpp
//! Graph export: Graphviz DOT and JSON, with readable node names, kernel names, launch shapes and
//! copy sizes.

#include "conveyor/observe/describe.hpp"

#include <string>
#include <string_view>

namespace conveyor {

//! The description as a Graphviz `digraph` named `name`: one box per node labelled with its display
//! name, kind, grid/block (kernels) or size (copies, memsets, allocations); child graphs and
//! conditional bodies as nested clusters; edges as arrows (programmatic edges dashed and
//! launch-completion edges dotted, both blue and labelled). A graph whose nodes run on two or more
//! devices (node_description::device) gets one cluster per device, labelled "device N", around the
//! nodes that run there; peer copies say "peer copy device S -> device D". Readable by `dot`.
[[nodiscard]] std::string to_dot(const graph_description& d, std::string_view name = "conveyor");
//! The description as JSON: {"nodes": [{"id", "kind", "label", "kernel", "grid", "block",
//! "shared_bytes", "bytes", "copy_kind", "device", "source_device", "bodies"}] (device keys only
//! where known), "devices": [the distinct devices, ascending], "edges": [[from, to], ...],
//! "edge_types": ["full" | "programmatic" | "launch_completion", ... one per edge], "statistics":
//! {...}}.
[[nodiscard]] std::string to_json(const graph_description& d, int indent = 2);

//! The DOT attributes an edge of `type` is drawn with, with a leading space: empty for full edges,
//! ` [style=dashed, color="#1f77b4", label="programmatic"]` and a dotted one for launch completion.
//! Never throws.
[[nodiscard]] std::string_view dot_edge_attributes(edge_type type) noexcept;

//! Shorthands: describe(g) then export.
//! \throws cuda_error when describing the graph fails; std::invalid_argument for an empty
//!         (moved-from) graph.
[[nodiscard]] std::string to_dot(const graph& g, std::string_view name = "conveyor");
//! describe(g) then to_json.
//! \throws cuda_error when describing the graph fails; std::invalid_argument for an empty
//!         (moved-from) graph.
[[nodiscard]] std::string to_json(const graph& g, int indent = 2);

} // namespace conveyor
