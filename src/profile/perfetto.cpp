// to_perfetto(): the trace in the Chrome trace-event JSON format (ui.perfetto.dev, chrome://tracing).
//
// One process per track (steps' track; outside steps "graph: <name>" per graph and "eager"), one thread row per
// device stream, a "launches" row and a "host" row. Complete ("X") events on one thread must nest or be disjoint:
// activities that overlap without nesting go to extra lanes ("device 0 stream 7 lane 2"). Flow arrows ("s" inside
// the end of the predecessor's slice, "f" with binding point "e" inside the start of the successor's) follow the
// dependencies between graph nodes that ran in the launch.
#include "conveyor/profile/report.hpp"

#include "profile/analysis.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace conveyor::profile {

namespace {

using detail::npos;
using nlohmann::json;

// A complete event before its thread is known.
struct slice {
  std::size_t process = 0;
  std::string row; // "launches", "device 0 stream 7" or "host"
  int row_order = 0;
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  json event;
  std::size_t lane = 0;
  int tid = 0;
};

struct process {
  std::string name;
  int pid = 0;
  std::uint64_t offset = std::numeric_limits<std::uint64_t>::max();
};

// The first lane where slice s nests in or follows the open slices (closing those that ended before it);
// lanes.size() when none.
std::size_t free_lane(std::vector<std::vector<std::uint64_t>>& lanes, const slice& s) {
  std::size_t l = 0;
  for (; l < lanes.size(); ++l) {
    auto& open = lanes[l];
    while (!open.empty() && open.back() <= s.start) open.pop_back();
    if (open.empty() || s.end <= open.back()) break;
  }
  return l;
}

// Places the slices of one row on lanes: a slice goes to the first lane where it nests in or follows the open ones.
void assign_lanes(std::vector<slice*>& row) {
  std::stable_sort(row.begin(), row.end(), [](const slice* x, const slice* y) {
    if (x->start != y->start) return x->start < y->start;
    return x->end > y->end;
  });
  std::vector<std::vector<std::uint64_t>> lanes; // per lane: ends of the open slices, innermost last
  for (auto* s : row) {
    const std::size_t l = free_lane(lanes, *s);
    if (l == lanes.size()) lanes.emplace_back();
    lanes[l].push_back(s->end);
    s->lane = l;
  }
}

double micros(std::uint64_t ns, std::uint64_t offset) {
  return static_cast<double>(ns >= offset ? ns - offset : 0) / 1000.0;
}

} // namespace

namespace {

// The records under each active node of one launch of a graph, for its flow arrows.
struct launch_records {
  std::vector<bool> active;                    // per flat node: it (or a node inside it) ran
  std::vector<std::vector<std::size_t>> under; // per node: records under it (itself or its bodies), by end time
  std::vector<std::vector<std::size_t>> own;   // per node: its own records
};

// Builds the trace: processes, slices on rows and lanes, metadata, flow arrows.
class trace_writer {
public:
  trace_writer(const trace& t, const profile_report& r, const perfetto_options& options) :
      t_(t),
      r_(r),
      options_(options),
      an_(detail::analyse(t, {})) {}

  std::string write() {
    add_units();
    if (options_.host_calls) add_host_calls();
    place_slices();
    add_flows();
    json other{{"generator", "conveyor profile"},      {"device", t_.device_name},
               {"activities", t_.activities.size()},   {"records_analysed", r_.records},
               {"attributed", r_.attributed},          {"dropped_records", t_.dropped_records},
               {"align_tracks", options_.align_tracks}};
    json out{{"traceEvents", std::move(events_)}, {"displayTimeUnit", "ns"}, {"otherData", std::move(other)}};
    return out.dump();
  }

private:
  std::size_t process_of(const std::string& key, const std::string& name) {
    auto [it, fresh] = process_index_.try_emplace(key, processes_.size());
    if (fresh) processes_.push_back({name, static_cast<int>(processes_.size()) + 1});
    return it->second;
  }

  std::size_t unit_process(const detail::unit& u) {
    using type = detail::unit::type;
    if (u.kind == type::step || !u.track.empty()) return track_process(u.track);
    if (u.kind == type::graph) {
      const auto name = u.graph.empty() ? fmt::format("executable graph {}", u.exec_id) : u.graph;
      return process_of("g:" + name, "graph: " + name);
    }
    return process_of("e:", "eager");
  }

