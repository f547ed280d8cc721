// to_dot(description, report, ...): the graph coloured by each node's share of its track's time; to_text(report):
// the report as a table.
#include "conveyor/profile/readable.hpp"
#include "conveyor/profile/report.hpp"

#include "conveyor/observe/export.hpp"

#include "util/median.hpp"
#include "util/dot_quoted.hpp"
#include "profile/analysis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <cmath>
#include <map>

namespace conveyor::profile {

namespace {

using conveyor::detail::dot_quoted;

constexpr std::string_view no_data_colour = "#d9d9d9";

// White (share 0) to red (the largest share).
std::string share_colour(double share, double max_share) {
  const double f = max_share > 0 ? std::clamp(share / max_share, 0.0, 1.0) : 0.0;
  const auto gb = static_cast<unsigned>(std::lround(255.0 * (1.0 - f)));
  return fmt::format("#ff{:02x}{:02x}", gb, gb);
}

struct dot_context {
  const std::map<std::vector<std::size_t>, const node_profile*>& profiles;
  double max_share = 0;
};

// The total time and share of the profiled nodes in `path`'s bodies.
std::pair<double, double> body_totals(const dot_context& c, const std::vector<std::size_t>& path) {
  double total = 0;
  double share = 0;
  for (const auto& [p, profile] : c.profiles)
    if (p.size() > path.size() && std::equal(path.begin(), path.end(), p.begin())) {
      total += profile->total_us;
      share += profile->share;
    }
  return {total, share};
}

// A node's label and fill colour: its profile's numbers, else its bodies' totals, else no data.
struct node_look {
  std::string label;
  std::string colour{no_data_colour};
};

// A profiled node: its median, records and total, coloured by its share.
void add_profile(node_look& look, const dot_context& c, const node_profile& profile) {
  look.label += fmt::format("\nmedian {:.2f} µs", profile.median_us);
  if (profile.records != profile.launches) look.label += fmt::format(" ({} records)", profile.records);
  look.label += fmt::format("\ntotal {:.1f} µs / {:.1f} %", profile.total_us, profile.share * 100);
  look.colour = share_colour(profile.share, c.max_share);
}

node_look look_of(const dot_context& c, const node_description& n, const std::vector<std::size_t>& node_path) {
  node_look look{n.display_name()};
  if (auto p = c.profiles.find(node_path); p != c.profiles.end()) {
    add_profile(look, c, *p->second);
  } else if (!n.bodies.empty()) {
    const auto [total, share] = body_totals(c, node_path);
    look.label += fmt::format("\n{}", to_string(n.kind));
    if (total > 0) look.label += fmt::format("\nbodies: total {:.1f} µs / {:.1f} %", total, share * 100);
  } else {
    look.label += fmt::format("\n{}\nno profile data", to_string(n.kind));
  }
  return look;
}

void write_body(std::string& out, const dot_context& c, const graph_description& d, const std::string& prefix,
                const std::vector<std::size_t>& path, int depth);

// The bodies of node n (DOT id `id`, at `node_path`), each a dashed cluster.
void write_bodies(std::string& out, const dot_context& c, const node_description& n, const std::string& id,
                  const std::vector<std::size_t>& node_path, int depth) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  for (std::size_t b = 0; b < n.bodies.size(); ++b) {
    const std::string body_prefix = fmt::format("{}_{}_", id, b);
    out += fmt::format("{}subgraph cluster_{}_{} {{\n{}  label={}; style=dashed;\n", indent, id, b, indent,
                       dot_quoted(fmt::format("body {} of {}", b, n.display_name())));
    auto body_path = node_path;
    body_path.push_back(b);
    write_body(out, c, n.bodies[b], body_prefix, body_path, depth + 1);
    out += fmt::format("{}}}\n", indent);
    if (!n.bodies[b].nodes.empty())
      out += fmt::format("{}{} -> {}0 [style=dashed, arrowhead=odot];\n", indent, id, body_prefix);
  }
}

void write_body(std::string& out, const dot_context& c, const graph_description& d, const std::string& prefix,
                const std::vector<std::size_t>& path, int depth) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  for (std::size_t i = 0; i < d.nodes.size(); ++i) {
    const auto& n = d.nodes[i];
    auto node_path = path;
    node_path.push_back(i);
    const std::string id = fmt::format("{}{}", prefix, i);
    const node_look look = look_of(c, n, node_path);
    out += fmt::format("{}{} [label={}, fillcolor={}];\n", indent, id, dot_quoted(look.label), dot_quoted(look.colour));
    write_bodies(out, c, n, id, node_path, depth);
  }
  for (std::size_t e = 0; e < d.edges.size(); ++e)
    out += fmt::format("{}{}{} -> {}{}{};\n", indent, prefix, d.edges[e].first, prefix, d.edges[e].second,
                       dot_edge_attributes(d.edge_type_of(e)));
}

