// analyze(): attributes every activity of a trace to a node of a watched graph (CUPTI's flattened node numbering,
// checked against the description) or to eager work by name and order, forms the units ("launches"), and measures
// nodes (records, total, median, min, max, share) and launches (wall, busy, gaps, critical path).
//
// Units: an activity of a marked step (activity::step != 0, or the step of the graph launch a conditional body's
// record belongs to) belongs to that step; graph work outside steps forms one unit per graph launch (exec_id,
// correlation); eager work outside steps forms one unit, of track "".
#include "conveyor/profile/report.hpp"

#include "util/median.hpp"
#include "profile/analysis.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace conveyor::profile {

namespace detail {

namespace {

double to_us(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Differences in integers first: CUPTI timestamps (ns since the epoch) do not fit a double's mantissa to the ns.
double to_us(std::uint64_t from_ns, std::uint64_t to_ns) {
  return to_ns >= from_ns ? static_cast<double>(to_ns - from_ns) / 1000.0
                          : -static_cast<double>(from_ns - to_ns) / 1000.0;
}

std::string shape_text(const std::array<unsigned, 3>& s) { return fmt::format("{}x{}x{}", s[0], s[1], s[2]); }

// CUPTI's numbering: the graph's own nodes in creation order, then, for each node and each of its bodies in order,
// that body's nodes followed by their own bodies (depth first).
void flatten(flat_graph& fg, const graph_description& g, const std::vector<std::size_t>& prefix,
             const std::string& label_prefix, std::size_t owner);

// g's own nodes, flat, after the nodes so far.
void add_flat_nodes(flat_graph& fg, const graph_description& g, const std::vector<std::size_t>& prefix,
                    const std::string& label_prefix, std::size_t owner) {
  const std::size_t first = fg.nodes.size();
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    flat_node f;
    f.node = &g.nodes[i];
    f.path = prefix;
    f.path.push_back(i);
    f.label = label_prefix + g.nodes[i].display_name();
    f.top = owner == npos ? first + i : fg.nodes[owner].top;
    f.owner = owner;
    fg.nodes.push_back(std::move(f));
  }
}

// The predecessors of g's flat nodes (node 0 at `first`), programmatic ones apart too.
void link_flat_nodes(flat_graph& fg, const graph_description& g, std::size_t first) {
  for (std::size_t e = 0; e < g.edges.size(); ++e) {
    const auto [from, to] = g.edges[e];
    fg.nodes[first + to].preds.push_back(first + from);
    if (g.edge_type_of(e) != edge_type::full) fg.nodes[first + to].programmatic_preds.push_back(first + from);
  }
}

// The bodies of g's nodes (node 0 at `first`), each flattened in turn.
void flatten_bodies(flat_graph& fg, const graph_description& g, const std::vector<std::size_t>& prefix,
                    const std::string& label_prefix, std::size_t first) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& n = g.nodes[i];
    for (std::size_t b = 0; b < n.bodies.size(); ++b) {
      auto path = prefix;
      path.push_back(i);
      path.push_back(b);
      flatten(fg, n.bodies[b], path, fmt::format("{}{}/body {}/", label_prefix, n.display_name(), b), first + i);
    }
  }
}

void flatten(flat_graph& fg, const graph_description& g, const std::vector<std::size_t>& prefix,
             const std::string& label_prefix, std::size_t owner) {
  const std::size_t first = fg.nodes.size();
  add_flat_nodes(fg, g, prefix, label_prefix, owner);
  link_flat_nodes(fg, g, first);
  flatten_bodies(fg, g, prefix, label_prefix, first);
}

node_kind node_kind_of(activity_kind k) {
  switch (k) {
  case activity_kind::kernel: return node_kind::kernel;
  case activity_kind::memcpy: return node_kind::memcpy;
  case activity_kind::memset: return node_kind::memset;
  }
  return node_kind::other;
}

std::string record_text(const activity& a) {
  return fmt::format("{} {} at node {}:{}", to_string(a.kind), a.name.empty() ? "?" : a.name, a.node_id >> 32U,
                     a.node_id & 0xffffffffU);
}

// An eager activity's name: the kernel's, or "memcpy HtoD", "memset".
std::string eager_name(const activity& a) {
  if (!a.name.empty()) return a.name;
  if (a.kind == activity_kind::memcpy && !a.copy_kind.empty()) return fmt::format("memcpy {}", a.copy_kind);
  return to_string(a.kind);
}

// CUDA runs some memset (and copy) nodes as kernels of its own ("memset32", ...): such a record is the node's.
bool is_driver_kernel_of(const activity& a, const node_description& n) {
  if (a.kind != activity_kind::kernel) return false;
  if (n.kind == node_kind::memset) return a.name.rfind("memset", 0) == 0;
  return n.kind == node_kind::memcpy && (a.name.rfind("memcpy", 0) == 0 || a.name.rfind("copy", 0) == 0);
}

// Why the kernel record `a` is not a run of kernel node `n` ("" when it can be); `where` names the node.
// Why a record that ran `what` (grid or block) `ran` is not a run of a node whose `what` is `has` ("" when the node's
// is unknown or the same).
std::string shape_mismatch(std::string_view what, const std::array<unsigned, 3>& ran,
                           const std::array<unsigned, 3>& has, const std::string& where) {
  constexpr std::array<unsigned, 3> unknown{0, 0, 0};
  if (has == unknown || ran == has) return {};
  return fmt::format("{}: the record ran {} {}, the node has {} {}", where, what, shape_text(ran), what,
                     shape_text(has));
}

std::string kernel_mismatch(const activity& a, const node_description& n, const std::string& where) {
  if (!n.kernel_name.empty() && a.name != n.kernel_name)
    return fmt::format("{}: the record ran kernel '{}', the node launches '{}'", where, a.name, n.kernel_name);
  if (std::string why = shape_mismatch("grid", a.grid, n.grid, where); !why.empty()) return why;
  return shape_mismatch("block", a.block, n.block, where);
}

// Why record `a` is not a run of node `n` ("" when it can be): the kind, then a kernel's name and shape or a copy's
// or memset's bytes.
std::string mismatch(const activity& a, const node_description& n, const std::string& where) {
  if (n.kind != node_kind_of(a.kind))
    return fmt::format("{} is a {} node, the record a {}", where, to_string(n.kind), to_string(a.kind));
  if (a.kind == activity_kind::kernel) return kernel_mismatch(a, n, where);
  if (n.bytes != 0 && a.bytes != n.bytes)
    return fmt::format("{}: the record {} {} bytes, the node {} bytes", where,
                       a.kind == activity_kind::memcpy ? "copied" : "set", a.bytes, n.bytes);
  return {};
}