  // The unit's span on the "launches" row, with the report's numbers when it was analysed.
  slice unit_span(const detail::unit& u, std::size_t p, const launch_profile* lp) const {
    slice span;
    span.process = p;
    span.row = "launches";
    span.row_order = 0;
    span.start = u.start_ns;
    span.end = u.end_ns;
    json args{{"activities", u.members.size()}, {"track", u.track}};
    if (u.step != 0) args["step"] = u.step;
    if (!u.graph.empty()) args["graph"] = u.graph;
    if (u.correlation != 0) args["correlation"] = u.correlation;
    add_launch_args(args, lp);
    span.event = {{"ph", "X"}, {"name", unit_name(u)}, {"cat", "launch"}, {"args", std::move(args)}};
    return span;
  }

  // "step 3", "graph <name> launch" or "eager work".
  static std::string unit_name(const detail::unit& u) {
    return u.kind == detail::unit::type::step ? fmt::format("step {}", u.step)
           : u.kind == detail::unit::type::graph
               ? fmt::format("graph {} launch", u.graph.empty() ? std::to_string(u.exec_id) : u.graph)
               : std::string("eager work");
  }

  // The report's numbers of the launch, or that it was not analysed (null).
  static void add_launch_args(json& args, const launch_profile* lp) {
    if (lp == nullptr) {
      args["analysed"] = false; // left out of the report (analyze_options::skip_launches)
      return;
    }
    args["wall_us"] = lp->wall_us;
    args["busy_us"] = lp->busy_us;
    args["utilisation"] = lp->utilisation;
    args["gaps"] = lp->gap_count;
    args["gap_total_us"] = lp->gap_total_us;
    args["critical_path_us"] = lp->critical_path_us;
    args["critical_path"] = lp->critical_path;
    if (lp->api_to_gpu_us >= 0) args["api_to_gpu_us"] = lp->api_to_gpu_us;
  }

  // Activity `i` on its device stream's row.
  slice activity_slice(std::size_t i, std::size_t p) const {
    const auto& a = t_.activities[i];
    const auto& info = an_.activities[i];
    slice s;
    s.process = p;
    s.row = fmt::format("device {} stream {}", a.device, a.stream);
    s.row_order = 1;
    s.start = a.start_ns;
    s.end = std::max(a.end_ns, a.start_ns);
    json args{{"kind", to_string(a.kind)}, {"node", info.label}};
    if (info.flat != npos) {
      args["graph"] = info.graph->watched->name;
      args["path"] = info.graph->nodes[info.flat].path;
    }
    if (a.exec_id != 0) args["exec_id"] = a.exec_id;
    if (!info.attributed) args["unattributed"] = info.reason;
    add_kind_args(args, a);
    if (info.step != 0) args["step"] = info.step;
    args["correlation"] = a.correlation;
    s.event = {{"ph", "X"}, {"name", info.label}, {"cat", to_string(a.kind)}, {"args", std::move(args)}};
    return s;
  }

  // A kernel's name and shape (where known), a copy's or memset's bytes and copy kind.
  static void add_kind_args(json& args, const activity& a) {
    if (a.kind == activity_kind::kernel) {
      args["kernel"] = a.name;
      if (a.grid != std::array<unsigned, 3>{0, 0, 0}) args["grid"] = a.grid;
      if (a.block != std::array<unsigned, 3>{0, 0, 0}) args["block"] = a.block;
    } else {
      args["bytes"] = a.bytes;
      if (!a.copy_kind.empty()) args["copy_kind"] = a.copy_kind;
    }
  }

  using launch_key = std::tuple<std::string, std::uint64_t, std::uint32_t, std::uint64_t>;

  // The report's launches by (track, step, correlation, start).
  [[nodiscard]] std::map<launch_key, const launch_profile*> analysed_launches() const {
    std::map<launch_key, const launch_profile*> analysed;
    for (const auto& l : r_.launches) analysed.try_emplace({l.track, l.step, l.correlation, l.start_ns}, &l);
    return analysed;
  }

  void add_units() {
    const std::map<launch_key, const launch_profile*> analysed = analysed_launches();
    slices_.reserve(t_.activities.size() + an_.units.size() + t_.host_calls.size());
    slice_of_.assign(t_.activities.size(), npos);
    unit_pid_.resize(an_.units.size());
    for (std::size_t k = 0; k < an_.units.size(); ++k) {
      const auto& u = an_.units[k];
      const auto p = unit_process(u);
      unit_pid_[k] = p;
      const auto found = analysed.find({u.track, u.step, u.correlation, u.start_ns});
      slices_.push_back(unit_span(u, p, found != analysed.end() ? found->second : nullptr));
      for (auto i : u.members) {
        slice_of_[i] = slices_.size();
        slices_.push_back(activity_slice(i, p));
      }
    }
  }

