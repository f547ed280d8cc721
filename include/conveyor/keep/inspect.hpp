#pragma once
//! \file inspect.hpp
//! Graph files opened offline, with no GPU: a saved graph described as exports show live graphs
//! (to_dot, to_json of observe/export.hpp), a summary of a whole file, the file as JSON, and two
//! saved graphs compared node by node as diff compares live ones, with whether a whole-graph update
//! or per-node setters could apply the difference.

#include "conveyor/define/description.hpp"
#include "conveyor/execute/graph_diff.hpp"
#include "conveyor/keep/graph_file.hpp"

#include <string>
#include <string_view>

namespace conveyor {

//! Saved graph `name` of `file` as exports show it: kinds, labels, kernel names, launch shapes and
//! attributes, sizes, copy directions, nested graphs, edges with their types. Node buffers are left
//! empty (a file holds no addresses).
//! \throws std::out_of_range when the file has no graph `name`.
[[nodiscard]] graph_description describe(const graph_file& file, std::string_view name);

//! A readable summary of `file`: who wrote it; each graph (nodes by kind, edges, nesting); kernels
//! (name, where the image comes from, parameters); buffers (name, memory, bytes, contents saved);
//! images; relocations typed and scanned. Never throws but for std::bad_alloc.
[[nodiscard]] std::string summary(const graph_file& file);

//! The file's document as JSON text (docs/graph-files.md's schema), byte strings shown as their
//! size and FNV-1a hash. Never throws but for std::bad_alloc.
[[nodiscard]] std::string to_json(const graph_file& file, int indent = 2);

//! Compares graph `before` of file `a` with graph `after` of file `b` as diff(graph, graph)
//! compares live graphs: topology first (node count, kinds, dependencies with their edge data, in
//! any order), then every node's parameters through its kind. Addresses compare as buffer names and
//! offsets; kernels as mangled names. Each change says whether a per-node setter or a whole-graph
//! update could apply it.
//! \throws std::out_of_range when a file has no graph of that name.
[[nodiscard]] graph_diff diff(const graph_file& a, std::string_view before, const graph_file& b,
                              std::string_view after);

//! One line saying what would apply `d` to an executable graph made from the first graph:
//! "identical", "per-node setters (N nodes)", "a whole-graph update", or "a new instantiation" with
//! the first reason. Never throws but for std::bad_alloc.
[[nodiscard]] std::string update_verdict(const graph_diff& d);

} // namespace conveyor
