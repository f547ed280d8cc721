// The tuning doctor: the CUDA Graphs performance checklist as checks over plain values (a graph's description, its
// executable graph's facts, a profile of its launches, a graphed callable's statistics and reasons). No CUDA call.
#include "conveyor/profile/doctor.hpp"
#include "conveyor/profile/readable.hpp"
#include "kinds/kind.hpp"
#include "util/byte_size.hpp"
#include "util/median.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <stdexcept>
#include <utility>

namespace conveyor::profile {

const char* to_string(severity s) noexcept {
  switch (s) {
  case severity::info: return "info";
  case severity::warning: return "warning";
  case severity::critical: return "critical";
  }
  return "info";
}

namespace {

// ---- formatting ------------------------------------------------------------------------------------------------

std::string us(double v) { return v < 10 ? fmt::format("{:.2f} µs", v) : fmt::format("{:.1f} µs", v); }
std::string percent(double share) { return fmt::format("{:.0f}%", share * 100); }
std::string human_bytes(std::size_t b) { return conveyor::detail::byte_size(static_cast<double>(b)); }
std::string bytes_text(std::size_t b) {
  return b >= 1024 ? fmt::format("{} B ({})", b, human_bytes(b)) : fmt::format("{} B", b);
}
std::string joined(const std::vector<std::string>& items, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}
std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

using conveyor::detail::median;

// A text and how often it came, in the order it first came.
struct tally {
  std::string text;
  std::size_t count = 0;
};

// Counts `text` once more in `tallies`.
void count_text(std::vector<tally>& tallies, std::string text) {
  auto it = std::find_if(tallies.begin(), tallies.end(), [&](const tally& t) { return t.text == text; });
  if (it == tallies.end()) tallies.push_back({std::move(text), 1});
  else ++it->count;
}

bool is_work(node_kind k) { return conveyor::detail::traits_of(k).work; }

bool is_while(const node_description& d) { return d.kind == node_kind::conditional && d.conditional_type == "while"; }

bool has_programmatic_attribute(const node_description& n) {
  return std::any_of(n.attributes.begin(), n.attributes.end(), [](const std::string& a) {
    std::string lower(a);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    return lower.find("programmatic") != std::string::npos;
  });
}

// ---- the description, flattened -------------------------------------------------------------------------------

// One graph (the top level or a nested body) with its adjacency; reachability on demand.
struct level {
  const graph_description* g = nullptr;
  std::string prefix;                                 // "" or "loop/body 0/"
  std::vector<std::size_t> path;                      // path of its container node + body index ({} at the top)
  std::size_t first = 0;                              // flat index of its node 0
  std::optional<std::size_t> parent;                  // flat index of the container node
  std::vector<std::vector<std::size_t>> preds, succs; // distinct, in id order
  std::vector<std::size_t> topo; // each node's place in a topological order (set by graph_view::add)

  [[nodiscard]] std::size_t size() const { return g->nodes.size(); }

  // Nodes reachable from `from` along `next` (succs or preds), `from` excluded; stops at nodes whose topological
  // place `keep` refuses. Linear in the level's size: no quadratic reachability table, whatever the graph's size.
  template <class Keep>
  [[nodiscard]] std::size_t search(const std::vector<std::size_t>& from,
                                   const std::vector<std::vector<std::size_t>>& next, std::vector<char>& seen,
                                   Keep keep) const {
    std::vector<std::size_t> stack;
    std::size_t count = 0;
    for (std::size_t f : from) visit(f, seen, stack, keep);
    while (!stack.empty()) {
      const std::size_t x = stack.back();
      stack.pop_back();
      ++count;
      for (std::size_t y : next[x]) visit(y, seen, stack, keep);
    }
    return count;
  }
  // Marks x seen and stacks it, unless it was seen before or `keep` refuses it.
  template <class Keep>
  static void visit(std::size_t x, std::vector<char>& seen, std::vector<std::size_t>& stack, Keep& keep) {
    if (seen[x] || !keep(x)) return;
    seen[x] = 1;
    stack.push_back(x);
  }
  // True when every other node of the level is before or after v: nothing can run beside it.
  [[nodiscard]] bool on_every_path(std::size_t v) const {
    std::vector<char> seen(size(), 0);
    seen[v] = 1;
    const auto all = [](std::size_t) { return true; };
    const std::size_t related = search(succs[v], succs, seen, all) + search(preds[v], preds, seen, all);
    return related + 1 == size();
  }
  // True when v can be reached from u other than through the edge u -> v (only nodes placed before v can lead to
  // it: the search stays there).
  [[nodiscard]] bool other_path(std::size_t u, std::size_t v) const {
    std::vector<char> seen(size(), 0);
    std::vector<std::size_t> from;
    for (std::size_t w : succs[u])
      if (w != v) from.push_back(w);
    bool found = false;
    (void)search(from, succs, seen, [&](std::size_t x) {
      if (x == v) found = true;
      return !found && topo[x] < topo[v];
    });
    return found;
  }
};

struct flat_node {
  const node_description* d = nullptr;
  std::size_t level = 0;
  std::size_t index = 0; // in its level
  std::string name;      // "parent/body k/name"
  std::vector<std::size_t> path;
};

struct graph_view {
  std::vector<level> levels;
  std::vector<flat_node> nodes;
  std::map<std::vector<std::size_t>, std::size_t> by_path; // flat index of each node path

  void add(const graph_description& g, std::string prefix, std::vector<std::size_t> path,
           std::optional<std::size_t> parent, const std::string& where) {
    level l;
    l.g = &g;
    l.prefix = std::move(prefix);
    l.path = std::move(path);
    l.first = nodes.size();
    l.parent = parent;
    link(l, distinct_edges(g, where));
    order(l, where);
    add_nodes(l, levels.size());
    const std::size_t first = l.first;
    levels.push_back(std::move(l));
    add_bodies(g, first);
  }

  // g's edges, each once, checked: both ends in range, none from a node to itself.
  static std::set<std::pair<std::size_t, std::size_t>> distinct_edges(const graph_description& g,
                                                                      const std::string& where) {
    const std::size_t n = g.nodes.size();
    std::set<std::pair<std::size_t, std::size_t>> edges;
    for (std::size_t e = 0; e < g.edges.size(); ++e) {
      const auto [from, to] = g.edges[e];
      if (from >= n || to >= n)
        throw std::invalid_argument(fmt::format(
            "conveyor::profile::diagnose: edge {} ({} -> {}) of {} names a node out of range (it has {} nodes)", e,
            from, to, where, n));
      if (from == to)
        throw std::invalid_argument(fmt::format(
            "conveyor::profile::diagnose: edge {} of {} is a cycle (node {} depends on itself)", e, where, from));
      edges.insert({from, to});
    }
    return edges;
  }

  static void link(level& l, const std::set<std::pair<std::size_t, std::size_t>>& edges) {
    l.preds.resize(l.size());
    l.succs.resize(l.size());
    for (const auto& [from, to] : edges) {
      l.succs[from].push_back(to);
      l.preds[to].push_back(from);
    }
  }

  // The level's nodes in Kahn's order: every node leaves the queue exactly when the edges are acyclic.
  static std::vector<std::size_t> kahn_order(const level& l) {
    std::vector<std::size_t> indeg(l.size()), queue;
    for (std::size_t v = 0; v < l.size(); ++v) {
      indeg[v] = l.preds[v].size();
      if (indeg[v] == 0) queue.push_back(v);
    }
    for (std::size_t k = 0; k < queue.size(); ++k) release_successors(l, queue[k], indeg, queue);
    return queue;
  }

  // Queues the successors of u that have no predecessor left once u leaves.
  static void release_successors(const level& l, std::size_t u, std::vector<std::size_t>& indeg,
                                 std::vector<std::size_t>& queue) {
    for (std::size_t w : l.succs[u])
      if (--indeg[w] == 0) queue.push_back(w);
  }

  // l.topo by Kahn's algorithm.
  static void order(level& l, const std::string& where) {
    const std::size_t n = l.size();
    const std::vector<std::size_t> queue = kahn_order(l);
    if (queue.size() != n)
      throw std::invalid_argument(fmt::format(
          "conveyor::profile::diagnose: the edges of {} are not a DAG ({} of {} nodes lie on or after a cycle)", where,
          n - queue.size(), n));
    l.topo.resize(n);
    for (std::size_t k = 0; k < queue.size(); ++k) l.topo[queue[k]] = k;
  }