  // The process of a host call: its step's, its correlation's, else the steps' or the eager one.
  std::size_t host_call_process(const host_call& c, const std::unordered_map<std::uint64_t, std::size_t>& step_pid,
                                const std::unordered_map<std::uint32_t, std::size_t>& correlation_pid) {
    if (auto s = step_pid.find(c.step); c.step != 0 && s != step_pid.end()) return s->second;
    if (auto k = correlation_pid.find(c.correlation); k != correlation_pid.end()) return k->second;
    if (c.step == 0) return process_of("e:", "eager");
    return step_process(c.step);
  }

  // The process of step `step`'s track (the steps' process when it has none).
  std::size_t step_process(std::uint64_t step) {
    const auto st = std::find_if(t_.steps.begin(), t_.steps.end(), [&](const step_info& s) { return s.id == step; });
    const std::string track = st == t_.steps.end() ? std::string() : st->track;
    return track_process(track);
  }

  // The process of a track of steps ("steps" when the track has no name).
  std::size_t track_process(const std::string& track) {
    return process_of("t:" + track, track.empty() ? std::string("steps") : track);
  }

  // The process of each unit's step and of each correlation id of its records.
  void unit_pids(std::unordered_map<std::uint64_t, std::size_t>& step_pid,
                 std::unordered_map<std::uint32_t, std::size_t>& correlation_pid) const {
    for (std::size_t k = 0; k < an_.units.size(); ++k) {
      if (an_.units[k].step != 0) step_pid.try_emplace(an_.units[k].step, unit_pid_[k]);
      for (auto i : an_.units[k].members)
        if (t_.activities[i].correlation != 0) correlation_pid.try_emplace(t_.activities[i].correlation, unit_pid_[k]);
    }
  }

  // Host call c on the "host" row of process p.
  static slice host_call_slice(const host_call& c, std::size_t p) {
    slice s;
    s.process = p;
    s.row = "host";
    s.row_order = 2;
    s.start = c.start_ns;
    s.end = std::max(c.end_ns, c.start_ns);
    json args{{"correlation", c.correlation}};
    if (c.step != 0) args["step"] = c.step;
    if (c.graph_launch) args["graph_launch"] = true;
    s.event = {{"ph", "X"}, {"name", c.name}, {"cat", "api"}, {"args", std::move(args)}};
    return s;
  }

  void add_host_calls() {
    std::unordered_map<std::uint64_t, std::size_t> step_pid;
    std::unordered_map<std::uint32_t, std::size_t> correlation_pid;
    unit_pids(step_pid, correlation_pid);
    for (const auto& c : t_.host_calls)
      slices_.push_back(host_call_slice(c, host_call_process(c, step_pid, correlation_pid)));
  }

  // Offsets: each process from its first timestamp (align_tracks), else all from the first timestamp of the trace.
  void set_offsets() {
    auto first = std::numeric_limits<std::uint64_t>::max();
    for (const auto& s : slices_) {
      processes_[s.process].offset = std::min(processes_[s.process].offset, s.start);
      first = std::min(first, s.start);
    }
    if (!options_.align_tracks)
      for (auto& p : processes_) p.offset = first;
  }