// Why the node id of `a` names no node of g ("" when it names one).
std::string node_id_error(const activity& a, const flat_graph& g) {
  const auto& name = g.watched->name;
  if ((a.node_id >> 32U) != a.exec_id)
    return fmt::format("the node id's high 32 bits are not the id of executable graph {} ('{}')", a.exec_id, name);
  if ((a.node_id & 0xffffffffU) >= g.nodes.size())
    return fmt::format("node index beyond the {} nodes of graph '{}' (executable graph {}, nested bodies "
                       "included): the description does not match the executable graph",
                       g.nodes.size(), name, a.exec_id);
  return {};
}

// Why record `a` is not a run of flat node `index` of g ("" when it can be, a driver kernel of the node included).
std::string node_mismatch(const activity& a, const flat_graph& g, std::size_t index) {
  const flat_node& f = g.nodes[index];
  if (is_driver_kernel_of(a, *f.node)) return {};
  const auto where = fmt::format("graph '{}' node {} ('{}')", g.watched->name, index, f.label);
  return mismatch(a, *f.node, where);
}

void attribute(const activity& a, const std::unordered_map<std::uint32_t, const flat_graph*>& by_exec,
               activity_info& info) {
  if (a.exec_id == 0) {
    info.attributed = true;
    return;
  }
  auto fail = [&](std::string reason) {
    info.reason = std::move(reason);
    info.example = record_text(a);
  };
  const auto found = by_exec.find(a.exec_id);
  if (found == by_exec.end())
    return fail(fmt::format("executable graph {} was not watched (profiler::watch)", a.exec_id));
  const flat_graph& g = *found->second;
  info.graph = &g;
  if (std::string why = node_id_error(a, g); !why.empty()) return fail(std::move(why));
  const std::size_t index = a.node_id & 0xffffffffU;
  if (std::string why = node_mismatch(a, g, index); !why.empty()) return fail(std::move(why));
  info.attributed = true;
  info.flat = index;
}

// A graph launch's correlated records: its GPU window, per top-level node the first start and last end.
struct launch_window {
  std::uint32_t correlation = 0;
  std::uint64_t start = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t end = 0;
  std::uint64_t host_start = std::numeric_limits<std::uint64_t>::max(); // its cudaGraphLaunch; max: unknown
  std::uint64_t step = 0;
  std::map<std::size_t, std::pair<std::uint64_t, std::uint64_t>> tops; // top node -> (first start, last end)
};

// The nodes reached from `from` along `next` (a node's list of neighbours), transitively.
template <class Next>
std::set<std::size_t> reached(std::size_t from, Next next) {
  std::set<std::size_t> out;
  std::vector<std::size_t> todo{from};
  while (!todo.empty()) {
    const auto i = todo.back();
    todo.pop_back();
    for (auto j : next(i))
      if (out.insert(j).second) todo.push_back(j);
  }
  return out;
}

// Top-level ancestors and descendants of top-level node `top` (transitive).
std::pair<std::set<std::size_t>, std::set<std::size_t>> relatives(const flat_graph& g, std::size_t top) {
  std::set<std::size_t> ancestors =
      reached(top, [&](std::size_t i) -> const std::vector<std::size_t>& { return g.nodes[i].preds; });
  std::vector<std::vector<std::size_t>> successors(g.watched->graph.nodes.size());
  for (const auto& [from, to] : g.watched->graph.edges) successors[from].push_back(to);
  std::set<std::size_t> descendants =
      reached(top, [&](std::size_t i) -> const std::vector<std::size_t>& { return successors[i]; });
  return {std::move(ancestors), std::move(descendants)};
}

// Whether a conditional body's record `a` (under top-level node `top`) can belong to launch `w`: the launch's records
// of the node's ancestors ended before it, those of its descendants start after it, and it was launched before.
using relatives_cache =
    std::map<std::pair<const flat_graph*, std::size_t>, std::pair<std::set<std::size_t>, std::set<std::size_t>>>;

// The relatives of top-level node `top` of g, computed once.
const std::pair<std::set<std::size_t>, std::set<std::size_t>>& cached_relatives(const flat_graph* g, std::size_t top,
                                                                                relatives_cache& cache) {
  auto found = cache.find({g, top});
  if (found == cache.end()) found = cache.emplace(std::make_pair(g, top), relatives(*g, top)).first;
  return found->second;
}

// Whether launch `w`'s records of the node's ancestors ended before `a`, and those of its descendants start after it.
bool ordered_around(const activity& a, const std::pair<std::set<std::size_t>, std::set<std::size_t>>& relatives,
                    const launch_window& w) {
  const auto& [ancestors, descendants] = relatives;
  for (const auto& [node, times] : w.tops) {
    if (ancestors.count(node) != 0 && times.second > a.start_ns + tolerance_ns) return false;
    if (descendants.count(node) != 0 && times.first + tolerance_ns < a.end_ns) return false;
  }
  return true;
}

bool fits(const activity& a, const flat_graph* g, std::size_t top, const launch_window& w, relatives_cache& cache) {
  if (w.host_start != std::numeric_limits<std::uint64_t>::max() && w.host_start > a.start_ns) return false;
  if (g == nullptr || top == npos) return true;
  return ordered_around(a, cached_relatives(g, top, cache), w);
}

using launch_key = std::pair<std::uint32_t, std::uint32_t>; // (exec_id, correlation)

// Launch window w, widened to hold record a; its step the first record's that has one.
void widen(launch_window& w, const activity& a) {
  w.correlation = a.correlation;
  w.start = std::min(w.start, a.start_ns);
  w.end = std::max(w.end, a.end_ns);
  if (w.step == 0) w.step = a.step;
}

// The span of top-level node `top` in launch window w, widened to hold record a.
void widen_top(launch_window& w, std::size_t top, const activity& a) {
  auto [it, fresh] = w.tops.try_emplace(top, a.start_ns, a.end_ns);
  if (!fresh) it->second = {std::min(it->second.first, a.start_ns), std::max(it->second.second, a.end_ns)};
}

// Every graph launch's correlated records: its window and per top-level node its span.
std::map<launch_key, launch_window> launch_windows(const trace& t, const analysis& an) {
  std::map<launch_key, launch_window> launches;
  for (std::size_t i = 0; i < t.activities.size(); ++i) {
    const auto& a = t.activities[i];
    if (a.exec_id == 0 || a.correlation == 0) continue;
    auto& w = launches[{a.exec_id, a.correlation}];
    widen(w, a);
    const auto& info = an.activities[i];
    if (info.flat == npos) continue;
    widen_top(w, info.graph->nodes[info.flat].top, a);
  }
  return launches;
}