  // The level's nodes, flat, named by the level's prefix.
  void add_nodes(const level& l, std::size_t li) {
    for (std::size_t i = 0; i < l.size(); ++i) {
      flat_node f;
      f.d = &l.g->nodes[i];
      f.level = li;
      f.index = i;
      f.name = l.prefix + l.g->nodes[i].display_name();
      f.path = l.path;
      f.path.push_back(i);
      by_path.emplace(f.path, nodes.size());
      nodes.push_back(std::move(f));
    }
  }

  // Every body of every node of g (whose node 0 is flat node `first`), as levels of their own.
  void add_bodies(const graph_description& g, std::size_t first) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i)
      for (std::size_t b = 0; b < g.nodes[i].bodies.size(); ++b) {
        std::vector<std::size_t> p = nodes[first + i].path;
        p.push_back(b);
        const std::string name = nodes[first + i].name;
        add(g.nodes[i].bodies[b], fmt::format("{}/body {}/", name, b), std::move(p), first + i,
            fmt::format("body {} of '{}'", b, name));
      }
  }

  [[nodiscard]] flat_node& at(std::size_t level_index, std::size_t i) { return nodes[levels[level_index].first + i]; }

  // True when nothing runs beside the node in its graph, nor beside any of its containers in theirs.
  [[nodiscard]] bool on_every_path(std::size_t flat) {
    std::optional<std::size_t> f = flat;
    while (f) {
      level& l = levels[nodes[*f].level];
      if (!l.on_every_path(nodes[*f].index)) return false;
      f = l.parent;
    }
    return true;
  }
};

// ---- the profile, narrowed to this graph -----------------------------------------------------------------------

struct profile_view {
  std::vector<const launch_profile*> launches;
  std::map<std::vector<std::size_t>, const node_profile*> by_path;
  double median_wall = 0;
  double typical_gap = 0; // idle time between nodes: sum of gaps / their count
  std::size_t gap_count = 0;
};

// A launch with numbers no measurement gives (NaN, infinite or negative times) is left out.
bool measured(const launch_profile& l) {
  return std::isfinite(l.wall_us) && l.wall_us >= 0 && std::isfinite(l.gap_total_us) && l.gap_total_us >= 0 &&
         std::isfinite(l.critical_gaps_us) && l.critical_gaps_us >= 0;
}

// The input's graph on the input's profile track, or on every track when it names none.
bool of_input(const doctor_input& in, const std::string& graph, const std::string& track) {
  return graph == in.profile_graph && (in.profile_track.empty() || track == in.profile_track);
}

// The graph's measured launches, their median wall time and the typical gap between nodes.
void add_launches(const doctor_input& in, profile_view& v) {
  std::vector<double> walls;
  double gaps = 0;
  for (const auto& l : in.profile->launches)
    if (of_input(in, l.graph, l.track) && measured(l)) {
      v.launches.push_back(&l);
      walls.push_back(l.wall_us);
      gaps += l.gap_total_us;
      v.gap_count += l.gap_count;
    }
  v.median_wall = median(walls);
  v.typical_gap = v.gap_count == 0 ? 0 : gaps / static_cast<double>(v.gap_count);
}

// The graph's profiled nodes by path; of a node on several tracks, the most measured.
void add_nodes(const doctor_input& in, profile_view& v) {
  for (const auto& n : in.profile->nodes) {
    if (!of_input(in, n.ref.graph, n.ref.track)) continue;
    auto [it, fresh] = v.by_path.emplace(n.ref.path, &n);
    if (!fresh && n.records > it->second->records) it->second = &n; // several tracks: the most measured
  }
}

profile_view view_of(const doctor_input& in) {
  profile_view v;
  if (in.profile == nullptr || in.profile_graph.empty()) return v;
  add_launches(in, v);
  add_nodes(in, v);
  return v;
}

// ---- the checks ------------------------------------------------------------------------------------------------

class doctor {
public:
  doctor(const doctor_input& in, const doctor_thresholds& t) : in_(in), t_(t), p_(view_of(in)) {
    if (in.graph != nullptr) {
      view_.emplace();
      view_->add(*in.graph, "", {}, std::nullopt, in.name.empty() ? "the graph" : fmt::format("graph '{}'", in.name));
    }
  }

  // The checks, in the order their findings sort among equal severities: each id written once, here.
  struct check_entry {
    const char* id;
    void (doctor::*run)();
  };
  static const check_entry checks[17];

  std::vector<finding> run() {
    for (const auto& c : checks) {
      current_ = c.id; // what add() and not_applicable() file their findings under
      (this->*c.run)();
    }
    const auto& ids = doctor_checks();
    const auto order = [&](const finding& f) {
      return static_cast<std::size_t>(std::find(ids.begin(), ids.end(), f.check) - ids.begin());
    };
    std::stable_sort(out_.begin(), out_.end(), [&](const finding& a, const finding& b) {
      if (a.applies != b.applies) return a.applies; // checks that did not apply last
      if (a.level != b.level) return a.level > b.level;
      return order(a) < order(b);
    });
    return std::move(out_);
  }

private:
  const doctor_input& in_;
  const doctor_thresholds& t_;
  profile_view p_;
  std::optional<graph_view> view_;
  std::vector<finding> out_;
  const char* current_ = ""; // the id of the check running (checks[])

  void add(severity s, std::vector<std::string> nodes, std::string evidence, std::string fix) {
    out_.push_back({current_, s, std::move(nodes), std::move(evidence), std::move(fix)});
  }
  // A check that saw its pattern but cannot apply here: why, for --verbose and the JSON.
  void not_applicable(std::vector<std::string> nodes, std::string why) {
    out_.push_back({current_, severity::info, std::move(nodes), std::move(why), {}, false});
  }

  [[nodiscard]] bool profiled() const { return !p_.launches.empty(); }
  [[nodiscard]] const node_profile* profile_of(const flat_node& f) const {
    const auto it = p_.by_path.find(f.path);
    return it == p_.by_path.end() ? nullptr : it->second;
  }
  // A profiled node's kind: the description's when it has the node, else the profile's.
  [[nodiscard]] node_kind kind_of(const node_profile& n) const {
    if (view_) {
      const auto it = view_->by_path.find(n.ref.path);
      if (it != view_->by_path.end()) return view_->nodes[it->second].d->kind;
    }
    return n.kind;
  }
  // The name a finding gives a profiled node: the description's when it has one, else the profile's label.
  [[nodiscard]] std::string name_of(const node_profile& n) const {
    if (view_) {
      const auto it = view_->by_path.find(n.ref.path);
      if (it != view_->by_path.end()) return view_->nodes[it->second].name;
    }
    return n.ref.label;
  }
  // Launches whose critical path holds the node (by its profile label, else its name).
  [[nodiscard]] std::size_t on_critical_path(const flat_node& f) const {
    const node_profile* np = profile_of(f);
    const std::string& label = np != nullptr ? np->ref.label : f.name;
    return static_cast<std::size_t>(std::count_if(p_.launches.begin(), p_.launches.end(), [&](const launch_profile* l) {
      return std::find(l->critical_path.begin(), l->critical_path.end(), label) != l->critical_path.end();
    }));
  }

  // 1. The launch is not amortised.
  static constexpr const char* amortise_fix =
      "capture more work per graph: several steps or iterations per launch, or a WHILE loop (conditional node) "
      "that repeats the step on the device, so that one launch's overhead is shared by more work";

  // The kernel, memcpy and memset nodes of the view (nested bodies counted), and whether a WHILE node repeats them.
  [[nodiscard]] std::pair<std::vector<std::string>, bool> work_nodes() const {
    std::vector<std::string> work;
    bool has_while = false;
    for (const auto& f : view_->nodes) {
      if (is_work(f.d->kind)) work.push_back(f.name);
      has_while = has_while || is_while(*f.d);
    }
    return {work, has_while};
  }

  void few_nodes() {
    if (view_ && in_.graph->nodes.empty()) return; // nothing to diagnose
    const auto [work, has_while] = view_ ? work_nodes() : std::pair<std::vector<std::string>, bool>{};
    if (profiled()) return few_nodes_measured(work); // the measurement decides
    few_nodes_unmeasured(work, has_while);
  }