  // Rows per process, then lanes, then thread ids: launches, streams (by device and stream), host.
  void place_slices() {
    set_offsets();
    std::map<std::tuple<std::size_t, int, std::string>, std::vector<slice*>> rows;
    for (auto& s : slices_) rows[{s.process, s.row_order, s.row}].push_back(&s);
    for (const auto& p : processes_)
      events_.push_back(
          {{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
    std::vector<std::pair<std::tuple<std::size_t, int, std::string>, std::vector<slice*>>> ordered(rows.begin(),
                                                                                                   rows.end());
    std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& x, const auto& y) {
      const auto& [px, ox, rx] = x.first;
      const auto& [py, oy, ry] = y.first;
      return std::make_tuple(px, ox, stream_numbers(rx)) < std::make_tuple(py, oy, stream_numbers(ry));
    });
    std::map<std::size_t, int> next_tid;
    for (auto& [key, row] : ordered) place_row(std::get<0>(key), std::get<2>(key), row, next_tid);
    emit_slices();
  }

  // Stream rows sort by (device, stream) numerically rather than by text: a row's numbers, (0, 0) for other rows.
  static std::pair<unsigned, unsigned> stream_numbers(const std::string& row) {
    unsigned d = 0;
    unsigned s = 0;
    if (std::sscanf(row.c_str(), "device %u stream %u", &d, &s) != 2) return std::pair<unsigned, unsigned>{0, 0};
    return std::pair<unsigned, unsigned>{d, s};
  }

  // The placed slices, as events of their process and thread, timed from the process's offset.
  void emit_slices() {
    for (auto& s : slices_) {
      const auto offset = processes_[s.process].offset;
      s.event["pid"] = processes_[s.process].pid;
      s.event["tid"] = s.tid;
      s.event["ts"] = micros(s.start, offset);
      s.event["dur"] = static_cast<double>(s.end - s.start) / 1000.0;
      events_.push_back(std::move(s.event));
    }
  }

  // One row's lanes, each a thread of process `p` named after the row.
  void place_row(std::size_t p, const std::string& name, std::vector<slice*>& row,
                 std::map<std::size_t, int>& next_tid) {
    assign_lanes(row);
    std::size_t lanes = 0;
    for (const auto* s : row) lanes = std::max(lanes, s->lane + 1);
    const int base = next_tid[p] + 1;
    next_tid[p] += static_cast<int>(lanes);
    for (std::size_t l = 0; l < lanes; ++l)
      events_.push_back({{"ph", "M"},
                         {"name", "thread_name"},
                         {"pid", processes_[p].pid},
                         {"tid", base + static_cast<int>(l)},
                         {"args", {{"name", l == 0 ? name : fmt::format("{} lane {}", name, l + 1)}}}});
    for (auto* s : row) s->tid = base + static_cast<int>(s->lane);
  }

  // An arrow from the end of `from`'s slice, or with `from_start` (a programmatic edge: the dependent may start while
  // its predecessor runs) from its start, to the start of `to`'s; inside the slices (1 ns or half the slice from their
  // ends), so each binds to its own slice.
  void arrow(std::size_t from, std::size_t to, bool from_start = false) {
    const auto& sf = slices_[slice_of_[from]];
    const auto& st = slices_[slice_of_[to]];
    const auto s_inset = std::min<std::uint64_t>(1, (sf.end - sf.start) / 2);
    const auto f_inset = std::min<std::uint64_t>(1, (st.end - st.start) / 2);
    const double s_ts = micros(from_start ? sf.start + s_inset : sf.end - s_inset, processes_[sf.process].offset);
    const double f_ts = micros(st.start + f_inset, processes_[st.process].offset);
    ++flow_id_;
    events_.push_back({{"ph", "s"},
                       {"id", flow_id_},
                       {"name", "dependency"},
                       {"cat", "dependency"},
                       {"pid", processes_[sf.process].pid},
                       {"tid", sf.tid},
                       {"ts", s_ts}});
    events_.push_back({{"ph", "f"},
                       {"bp", "e"},
                       {"id", flow_id_},
                       {"name", "dependency"},
                       {"cat", "dependency"},
                       {"pid", processes_[st.process].pid},
                       {"tid", st.tid},
                       {"ts", f_ts}});
  }

  // Flow arrows along the dependencies, for the first launches of each executable graph.
  void add_flows() {
    const auto launches = graph_launch_records();
    std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, const std::vector<std::size_t>*>>> by_exec;
    for (const auto& [key, records] : launches) by_exec[key.first].emplace_back(first_start(records), &records);
    for (auto& [exec, list] : by_exec) {
      std::sort(list.begin(), list.end());
      for (std::size_t n = 0; n < list.size() && n < options_.flow_launches; ++n) launch_flows(*list[n].second);
    }
  }

  // The attributed records of each graph launch: (exec, corr) -> records.
  [[nodiscard]] std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>>
  graph_launch_records() const {
    std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> launches;
    for (std::size_t i = 0; i < t_.activities.size(); ++i)
      if (an_.activities[i].flat != npos)
        launches[{t_.activities[i].exec_id, an_.activities[i].correlation}].push_back(i);
    return launches;
  }

  // The earliest start of the records.
  [[nodiscard]] std::uint64_t first_start(const std::vector<std::size_t>& records) const {
    auto start = std::numeric_limits<std::uint64_t>::max();
    for (auto i : records) start = std::min(start, t_.activities[i].start_ns);
    return start;
  }

  launch_records records_of(const detail::flat_graph& g, const std::vector<std::size_t>& records) const {
    launch_records lr{std::vector<bool>(g.nodes.size(), false), std::vector<std::vector<std::size_t>>(g.nodes.size()),
                      std::vector<std::vector<std::size_t>>(g.nodes.size())};
    for (auto i : records) {
      const auto flat = an_.activities[i].flat;
      if (flat == npos) continue;
      lr.own[flat].push_back(i);
      for (auto f = flat; f != npos; f = g.nodes[f].owner) {
        lr.active[f] = true;
        lr.under[f].push_back(i);
      }
    }
    for (auto& v : lr.under)
      std::sort(v.begin(), v.end(),
                [&](std::size_t a, std::size_t b) { return t_.activities[a].end_ns < t_.activities[b].end_ns; });
    return lr;
  }

  // The latest record under node `p` that ended before `time` (+ tolerance): a binary search.
  std::size_t ended_before(const launch_records& lr, std::size_t p, std::uint64_t time) const {
    const auto& v = lr.under[p];
    const auto limit = time + detail::tolerance_ns;
    const auto it = std::upper_bound(v.begin(), v.end(), limit,
                                     [&](std::uint64_t x, std::size_t i) { return x < t_.activities[i].end_ns; });
    return it == v.begin() ? npos : *std::prev(it);
  }

  // The latest record under node `p` that started before record `x` (a programmatic predecessor overlaps it).
  std::size_t started_before(const launch_records& lr, std::size_t p, std::size_t x) const {
    std::size_t started = npos;
    for (auto i : lr.under[p])
      if (t_.activities[i].start_ns <= t_.activities[x].start_ns &&
          (started == npos || t_.activities[i].start_ns > t_.activities[started].start_ns))
        started = i;
    return started;
  }

  // The records of node `q` that arrows point at: its own, or for a node with bodies its earliest record.
  std::vector<std::size_t> targets_of(const detail::flat_graph& g, const launch_records& lr, std::size_t q) const {
    if (g.nodes[q].node->bodies.empty()) return lr.own[q];
    const std::size_t earliest = earliest_under(lr, q);
    return earliest == npos ? std::vector<std::size_t>{} : std::vector<std::size_t>{earliest};
  }

  // The record under node q that started first; npos when none.
  std::size_t earliest_under(const launch_records& lr, std::size_t q) const {
    std::size_t earliest = npos;
    for (auto i : lr.under[q])
      if (earliest == npos || t_.activities[i].start_ns < t_.activities[earliest].start_ns) earliest = i;
    return earliest;
  }

  void launch_flows(const std::vector<std::size_t>& records) {
    const auto& g = *an_.activities[records.front()].graph;
    const launch_records lr = records_of(g, records);
    for (std::size_t q = 0; q < g.nodes.size(); ++q)
      if (lr.active[q]) node_flows(g, lr, q);
  }

  // The arrows into active node q from its active predecessors.
  void node_flows(const detail::flat_graph& g, const launch_records& lr, std::size_t q) {
    const auto preds = detail::active_predecessors(g, q, lr.active);
    const auto& overlapping = g.nodes[q].programmatic_preds;
    for (auto x : preds.empty() ? std::vector<std::size_t>{} : targets_of(g, lr, q))
      for (auto p : preds) arrow_from(lr, p, x, overlapping);
  }

  // An arrow into record x from the latest record under node p that ended before x started, else, when p is a
  // programmatic predecessor (in `overlapping`), from the latest that started before it.
  void arrow_from(const launch_records& lr, std::size_t p, std::size_t x, const std::vector<std::size_t>& overlapping) {
    if (auto y = ended_before(lr, p, t_.activities[x].start_ns); y != npos) return arrow(y, x);
    const bool programmatic = std::find(overlapping.begin(), overlapping.end(), p) != overlapping.end();
    if (!programmatic) return;
    if (const auto started = started_before(lr, p, x); started != npos) arrow(started, x, true);
  }

  const trace& t_;
  const profile_report& r_;
  const perfetto_options& options_;
  detail::analysis an_;
  std::vector<process> processes_;
  std::map<std::string, std::size_t> process_index_;
  std::vector<slice> slices_;
  std::vector<std::size_t> slice_of_;
  std::vector<std::size_t> unit_pid_;
  json events_ = json::array();
  std::uint64_t flow_id_ = 0;
};

} // namespace

std::string to_perfetto(const trace& t, const profile_report& r, const perfetto_options& options) {
  return trace_writer(t, r, options).write();
}

} // namespace conveyor::profile