std::string track_name(const std::string& track) {
  return track.empty() ? std::string("(outside steps)") : fmt::format("\"{}\"", track);
}

// An empty track selects the graph's nodes outside steps if there are any, else those of the first track it ran in.
std::string chosen_track(const profile_report& r, std::string_view graph, std::string_view track) {
  std::string chosen(track);
  if (!track.empty()) return chosen;
  const auto outside = std::find_if(r.nodes.begin(), r.nodes.end(),
                                    [&](const node_profile& n) { return n.ref.graph == graph && n.ref.track.empty(); });
  const auto any =
      std::find_if(r.nodes.begin(), r.nodes.end(), [&](const node_profile& n) { return n.ref.graph == graph; });
  if (outside == r.nodes.end() && any != r.nodes.end()) chosen = any->ref.track;
  return chosen;
}

// The graph's profiled nodes on the track, by path, and their largest share.
std::map<std::vector<std::size_t>, const node_profile*> profiles_of(const profile_report& r, std::string_view graph,
                                                                    const std::string& chosen, double& max_share) {
  std::map<std::vector<std::size_t>, const node_profile*> profiles;
  for (const auto& n : r.nodes) {
    if (n.ref.graph != graph || n.ref.track != chosen || n.ref.path.empty()) continue;
    profiles.emplace(n.ref.path, &n);
    max_share = std::max(max_share, n.share);
  }
  return profiles;
}

} // namespace

std::string to_dot(const graph_description& d, const profile_report& r, std::string_view graph, std::string_view track,
                   std::string_view name) {
  detail::validate(d, "conveyor::profile::to_dot");
  const std::string chosen = chosen_track(r, graph, track);
  double max_share = 0;
  const std::map<std::vector<std::size_t>, const node_profile*> profiles = profiles_of(r, graph, chosen, max_share);
  const dot_context c{profiles, max_share};
  std::string out = fmt::format("digraph {} {{\n", dot_quoted(name));
  out += fmt::format(
      "  label={}; labelloc=t;\n",
      dot_quoted(fmt::format("{}: {} (colour: share of the track's node time)", graph, track_name(chosen))));
  out += "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  write_body(out, c, d, "n", {}, 1);
  out += "}\n";
  return out;
}