  // few_nodes without a profile: the count of work nodes against the threshold, unless a WHILE node repeats them.
  void few_nodes_unmeasured(const std::vector<std::string>& work, bool has_while) {
    if (!view_ || has_while || work.size() >= t_.min_nodes) return;
    add(severity::warning, work,
        fmt::format("{} kernel/memcpy/memset nodes (nested bodies counted), fewer than {}: a launch costs about {} of "
                    "host and GPU time, likely not amortised (no profile to measure it)",
                    work.size(), t_.min_nodes, us(t_.launch_overhead_us)),
        amortise_fix);
  }

  // few_nodes with a profile: the median wall time per launch against 4 × the launch overhead.
  void few_nodes_measured(const std::vector<std::string>& work) {
    const double line = 4 * t_.launch_overhead_us;
    if (p_.median_wall >= line) return;
    std::string evidence = fmt::format(
        "median wall time {} per launch over {}, below 4 × the launch overhead of {} = {}", us(p_.median_wall),
        plural(p_.launches.size(), "launch", "launches"), us(t_.launch_overhead_us), us(line));
    if (view_) evidence += fmt::format("; {} kernel/memcpy/memset nodes", work.size());
    add(p_.median_wall <= t_.launch_overhead_us ? severity::critical : severity::warning,
        work.size() < t_.min_nodes ? work : std::vector<std::string>{}, std::move(evidence), amortise_fix);
  }

  // 2. Kernels shorter than the gaps between nodes.
  // Kernel nodes whose median is below the short-kernel threshold and below the typical gap, shortest first.
  [[nodiscard]] std::vector<const node_profile*> short_kernel_nodes(std::size_t& kernels) const {
    std::vector<const node_profile*> shorts;
    for (const auto& [path, n] : p_.by_path) { // one per node, whatever the tracks
      if (kind_of(*n) != node_kind::kernel) continue;
      ++kernels;
      if (n->median_us < t_.short_kernel_us && n->median_us < p_.typical_gap) shorts.push_back(n);
    }
    std::sort(shorts.begin(), shorts.end(), [](auto* a, auto* b) { return a->median_us < b->median_us; });
    return shorts;
  }

  // Pairs of short kernels on a chain (u's one successor is v, v's one predecessor is u): the natural fusions.
  [[nodiscard]] std::vector<std::string> chained_pairs(const std::vector<const node_profile*>& shorts) const {
    std::vector<std::string> pairs;
    if (!view_) return pairs;
    std::set<std::vector<std::size_t>> short_paths;
    for (const node_profile* n : shorts) short_paths.insert(n->ref.path);
    for (const auto& l : view_->levels) add_chained_pairs(l, short_paths, pairs);
    return pairs;
  }

  // chained_pairs in level l: pairs of nodes whose paths are in `short_paths`.
  void add_chained_pairs(const level& l, const std::set<std::vector<std::size_t>>& short_paths,
                         std::vector<std::string>& pairs) const {
    const auto is_short = [&](std::size_t i) { return short_paths.contains(view_->nodes[l.first + i].path); };
    for (std::size_t u = 0; u < l.size(); ++u)
      if (const auto v = only_successor(l, u); v && is_short(u) && is_short(*v))
        pairs.push_back(fmt::format("{} → {}", view_->nodes[l.first + u].name, view_->nodes[l.first + *v].name));
  }

  // u's successor when it is u's only successor and u its only predecessor: a link of a chain.
  [[nodiscard]] static std::optional<std::size_t> only_successor(const level& l, std::size_t u) {
    if (l.succs[u].size() != 1) return std::nullopt;
    const std::size_t v = l.succs[u][0];
    return l.preds[v].size() == 1 ? std::optional<std::size_t>(v) : std::nullopt;
  }

  void short_kernels() {
    if (!profiled() || p_.typical_gap <= 0) return;
    std::size_t kernels = 0;
    const std::vector<const node_profile*> shorts = short_kernel_nodes(kernels);
    if (shorts.empty()) return;
    std::vector<std::string> names, listed;
    name_shorts(shorts, names, listed);
    std::string evidence = fmt::format(
        "{} of {} kernels run a median below {} and below the typical gap between nodes of {} ({} over {}): {}",
        shorts.size(), kernels, us(t_.short_kernel_us), us(p_.typical_gap), plural(p_.gap_count, "gap", "gaps"),
        plural(p_.launches.size(), "launch", "launches"), joined(listed));
    add(shorts.size() >= 2 ? severity::warning : severity::info, std::move(names), std::move(evidence),
        fusion_fix(chained_pairs(shorts)));
  }

  // The short kernels' names, and the names with their medians.
  void name_shorts(const std::vector<const node_profile*>& shorts, std::vector<std::string>& names,
                   std::vector<std::string>& listed) const {
    for (const node_profile* n : shorts) {
      names.push_back(name_of(*n));
      listed.push_back(fmt::format("{} {}", names.back(), us(n->median_us)));
    }
  }

  // The fix for short kernels: the pairs on a chain to fuse when there are any.
  static std::string fusion_fix(const std::vector<std::string>& pairs) {
    return pairs.empty()
               ? "fuse each into a neighbouring kernel (one kernel doing both steps), or launch the consumers with "
                 "programmatic dependent launch so that they start while their producer finishes"
               : fmt::format("fuse the pairs that follow one another on a chain ({}) into one kernel each, or the "
                             "others into a neighbouring kernel; or launch the consumers with programmatic dependent "
                             "launch so that they start while their producer finishes",
                             joined(pairs, ", "));
  }

  // 3. Idle time on the critical path.
  // The largest idle gap of the launches, one on the critical path first; null when none was measured.
  [[nodiscard]] const idle_gap* largest_gap() const {
    const idle_gap* largest = nullptr;
    for (const launch_profile* l : p_.launches) {
      const idle_gap& g = l->largest_gap;
      if (g.duration_us > 0 && outranks(g, largest)) largest = &g;
    }
    return largest;
  }

  // True when gap g goes before `largest` (null: none yet): one on the critical path first, then the longer.
  static bool outranks(const idle_gap& g, const idle_gap* largest) {
    return largest == nullptr || (g.on_critical_path && !largest->on_critical_path) ||
           (g.on_critical_path == largest->on_critical_path && g.duration_us > largest->duration_us);
  }

  void critical_path_gaps() {
    if (!profiled() || p_.median_wall <= 0) return;
    std::vector<double> gaps;
    for (const launch_profile* l : p_.launches) gaps.push_back(l->critical_gaps_us);
    const idle_gap* largest = largest_gap();
    const double gap = median(gaps);
    const double share = gap / p_.median_wall;
    if (share <= t_.gap_share) return;
    std::string evidence = fmt::format(
        "median {} of idle time between the critical path's activities per launch, {} of the median wall time {} "
        "({}; threshold {})",
        us(gap), percent(share), us(p_.median_wall), plural(p_.launches.size(), "launch", "launches"),
        percent(t_.gap_share));
    std::vector<std::string> nodes = largest_gap_evidence(largest, evidence);
    add(share > 0.3 ? severity::critical : severity::warning, std::move(nodes), std::move(evidence), gap_fix(largest));
  }

  // The largest gap (none when null) added to `evidence`; the nodes on either side of it.
  static std::vector<std::string> largest_gap_evidence(const idle_gap* largest, std::string& evidence) {
    if (largest == nullptr) return {};
    evidence += fmt::format("; largest gap {} after {} before {}{}", us(largest->duration_us),
                            largest->after.empty() ? "(launch start)" : largest->after, largest->before,
                            largest->on_critical_path ? " (on the critical path)" : "");
    std::vector<std::string> nodes;
    for (const std::string* side : {&largest->after, &largest->before})
      if (!side->empty()) nodes.push_back(*side);
    return nodes;
  }

  // The fix for idle time on the critical path, with the pipelining advice when the largest gap follows a copy.
  [[nodiscard]] std::string gap_fix(const idle_gap* largest) const {
    std::string fix = "shorten the waits between dependent nodes: programmatic dependent launch on the critical "
                      "chain (the consumer starts while its producer drains), fewer dependencies (only the edges the "
                      "data needs), and fusion of short dependent kernels";
    if (largest != nullptr && copies_data(largest->after))
      fix += "; the largest gap follows a copy, so the GPU waits for its data: keep several items in flight, one's "
             "copies beside another's compute (conveyor::frame_pipeline; conveyor filter --pipeline 3)";
    return fix;
  }

