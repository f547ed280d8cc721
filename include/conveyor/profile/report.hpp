#pragma once
//! \file report.hpp
//! The analysis of a collected trace (trace.hpp): every activity attributed to a node of a watched
//! graph (nested bodies included) or, for eager work, to a kernel by name and order in its step;
//! per-node times; per-launch wall time, GPU busy time, utilisation, idle gaps and the critical
//! path; and the exports (Chrome/Perfetto trace JSON, DOT coloured by time share, a text table).
//! Plain C++: testable without a GPU.

#include "conveyor/profile/trace.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::profile {

//! Where an activity was attributed: a node of a watched graph, or eager work. A plain value.
struct node_ref {
  std::string track; //!< step_info::track of its steps ("" outside steps)
  std::string graph; //!< watched_graph::name; empty for eager work
  //! graph nodes: node id, then for each level down body index and node id
  std::vector<std::size_t> path;
  // !< ({3} top-level node 3; {5, 0, 1} node 1 of body 0 of node 5);
  // eager: empty
  //! eager work: which occurrence of `label` in its step (1, 2, ...)
  std::size_t ordinal = 0;
  std::string label; //!< readable: "axpy", "loop/body 0/spmv", "sgemm #2"
};

//! Time spent in one node (or one eager kernel), over all launches analysed. Durations in µs. A
//! plain value.
struct node_profile {
  node_ref ref; //!< which node
  //! kernel, memcpy or memset (graph nodes: the description's kind)
  node_kind kind = node_kind::other;
  std::string kernel_name; //!< kernel: the function's name
  //! activities attributed (a WHILE body's node counts each iteration)
  std::size_t records = 0;
  std::size_t launches = 0; //!< launches (or steps) it ran in
  double total_us = 0;      //!< sum of its activities' durations
  double median_us = 0;     //!< median activity duration
  double min_us = 0;        //!< shortest activity
  double max_us = 0;        //!< longest activity
  double share = 0;         //!< total_us / sum of total_us over its track's nodes (0..1)
};

//! An interval in a launch when no activity of it ran on the GPU. A plain value.
struct idle_gap {
  double start_us = 0;    //!< from the launch's first activity
  double duration_us = 0; //!< length
  std::string after;      //!< label of the activity that ended last before it
  //! label of the activity that starts it ending ("before which node")
  std::string before;
  //! true when `before` is on the critical path and waited on `after`
  bool on_critical_path = false;
};

//! One graph launch, or one marked step of eager work. Times in µs. A plain value.
struct launch_profile {
  std::string track;             //!< step_info::track ("" when not in a step)
  std::string graph;             //!< watched graph launched ("" for eager steps)
  std::uint64_t step = 0;        //!< step_info::id; 0 when not in a step
  std::uint32_t correlation = 0; //!< graph launches: the cudaGraphLaunch's correlation id
  std::uint64_t start_ns = 0;    //!< first activity's start
  std::uint64_t end_ns = 0;      //!< last activity's end
  double wall_us = 0;            //!< end - start
  double busy_us = 0;            //!< union of its activities' intervals
  double utilisation = 0;        //!< busy / wall (0..1); 0 when wall is 0
  //! first enqueuing API call's host start to the first activity; -1: unknown
  double api_to_gpu_us = -1;
  std::size_t activities = 0; //!< records in it
  //! idle intervals between the first start and the last end
  std::size_t gap_count = 0;
  double gap_total_us = 0; //!< their sum (= wall - busy)
  idle_gap largest_gap;    //!< the longest (duration 0 when none)
  //! labels, first to last: the chain of activities each of which waited
  std::vector<std::string> critical_path;
  // !< for the one before it (graph: a dependency; eager:
  // the stream order)
  //! sum of the durations on the critical path, each counted from the end of the
  double critical_path_us = 0;
  // !< one before it (under programmatic dependent launch a node
  // starts, and !< waits, while its predecessor still runs)
  double critical_gaps_us = 0; //!< idle time between consecutive activities of the critical path
};

//! Per-track totals over its launches. Times in µs. A plain value.
struct track_summary {
  std::string track;         //!< as in step_info::track
  std::size_t launches = 0;  //!< launch_profiles in it
  double median_wall_us = 0; //!< median over launches
  double median_busy_us = 0; //!< median over launches
  double utilisation = 0;    //!< sum busy / sum wall over its launches
  //! sum busy / (last end - first start): counts the idle time between launches
  double span_utilisation = 0;
  double node_time_us = 0; //!< sum of node_profile::total_us in the track
  //! sum of busy time: node_time_us / busy_us > 1 means nodes overlapped
  double busy_us = 0;
  double gap_total_us = 0;            //!< idle time inside launches
  double median_critical_path_us = 0; //!< median over launches
};