// The earliest host call of each correlation id.
std::unordered_map<std::uint32_t, const host_call*> earliest_calls(const trace& t) {
  std::unordered_map<std::uint32_t, const host_call*> calls;
  for (const auto& c : t.host_calls) {
    auto [it, fresh] = calls.try_emplace(c.correlation, &c);
    if (!fresh && c.start_ns < it->second->start_ns) it->second = &c;
  }
  return calls;
}

// Launch window w's host start from its call, and the call's step where the records had none.
void adopt_call(launch_window& w, const host_call& c) {
  w.host_start = c.start_ns;
  if (w.step == 0) w.step = c.step;
}

// Each launch's host start (its earliest cudaGraphLaunch) and step from the host calls; the launches of each
// executable graph by GPU start.
std::unordered_map<std::uint32_t, std::vector<const launch_window*>>
launches_by_exec(const trace& t, std::map<launch_key, launch_window>& launches) {
  const std::unordered_map<std::uint32_t, const host_call*> calls = earliest_calls(t);
  std::unordered_map<std::uint32_t, std::vector<const launch_window*>> by_exec;
  for (auto& [key, w] : launches) {
    if (auto c = calls.find(key.second); c != calls.end()) adopt_call(w, *c->second);
    by_exec[key.first].push_back(&w);
  }
  for (auto& [exec, list] : by_exec)
    std::sort(list.begin(), list.end(), [](const auto* x, const auto* y) { return x->start < y->start; });
  return by_exec;
}

// Of the launches just before and just after record `a` (either may be null), the earlier it fits, else the nearer.
const launch_window* fitting_launch(const activity& a, const activity_info& info, const launch_window* before,
                                    const launch_window* after, relatives_cache& cache) {
  const std::size_t top = info.flat == npos ? npos : info.graph->nodes[info.flat].top;
  if (before != nullptr && fits(a, info.graph, top, *before, cache)) return before;
  if (after != nullptr && fits(a, info.graph, top, *after, cache)) return after;
  return before != nullptr ? before : after;
}

// The launch (of `list`, by start) that a conditional body's record `a` belongs to: the one whose window holds it,
// else the latest launch before it or the first after it that it fits (fits), else the nearest.
const launch_window* launch_of(const activity& a, const activity_info& info,
                               const std::vector<const launch_window*>& list, relatives_cache& cache) {
  const auto next = std::upper_bound(list.begin(), list.end(), a.start_ns,
                                     [](std::uint64_t s, const launch_window* w) { return s < w->start; });
  const launch_window* before = next == list.begin() ? nullptr : *(next - 1);
  const launch_window* after = next == list.end() ? nullptr : *next;
  if (before != nullptr && a.start_ns <= before->end) return before; // launches of one executable graph never overlap
  return fitting_launch(a, info, before, after, cache);
}

// A conditional body's record (correlation 0): the launch of its executable graph it belongs to, and its step.
void resolve_body_record(const activity& a, activity_info& info,
                         const std::unordered_map<std::uint32_t, std::vector<const launch_window*>>& by_exec,
                         relatives_cache& cache) {
  const auto found = by_exec.find(a.exec_id);
  if (found == by_exec.end()) return;
  const launch_window* chosen = launch_of(a, info, found->second, cache);
  info.correlation = chosen->correlation;
  if (info.step == 0) info.step = chosen->step;
}

// Assigns conditional-body work (correlation 0) to a graph launch of its executable graph, and graph work outside
// steps to the step of its launch.
void resolve_launches(const trace& t, analysis& an) {
  auto launches = launch_windows(t, an);
  const auto by_exec = launches_by_exec(t, launches);
  relatives_cache cache;
  for (std::size_t i = 0; i < t.activities.size(); ++i) {
    const auto& a = t.activities[i];
    auto& info = an.activities[i];
    if (a.exec_id == 0) continue;
    if (a.correlation != 0) {
      if (info.step == 0) info.step = launches[{a.exec_id, a.correlation}].step;
      continue;
    }
    resolve_body_record(a, info, by_exec, cache);
  }
}

// The unit an activity belongs to, before its members: its profiled step, else its graph launch, else eager work.
unit unit_of(const activity& a, const activity_info& info,
             const std::unordered_map<std::uint64_t, const step_info*>& steps) {
  unit u;
  if (info.step != 0) {
    u.kind = unit::type::step;
    u.step = info.step;
    if (auto s = steps.find(info.step); s != steps.end()) u.track = s->second->track;
  } else if (a.exec_id != 0) {
    u.kind = unit::type::graph;
    u.exec_id = a.exec_id;
    u.correlation = info.correlation;
    if (info.graph != nullptr) u.graph = info.graph->watched->name;
  }
  return u;
}

// The activities grouped into units, in the order each unit first appears.
std::vector<unit> group_units(const trace& t, const analysis& an) {
  std::unordered_map<std::uint64_t, const step_info*> steps;
  for (const auto& s : t.steps) steps.emplace(s.id, &s);
  std::map<std::tuple<int, std::uint64_t, std::uint32_t, std::uint32_t>, std::size_t> index;
  std::vector<unit> units;
  for (std::size_t i = 0; i < t.activities.size(); ++i) {
    unit u = unit_of(t.activities[i], an.activities[i], steps);
    const auto key = std::make_tuple(static_cast<int>(u.kind), u.step, u.exec_id, u.correlation);
    auto [it, fresh] = index.try_emplace(key, units.size());
    if (fresh) units.push_back(std::move(u));
    units[it->second].members.push_back(i);
  }
  return units;
}

// A step's graph: the first graph launch among its members.
void find_step_graph(unit& u, const trace& t, const analysis& an) {
  for (auto i : u.members) {
    if (t.activities[i].exec_id == 0) continue;
    u.exec_id = t.activities[i].exec_id;
    u.correlation = an.activities[i].correlation;
    if (an.activities[i].graph != nullptr) u.graph = an.activities[i].graph->watched->name;
    return;
  }
}

// Members in start order, the unit's window, and a step's graph.
void finish_unit(unit& u, const trace& t, const analysis& an) {
  std::stable_sort(u.members.begin(), u.members.end(), [&](std::size_t x, std::size_t y) {
    const auto& ax = t.activities[x];
    const auto& ay = t.activities[y];
    return std::tie(ax.start_ns, ax.end_ns) < std::tie(ay.start_ns, ay.end_ns);
  });
  u.start_ns = t.activities[u.members.front()].start_ns;
  u.end_ns = 0;
  for (auto i : u.members) u.end_ns = std::max(u.end_ns, t.activities[i].end_ns);
  if (u.kind == unit::type::step) find_step_graph(u, t, an);
}