  // True when the node the profile calls `name` is a copy between the host and the device.
  [[nodiscard]] bool copies_data(const std::string& name) const {
    if (!view_ || name.empty()) return false;
    const auto f =
        std::find_if(view_->nodes.begin(), view_->nodes.end(), [&](const flat_node& n) { return n.name == name; });
    return f != view_->nodes.end() && f->d->kind == node_kind::memcpy && f->d->copy_kind != "DtoD";
  }

  // 4. Kernel chains that programmatic dependent launch could overlap.
  void pdl_chains() {
    if (!view_) return;
    for (std::size_t li = 0; li < view_->levels.size(); ++li) pdl_chains_of(li);
  }

  // A kernel node without a programmatic launch attribute of its own.
  [[nodiscard]] static bool plain_kernel(const level& l, std::size_t i) {
    const node_description& d = l.g->nodes[i];
    return d.kind == node_kind::kernel && !has_programmatic_attribute(d);
  }

  // Links already programmatic (or launch-completion) in level `l`: not a gap to close.
  [[nodiscard]] static std::set<std::pair<std::size_t, std::size_t>> programmatic_links_of(const level& l) {
    std::set<std::pair<std::size_t, std::size_t>> out;
    for (std::size_t e = 0; e < l.g->edges.size(); ++e)
      if (l.g->edge_type_of(e) != edge_type::full) out.insert(l.g->edges[e]);
    return out;
  }

  // A level that already has programmatic links was made programmatic where its kernels wait for their dependencies
  // (make_programmatic, or programmatic launches): the full links left lead into kernels that do not wait (library
  // kernels), where a programmatic edge would let them read unfinished data. Said only in the verbose text.
  void pdl_already_applied(std::size_t li, std::size_t programmatic) {
    const level& l = view_->levels[li];
    const std::size_t left = full_kernel_links(l);
    if (left == 0) return;
    not_applicable(
        {}, fmt::format("{} has {} programmatic link(s); its {} full link(s) between kernels lead into kernels "
                        "the programmatic pass left alone (kernels that do not wait for their dependencies, "
                        "such as cuBLAS's and cuSPARSE's): no chain to make programmatic",
                        li == 0 ? std::string("the graph") : fmt::format("body {}", l.prefix), programmatic, left));
  }

  // The full links of level l between plain kernels.
  [[nodiscard]] static std::size_t full_kernel_links(const level& l) {
    std::size_t left = 0;
    for (std::size_t e = 0; e < l.g->edges.size(); ++e) {
      const auto [u, v] = l.g->edges[e];
      left += l.g->edge_type_of(e) == edge_type::full && plain_kernel(l, u) && plain_kernel(l, v) ? 1 : 0;
    }
    return left;
  }

  // Each node's one successor along a chain of plain kernels (each the only successor and predecessor).
  [[nodiscard]] static std::vector<std::optional<std::size_t>> chain_links(const level& l) {
    std::vector<std::optional<std::size_t>> next(l.size());
    for (std::size_t u = 0; u < l.size(); ++u)
      if (const auto v = only_successor(l, u); v && plain_kernel(l, u) && plain_kernel(l, *v)) next[u] = v;
    return next;
  }

  void pdl_chains_of(std::size_t li) {
    const level& l = view_->levels[li];
    if (const auto links = programmatic_links_of(l); !links.empty()) return pdl_already_applied(li, links.size());
    const auto next = chain_links(l);
    const std::vector<bool> linked_in = linked_into(next);
    for (std::size_t s = 0; s < l.size(); ++s) {
      if (linked_in[s] || !next[s]) continue;
      const std::vector<std::size_t> chain = chain_from(next, s);
      if (chain.size() >= t_.pdl_chain) report_pdl_chain(li, chain);
    }
  }

  // The nodes some link leads into (not the first of a chain).
  static std::vector<bool> linked_into(const std::vector<std::optional<std::size_t>>& next) {
    std::vector<bool> linked_in(next.size(), false);
    for (const auto& v : next)
      if (v) linked_in[*v] = true;
    return linked_in;
  }

  // The chain that starts at node s, following its links.
  static std::vector<std::size_t> chain_from(const std::vector<std::optional<std::size_t>>& next, std::size_t s) {
    std::vector<std::size_t> chain{s};
    for (auto v = next[s]; v; v = next[*v]) chain.push_back(*v);
    return chain;
  }

  void report_pdl_chain(std::size_t li, const std::vector<std::size_t>& chain) {
    std::vector<std::string> names;
    for (std::size_t i : chain) names.push_back(view_->at(li, i).name);
    std::string evidence = fmt::format("a chain of {} kernel nodes, each the only successor of the one before: {}",
                                       chain.size(), joined(names, " → "));
    const severity s_level = chain_idle_evidence(chain.size() - 1, evidence);
    add(s_level, std::move(names), std::move(evidence),
        "use programmatic dependent launch along the chain: call conveyor::device::wait_for_dependencies() "
        "(cudaGridDependencySynchronize) in each consumer before it reads the producer's output, then make the edges "
        "programmatic — conveyor::make_programmatic(graph, waiting_kernels) on the built or captured graph, "
        "programmatic(producer) dependencies in the builder, or conveyor::launch with launch_config::programmatic "
        "when capturing (cudaLaunchAttributeProgrammaticStreamSerialization); optionally "
        "conveyor::device::launch_dependents() in the producer once its output is written");
  }

  // The idle time the typical gap puts between `links` links of a chain, added to `evidence` when profiled; warning
  // when that is more than the gap share of the median wall time.
  severity chain_idle_evidence(std::size_t links, std::string& evidence) const {
    if (!profiled() || p_.typical_gap <= 0) return severity::info;
    const double idle = p_.typical_gap * static_cast<double>(links);
    evidence += fmt::format("; about {} of idle time per launch between them ({} × the typical gap {}), {} of the "
                            "median wall time {}",
                            us(idle), links, us(p_.typical_gap),
                            percent(p_.median_wall > 0 ? idle / p_.median_wall : 0), us(p_.median_wall));
    return p_.median_wall > 0 && idle > t_.gap_share * p_.median_wall ? severity::warning : severity::info;
  }

  // 5. Host work and pageable copies that block the GPU.
  void host_on_critical_path() {
    if (!view_) return;
    for (std::size_t fi = 0; fi < view_->nodes.size(); ++fi) blocking_node(fi);
  }

  // Flat node fi when it is a host node or a copy with a pageable host side.
  void blocking_node(std::size_t fi) {
    const flat_node& f = view_->nodes[fi];
    const bool host = f.d->kind == node_kind::host;
    const bool pageable = f.d->kind == node_kind::memcpy && f.d->pageable_host;
    if (!host && !pageable) return;
    std::string evidence = blocking_evidence(f, host);
    const bool worse = blocks_everything(fi, evidence);
    add(worse ? severity::critical : severity::warning, {f.name}, std::move(evidence),
        host ? "move the host work out of the graph: run it between graph launches (a stream callback with "
               "cudaLaunchHostFunc, or plain host code after synchronising), or do it on the device"
             : "pin the host memory (cudaMallocHost, or cudaHostRegister on the existing buffer) so that the copy "
               "is a DMA that can overlap; capture it again afterwards");
  }

  // What a host node or a pageable copy makes the GPU wait for.
  static std::string blocking_evidence(const flat_node& f, bool host) {
    return host ? "a host node: the GPU work after it waits for the CPU callable, run by the CUDA runtime's thread"
                : fmt::format("a {} copy of {} with a pageable host side: staged through a driver buffer, it cannot "
                              "overlap and runs at a fraction of the bus speed",
                              f.d->copy_kind.empty() ? "memcpy" : f.d->copy_kind, bytes_text(f.d->bytes));
  }

  // Whether flat node fi lies on every path through the graph, then (when profiled) its median and the launches
  // whose critical path holds it, added to `evidence`; true when it is on every path or on a critical path.
  bool blocks_everything(std::size_t fi, std::string& evidence) {
    bool worse = false;
    if (view_->on_every_path(fi)) {
      evidence += "; it lies on every path through the graph (nothing runs beside it)";
      worse = true;
    }
    const bool critical = on_measured_critical_path(view_->nodes[fi], evidence);
    return worse || critical;
  }

