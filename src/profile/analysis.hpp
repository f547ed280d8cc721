#pragma once
// The profile analysis' internal model, shared by analyze() (analyze.cpp) and the exports (perfetto.cpp): watched
// graphs flattened in CUPTI's node numbering, every activity's attribution, and the units ("launches") it forms.
// Not part of the public API.

#include "conveyor/profile/report.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace conveyor::profile::detail {

inline constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

//! Activities that end at most this long after another starts still count as finished before it (clock jitter).
inline constexpr std::uint64_t tolerance_ns = 50;

//! One node of a watched graph in CUPTI's flattened numbering (index = the low 32 bits of its node id).
struct flat_node {
  const node_description* node = nullptr;
  std::vector<std::size_t> path;  // node_ref::path
  std::string label;              // display names joined with "/": "loop/body 0/spmv"
  std::size_t top = 0;            // flat index (= node id) of its top-level ancestor; itself when top-level
  std::size_t owner = npos;       // flat index of the node whose body holds it; npos for top-level nodes
  std::vector<std::size_t> preds; // flat indices of its direct predecessors in its own (body) graph
  //! The predecessors of `preds` reached through a programmatic or launch-completion edge: this node may start
  //! before they end (programmatic dependent launch), so the critical path lets them overlap it.
  std::vector<std::size_t> programmatic_preds;
};

//! A watched graph, validated and flattened.
struct flat_graph {
  const watched_graph* watched = nullptr;
  std::vector<flat_node> nodes;
};

//! What the analysis knows about one activity of the trace.
struct activity_info {
  bool attributed = false;
  const flat_graph* graph = nullptr; // watched graph (exec_id != 0 and watched)
  std::size_t flat = npos;           // attributed graph work: index into graph->nodes
  std::string reason;                // unattributed: why
  std::string example;               // unattributed: the record in a few words
  std::uint32_t correlation = 0;     // the graph launch it belongs to (correlation 0 resolved by time)
  std::uint64_t step = 0;            // its step (for body work, the step of its graph launch)
  std::size_t unit = npos;           // index into analysis::units
  std::string label;                 // node label, eager "name #k", or "name (unattributed)"
  std::size_t ordinal = 0;           // eager: occurrence of the name in its unit (1, 2, ...)
};

//! A "launch": a marked step, a graph launch outside steps, or the eager work outside steps (one per track "").
struct unit {
  enum class type : std::uint8_t { step, graph, eager };
  type kind = type::eager;
  std::string track;
  std::uint64_t step = 0;
  std::uint32_t exec_id = 0;        // graph units: the executable graph
  std::uint32_t correlation = 0;    // graph units: the launch; steps: the first graph launch in it
  std::string graph;                // watched name of the (first) graph launched
  std::vector<std::size_t> members; // activity indices, by start time
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  bool kept = true; // false: left out by analyze_options::skip_launches
};

struct analysis {
  std::vector<flat_graph> graphs;
  std::vector<activity_info> activities; // parallel to trace::activities
  std::vector<unit> units;               // by start time
};

//! Validates and flattens the watched graphs, attributes every activity and forms the units.
//! \throws std::invalid_argument when a watched graph's description is not a DAG or an edge is out of range.
analysis analyse(const trace& t, const analyze_options& options);

//! Edges in range and no cycle, in `g` and its nested bodies; `where` names the graph in messages.
//! \throws std::invalid_argument naming the edge, or the cycle's nodes.
void validate(const graph_description& g, const std::string& where);

//! For a node of `g`: its predecessors in its own graph that ran in the launch (`active[i]`: node i has an activity
//! in it, itself or in its bodies), walking through the predecessors that did not.
std::vector<std::size_t> active_predecessors(const flat_graph& g, std::size_t node, const std::vector<bool>& active);

//! Whether flat node `node` is `ancestor` or lies in one of its bodies.
bool is_within(const flat_graph& g, std::size_t node, std::size_t ancestor);

} // namespace conveyor::profile::detail
