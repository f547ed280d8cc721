// Graph files offline: describe, summary, JSON, diff (through the kind table's keep facets, kinds/keep.cpp).
#include "conveyor/keep/inspect.hpp"

#include "keep/schema.hpp"
#include "kinds/kind.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <map>
#include <stdexcept>

namespace conveyor {

namespace {

const named_graph& graph_named(const graph_file& file, std::string_view name) {
  if (const named_graph* g = file.find(name)) return *g;
  std::string names;
  for (const auto& g : file.graphs) names += fmt::format("{}'{}'", names.empty() ? "" : ", ", g.name);
  throw std::out_of_range(fmt::format("the file has no graph '{}' (it has {})", name, names.empty() ? "none" : names));
}

std::uint64_t fnv1a(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

void replace_binary(detail::keep::json& j) {
  if (j.is_binary()) {
    const auto& b = j.get_binary();
    j = {{"bytes", b.size()}, {"fnv1a", fmt::format("{:016x}", fnv1a(b))}};
  } else if (j.is_structured()) {
    for (auto& v : j) replace_binary(v);
  }
}

struct graph_counts {
  std::map<std::string, std::size_t> kinds;
  std::size_t nodes = 0;
  std::size_t edges = 0;
  std::size_t typed = 0;
  std::size_t scanned = 0;
  std::size_t depth = 0;
};

void count(const saved_graph& g, graph_counts& c, std::size_t depth) {
  c.depth = std::max(c.depth, depth);
  for (const auto& n : g.nodes) {
    ++c.nodes;
    ++c.kinds[std::string(to_string(n.kind))];
    c.edges += n.dependencies.size();
    if (const auto* k = std::get_if<saved_kernel_node>(&n.parameters))
      for (const auto& r : k->relocations) ++(r.typed ? c.typed : c.scanned);
    for (const auto& b : n.bodies) count(b, c, depth + 1);
  }
}

std::string bytes_text(std::uint64_t b) {
  if (b >= (1ULL << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ULL << 30));
  if (b >= (1ULL << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1ULL << 20));
  if (b >= (1ULL << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ULL << 10));
  return fmt::format("{} B", b);
}

} // namespace

graph_description describe(const graph_file& file, std::string_view name) {
  return detail::describe_saved_graph(graph_named(file, name).graph, file);
}

namespace {

std::string producer_line(const graph_file& file) {
  const auto& p = file.producer;
  return fmt::format("graph file version {}, written by Conveyor {} (CUDA runtime {}.{}, driver {}.{}) on "
                     "{} (compute capability {}.{})\n",
                     file.version, p.conveyor, p.cuda_runtime / 1000, p.cuda_runtime % 1000 / 10, p.driver / 1000,
                     p.driver % 1000 / 10, p.device.empty() ? "?" : p.device, p.compute_capability / 10,
                     p.compute_capability % 10);
}

std::string graph_line(const named_graph& g) {
  graph_counts c;
  count(g.graph, c, 0);
  std::string kinds;
  for (const auto& [k, n] : c.kinds) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, k);
  const char* bucket = !g.key ? "" : g.key->exact ? ", a graphed bucket" : ", a graphed bucket (binding re-captured)";
  return fmt::format("  '{}': {} nodes ({} with nested graphs: {}), {} edges, nesting depth {}, {} typed and {} "
                     "scanned relocations{}\n",
                     g.name, g.graph.nodes.size(), c.nodes, kinds.empty() ? "none" : kinds, c.edges, c.depth, c.typed,
                     c.scanned, bucket);
}

std::string kernel_line(const saved_kernel& k) {
  return fmt::format("  {}: {} parameters, {}\n", detail::readable_kernel_name(k.name.c_str()), k.parameters.size(),
                     k.image ? fmt::format("image {}", *k.image)
                             : std::string("resolved through the registry at load"));
}

std::string buffer_line(const saved_buffer& b) {
  return fmt::format("  '{}': {} {}{}{}\n", b.name, bytes_text(b.bytes), to_string(b.memory),
                     b.device >= 0 ? fmt::format(" on device {}", b.device) : std::string{},
                     b.contents ? ", contents saved" : "");
}

} // namespace

std::string summary(const graph_file& file) {
  std::string out = producer_line(file);
  out += fmt::format("graphs: {}\n", file.graphs.size());
  for (const auto& g : file.graphs) out += graph_line(g);
  out += fmt::format("kernels: {}\n", file.kernels.size());
  for (const auto& k : file.kernels) out += kernel_line(k);
  out += fmt::format("buffers: {}\n", file.buffers.size());
  for (const auto& b : file.buffers) out += buffer_line(b);
  for (std::size_t i = 0; i < file.images.size(); ++i)
    out += fmt::format("image {}: {} {}, from {}\n", i, to_string(file.images[i].format),
                       bytes_text(file.images[i].bytes.size()), file.images[i].source);
  if (!file.events.empty()) out += fmt::format("events: {}\n", fmt::join(file.events, ", "));
  if (!file.host_functions.empty()) out += fmt::format("host functions: {}\n", fmt::join(file.host_functions, ", "));
  return out;
}

std::string to_json(const graph_file& file, int indent) {
  detail::keep::json d = detail::keep::to_document(file);
  replace_binary(d);
  return d.dump(indent);
}

graph_diff diff(const graph_file& a, std::string_view before, const graph_file& b, std::string_view after) {
  const saved_graph& ga = graph_named(a, before).graph;
  const saved_graph& gb = graph_named(b, after).graph;
  const detail::saved_comparison c = detail::compare_saved_graphs(ga, gb, {&a, &b});
  graph_diff out;
  out.same_topology = c.same_topology;
  out.topology_reason = c.topology_reason;
  out.nodes = gb.nodes.size();
  for (const auto& d : c.changed) {
    const saved_node& n = gb.nodes[d.position];
    node_change change;
    change.position = d.position;
    change.kind = d.kind;
    node_description nd;
    nd.kind = n.kind;
    nd.label = n.label;
    if (const auto* f = detail::traits_of(n.kind).keep; f != nullptr && f->describe != nullptr) f->describe(n, b, nd);
    change.name = !n.label.empty()          ? n.label
                  : !nd.kernel_name.empty() ? fmt::format("{} '{}'", to_string(n.kind), nd.kernel_name)
                                            : std::string(to_string(n.kind));
    change.what = d.diff.what;
    change.comparable = d.diff.comparable;
    change.settable = d.diff.settable;
    change.updatable = d.diff.updatable;
    out.changed.push_back(std::move(change));
  }
  return out;
}

std::string update_verdict(const graph_diff& d) {
  if (d.identical()) return "identical: nothing to apply";
  if (!d.same_topology) return "a new instantiation: the topology differs (" + d.topology_reason + ")";
  for (const auto& c : d.changed)
    if (!c.updatable)
      return fmt::format("a new instantiation: node {} ({}) changes what a whole-graph update does not apply: {}",
                         c.position, c.name, c.what);
  std::size_t settable = 0;
  for (const auto& c : d.changed) settable += c.settable ? 1 : 0;
  if (settable == d.changed.size())
    return fmt::format("per-node setters ({} node{}), or a whole-graph update", settable, settable == 1 ? "" : "s");
  return fmt::format("a whole-graph update ({} of {} changed nodes have no per-node setter for the change)",
                     d.changed.size() - settable, d.changed.size());
}

} // namespace conveyor