  // When profiled: f's median and the launches whose critical path holds it, added to `evidence`; true when any does.
  bool on_measured_critical_path(const flat_node& f, std::string& evidence) const {
    if (!profiled()) return false;
    if (const node_profile* np = profile_of(f)) evidence += fmt::format("; median {}", us(np->median_us));
    const std::size_t on = on_critical_path(f);
    if (on == 0) return false;
    evidence += fmt::format("; on the critical path in {} of {}", on, plural(p_.launches.size(), "launch", "launches"));
    return true;
  }

  // 6. Device copies that could be avoided or folded into a kernel.
  void removable_copies() {
    if (!view_) return;
    for (const flat_node& f : view_->nodes)
      if (f.d->kind == node_kind::memcpy) removable_copy(f);
  }

  // The names of the kernel nodes just before and just after node f in its graph.
  [[nodiscard]] std::vector<std::string> kernel_neighbours(const flat_node& f) const {
    const level& l = view_->levels[f.level];
    std::vector<std::string> kernels;
    for (const auto* side : {&l.preds[f.index], &l.succs[f.index]})
      for (std::size_t w : *side)
        if (l.g->nodes[w].kind == node_kind::kernel) kernels.push_back(view_->nodes[l.first + w].name);
    return kernels;
  }

  static std::string copy_fix(bool dtod, bool small, const std::vector<std::string>& kernels) {
    std::string fix;
    if (dtod)
      fix = "a device-to-device copy moves data the GPU already has: write it in place (let the producer write "
            "into the destination, or swap the two pointers between steps) and drop the copy";
    if (small && !kernels.empty())
      fix += fmt::format(
          "{}the copy is small: make it part of the {} kernel ({}): read or write the data there directly (a kernel "
          "argument for a few host values, mapped pinned memory for results the host reads)",
          fix.empty() ? "" : "; or, ", kernels.size() == 1 ? "neighbouring" : "producing or consuming",
          joined(kernels));
    return fix;
  }

  // A device-to-device copy, or a small copy beside a kernel.
  void removable_copy(const flat_node& f) {
    const std::vector<std::string> kernels = kernel_neighbours(f);
    const bool dtod = f.d->copy_kind == "DtoD";
    const bool small = f.d->bytes > 0 && f.d->bytes <= t_.small_copy_bytes;
    if (!dtod && !(small && !kernels.empty())) return;
    std::string evidence = copy_evidence(f, small, kernels);
    const double share = measured_share(f, evidence);
    const bool costly = (dtod && !small) || share >= 0.05;
    add(costly ? severity::warning : severity::info, {f.name}, std::move(evidence), copy_fix(dtod, small, kernels));
  }

  // The copy's kind and size, whether it is small, and its kernel neighbours.
  [[nodiscard]] std::string copy_evidence(const flat_node& f, bool small,
                                          const std::vector<std::string>& kernels) const {
    std::string evidence =
        fmt::format("{} copy of {}", f.d->copy_kind.empty() ? "memcpy" : f.d->copy_kind, bytes_text(f.d->bytes));
    if (small) evidence += fmt::format(", small (at most {})", human_bytes(t_.small_copy_bytes));
    if (!kernels.empty()) evidence += fmt::format("; kernel neighbours: {}", joined(kernels));
    return evidence;
  }

  // The node's share of the graph's node time, its median and share added to `evidence`; 0 when not measured.
  double measured_share(const flat_node& f, std::string& evidence) const {
    const node_profile* np = profiled() ? profile_of(f) : nullptr;
    if (np == nullptr) return 0;
    evidence += fmt::format("; median {}, {} of the graph's node time", us(np->median_us), percent(np->share));
    return np->share;
  }

  // 7. The first launch paid for the upload.
  void missing_upload() {
    if (in_.exec == nullptr || !in_.exec->first_launch_before_upload) return;
    if (in_.exec->launched_at_instantiation)
      return not_applicable({}, "the first launch came before any upload, but graphed made and launched the executable "
                                "graph in one call: an upload there would not be ahead of the launch (graphed::prepare "
                                "instantiates and uploads every bucket ahead)");
    add(severity::warning, {},
        fmt::format("the first launch came before any upload (uploaded since: {}): it paid for the upload of the "
                    "executable graph to the device",
                    in_.exec->uploaded ? "yes" : "no"),
        "call graph_exec::upload(stream) after instantiating, or instantiate(g, instantiate_flags::upload, stream), "
        "before the first launch (outside the timed loop)");
  }

  // 8. Graph allocations that stay allocated after a launch.
  static constexpr const char* free_fix =
      "add a mem_free node for each allocation at the end of the graph (graph::mem_free, or cudaFreeAsync in the "
      "captured work), or instantiate with instantiate_flags::auto_free_on_launch";

  void unfreed_allocations() {
    const exec_facts* e = in_.exec;
    const bool auto_free = e != nullptr && e->auto_free_on_launch;
    if (allocations_left(e) && !auto_free) return still_allocated(*e);
    if (!view_ || auto_free) return;
    if (freed_outside(e)) return;
    unfreed_by_the_graph(e);
  }

  // The executable graph's allocations were read after its last launch, and some are still allocated.
  static bool allocations_left(const exec_facts* e) {
    return e != nullptr && e->allocations_read && !e->unfreed_allocations.empty();
  }

  // The executable graph's allocations were read after a launch and none is left: freed outside the graph.
  static bool freed_outside(const exec_facts* e) {
    return e != nullptr && e->allocations_read && e->launched && e->unfreed_allocations.empty();
  }

  // The executable graph's allocations, read after its last launch, are still allocated.
  void still_allocated(const exec_facts& e) {
    add(severity::critical, e.unfreed_allocations,
        fmt::format("{} still allocated after the last launch and the executable graph was instantiated without "
                    "auto_free_on_launch: launching it again fails until they are freed",
                    plural(e.unfreed_allocations.size(), "graph allocation is", "graph allocations are")),
        free_fix);
  }

  // More mem_alloc than mem_free nodes in the graph (what a second launch needs freed).
  // The mem_alloc nodes of the view, and the count of its mem_free nodes.
  void allocs_and_frees(std::vector<std::string>& allocs, std::size_t& frees) const {
    for (const flat_node& f : view_->nodes) {
      if (f.d->kind == node_kind::mem_alloc) allocs.push_back(f.name);
      if (f.d->kind == node_kind::mem_free) ++frees;
    }
  }

  void unfreed_by_the_graph(const exec_facts* e) {
    std::vector<std::string> allocs;
    std::size_t frees = 0;
    allocs_and_frees(allocs, frees);
    if (allocs.size() <= frees) return;
    add(severity::warning, allocs,
        fmt::format("{} and {} in the graph: {} not freed by it, and the executable graph is {}; a second launch "
                    "fails unless the memory is freed between launches",
                    plural(allocs.size(), "mem_alloc node", "mem_alloc nodes"),
                    plural(frees, "mem_free node", "mem_free nodes"),
                    plural(allocs.size() - frees, "allocation is", "allocations are"),
                    e == nullptr ? "not known to use auto_free_on_launch" : "instantiated without auto_free_on_launch"),
        free_fix);
  }

  // 8b. Allocation nodes in a captured graph: a library call (or the captured code) allocated its scratch memory
  // inside the capture. Named by the call when a capture_scope labelled them (conveyor/libraries does).
  // The allocation nodes of the view, their bytes, and the calls that made them.
  struct allocation_census {
    std::vector<std::string> nodes;
    std::vector<tally> calls; // the call that made them, and how many
    std::size_t bytes = 0;
  };

  [[nodiscard]] allocation_census allocations() const {
    allocation_census c;
    for (const flat_node& f : view_->nodes) {
      if (f.d->kind != node_kind::mem_alloc) continue;
      c.nodes.push_back(f.name);
      c.bytes += f.d->bytes;
      count_text(c.calls, allocating_call(f.d->label));
    }
    return c;
  }

  // Each call with its count: "call ×2".
  static std::vector<std::string> counted(const std::vector<tally>& calls) {
    std::vector<std::string> made_by;
    for (const auto& [call, count] : calls) made_by.push_back(fmt::format("{} ×{}", call, count));
    return made_by;
  }