// How often each eager member's name occurs in the unit.
std::unordered_map<std::string, std::size_t> eager_occurrences(const unit& u, const trace& t) {
  std::unordered_map<std::string, std::size_t> occurrences;
  for (auto i : u.members)
    if (t.activities[i].exec_id == 0) ++occurrences[eager_name(t.activities[i])];
  return occurrences;
}

// An eager member's label: its name, numbered (by `ordinal`, the count so far) when the name occurs more than once in
// the unit (`occurrences`).
void label_eager(const activity& a, activity_info& info, std::unordered_map<std::string, std::size_t>& occurrences,
                 std::unordered_map<std::string, std::size_t>& ordinal) {
  auto name = eager_name(a);
  info.ordinal = ++ordinal[name];
  info.label = occurrences[name] > 1 ? fmt::format("{} #{}", name, info.ordinal) : std::move(name);
}

// Labels of unit k's members: graph nodes by path; eager work by name, numbered when the name occurs more than once
// in the unit.
void label_members(const unit& u, std::size_t k, const trace& t, analysis& an) {
  std::unordered_map<std::string, std::size_t> occurrences = eager_occurrences(u, t);
  std::unordered_map<std::string, std::size_t> ordinal;
  for (auto i : u.members) {
    const auto& a = t.activities[i];
    auto& info = an.activities[i];
    info.unit = k;
    if (a.exec_id == 0) label_eager(a, info, occurrences, ordinal);
    else if (info.flat != npos) info.label = info.graph->nodes[info.flat].label;
    else info.label = fmt::format("{} (unattributed)", a.name.empty() ? to_string(a.kind) : a.name);
  }
}

void form_units(const trace& t, analysis& an, const analyze_options& options) {
  std::vector<unit> units = group_units(t, an);
  for (auto& u : units) finish_unit(u, t, an);
  std::stable_sort(units.begin(), units.end(), [](const unit& x, const unit& y) {
    return std::tie(x.start_ns, x.end_ns) < std::tie(y.start_ns, y.end_ns);
  });
  std::unordered_map<std::string, std::size_t> seen;
  for (std::size_t k = 0; k < units.size(); ++k) {
    units[k].kept = seen[units[k].track]++ >= options.skip_launches;
    label_members(units[k], k, t, an);
  }
  an.units = std::move(units);
}

// The chain of activities, first to last, each of which waited for the one before it (see report.hpp).
// How far back the critical path's search for a gating activity looks after it found a candidate (activities, in
// start order): exact while no activity in the unit is longer than the stretch this covers, bounded always.
constexpr std::size_t scan_limit = 4096;

// The walk back from a unit's last activity along the activities each one waited for (critical_path).
class critical_walk {
public:
  critical_walk(const trace& t, const analysis& an, const unit& u) : t_(t), an_(an), m_(u.members) {
    find_last_and_longest();
    mark_active();
    visited_.assign(m_.size(), false);
  }

  std::vector<std::size_t> run() {
    visited_[last_] = true;
    std::vector<std::size_t> path{m_[last_]};
    for (std::size_t cur = last_;;) {
      const std::size_t best = gate_of(cur);
      if (best == npos) break;
      path.push_back(m_[best]);
      visited_[best] = true;
      cur = best;
    }
    std::reverse(path.begin(), path.end());
    return path;
  }

private:
  // last_: the member that ended last (of those, the last to start); max_duration_: the longest member's duration.
  void find_last_and_longest() {
    for (std::size_t k = 0; k < m_.size(); ++k) {
      const auto& a = t_.activities[m_[k]];
      const auto& l = t_.activities[m_[last_]];
      if (a.end_ns > l.end_ns || (a.end_ns == l.end_ns && a.start_ns > l.start_ns)) last_ = k;
      max_duration_ = std::max(max_duration_, a.end_ns - std::min(a.start_ns, a.end_ns));
    }
  }

  // Per graph launch in the unit: which flat nodes ran (themselves or in their bodies).
  void mark_active() {
    for (auto j : m_) {
      const auto& info = an_.activities[j];
      if (info.flat == npos) continue;
      auto& flags = active_[{t_.activities[j].exec_id, info.correlation}];
      flags.resize(info.graph->nodes.size(), false);
      for (auto f = info.flat; f != npos; f = info.graph->nodes[f].owner) flags[f] = true;
    }
  }

  // The best candidate of latest_before so far: the member that ended last, and how far the scan went past it.
  struct latest {
    std::size_t best = npos;
    std::uint64_t best_end = 0;
    std::size_t scanned_past = 0; // members looked at after the first candidate: bounded (one long activity would
                                  // otherwise defeat the duration bound and make the walk quadratic)

    // True when no member starting no later than `a` can end later than the best so far, or the scan went far enough.
    bool done(const activity& a, std::uint64_t max_duration) {
      return best != npos && (a.start_ns + max_duration < best_end || ++scanned_past > scan_limit);
    }
    void offer(std::size_t k, const activity& a) {
      if (best == npos || a.end_ns > best_end) {
        best = k;
        best_end = a.end_ns;
      }
    }
  };

  // The count of members that started by `limit` (members are in start order).
  [[nodiscard]] std::size_t started_by(std::uint64_t limit) const {
    return static_cast<std::size_t>(
        std::upper_bound(m_.begin(), m_.end(), limit,
                         [&](std::uint64_t v, std::size_t j) { return v < t_.activities[j].start_ns; }) -
        m_.begin());
  }

  // True when `a` (member j) ended by `limit`, or by `overlap_limit` when `overlap` takes it.
  template <class Overlap>
  static bool ends_in_time(const activity& a, std::size_t j, std::uint64_t limit, std::uint64_t overlap_limit,
                           Overlap& overlap) {
    return a.end_ns <= limit || (a.end_ns <= overlap_limit && overlap(j));
  }

  // The member that ended last before `cur` started (within the tolerance) among those `accept` takes; members
  // `overlap` takes (programmatic predecessors) may also end after `cur` started, as long as before it ended. Scans
  // back from the last member that started in time and stops when no earlier one can end later than the best so far.
  template <class Accept, class Overlap>
  std::size_t latest_before(std::size_t cur, Accept&& accept, Overlap&& overlap) const {
    const auto limit = t_.activities[m_[cur]].start_ns + tolerance_ns;
    const auto overlap_limit = t_.activities[m_[cur]].end_ns + tolerance_ns;
    latest l;
    for (std::size_t k = started_by(limit); k-- > 0;) {
      const auto& a = t_.activities[m_[k]];
      if (l.done(a, max_duration_)) break;
      if (visited_[k] || !accept(m_[k]) || !ends_in_time(a, m_[k], limit, overlap_limit, overlap)) continue;
      l.offer(k, a);
    }
    return l.best;
  }

