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

// Places the slices of one row on lanes: a slice goes to the first lane where it nests in or follows the open ones.
void assign_lanes(std::vector<slice*>& row) {
  std::stable_sort(row.begin(), row.end(), [](const slice* x, const slice* y) {
    if (x->start != y->start) return x->start < y->start;
    return x->end > y->end;
  });
  std::vector<std::vector<std::uint64_t>> lanes; // per lane: ends of the open slices, innermost last
  for (auto* s : row) {
    std::size_t l = 0;
    for (; l < lanes.size(); ++l) {
      auto& open = lanes[l];
      while (!open.empty() && open.back() <= s->start) open.pop_back();
      if (open.empty() || s->end <= open.back()) break;
    }
    if (l == lanes.size()) lanes.emplace_back();
    lanes[l].push_back(s->end);
    s->lane = l;
  }
}

double micros(std::uint64_t ns, std::uint64_t offset) {
  return static_cast<double>(ns >= offset ? ns - offset : 0) / 1000.0;
}

} // namespace

std::string to_perfetto(const trace& t, const profile_report& r, const perfetto_options& options) {
  const auto an = detail::analyse(t, {});

  std::vector<process> processes;
  std::map<std::string, std::size_t> process_index;
  auto process_of = [&](const std::string& key, const std::string& name) {
    auto [it, fresh] = process_index.try_emplace(key, processes.size());
    if (fresh) processes.push_back({name, static_cast<int>(processes.size()) + 1});
    return it->second;
  };
  auto unit_process = [&](const detail::unit& u) {
    using type = detail::unit::type;
    if (u.kind == type::step || !u.track.empty())
      return process_of("t:" + u.track, u.track.empty() ? std::string("steps") : u.track);
    if (u.kind == type::graph) {
      const auto name = u.graph.empty() ? fmt::format("executable graph {}", u.exec_id) : u.graph;
      return process_of("g:" + name, "graph: " + name);
    }
    return process_of("e:", "eager");
  };

  std::map<std::tuple<std::string, std::uint64_t, std::uint32_t, std::uint64_t>, const launch_profile*> analysed;
  for (const auto& l : r.launches) analysed.try_emplace({l.track, l.step, l.correlation, l.start_ns}, &l);

  std::vector<slice> slices;
  slices.reserve(t.activities.size() + an.units.size() + t.host_calls.size());
  std::vector<std::size_t> slice_of(t.activities.size(), npos);
  std::vector<std::size_t> unit_pid(an.units.size());
  for (std::size_t k = 0; k < an.units.size(); ++k) {
    const auto& u = an.units[k];
    const auto p = unit_process(u);
    unit_pid[k] = p;
    // The unit's span on the "launches" row, with the report's numbers when it was analysed.
    slice span;
    span.process = p;
    span.row = "launches";
    span.row_order = 0;
    span.start = u.start_ns;
    span.end = u.end_ns;
    std::string name = u.kind == detail::unit::type::step   ? fmt::format("step {}", u.step)
                       : u.kind == detail::unit::type::graph ? fmt::format("graph {} launch", u.graph.empty()
                                                                                ? std::to_string(u.exec_id)
                                                                                : u.graph)
                                                             : std::string("eager work");
    json args{{"activities", u.members.size()}, {"track", u.track}};
    if (u.step != 0) args["step"] = u.step;
    if (!u.graph.empty()) args["graph"] = u.graph;
    if (u.correlation != 0) args["correlation"] = u.correlation;
    const auto found = analysed.find({u.track, u.step, u.correlation, u.start_ns});
    if (found != analysed.end()) {
      const auto* lp = found->second;
      args["wall_us"] = lp->wall_us;
      args["busy_us"] = lp->busy_us;
      args["utilisation"] = lp->utilisation;
      args["gaps"] = lp->gap_count;
      args["gap_total_us"] = lp->gap_total_us;
      args["critical_path_us"] = lp->critical_path_us;
      args["critical_path"] = lp->critical_path;
      if (lp->api_to_gpu_us >= 0) args["api_to_gpu_us"] = lp->api_to_gpu_us;
    } else {
      args["analysed"] = false; // left out of the report (analyze_options::skip_launches)
    }
    span.event = {{"ph", "X"}, {"name", std::move(name)}, {"cat", "launch"}, {"args", std::move(args)}};
    slices.push_back(std::move(span));

    for (auto i : u.members) {
      const auto& a = t.activities[i];
      const auto& info = an.activities[i];
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
      if (a.kind == activity_kind::kernel) {
        args["kernel"] = a.name;
        if (a.grid != std::array<unsigned, 3>{0, 0, 0}) args["grid"] = a.grid;
        if (a.block != std::array<unsigned, 3>{0, 0, 0}) args["block"] = a.block;
      } else {
        args["bytes"] = a.bytes;
        if (!a.copy_kind.empty()) args["copy_kind"] = a.copy_kind;
      }
      if (info.step != 0) args["step"] = info.step;
      args["correlation"] = a.correlation;
      s.event = {{"ph", "X"}, {"name", info.label}, {"cat", to_string(a.kind)}, {"args", std::move(args)}};
      slice_of[i] = slices.size();
      slices.push_back(std::move(s));
    }
  }

  if (options.host_calls) {
    std::unordered_map<std::uint64_t, std::size_t> step_pid;
    std::unordered_map<std::uint32_t, std::size_t> correlation_pid;
    for (std::size_t k = 0; k < an.units.size(); ++k) {
      if (an.units[k].step != 0) step_pid.try_emplace(an.units[k].step, unit_pid[k]);
      for (auto i : an.units[k].members)
        if (t.activities[i].correlation != 0) correlation_pid.try_emplace(t.activities[i].correlation, unit_pid[k]);
    }
    for (const auto& c : t.host_calls) {
      std::size_t p = npos;
      if (auto s = step_pid.find(c.step); c.step != 0 && s != step_pid.end()) p = s->second;
      else if (auto k = correlation_pid.find(c.correlation); k != correlation_pid.end()) p = k->second;
      else if (c.step != 0) {
        const auto st =
            std::find_if(t.steps.begin(), t.steps.end(), [&](const step_info& s) { return s.id == c.step; });
        const std::string track = st == t.steps.end() ? std::string() : st->track;
        p = process_of("t:" + track, track.empty() ? std::string("steps") : track);
      } else {
        p = process_of("e:", "eager");
      }
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
      slices.push_back(std::move(s));
    }
  }

  // Offsets: each process from its first timestamp (align_tracks), else all from the first timestamp of the trace.
  auto first = std::numeric_limits<std::uint64_t>::max();
  for (const auto& s : slices) {
    processes[s.process].offset = std::min(processes[s.process].offset, s.start);
    first = std::min(first, s.start);
  }
  if (!options.align_tracks)
    for (auto& p : processes) p.offset = first;

  // Rows per process, then lanes, then thread ids: launches, streams (by device and stream), host.
  std::map<std::tuple<std::size_t, int, std::string>, std::vector<slice*>> rows;
  for (auto& s : slices) rows[{s.process, s.row_order, s.row}].push_back(&s);
  json events = json::array();
  for (const auto& p : processes)
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", p.pid}, {"tid", 0}, {"args", {{"name", p.name}}}});
  std::map<std::size_t, int> next_tid;
  std::vector<std::pair<std::tuple<std::size_t, int, std::string>, std::vector<slice*>>> ordered(rows.begin(),
                                                                                                   rows.end());
  // Stream rows sort by (device, stream) numerically rather than by text.
  auto numbers = [](const std::string& row) {
    unsigned d = 0;
    unsigned s = 0;
    if (std::sscanf(row.c_str(), "device %u stream %u", &d, &s) != 2) return std::pair<unsigned, unsigned>{0, 0};
    return std::pair<unsigned, unsigned>{d, s};
  };
  std::stable_sort(ordered.begin(), ordered.end(), [&](const auto& x, const auto& y) {
    const auto& [px, ox, rx] = x.first;
    const auto& [py, oy, ry] = y.first;
    return std::make_tuple(px, ox, numbers(rx)) < std::make_tuple(py, oy, numbers(ry));
  });
  for (auto& [key, row] : ordered) {
    const auto& [p, order, name] = key;
    assign_lanes(row);
    std::size_t lanes = 0;
    for (const auto* s : row) lanes = std::max(lanes, s->lane + 1);
    const int base = next_tid[p] + 1;
    next_tid[p] += static_cast<int>(lanes);
    for (std::size_t l = 0; l < lanes; ++l)
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", processes[p].pid},
                        {"tid", base + static_cast<int>(l)},
                        {"args", {{"name", l == 0 ? name : fmt::format("{} lane {}", name, l + 1)}}}});
    for (auto* s : row) s->tid = base + static_cast<int>(s->lane);
  }
  for (auto& s : slices) {
    const auto offset = processes[s.process].offset;
    s.event["pid"] = processes[s.process].pid;
    s.event["tid"] = s.tid;
    s.event["ts"] = micros(s.start, offset);
    s.event["dur"] = static_cast<double>(s.end - s.start) / 1000.0;
    events.push_back(std::move(s.event));
  }

  // Flow arrows along the dependencies, for the first launches of each executable graph.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::size_t>> launches; // (exec, corr) -> records
  for (std::size_t i = 0; i < t.activities.size(); ++i)
    if (an.activities[i].flat != npos)
      launches[{t.activities[i].exec_id, an.activities[i].correlation}].push_back(i);
  std::map<std::uint32_t, std::vector<std::pair<std::uint64_t, const std::vector<std::size_t>*>>> by_exec;
  for (const auto& [key, records] : launches) {
    auto start = std::numeric_limits<std::uint64_t>::max();
    for (auto i : records) start = std::min(start, t.activities[i].start_ns);
    by_exec[key.first].emplace_back(start, &records);
  }
  std::uint64_t flow_id = 0;
  // From the end of `from`'s slice, or with `from_start` (a programmatic edge: the dependent may start while its
  // predecessor runs) from its start.
  auto arrow = [&](std::size_t from, std::size_t to, bool from_start = false) {
    const auto& sf = slices[slice_of[from]];
    const auto& st = slices[slice_of[to]];
    // Inside the slices (1 ns or half the slice from their ends), so each binds to its own slice.
    const auto s_inset = std::min<std::uint64_t>(1, (sf.end - sf.start) / 2);
    const auto f_inset = std::min<std::uint64_t>(1, (st.end - st.start) / 2);
    const double s_ts = micros(from_start ? sf.start + s_inset : sf.end - s_inset, processes[sf.process].offset);
    const double f_ts = micros(st.start + f_inset, processes[st.process].offset);
    ++flow_id;
    events.push_back({{"ph", "s"}, {"id", flow_id}, {"name", "dependency"}, {"cat", "dependency"},
                      {"pid", processes[sf.process].pid}, {"tid", sf.tid}, {"ts", s_ts}});
    events.push_back({{"ph", "f"}, {"bp", "e"}, {"id", flow_id}, {"name", "dependency"}, {"cat", "dependency"},
                      {"pid", processes[st.process].pid}, {"tid", st.tid}, {"ts", f_ts}});
  };
  for (auto& [exec, list] : by_exec) {
    std::sort(list.begin(), list.end());
    for (std::size_t n = 0; n < list.size() && n < options.flow_launches; ++n) {
      const auto& records = *list[n].second;
      const auto& g = *an.activities[records.front()].graph;
      std::vector<bool> active(g.nodes.size(), false);
      // Per node: the records under it (itself or its bodies), by end time; and the records of the node itself.
      std::vector<std::vector<std::size_t>> under(g.nodes.size());
      std::vector<std::vector<std::size_t>> own(g.nodes.size());
      for (auto i : records) {
        const auto flat = an.activities[i].flat;
        if (flat == npos) continue;
        own[flat].push_back(i);
        for (auto f = flat; f != npos; f = g.nodes[f].owner) {
          active[f] = true;
          under[f].push_back(i);
        }
      }
      for (auto& v : under)
        std::sort(v.begin(), v.end(),
                  [&](std::size_t a, std::size_t b) { return t.activities[a].end_ns < t.activities[b].end_ns; });
      // The latest record under `p` that ended before `time` (+ tolerance): a binary search.
      auto source = [&](std::size_t p, std::uint64_t time) {
        const auto& v = under[p];
        const auto limit = time + detail::tolerance_ns;
        const auto it = std::upper_bound(v.begin(), v.end(), limit,
                                         [&](std::uint64_t x, std::size_t i) { return x < t.activities[i].end_ns; });
        return it == v.begin() ? npos : *std::prev(it);
      };
      for (std::size_t q = 0; q < g.nodes.size(); ++q) {
        if (!active[q]) continue;
        const auto preds = detail::active_predecessors(g, q, active);
        if (preds.empty()) continue;
        std::vector<std::size_t> targets;
        if (g.nodes[q].node->bodies.empty()) {
          targets = own[q];
        } else {
          std::size_t earliest = npos;
          for (auto i : under[q])
            if (earliest == npos || t.activities[i].start_ns < t.activities[earliest].start_ns) earliest = i;
          if (earliest != npos) targets.push_back(earliest);
        }
        const auto& overlapping = g.nodes[q].programmatic_preds;
        for (auto x : targets)
          for (auto p : preds) {
            const bool programmatic = std::find(overlapping.begin(), overlapping.end(), p) != overlapping.end();
            if (auto y = source(p, t.activities[x].start_ns); y != npos) {
              arrow(y, x);
            } else if (programmatic) { // it overlaps x: the latest record under p that started before x
              std::size_t started = npos;
              for (auto i : under[p])
                if (t.activities[i].start_ns <= t.activities[x].start_ns &&
                    (started == npos || t.activities[i].start_ns > t.activities[started].start_ns))
                  started = i;
              if (started != npos) arrow(started, x, true);
            }
          }
      }
    }
  }

  json other{{"generator", "conveyor profile"},
             {"device", t.device_name},
             {"activities", t.activities.size()},
             {"records_analysed", r.records},
             {"attributed", r.attributed},
             {"dropped_records", t.dropped_records},
             {"align_tracks", options.align_tracks}};
  json out{{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}, {"otherData", std::move(other)}};
  return out.dump();
}

} // namespace conveyor::profile