  // The call a capture_scope named in an allocation node's label ("<call>: allocation"), else an unnamed call.
  static std::string allocating_call(const std::string& label) {
    const std::string suffix = ": allocation";
    return label.size() > suffix.size() && label.ends_with(suffix)
               ? label.substr(0, label.size() - suffix.size())
               : std::string("an unnamed call (a library's workspace, or cudaMallocAsync)");
  }

  void captured_allocations() {
    if (!view_ || in_.graph == nullptr || !in_.graph->captured) return;
    const auto [nodes, calls, bytes] = allocations();
    if (nodes.empty()) return;
    const std::vector<std::string> made_by = counted(calls);
    const bool named =
        std::any_of(calls.begin(), calls.end(), [](const tally& c) { return !c.text.starts_with("an "); });
    add(named ? severity::warning : severity::info, nodes,
        fmt::format("{} in a captured graph ({} in all), made by {}: a conditional node's body cannot hold them "
                    "(instantiation fails), and every launch maps them from the graph memory pool",
                    plural(nodes.size(), "allocation node", "allocation nodes"), bytes_text(bytes),
                    joined(made_by, ", ")),
        "give the library a workspace allocated before capturing and bound to the capture stream "
        "(conveyor/libraries: cublas_handle, cublaslt_handle, cusparse_spmv, cufft_plan, cub_temp, "
        "thrust_workspace_allocator; docs/libraries.md), or allocate once outside the graph and pass the pointer");
  }

  // The graphed reasons that cost a capture, grouped: the text after "call N: ", values left out.
  using reason_group = tally;
  [[nodiscard]] std::vector<reason_group> churn_reasons() const {
    std::vector<reason_group> groups;
    if (in_.graphed_reasons == nullptr) return groups;
    static const std::regex call_prefix(R"(^call \d+: )");
    for (const std::string& r : *in_.graphed_reasons) {
      std::string text = std::regex_replace(r, call_prefix, "");
      if (text.starts_with("[") || text.find("no capture") != std::string::npos) continue; // rebinds: no capture
      if (text.starts_with("churn guard")) continue;                                       // the guard's own notes
      count_text(groups, without_values(std::move(text)));
    }
    std::stable_sort(groups.begin(), groups.end(),
                     [](const reason_group& a, const reason_group& b) { return a.count > b.count; });
    return groups;
  }

  // A reason with its values left out, so that reasons differing only in them group together.
  static std::string without_values(std::string text) {
    static const std::regex change_values(R"( changed from .*? to [^;:\s]+)");
    static const std::regex shape_values(R"( for shape \([^)]*\))");
    static const std::regex node_count(R"( of \d+ nodes)");
    static const std::regex notes(R"( \[[^\]]*\])");
    static const std::regex updated(R"( updated \d+ node\(s\))");
    static const std::regex above(R"( size \d+ above)");
    text = std::regex_replace(text, change_values, " changed");
    text = std::regex_replace(text, shape_values, " for a new shape");
    text = std::regex_replace(text, node_count, "");
    text = std::regex_replace(text, notes, "");
    text = std::regex_replace(text, updated, " updated node(s)");
    return std::regex_replace(text, above, " size above");
  }

  // The three most frequent reasons, quoted with their counts.
  static std::vector<std::string> top_reasons(const std::vector<reason_group>& groups) {
    std::vector<std::string> top;
    for (std::size_t k = 0; k < groups.size() && k < 3; ++k)
      top.push_back(fmt::format("\"{}\" ×{}", groups[k].text, groups[k].count));
    return top;
  }

  // The calls after the warm-ups (none when the warm-ups took every call).
  static std::size_t calls_after_warmups(const graphed_statistics& g) {
    return g.calls > g.warmups ? g.calls - g.warmups : 0;
  }

  // 9. Captures and instantiations in the steady state.
  void recapture_churn() {
    const graphed_statistics* g = in_.graphed;
    if (g == nullptr || calls_after_warmups(*g) == 0 || g->captures <= 1) return;
    const double calls = static_cast<double>(calls_after_warmups(*g));
    const double rate = static_cast<double>(g->captures + g->instantiations) / calls;
    if (rate <= t_.churn_rate) return;
    std::string evidence = fmt::format(
        "{:.2f} captures + instantiations per call ({} captures + {} instantiations over {} calls after {}; "
        "threshold {:.2f})",
        rate, g->captures, g->instantiations, calls_after_warmups(*g), plural(g->warmups, "warm-up", "warm-ups"),
        t_.churn_rate);
    const churn_split split = split_churn(*g, evidence);
    evidence += fmt::format("; {} for new shapes, {} for changed bindings", plural(split.shape, "event", "events"),
                            plural(split.binding, "re-capture", "re-captures"));
    add(rate > 0.5 ? severity::critical : severity::warning, {}, std::move(evidence), churn_fix(split));
  }

  // Shape churn (new shapes, evictions, sizes above the buckets) against binding churn (re-captures of a cached shape).
  struct churn_split {
    std::size_t shape = 0;
    std::size_t binding = 0;
  };
  // The split, from the reasons when there are any (their three most frequent added to `evidence`), else from the
  // statistics.
  [[nodiscard]] churn_split split_churn(const graphed_statistics& g, std::string& evidence) const {
    churn_split c;
    const auto groups = churn_reasons();
    if (groups.empty()) {
      c.binding = g.per_node_updates + g.whole_graph_updates + g.unchanged_recaptures;
      c.shape = (g.captures > c.binding ? g.captures - c.binding : 0) + g.evictions + g.eager_fallbacks;
      return c;
    }
    for (const auto& r : groups) (r.text.find("re-captured") != std::string::npos ? c.binding : c.shape) += r.count;
    evidence += fmt::format("; most frequent reasons: {}", joined(top_reasons(groups), "; "));
    return c;
  }

  static constexpr const char* shape_churn_fix =
      "shape churn: pass sizes as batch_size and set graphed_options::buckets (or a padding_rule per dimension, "
      "graphed_options::dimensions) so that sizes pad to a few captured shapes; raise max_graphs if graphs are "
      "evicted; keep shape arguments stable; graphed_options::churn runs the callable eagerly while it churns";
  static constexpr const char* binding_churn_fix =
      "binding churn: keep buffers stable (allocate once and reuse them); declare arguments that only flow "
      "into node fields (graphed_options::rebind_arguments with rebind_policy::learn or patch) so that their "
      "changes are patched instead of re-captured; wrap arguments the work does not depend on in "
      "conveyor::unkeyed";

  // The fix for the larger kind of churn: shapes (ties included) or bindings.
  static const char* churn_fix(const churn_split& split) {
    return split.shape >= split.binding ? shape_churn_fix : binding_churn_fix;
  }

  // 9b. The churn guard ran calls eagerly: the callable re-recorded more often than its cap allows.
  // What the churn guard did: the calls it ran eagerly (`share` of them), its trips and resumes.
  static std::string guard_evidence(const graphed_statistics& g, double share) {
    return fmt::format(
        "the churn guard ran {} of {} calls eagerly ({}): it engaged {} when the callable made more than {} captures "
        "and re-captures within {} calls, and resumed graphing {} after the arguments settled{}",
        g.guarded_calls, g.calls, percent(share), plural(g.guard_trips, "time", "times"), g.churn_max_records,
        g.churn_window, plural(g.guard_resumes, "time", "times"), g.guard_engaged ? "; it runs eagerly now" : "");
  }

  void churn_guard() {
    const graphed_statistics* g = in_.graphed;
    if (g == nullptr || g->guard_trips == 0) return;
    const double share = g->calls == 0 ? 0 : static_cast<double>(g->guarded_calls) / static_cast<double>(g->calls);
    std::string evidence = guard_evidence(*g, share);
    const std::vector<std::string> top = top_reasons(churn_reasons());
    if (!top.empty()) evidence += fmt::format("; what re-recorded: {}", joined(top, "; "));
    add(share > 0.5 || g->guard_engaged ? severity::critical : severity::warning, {}, std::move(evidence),
        "the shapes or arguments change faster than graphs pay back: pad sizes to a few shapes (batch_size with "
        "graphed_options::buckets, or a padding_rule per dimension in graphed_options::dimensions: buckets, multiple, "
        "power_of_two, limit), keep buffers stable or declare arguments that only flow into node fields "
        "(rebind_arguments); if the shapes are meant to change this often, run the callable eagerly "
        "(graphed_options::disabled)");
  }