  bool same_launch(std::size_t j, std::size_t cur) const {
    return t_.activities[j].exec_id == t_.activities[m_[cur]].exec_id &&
           an_.activities[j].correlation == an_.activities[m_[cur]].correlation;
  }

  // The programmatic predecessors of flat node f and of its top-level node, as flags.
  static std::vector<bool> programmatic_of(const flat_graph& g, std::size_t f) {
    std::vector<bool> programmatic(g.nodes.size(), false);
    for (auto p : g.nodes[f].programmatic_preds) programmatic[p] = true;
    for (auto p : g.nodes[g.nodes[f].top].programmatic_preds) programmatic[p] = true;
    return programmatic;
  }

  // Graph work: records of the DAG predecessors of its top-level node (walking through nodes that did not run) and
  // earlier records under that same node (nested bodies); programmatic predecessors (of the node itself, within its
  // body, or of its top-level node) may overlap it.
  std::size_t graph_gate(std::size_t cur) const {
    const auto& ca = t_.activities[m_[cur]];
    const auto& ci = an_.activities[m_[cur]];
    const auto& g = *ci.graph;
    const auto top = g.nodes[ci.flat].top;
    std::vector<bool> candidate(g.nodes.size(), false);
    candidate[top] = true;
    for (auto p : active_predecessors(g, top, active_.at({ca.exec_id, ci.correlation}))) candidate[p] = true;
    const std::vector<bool> programmatic = programmatic_of(g, ci.flat);
    return latest_before(
        cur,
        [&](std::size_t j) {
          const auto& info = an_.activities[j];
          return info.flat != npos && same_launch(j, cur) && candidate[g.nodes[info.flat].top];
        },
        [&](std::size_t j) {
          const auto f = an_.activities[j].flat;
          return programmatic[f] || programmatic[g.nodes[f].top];
        });
  }

  // Eager work: stream order, and graph launches enqueued before it (the stream waits for all of a launch, whose
  // nodes run on the graph's own streams: a copy after a WHILE loop waits for the loop's last body work).
  std::size_t eager_gate(std::size_t cur) const {
    const auto& ca = t_.activities[m_[cur]];
    return latest_before(
        cur,
        [&](std::size_t j) {
          const auto& a = t_.activities[j];
          if (a.device == ca.device && a.stream == ca.stream) return true;
          const auto launched = an_.activities[j].correlation;
          return a.exec_id != 0 && launched != 0 && ca.correlation != 0 && launched < ca.correlation;
        },
        no_overlap);
  }

  std::size_t gate_of(std::size_t cur) const {
    const auto& ca = t_.activities[m_[cur]];
    const auto& ci = an_.activities[m_[cur]];
    std::size_t best = npos;
    if (ci.flat != npos) best = graph_gate(cur);
    else if (ca.exec_id == 0) best = eager_gate(cur);
    if (best != npos) return best;
    // Else (a root node, eager work first on its stream, unattributed work): any other work of the unit.
    return latest_before(
        cur, [&](std::size_t j) { return ci.flat == npos || !same_launch(j, cur); }, no_overlap);
  }

  static bool no_overlap(std::size_t) { return false; }

  const trace& t_;
  const analysis& an_;
  const std::vector<std::size_t>& m_; // by start time
  std::size_t last_ = 0;
  std::uint64_t max_duration_ = 0;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<bool>> active_;
  std::vector<bool> visited_;
};

std::vector<std::size_t> critical_path(const trace& t, const analysis& an, const unit& u) {
  if (u.members.empty()) return {};
  return critical_walk(t, an, u).run();
}

// The earliest host start of the API calls of each step and of each correlation id.
struct call_starts {
  std::unordered_map<std::uint64_t, std::uint64_t> by_step;
  std::unordered_map<std::uint32_t, std::uint64_t> by_correlation;

  explicit call_starts(const trace& t) {
    for (const auto& c : t.host_calls) {
      if (c.step != 0) keep_earliest(by_step, c.step, c.start_ns);
      keep_earliest(by_correlation, c.correlation, c.start_ns);
    }
  }

  // starts[key]: the earliest of the starts seen.
  template <class Key>
  static void keep_earliest(std::unordered_map<Key, std::uint64_t>& starts, Key key, std::uint64_t start) {
    auto [it, fresh] = starts.try_emplace(key, start);
    if (!fresh) it->second = std::min(it->second, start);
  }
};

// Activity a's time on the critical path, and the idle time since `prev` (the one before it; null for the first).
void add_critical_time(launch_profile& lp, const activity& a, const activity* prev) {
  // Only the part after the one before it ended: under programmatic dependent launch a node starts (and waits)
  // while its predecessor still runs.
  const std::uint64_t from = prev != nullptr ? std::max(a.start_ns, prev->end_ns) : a.start_ns;
  lp.critical_path_us += to_us(std::min(from, a.end_ns), a.end_ns);
  if (prev != nullptr && a.start_ns > prev->end_ns) lp.critical_gaps_us += to_us(prev->end_ns, a.start_ns);
}

// The critical path's labels and time in `lp`; returns, per activity on it, the one it waited on (npos: the first).
std::unordered_map<std::size_t, std::size_t> add_critical_path(const trace& t, const analysis& an, const unit& u,
                                                               launch_profile& lp) {
  const auto path = critical_path(t, an, u);
  std::unordered_map<std::size_t, std::size_t> path_pred;
  for (std::size_t k = 0; k < path.size(); ++k) {
    path_pred[path[k]] = k == 0 ? npos : path[k - 1];
    lp.critical_path.push_back(an.activities[path[k]].label);
    add_critical_time(lp, t.activities[path[k]], k > 0 ? &t.activities[path[k - 1]] : nullptr);
  }
  return path_pred;
}

// The busy pieces of a unit (the union of its members' intervals, members in start order) and the idle gaps between
// them, each gap named by the activities around it.
class gap_scan {
public:
  gap_scan(const trace& t, const analysis& an, const unit& u,
           const std::unordered_map<std::size_t, std::size_t>& path_pred) :
      t_(t),
      an_(an),
      u_(u),
      m_(u.members),
      path_pred_(path_pred) {}

