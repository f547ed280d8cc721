#include "conveyor/observe/export.hpp"

#include "conveyor/define/graph.hpp"
#include "kinds/kind.hpp"
#include "model/graph_state.hpp"
#include "util/byte_size.hpp"
#include "util/dot_quoted.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace conveyor {

namespace {

using detail::dot_quoted;

std::string size_text(std::size_t bytes) { return detail::byte_size(static_cast<double>(bytes), 2); }

// The kernel's part of a DOT label (the kind's traits show a launch).
std::string launch_text(const node_description& n) {
  std::string text;
  if (!n.label.empty() && !n.kernel_name.empty()) text += fmt::format(" {}", n.kernel_name);
  text += fmt::format("\ngrid {}x{}x{} block {}x{}x{}", n.grid[0], n.grid[1], n.grid[2], n.block[0], n.block[1],
                      n.block[2]);
  if (n.shared_bytes > 0) text += fmt::format(" smem {}", size_text(n.shared_bytes));
  for (const auto& a : n.attributes) text += fmt::format("\n{}", a);
  return text;
}

// The part of a DOT label a node of its kind shows (kind_traits::shows): launch, copy kind, bytes.
std::string kind_text(const node_description& n) {
  const unsigned shows = detail::traits_of(n.kind).shows;
  std::string text;
  if ((shows & detail::shows_launch) != 0) text += launch_text(n);
  if ((shows & detail::shows_copy_kind) != 0) text += fmt::format(" {}", n.copy_kind);
  if ((shows & detail::shows_bytes) != 0) text += fmt::format(" {}", size_text(n.bytes));
  return text;
}

std::string node_text(const node_description& n) {
  std::string text = fmt::format("{}\n{}", n.display_name(), to_string(n.kind));
  text += kind_text(n);
  if (n.source_device >= 0 && n.device >= 0)
    text += fmt::format("\npeer copy device {} -> device {}", n.source_device, n.device);
  for (const auto& b : n.bindings) text += fmt::format("\nbinds {}", b);
  if (!n.fault.empty()) text += fmt::format("\nFAULT: {}", n.fault);
  return text;
}

void write_dot_node(std::string& out, const node_description& n, const std::string& prefix, int depth);

// The devices of this level's nodes (not of nested bodies), ascending.
std::vector<int> level_devices(const graph_description& d) {
  std::vector<int> out;
  for (const auto& n : d.nodes)
    if (n.device >= 0 && std::find(out.begin(), out.end(), n.device) == out.end()) out.push_back(n.device);
  std::sort(out.begin(), out.end());
  return out;
}

// One device's cluster around the nodes of this level that run there.
void write_device_cluster(std::string& out, const graph_description& d, int device, const std::string& prefix,
                          int depth) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  out += fmt::format("{}subgraph cluster_{}device_{} {{\n{}  label={}; style=\"rounded,dashed\"; color=\"#555555\";\n",
                     indent, prefix, device, indent, dot_quoted(fmt::format("device {}", device)));
  for (const auto& n : d.nodes)
    if (n.device == device) write_dot_node(out, n, prefix, depth + 1);
  out += fmt::format("{}}}\n", indent);
}

// A multi-device graph: one cluster per device around the nodes that run there; the others (host, empty, event,
// child-graph nodes) outside. Edges are written after every node, so they cross clusters freely.
void write_device_clusters(std::string& out, const graph_description& d, const std::vector<int>& devices,
                           const std::string& prefix, int depth) {
  for (const auto& n : d.nodes)
    if (n.device < 0) write_dot_node(out, n, prefix, depth);
  for (const int device : devices) write_device_cluster(out, d, device, prefix, depth);
}

void write_dot_edges(std::string& out, const graph_description& d, const std::string& prefix,
                     const std::string& indent) {
  for (std::size_t e = 0; e < d.edges.size(); ++e)
    out += fmt::format("{}{}{} -> {}{}{};\n", indent, prefix, d.edges[e].first, prefix, d.edges[e].second,
                       dot_edge_attributes(d.edge_type_of(e)));
}

void write_dot_body(std::string& out, const graph_description& d, const std::string& prefix, int depth) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  const std::vector<int> devices = level_devices(d);
  if (devices.size() < 2) {
    for (const auto& n : d.nodes) write_dot_node(out, n, prefix, depth);
  } else {
    write_device_clusters(out, d, devices, prefix, depth);
  }
  write_dot_edges(out, d, prefix, indent);
}