  // 10. Updates that fell back to slower paths.
  // The churn graphed's statistics show: each kind that happened, and what to do about it.
  struct churn {
    std::vector<std::string> parts, fixes;
    std::size_t events = 0;
  };

  // Re-instantiations named in graphed's reasons (none when the reasons were not passed).
  [[nodiscard]] std::size_t reinstantiations() const {
    std::size_t n = 0;
    if (in_.graphed_reasons != nullptr)
      for (const std::string& r : *in_.graphed_reasons) n += r.find("re-instantiated") != std::string::npos ? 1 : 0;
    return n;
  }

  static void whole_graph_churn(const graphed_statistics& g, churn& c) {
    if (g.whole_graph_updates == 0) return;
    c.parts.push_back(plural(g.whole_graph_updates, "whole-graph update", "whole-graph updates"));
    c.fixes.push_back("whole-graph updates (cudaGraphExecUpdate) mean a node changed in a way the per-node setters "
                      "cannot set: keep kernels, launch shapes and node kinds the same between calls");
    c.events += g.whole_graph_updates;
  }

  void reinstantiation_churn(const graphed_statistics& g, churn& c) const {
    const std::size_t reinstantiated = reinstantiations();
    if (reinstantiated > 0) {
      c.parts.push_back(
          fmt::format("{} after a re-capture", plural(reinstantiated, "re-instantiation", "re-instantiations")));
      c.fixes.push_back("re-instantiations mean the topology changed: make the changing part a shape argument (its "
                        "own cached graph) or keep the node structure fixed");
      c.events += reinstantiated;
    } else if (g.instantiations > 1 && g.per_node_updates + g.whole_graph_updates + g.unchanged_recaptures > 0) {
      c.parts.push_back(fmt::format("{} with re-captures of cached shapes (some may be re-instantiations)",
                                    plural(g.instantiations, "instantiation", "instantiations")));
      c.fixes.push_back("pass the reasons (graphed::reasons()) to tell re-instantiations from new shapes");
    }
  }

  static void recapture_churn_parts(const graphed_statistics& g, churn& c) {
    if (g.unchanged_recaptures > 0) {
      c.parts.push_back(
          plural(g.unchanged_recaptures, "re-capture that changed nothing", "re-captures that changed nothing"));
      c.fixes.push_back("re-captures that change nothing come from an argument the GPU work does not use: wrap it in "
                        "conveyor::unkeyed or give the graphed callable a key function");
      c.events += g.unchanged_recaptures;
    }
    if (g.rebind_fallbacks > 1 && g.rebind_fallbacks > g.rebinds) {
      c.parts.push_back(fmt::format("{} against {}", plural(g.rebind_fallbacks, "rebind fallback", "rebind fallbacks"),
                                    plural(g.rebinds, "rebind", "rebinds")));
      c.fixes.push_back("rebind fallbacks re-capture because the changed argument is not embedded as it is "
                        "(transformed, used on the host or inside a child graph): pass the pointer itself, or set "
                        "rebind_policy::patch for arguments embedded at fixed offsets");
      c.events += g.rebind_fallbacks;
    }
  }

  void update_fallbacks() {
    const graphed_statistics* g = in_.graphed;
    if (g == nullptr) return;
    churn c;
    whole_graph_churn(*g, c);
    reinstantiation_churn(*g, c);
    recapture_churn_parts(*g, c);
    if (c.parts.empty()) return;
    const std::size_t calls = calls_after_warmups(*g);
    const double rate = calls == 0 ? 0 : static_cast<double>(c.events) / static_cast<double>(calls);
    std::string evidence = fmt::format("{} over {} calls after warm-ups ({} per-node updates, {} rebinds)",
                                       joined(c.parts, ", "), calls, g->per_node_updates, g->rebinds);
    add(rate > t_.churn_rate ? severity::warning : severity::info, {}, std::move(evidence), joined(c.fixes, "; "));
  }

  // 11. Dependencies between nodes that touch no common allocation.
  void serialised_branches() {
    if (!view_) return;
    for (auto& l : view_->levels)
      for (std::size_t u = 0; u < l.size(); ++u)
        for (std::size_t v : l.succs[u]) serialised_edge(l, u, v);
  }

  static std::string hex_list(const std::vector<std::uint64_t>& b) {
    std::vector<std::string> s;
    for (auto x : b) s.push_back(fmt::format("{:#x}", x));
    return joined(s);
  }

  // The edge u → v of level l, when both nodes list their allocations, none in common, and nothing else orders them.
  void serialised_edge(level& l, std::size_t u, std::size_t v) {
    const node_description& a = l.g->nodes[u];
    const node_description& b = l.g->nodes[v];
    if (a.buffers.empty() || b.buffers.empty()) return;
    std::vector<std::uint64_t> common;
    std::set_intersection(a.buffers.begin(), a.buffers.end(), b.buffers.begin(), b.buffers.end(),
                          std::back_inserter(common));
    if (!common.empty() || l.other_path(u, v)) return;
    const flat_node& fu = view_->nodes[l.first + u];
    const flat_node& fv = view_->nodes[l.first + v];
    std::string evidence =
        fmt::format("{} uses allocations {{{}}} and {} uses {{{}}}: none in common, and the edge {} → {} is the only "
                    "ordering between them",
                    fu.name, hex_list(a.buffers), fv.name, hex_list(b.buffers), fu.name, fv.name);
    const severity s = overlap_evidence(fu, fv, evidence);
    add(s, {fu.name, fv.name}, std::move(evidence),
        fmt::format("if {} does not read or write what {} writes, drop the dependency so they can run in "
                    "parallel (capture them on forked streams, or add {} without the edge); check first: "
                    "kernels can share memory through pointers stored in device memory, which the buffer "
                    "list does not see",
                    fv.name, fu.name, fv.name));
  }

  // What running fu and fv side by side could save, added to `evidence` when both were measured; warning when that
  // is more than the gap share of the median wall time.
  severity overlap_evidence(const flat_node& fu, const flat_node& fv, std::string& evidence) {
    if (!profiled() || p_.median_wall <= 0) return severity::info;
    const node_profile* pu = profile_of(fu);
    const node_profile* pv = profile_of(fv);
    if (pu == nullptr || pv == nullptr) return severity::info;
    const double overlap = std::min(pu->median_us, pv->median_us);
    evidence += fmt::format("; medians {} and {}: running them side by side could save up to {} ({} of "
                            "the median wall time)",
                            us(pu->median_us), us(pv->median_us), us(overlap), percent(overlap / p_.median_wall));
    return overlap > t_.gap_share * p_.median_wall ? severity::warning : severity::info;
  }

  // 12. WHILE bodies too small to pay for an iteration.
  void tiny_loop_body() {
    if (!view_) return;
    for (const flat_node& f : view_->nodes)
      if (is_while(*f.d) && !f.d->bodies.empty()) tiny_body(f);
  }

  // A WHILE body's nodes (nested included) counted and, where profiled, measured.
  struct body_measure {
    std::size_t kernels = 0, measured = 0, records = 0, launches = 0;
    double per_iteration = 0; // µs: the sum of the measured nodes' medians
  };

  [[nodiscard]] body_measure measure_body(const flat_node& f) {
    // The body's nodes: flat nodes whose path extends this node's path by body 0.
    std::vector<std::size_t> body_path = f.path;
    body_path.push_back(0);
    body_measure m;
    for (const flat_node& n : view_->nodes) {
      if (!extends(n.path, body_path)) continue;
      if (n.d->kind == node_kind::kernel) ++m.kernels;
      if (const node_profile* np = profiled() ? profile_of(n) : nullptr) add_measured(m, *np);
    }
    return m;
  }