//! Activities that could not be attributed to a node, grouped by reason. A plain value.
struct unattributed_group {
  std::size_t records = 0; //!< how many
  std::string reason;      //!< why, e.g. "executable graph 7 was not watched (profiler::watch)"
  std::string example;     //!< one of them, e.g. "kernel axpy at node 7:12"
};

//! The analysis of a trace. A plain value.
struct profile_report {
  std::vector<node_profile> nodes;              //!< by track, then by total time, longest first
  std::vector<launch_profile> launches;         //!< in start order
  std::vector<track_summary> tracks;            //!< in order of first appearance
  std::vector<unattributed_group> unattributed; //!< empty when every record was attributed
  //! what limits the profile, e.g. a watched graph with a WHILE node that
  std::vector<std::string> notes;
  // !< was instantiated before profiling started
  std::size_t records = 0;           //!< activities analysed
  std::size_t attributed = 0;        //!< of which attributed to a node (graph node or eager kernel)
  std::uint64_t dropped_records = 0; //!< trace::dropped_records
  std::string device_name;           //!< trace::device_name
};

//! How analyze() groups and filters.
struct analyze_options {
  std::size_t skip_launches = 0; //!< per track, leave out the first launches (warm-up)
};

//! Attributes every activity of `t` and measures nodes and launches.
//!
//! Attribution: an activity of an executable graph (exec_id != 0) belongs to a watched graph's node
//! by CUPTI's node numbering (the nodes of the graph in creation order, then, depth first, the
//! nodes of each nested body); it is checked against the description (same kind; kernels: same
//! function and launch shape; copies and memsets: same size), and a mismatch is reported
//! unattributed with the reason, never guessed. Work of a conditional body (correlation 0) goes to
//! the launch of its executable graph running at that time. Eager activities belong to their step
//! and are named by kernel (or copy kind) and occurrence. Cost: linear in the records but for the
//! critical path, whose search for each activity's gating predecessor looks back at most 4096
//! activities past its first candidate.
//! \throws std::invalid_argument when a watched graph's description is not a DAG or an edge
//!         is out of range, an executable graph is watched twice, or an activity ends before it
//!         starts.
[[nodiscard]] profile_report analyze(const trace& t, const analyze_options& options = {});

//! How to_perfetto() lays the trace out.
struct perfetto_options {
  //! start every track (execution mode) at time 0, so they lie side by side
  bool align_tracks = true;
  //! draw dependency arrows for the first so many launches of each graph
  std::size_t flow_launches = 3;
  //! a "host" row per track with the API calls that enqueued the work
  bool host_calls = true;
};

//! The trace in the Chrome trace-event JSON format (what ui.perfetto.dev and chrome://tracing
//! open): one process per track (execution mode), one thread row per device stream (nodes labelled,
//! args with kind, node path, grid/block, bytes), a row of launch spans, the host calls, and flow
//! arrows along the graph's dependencies. Timestamps in µs. `r` must be analyze(t, ...) of the same
//! trace (the export analyses `t` again for the slices' attribution, so that launches left out by
//! analyze_options::skip_launches still appear, marked). Linear in the records.
//! \throws std::invalid_argument as analyze().
[[nodiscard]] std::string to_perfetto(const trace& t, const profile_report& r,
                                      const perfetto_options& options = {});

//! The description as a Graphviz digraph (as conveyor::to_dot) with each node filled by its share
//! of the track's time (white to red) and labelled with its median and total µs. `graph` and
//! `track` select the node_profiles (an empty `track`: the graph's launches outside steps if any,
//! else the first track it ran in).
//! \throws std::invalid_argument when an edge of `d` (or of a nested body) names a node out
//!         of range or the edges form a cycle.
[[nodiscard]] std::string to_dot(const graph_description& d, const profile_report& r,
                                 std::string_view graph, std::string_view track = {},
                                 std::string_view name = "conveyor");

//! A text report: per track the launches, median wall/busy time, utilisation, gaps and critical
//! path; the `top` nodes by time with count, total, median, min, max and share; unattributed
//! records with reasons. Node names are shortened (no template arguments, namespaces or parameter
//! lists: readable.hpp's short_name) unless `verbose`.
[[nodiscard]] std::string to_text(const profile_report& r, std::size_t top = 12,
                                  bool verbose = false);

} // namespace conveyor::profile