  void run(launch_profile& lp) {
    std::uint64_t piece_start = t_.activities[m_.front()].start_ns;
    std::uint64_t piece_end = t_.activities[m_.front()].end_ns;
    std::vector<std::size_t> ending{m_.front()}; // members of the piece that end at piece_end
    std::uint64_t busy_ns = 0;
    for (std::size_t k = 1; k <= m_.size(); ++k) {
      if (k < m_.size() && t_.activities[m_[k]].start_ns <= piece_end) {
        extend(m_[k], piece_end, ending);
        continue;
      }
      busy_ns += piece_end - piece_start;
      if (k == m_.size()) break;
      add_gap(lp, gap_at(k, piece_end, ending));
      piece_start = t_.activities[m_[k]].start_ns;
      piece_end = t_.activities[m_[k]].end_ns;
      ending = {m_[k]};
    }
    lp.busy_us = to_us(busy_ns);
    lp.utilisation = lp.wall_us > 0 ? lp.busy_us / lp.wall_us : 0;
  }

private:
  void extend(std::size_t i, std::uint64_t& piece_end, std::vector<std::size_t>& ending) const {
    const auto& a = t_.activities[i];
    if (a.end_ns > piece_end) {
      piece_end = a.end_ns;
      ending.clear();
    }
    if (a.end_ns == piece_end) ending.push_back(i);
  }

  // The gap from piece_end to the start of member k: "before" prefers an activity on the critical path, "after" the
  // one it waited on.
  idle_gap gap_at(std::size_t k, std::uint64_t piece_end, const std::vector<std::size_t>& ending) const {
    const auto gap_end = t_.activities[m_[k]].start_ns;
    const std::size_t before = gap_before(k, gap_end);
    const auto [after, on_path] = gap_after(before, ending);
    idle_gap gap;
    gap.start_us = to_us(u_.start_ns, piece_end);
    gap.duration_us = to_us(piece_end, gap_end);
    gap.after = an_.activities[after].label;
    gap.before = an_.activities[before].label;
    gap.on_critical_path = on_path;
    return gap;
  }

  // The activity the gap comes before: of the members starting at gap_end (from member k on), the first on the
  // critical path, else member k.
  [[nodiscard]] std::size_t gap_before(std::size_t k, std::uint64_t gap_end) const {
    for (std::size_t j = k; j < m_.size() && t_.activities[m_[j]].start_ns == gap_end; ++j)
      if (path_pred_.count(m_[j]) != 0) return m_[j];
    return m_[k];
  }

  // The activity the gap comes after: of those `ending` the piece, the one `before` waited on (the gap is then on the
  // critical path), else the first.
  [[nodiscard]] std::pair<std::size_t, bool> gap_after(std::size_t before,
                                                       const std::vector<std::size_t>& ending) const {
    std::size_t after = ending.front();
    bool on_path = false;
    if (auto p = path_pred_.find(before); p != path_pred_.end())
      for (auto e : ending)
        if (e == p->second) {
          after = e;
          on_path = true;
        }
    return {after, on_path};
  }

  static void add_gap(launch_profile& lp, idle_gap gap) {
    ++lp.gap_count;
    lp.gap_total_us += gap.duration_us;
    if (gap.duration_us > lp.largest_gap.duration_us) lp.largest_gap = std::move(gap);
  }

  const trace& t_;
  const analysis& an_;
  const unit& u_;
  const std::vector<std::size_t>& m_;
  const std::unordered_map<std::size_t, std::size_t>& path_pred_;
};

// A step's earliest API call; max when the unit is not a step or none is known.
std::uint64_t first_step_call(const unit& u, const call_starts& calls) {
  if (u.kind == unit::type::step)
    if (auto c = calls.by_step.find(u.step); c != calls.by_step.end()) return c->second;
  return std::numeric_limits<std::uint64_t>::max();
}

// The earliest API call of the unit's records' correlations; max when none is known.
std::uint64_t first_correlated_call(const analysis& an, const unit& u, const call_starts& calls) {
  auto host = std::numeric_limits<std::uint64_t>::max();
  for (auto j : u.members) {
    const auto correlation = an.activities[j].correlation;
    if (auto c = calls.by_correlation.find(correlation); correlation != 0 && c != calls.by_correlation.end())
      host = std::min(host, c->second);
  }
  return host;
}

// The first enqueuing API call of a unit: the step's earliest, else the earliest of its records' correlations; max
// when none is known.
std::uint64_t first_api_call(const analysis& an, const unit& u, const call_starts& calls) {
  const auto host = first_step_call(u, calls);
  if (host != std::numeric_limits<std::uint64_t>::max()) return host;
  return first_correlated_call(an, u, calls);
}

launch_profile measure(const trace& t, const analysis& an, const unit& u, const call_starts& calls) {
  launch_profile lp;
  lp.track = u.track;
  lp.graph = u.graph;
  lp.step = u.step;
  lp.correlation = u.correlation;
  lp.start_ns = u.start_ns;
  lp.end_ns = u.end_ns;
  lp.wall_us = to_us(u.start_ns, u.end_ns);
  lp.activities = u.members.size();
  if (u.members.empty()) return lp;
  const auto path_pred = add_critical_path(t, an, u, lp);
  gap_scan(t, an, u, path_pred).run(lp);
  if (const auto host = first_api_call(an, u, calls); host != std::numeric_limits<std::uint64_t>::max())
    lp.api_to_gpu_us = to_us(host, u.start_ns);
  return lp;
}

} // namespace

namespace {

void check_edges_in_range(const graph_description& g, const std::string& where) {
  const std::size_t n = g.nodes.size();
  for (std::size_t k = 0; k < g.edges.size(); ++k) {
    const auto [from, to] = g.edges[k];
    if (from >= n || to >= n)
      throw std::invalid_argument(fmt::format(
          "{}: edge {} ({} -> {}) names a node out of range (the graph has {} nodes)", where, k, from, to, n));
  }
}

// The nodes of in-degree 0.
std::vector<std::size_t> roots_of(const std::vector<std::size_t>& indegree) {
  std::vector<std::size_t> roots;
  for (std::size_t i = 0; i < indegree.size(); ++i)
    if (indegree[i] == 0) roots.push_back(i);
  return roots;
}

// Kahn's order over g's edges: done[i] for every node it reaches; the nodes left lie on or behind a cycle.
std::vector<bool> topological_reach(const graph_description& g,
                                    const std::vector<std::vector<std::size_t>>& successors) {
  const std::size_t n = g.nodes.size();
  std::vector<std::size_t> indegree(n, 0);
  for (const auto& [from, to] : g.edges) ++indegree[to];
  std::vector<std::size_t> ready = roots_of(indegree);
  std::vector<bool> done(n, false);
  while (!ready.empty()) {
    const auto i = ready.back();
    ready.pop_back();
    done[i] = true;
    for (auto s : successors[i])
      if (--indegree[s] == 0) ready.push_back(s);
  }
  return done;
}

// A cycle among the nodes not done, as text: every such node has a predecessor not done, so walking backwards from
// one repeats a node.
std::string cycle_text(const graph_description& g, const std::vector<std::vector<std::size_t>>& predecessors,
                       const std::vector<bool>& done) {
  std::size_t i = 0;
  while (done[i]) ++i;
  std::vector<std::size_t> seen_at(g.nodes.size(), npos);
  std::vector<std::size_t> walk;
  while (seen_at[i] == npos) {
    seen_at[i] = walk.size();
    walk.push_back(i);
    i = *std::find_if(predecessors[i].begin(), predecessors[i].end(), [&](std::size_t p) { return !done[p]; });
  }
  std::vector<std::size_t> cycle(walk.begin() + static_cast<std::ptrdiff_t>(seen_at[i]), walk.end());
  std::reverse(cycle.begin(), cycle.end());
  cycle.push_back(cycle.front());
  std::string text;
  for (std::size_t k = 0; k < cycle.size(); ++k)
    text += fmt::format("{}{} ('{}')", k == 0 ? "" : " -> ", cycle[k], g.nodes[cycle[k]].display_name());
  return text;
}

} // namespace