void write_dot_node(std::string& out, const node_description& n, const std::string& prefix, int depth) {
  const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
  {
    const std::string id = fmt::format("{}{}", prefix, n.id);
    out += fmt::format("{}{} [label={}, fillcolor={}{}];\n", indent, id, dot_quoted(node_text(n)),
                       dot_quoted(detail::traits_of(n.kind).dot_colour),
                       n.fault.empty() ? "" : ", color=\"#cc0000\", penwidth=3");
    for (std::size_t b = 0; b < n.bodies.size(); ++b) {
      const std::string body_prefix = fmt::format("{}_{}_", id, b);
      out += fmt::format("{}subgraph cluster_{}_{} {{\n{}  label={}; style=dashed;\n", indent, id, b, indent,
                         dot_quoted(fmt::format("body {} of {}", b, n.display_name())));
      write_dot_body(out, n.bodies[b], body_prefix, depth + 1);
      out += fmt::format("{}}}\n", indent);
      if (!n.bodies[b].nodes.empty())
        out += fmt::format("{}{} -> {}0 [style=dashed, arrowhead=odot];\n", indent, id, body_prefix);
    }
  }
}

nlohmann::json to_json_value(const graph_description& d);

// The fields a node of its kind shows (kind_traits::shows): launch, bytes, copy kind.
void add_kind_fields(nlohmann::json& j, const node_description& n) {
  const unsigned shows = detail::traits_of(n.kind).shows;
  if ((shows & detail::shows_launch) != 0) {
    j["kernel"] = n.kernel_name;
    j["grid"] = n.grid;
    j["block"] = n.block;
    j["shared_bytes"] = n.shared_bytes;
    if (!n.attributes.empty()) j["attributes"] = n.attributes;
  }
  if ((shows & detail::shows_bytes) != 0) j["bytes"] = n.bytes;
  if ((shows & detail::shows_copy_kind) != 0) j["copy_kind"] = n.copy_kind;
}

// The fields of any node, given only where known: devices, bindings, a fault, nested bodies.
void add_optional_fields(nlohmann::json& j, const node_description& n) {
  if (n.device >= 0) j["device"] = n.device;
  if (n.source_device >= 0) j["source_device"] = n.source_device;
  if (!n.bindings.empty()) j["bindings"] = n.bindings;
  if (!n.fault.empty()) j["fault"] = n.fault;
  if (n.bodies.empty()) return;
  j["bodies"] = nlohmann::json::array();
  for (const auto& body : n.bodies) j["bodies"].push_back(to_json_value(body));
}

nlohmann::json node_json(const node_description& n) {
  nlohmann::json j{
      {"id", n.id}, {"kind", std::string(to_string(n.kind))}, {"label", n.label}, {"name", n.display_name()}};
  add_kind_fields(j, n);
  add_optional_fields(j, n);
  return j;
}

nlohmann::json statistics_json(const graph_description& d) {
  const auto s = statistics(d);
  nlohmann::json by_kind = nlohmann::json::object();
  for (const auto& [kind, count] : s.by_kind) by_kind[std::string(to_string(kind))] = count;
  return {{"nodes", s.nodes},
          {"edges", s.edges},
          {"nested_nodes", s.nested_nodes},
          {"depth", s.depth},
          {"width", s.width},
          {"memcpy_bytes", s.memcpy_bytes},
          {"by_kind", std::move(by_kind)}};
}

nlohmann::json to_json_value(const graph_description& d) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : d.nodes) nodes.push_back(node_json(n));
  nlohmann::json edges = nlohmann::json::array();
  nlohmann::json edge_types = nlohmann::json::array();
  for (std::size_t e = 0; e < d.edges.size(); ++e) {
    edges.push_back({d.edges[e].first, d.edges[e].second});
    edge_types.push_back(std::string(to_string(d.edge_type_of(e))));
  }
  return {{"nodes", std::move(nodes)},
          {"devices", d.devices()},
          {"edges", std::move(edges)},
          {"edge_types", std::move(edge_types)},
          {"statistics", statistics_json(d)}};
}

} // namespace

std::string_view dot_edge_attributes(edge_type type) noexcept {
  switch (type) {
  case edge_type::full: return "";
  case edge_type::programmatic: return R"( [style=dashed, color="#1f77b4", label="programmatic"])";
  case edge_type::launch_completion: return R"( [style=dotted, color="#1f77b4", label="launch completion"])";
  }
  return "";
}

std::string to_dot(const graph_description& d, std::string_view name) {
  std::string out = fmt::format("digraph {} {{\n", dot_quoted(name));
  out += "  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  write_dot_body(out, d, "n", 1);
  out += "}\n";
  return out;
}

std::string to_json(const graph_description& d, int indent) { return to_json_value(d).dump(indent); }

std::string to_dot(const graph& g, std::string_view name) {
  (void)detail::nonempty_state(g, "conveyor::to_dot");
  return to_dot(describe(g), name);
}

std::string to_json(const graph& g, int indent) {
  (void)detail::nonempty_state(g, "conveyor::to_json");
  return to_json(describe(g), indent);
}

} // namespace conveyor