  // True when `path` extends `prefix` by at least one step.
  static bool extends(const std::vector<std::size_t>& path, const std::vector<std::size_t>& prefix) {
    return path.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), path.begin());
  }

  static void add_measured(body_measure& m, const node_profile& np) {
    ++m.measured;
    m.per_iteration += np.median_us;
    m.records = std::max(m.records, np.records);
    m.launches = std::max(m.launches, np.launches);
  }

  static constexpr const char* tiny_body_fix =
      "do more work per iteration: unroll k iterations into the body (k copies of the step, the condition checked "
      "once per k), or give each iteration a larger piece of work";

  void tiny_body(const flat_node& f) {
    const body_measure m = measure_body(f);
    if (m.measured > 0) return tiny_measured_body(f, m);
    if (m.kernels > t_.tiny_body_nodes) return;
    add(severity::info, {f.name},
        fmt::format("the WHILE body holds {}, at most {} (no profile of it to measure an iteration)",
                    plural(m.kernels, "kernel node", "kernel nodes"), t_.tiny_body_nodes),
        tiny_body_fix);
  }

  // tiny_body with a profile of the body: its time per iteration against the threshold.
  void tiny_measured_body(const flat_node& f, const body_measure& m) {
    if (m.per_iteration >= t_.tiny_body_us) return;
    const double iterations = m.launches == 0 ? 0 : static_cast<double>(m.records) / static_cast<double>(m.launches);
    add(severity::warning, {f.name},
        fmt::format("the WHILE body takes {} per iteration (sum of its {} measured nodes' medians; {} kernel "
                    "nodes), below {}; about {:.0f} iterations per launch pay the loop's per-iteration overhead",
                    us(m.per_iteration), m.measured, m.kernels, us(t_.tiny_body_us), iterations),
        tiny_body_fix);
  }

  // 13. The legacy default stream.
  // 0. A launch that failed: the fault is in one of the nodes, which a step-through run names.
  void failed_launch() {
    if (in_.exec == nullptr || in_.exec->launch_error.empty()) return;
    add(severity::critical, {},
        fmt::format("the last failed launch of the executable graph returned {}", in_.exec->launch_error),
        "run the graph node by node to find the node: conveyor::step_through(exec, stream), or the unchanged "
        "program with CONVEYOR_STEP_THROUGH=1 (a sticky error such as an illegal address needs a fresh process; "
        "compute-sanitizer --tool memcheck names the faulting access)");
  }

  // 14. Launches that ran node by node: their timings are a debugging run's.
  void step_through() {
    if (in_.exec == nullptr || !in_.exec->step_through) return;
    add(severity::info, {},
        "the executable graph launches step by step (CONVEYOR_STEP_THROUGH or step_through_launches): every node is "
        "a launch of its own followed by a synchronisation, so the timings are a debugging run's, not a replay's",
        "unset CONVEYOR_STEP_THROUGH (or call step_through_launches(false)) to measure");
  }

  void legacy_stream() {
    if (in_.graph != nullptr && in_.graph->captured_on_blocking_stream)
      add(severity::warning, {},
          "captured on a blocking stream (created without cudaStreamNonBlocking): its work synchronises with the "
          "legacy default stream",
          "capture on a stream created with cudaStreamNonBlocking (conveyor::stream is by default)");
    if (in_.exec != nullptr && in_.exec->launched_on_legacy_stream)
      add(severity::warning, {},
          "a launch went to the legacy default stream (stream 0 or cudaStreamLegacy): it serialises with every "
          "blocking stream on the device",
          "launch on a non-default stream created with cudaStreamNonBlocking (conveyor::stream is by default)");
  }
};

const doctor::check_entry doctor::checks[17] = {
    {"failed_launch", &doctor::failed_launch},
    {"few_nodes", &doctor::few_nodes},
    {"short_kernels", &doctor::short_kernels},
    {"critical_path_gaps", &doctor::critical_path_gaps},
    {"pdl_chains", &doctor::pdl_chains},
    {"host_on_critical_path", &doctor::host_on_critical_path},
    {"removable_copies", &doctor::removable_copies},
    {"missing_upload", &doctor::missing_upload},
    {"unfreed_allocations", &doctor::unfreed_allocations},
    {"captured_allocations", &doctor::captured_allocations},
    {"recapture_churn", &doctor::recapture_churn},
    {"churn_guard", &doctor::churn_guard},
    {"update_fallbacks", &doctor::update_fallbacks},
    {"serialised_branches", &doctor::serialised_branches},
    {"tiny_loop_body", &doctor::tiny_loop_body},
    {"legacy_stream", &doctor::legacy_stream},
    {"step_through", &doctor::step_through},
};

} // namespace

const std::vector<std::string>& doctor_checks() {
  static const std::vector<std::string> ids = [] {
    std::vector<std::string> out;
    for (const auto& c : doctor::checks) out.emplace_back(c.id);
    return out;
  }();
  return ids;
}

namespace {

void check_thresholds(const doctor_thresholds& thresholds) {
  const auto check = [](double v, const char* name) {
    if (!std::isfinite(v) || v < 0)
      throw std::invalid_argument(fmt::format("conveyor::profile::diagnose: threshold {} must be a finite number >= 0, "
                                              "got {}",
                                              name, v));
  };
  check(thresholds.launch_overhead_us, "launch_overhead_us");
  check(thresholds.short_kernel_us, "short_kernel_us");
  check(thresholds.gap_share, "gap_share");
  check(thresholds.tiny_body_us, "tiny_body_us");
  check(thresholds.churn_rate, "churn_rate");
  if (thresholds.min_nodes == 0 || thresholds.pdl_chain < 2)
    throw std::invalid_argument(fmt::format("conveyor::profile::diagnose: min_nodes must be >= 1 and pdl_chain >= 2, "
                                            "got {} and {}",
                                            thresholds.min_nodes, thresholds.pdl_chain));
}

} // namespace

std::vector<finding> diagnose(const doctor_input& in, const doctor_thresholds& thresholds) {
  check_thresholds(thresholds);
  return doctor(in, thresholds).run();
}

namespace {

// `text` cut at about `most` characters, at a word, with a pointer to the full view.
std::string cut(std::string text, std::size_t most) {
  if (text.size() <= most) return text;
  std::size_t at = text.rfind(' ', most);
  if (at == std::string::npos || at < most / 2) at = most;
  text.resize(at);
  return text + " … (cut: --verbose or --verbose-report shows all)";
}

// One finding in three short lines: what and where, what it costs, the fix.
std::string brief(const finding& f) {
  std::string out = fmt::format("[{}] {}", to_string(f.level), f.check);
  if (!f.nodes.empty()) out += ": " + joined(fold_names(f.nodes));
  const auto readable = [&](const std::string& text) { return shorten_names(shorten_paths(text, f.nodes)); };
  return out + fmt::format("\n  cost: {}\n  fix:  {}\n", cut(readable(f.evidence), 300), cut(readable(f.fix), 400));
}

std::string in_full(const finding& f) {
  std::string out = fmt::format("[{}] {}\n", to_string(f.level), f.check);
  if (!f.nodes.empty()) out += fmt::format("  nodes:    {}\n", joined(f.nodes));
  return out + fmt::format("  evidence: {}\n  fix:      {}\n", f.evidence, f.fix);
}

// The head line: how many findings apply, by severity.
std::string summary(const std::vector<finding>& findings, std::string_view name) {
  const std::string head = name.empty() ? std::string("tuning doctor") : fmt::format("tuning doctor: {}", name);
  std::size_t counts[3]{};
  std::size_t applying = 0;
  for (const auto& f : findings)
    if (f.applies) {
      ++counts[static_cast<int>(f.level)];
      ++applying;
    }
  return applying == 0 ? fmt::format("{}: no findings\n", head)
                       : fmt::format("{}: {} ({} critical, {} warning, {} info)\n", head,
                                     plural(applying, "finding", "findings"), counts[2], counts[1], counts[0]);
}

// The checks that did not apply, and why (the verbose text only).
std::string not_applying(const std::vector<finding>& findings) {
  std::string out;
  for (const auto& f : findings)
    if (!f.applies) out += fmt::format("\n[does not apply] {}: {}\n", f.check, f.evidence);
  return out;
}

} // namespace

std::string to_text(const std::vector<finding>& findings, std::string_view name, bool verbose) {
  std::string out = summary(findings, name);
  for (const auto& f : findings)
    if (f.applies) out += "\n" + (verbose ? in_full(f) : brief(f));
  if (!verbose) return out;
  return out + not_applying(findings);
}

std::string to_json(const std::vector<finding>& findings, int indent) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array(); // keys in the documented order
  for (const auto& f : findings)
    out.push_back({{"check", f.check},
                   {"severity", to_string(f.level)},
                   {"nodes", f.nodes},
                   {"evidence", f.evidence},
                   {"fix", f.fix},
                   {"applies", f.applies}});
  return out.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

} // namespace conveyor::profile