namespace {

// The text report's parts; `name` gives a node name as the report prints it (short, or in full when verbose).
using name_fn = std::string (*)(const std::string&);

std::string full_name(const std::string& n) { return n; }
std::string brief_name(const std::string& n) { return short_name(n); }

// "profile on DEVICE: N records, M attributed (P %)" and the dropped-records warning.
std::string text_head(const profile_report& r) {
  const double coverage =
      r.records > 0 ? 100.0 * static_cast<double>(r.attributed) / static_cast<double>(r.records) : 100.0;
  const std::string on = r.device_name.empty() ? std::string() : fmt::format(" on {}", r.device_name);
  std::string out =
      r.records == 0
          ? fmt::format("profile{}: no records (nothing ran while the profiler recorded, or it was paused)\n", on)
          : fmt::format("profile{}: {} records, {} attributed ({:.1f} %)\n", on, r.records, r.attributed, coverage);
  if (r.dropped_records > 0)
    out += fmt::format("WARNING: {} records were dropped (CUPTI's buffers full, or beyond max_records): the numbers "
                       "below miss that work\n",
                       r.dropped_records);
  return out;
}

// A track's launches summed: their gaps, the launch with the largest gap, the API-to-GPU times.
struct track_launches {
  std::size_t gaps = 0;
  const launch_profile* largest = nullptr;
  std::vector<double> api;
};

track_launches launches_of(const profile_report& r, const track_summary& s) {
  track_launches t;
  for (const auto& l : r.launches) {
    if (l.track != s.track) continue;
    t.gaps += l.gap_count;
    if (t.largest == nullptr || l.largest_gap.duration_us > t.largest->largest_gap.duration_us) t.largest = &l;
    if (l.api_to_gpu_us >= 0) t.api.push_back(l.api_to_gpu_us);
  }
  return t;
}

std::string largest_gap_text(const track_launches& t, name_fn name);

// A track's heading, its gaps and critical path, and its largest gap.
std::string track_text(const profile_report& r, const track_summary& s, name_fn name) {
  const track_launches t = launches_of(r, s);
  std::string out =
      fmt::format("\ntrack {}: {} launches, median wall {:.2f} µs, median busy {:.2f} µs, utilisation {:.1f} %, "
                  "span utilisation {:.1f} %\n",
                  track_name(s.track), s.launches, s.median_wall_us, s.median_busy_us, s.utilisation * 100,
                  s.span_utilisation * 100);
  out += fmt::format("  gaps: {} ({:.2f} µs in total); critical path {:.2f} µs of {:.2f} µs wall (medians)", t.gaps,
                     s.gap_total_us, s.median_critical_path_us, s.median_wall_us);
  if (!t.api.empty()) out += fmt::format("; API call to GPU start {:.2f} µs (median)", conveyor::detail::median(t.api));
  out += fmt::format("; node time / busy time {:.2f}\n", s.busy_us > 0 ? s.node_time_us / s.busy_us : 0.0);
  return out + largest_gap_text(t, name);
}

// The largest gap of a track's launches, where one was measured.
std::string largest_gap_text(const track_launches& t, name_fn name) {
  if (t.largest == nullptr || t.largest->largest_gap.duration_us <= 0) return {};
  const auto& g = t.largest->largest_gap;
  return fmt::format("  largest gap: {:.2f} µs after '{}' before '{}' ({} at {:.2f} µs){}\n", g.duration_us,
                     name(g.after), name(g.before),
                     t.largest->step != 0 ? fmt::format("step {}", t.largest->step)
                                          : fmt::format("launch {}", t.largest->correlation),
                     g.start_us, g.on_critical_path ? ", on the critical path" : "");
}

// The track's node profiles, in the report's order.
std::vector<const node_profile*> track_nodes(const profile_report& r, const track_summary& s) {
  std::vector<const node_profile*> nodes;
  for (const auto& n : r.nodes)
    if (n.ref.track == s.track) nodes.push_back(&n);
  return nodes;
}

// The width of the name column: the longest of the first `shown` names, at least 4 and at most 60.
std::size_t name_width(const std::vector<const node_profile*>& nodes, std::size_t shown, name_fn name) {
  std::size_t width = 4;
  for (std::size_t k = 0; k < shown; ++k)
    width = std::max(width, std::min<std::size_t>(name(nodes[k]->ref.label).size(), 60));
  return width;
}

// The `top` nodes of a track by time, as a table.
std::string nodes_text(const profile_report& r, const track_summary& s, std::size_t top, name_fn name) {
  const std::vector<const node_profile*> nodes = track_nodes(r, s);
  if (nodes.empty()) return {};
  const std::size_t shown = std::min(top, nodes.size());
  const std::size_t width = name_width(nodes, shown, name);
  std::string out = fmt::format("  {:<{}}  {:>7}  {:>10}  {:>9}  {:>9}  {:>9}  {:>6}\n", "node", width, "records",
                                "total µs", "median µs", "min µs", "max µs", "share");
  for (std::size_t k = 0; k < shown; ++k) {
    const auto& n = *nodes[k];
    out += fmt::format("  {:<{}}  {:>7}  {:>10.2f}  {:>9.2f}  {:>9.2f}  {:>9.2f}  {:>5.1f}%\n", name(n.ref.label),
                       width, n.records, n.total_us, n.median_us, n.min_us, n.max_us, n.share * 100);
  }
  if (nodes.size() > shown) out += fmt::format("  ... and {} more nodes\n", nodes.size() - shown);
  return out;
}

// The records no node took, grouped by reason; empty when there are none.
std::string unattributed_groups_text(const profile_report& r, name_fn name) {
  if (r.unattributed.empty()) return {};
  std::size_t count = 0;
  for (const auto& g : r.unattributed) count += g.records;
  std::string out = fmt::format("\nunattributed: {} of {} records\n", count, r.records);
  for (const auto& g : r.unattributed)
    out += fmt::format("  {} records: {} (e.g. {})\n", g.records, g.reason, name(g.example));
  return out;
}

// The records no node took, grouped by reason, and the report's notes.
std::string unattributed_text(const profile_report& r, name_fn name) {
  std::string out = unattributed_groups_text(r, name);
  for (const auto& note : r.notes) out += fmt::format("\nnote: {}\n", note);
  return out;
}

} // namespace

std::string to_text(const profile_report& r, std::size_t top, bool verbose) {
  const name_fn name = verbose ? &full_name : &brief_name;
  std::string out = text_head(r);
  for (const auto& s : r.tracks) out += track_text(r, s, name) + nodes_text(r, s, top, name);
  return out + unattributed_text(r, name);
}

} // namespace conveyor::profile