// Edges in range, no cycle; recursively for the bodies. `where` names the graph in messages.
void validate(const graph_description& g, const std::string& where) {
  check_edges_in_range(g, where);
  const std::size_t n = g.nodes.size();
  std::vector<std::vector<std::size_t>> successors(n);
  std::vector<std::vector<std::size_t>> predecessors(n);
  for (const auto& [from, to] : g.edges) {
    successors[from].push_back(to);
    predecessors[to].push_back(from);
  }
  const std::vector<bool> done = topological_reach(g, successors);
  if (std::find(done.begin(), done.end(), false) != done.end())
    throw std::invalid_argument(fmt::format("{}: the edges form a cycle: {} (a graph must be a DAG)", where,
                                            cycle_text(g, predecessors, done)));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t b = 0; b < g.nodes[i].bodies.size(); ++b)
      validate(g.nodes[i].bodies[b],
               fmt::format("{}, body {} of node {} ('{}')", where, b, i, g.nodes[i].display_name()));
}

std::vector<std::size_t> active_predecessors(const flat_graph& g, std::size_t node, const std::vector<bool>& active) {
  std::vector<std::size_t> out;
  std::set<std::size_t> seen;
  std::vector<std::size_t> todo(g.nodes[node].preds.begin(), g.nodes[node].preds.end());
  while (!todo.empty()) {
    const auto p = todo.back();
    todo.pop_back();
    if (!seen.insert(p).second) continue;
    if (p < active.size() && active[p]) out.push_back(p);
    else todo.insert(todo.end(), g.nodes[p].preds.begin(), g.nodes[p].preds.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool is_within(const flat_graph& g, std::size_t node, std::size_t ancestor) {
  for (auto f = node; f != npos; f = g.nodes[f].owner)
    if (f == ancestor) return true;
  return false;
}

namespace {

// Each watched graph, validated and flattened.
void flatten_watched(const trace& t, analysis& an) {
  an.graphs.reserve(t.graphs.size());
  for (const auto& w : t.graphs) {
    validate(w.graph, fmt::format("watched graph '{}' (executable graph {})", w.name, w.exec_id));
    flat_graph fg;
    fg.watched = &w;
    flatten(fg, w.graph, {}, "", npos);
    an.graphs.push_back(std::move(fg));
  }
}

// The flattened graphs by executable graph id; each id watched once.
std::unordered_map<std::uint32_t, const flat_graph*> graphs_by_exec(const analysis& an) {
  std::unordered_map<std::uint32_t, const flat_graph*> by_exec;
  for (const auto& g : an.graphs)
    if (!by_exec.try_emplace(g.watched->exec_id, &g).second)
      throw std::invalid_argument(fmt::format("conveyor::profile::analyze: executable graph {} is watched twice "
                                              "('{}'); give each executable graph one description",
                                              g.watched->exec_id, g.watched->name));
  return by_exec;
}

// Each activity, checked, with its correlation and step, attributed to a node where it can be.
void attribute_all(const trace& t, analysis& an, const std::unordered_map<std::uint32_t, const flat_graph*>& by_exec) {
  an.activities.resize(t.activities.size());
  for (std::size_t i = 0; i < t.activities.size(); ++i) {
    const auto& a = t.activities[i];
    if (a.end_ns < a.start_ns)
      throw std::invalid_argument(fmt::format("conveyor::profile::analyze: activity {} ('{}') ends before it starts "
                                              "({} < {} ns)",
                                              i, a.name, a.end_ns, a.start_ns));
    auto& info = an.activities[i];
    info.correlation = a.correlation;
    info.step = a.step;
    attribute(a, by_exec, info);
  }
}

} // namespace

analysis analyse(const trace& t, const analyze_options& options) {
  analysis an;
  flatten_watched(t, an);
  attribute_all(t, an, graphs_by_exec(an));
  resolve_launches(t, an);
  form_units(t, an, options);
  return an;
}

} // namespace detail

namespace {

using detail::npos;

// Whether g or a body nested in it holds a WHILE node.
bool has_while(const graph_description& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [](const node_description& n) {
    return n.conditional_type == "while" || std::any_of(n.bodies.begin(), n.bodies.end(), has_while);
  });
}

// Graphs with WHILE bodies instantiated before the first profiler started: CUPTI then records one iteration.
std::vector<std::string> while_notes(const trace& t) {
  std::vector<std::string> notes;
  if (t.step_through)
    notes.emplace_back("CONVEYOR_STEP_THROUGH was set: graph launches ran node by node (each node a graph of its own, "
                       "followed by a synchronisation), so these are a debugging run's timings; unset it to profile");
  for (const auto& w : t.graphs)
    if (w.instantiated_before_profiling && has_while(w.graph))
      notes.push_back(fmt::format(
          "graph '{}' was instantiated before the first profiler of the process started: CUPTI then records only the "
          "first iteration of its WHILE bodies in each launch (CUDA 13.0, H200); instantiate it after a profiler "
          "has started to see every iteration",
          w.name));
  return notes;
}

// The records of the kept units, node by node (graph nodes by path, eager work by label) and track by track, and
// the unattributed ones by reason.
class node_table {
public:
  node_table(const trace& t, const detail::analysis& an) : t_(t), an_(an) {}

  // Adds the records of unit `k`, its launch measured into `r`.
  void add_unit(std::size_t k, profile_report& r, const detail::call_starts& calls) {
    const auto& u = an_.units[k];
    auto [tr, fresh_track] = track_index_.try_emplace(u.track, tracks_.size());
    if (fresh_track) tracks_.push_back(u.track);
    r.launches.push_back(detail::measure(t_, an_, u, calls));
    for (auto i : u.members) {
      ++r.records;
      if (an_.activities[i].attributed) {
        ++r.attributed;
        add_record(k, i, tr->second);
      } else {
        add_unattributed(an_.activities[i]);
      }
    }
  }

  // An unattributed record, counted in the group of its reason.
  void add_unattributed(const detail::activity_info& info) {
    auto [g, fresh] = group_index_.try_emplace(info.reason, groups_.size());
    if (fresh) groups_.push_back({0, info.reason, info.example});
    ++groups_[g->second].records;
  }

  // The node profiles, by track, then by total time, with their shares; the track summaries; the unattributed
  // groups, largest first.
  void finish(profile_report& r) {
    const std::vector<double> track_time = summarise_nodes();
    std::stable_sort(nodes_.begin(), nodes_.end(), [](const accumulator& x, const accumulator& y) {
      if (x.track != y.track) return x.track < y.track;
      return x.profile.total_us > y.profile.total_us;
    });
    move_nodes(r, track_time);
    for (std::size_t k = 0; k < tracks_.size(); ++k) r.tracks.push_back(track_of(tracks_[k], track_time[k], r));
    std::stable_sort(groups_.begin(), groups_.end(),
                     [](const unattributed_group& x, const unattributed_group& y) { return x.records > y.records; });
    r.unattributed = std::move(groups_);
  }

private:
  struct accumulator {
    node_profile profile;
    std::size_t track = 0;
    std::vector<double> durations;
    std::set<std::size_t> units;
  };

  // Each node's numbers summarised; the node time of each track.
  std::vector<double> summarise_nodes() {
    std::vector<double> track_time(tracks_.size(), 0);
    for (auto& acc : nodes_) {
      summarise(acc);
      track_time[acc.track] += acc.profile.total_us;
    }
    return track_time;
  }

  // The node profiles, with their share of their track's node time, into r.
  void move_nodes(profile_report& r, const std::vector<double>& track_time) {
    for (auto& acc : nodes_) {
      acc.profile.share = track_time[acc.track] > 0 ? acc.profile.total_us / track_time[acc.track] : 0;
      r.nodes.push_back(std::move(acc.profile));
    }
  }

  // The node an attributed record `i` of unit `k` belongs to, and its key.
  std::pair<node_ref, std::string> node_of(std::size_t k, std::size_t i) const {
    const auto& u = an_.units[k];
    const auto& info = an_.activities[i];
    node_ref ref;
    ref.track = u.track;
    if (info.flat != npos) {
      const auto& f = info.graph->nodes[info.flat];
      ref.graph = info.graph->watched->name;
      ref.path = f.path;
      ref.label = f.label;
      return {ref, fmt::format("{}\x1fg{}\x1f{}", u.track, ref.graph, fmt::join(f.path, ","))};
    }
    ref.ordinal = info.ordinal;
    ref.label = info.label;
    return {ref, fmt::format("{}\x1f"
                             "e{}",
                             u.track, ref.label)};
  }

  accumulator new_node(node_ref ref, std::size_t track, std::size_t i) const {
    const auto& a = t_.activities[i];
    const auto& info = an_.activities[i];
    accumulator acc;
    acc.track = track;
    acc.profile.ref = std::move(ref);
    if (info.flat != npos) {
      const auto& d = *info.graph->nodes[info.flat].node;
      acc.profile.kind = d.kind;
      acc.profile.kernel_name = d.kernel_name.empty() && a.kind == activity_kind::kernel ? a.name : d.kernel_name;
    } else {
      acc.profile.kind = detail::node_kind_of(a.kind);
      if (a.kind == activity_kind::kernel) acc.profile.kernel_name = a.name;
    }
    return acc;
  }

  void add_record(std::size_t k, std::size_t i, std::size_t track) {
    auto [ref, key] = node_of(k, i);
    auto [n, fresh] = node_index_.try_emplace(key, nodes_.size());
    if (fresh) nodes_.push_back(new_node(std::move(ref), track, i));
    auto& acc = nodes_[n->second];
    acc.durations.push_back(detail::to_us(t_.activities[i].start_ns, t_.activities[i].end_ns));
    acc.units.insert(k);
  }

  static void summarise(accumulator& acc) {
    auto& p = acc.profile;
    p.records = acc.durations.size();
    p.launches = acc.units.size();
    for (auto d : acc.durations) p.total_us += d;
    p.min_us = *std::min_element(acc.durations.begin(), acc.durations.end());
    p.max_us = *std::max_element(acc.durations.begin(), acc.durations.end());
    p.median_us = conveyor::detail::median(acc.durations);
  }

  static track_summary track_of(const std::string& track, double node_time, const profile_report& r) {
    track_summary s;
    s.track = track;
    s.node_time_us = node_time;
    std::vector<double> walls;
    std::vector<double> busys;
    std::vector<double> critical;
    double wall_sum = 0;
    auto first = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t last = 0;
    for (const auto& lp : r.launches) {
      if (lp.track != s.track) continue;
      ++s.launches;
      walls.push_back(lp.wall_us);
      busys.push_back(lp.busy_us);
      critical.push_back(lp.critical_path_us);
      wall_sum += lp.wall_us;
      s.busy_us += lp.busy_us;
      s.gap_total_us += lp.gap_total_us;
      first = std::min(first, lp.start_ns);
      last = std::max(last, lp.end_ns);
    }
    s.median_wall_us = conveyor::detail::median(walls);
    s.median_busy_us = conveyor::detail::median(busys);
    s.median_critical_path_us = conveyor::detail::median(critical);
    s.utilisation = wall_sum > 0 ? s.busy_us / wall_sum : 0;
    s.span_utilisation = last > first ? s.busy_us / detail::to_us(first, last) : 0;
    return s;
  }

  const trace& t_;
  const detail::analysis& an_;
  std::vector<std::string> tracks_; // in order of first appearance
  std::unordered_map<std::string, std::size_t> track_index_;
  std::vector<accumulator> nodes_;
  std::map<std::string, std::size_t> node_index_;
  std::vector<unattributed_group> groups_;
  std::unordered_map<std::string, std::size_t> group_index_;
};

} // namespace

profile_report analyze(const trace& t, const analyze_options& options) {
  std::vector<std::string> notes = while_notes(t);
  const auto an = detail::analyse(t, options);
  profile_report r;
  r.dropped_records = t.dropped_records;
  r.device_name = t.device_name;
  r.notes = std::move(notes);
  node_table table(t, an);
  const detail::call_starts calls(t);
  for (std::size_t k = 0; k < an.units.size(); ++k)
    if (an.units[k].kept) table.add_unit(k, r, calls);
  table.finish(r);
  return r;
}

} // namespace conveyor::profile
