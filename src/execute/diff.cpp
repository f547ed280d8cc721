#include "conveyor/execute/graph_diff.hpp"

#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <fmt/format.h>

namespace conveyor {

std::vector<std::string> graph_diff::lines() const {
  std::vector<std::string> out;
  out.reserve(changed.size());
  for (const auto& c : changed) out.push_back(fmt::format("node {} ({}): {}", c.position, c.name, c.what));
  return out;
}

graph_diff diff(const graph& before, const graph& after) {
  const auto* sb = detail::nonempty_state(before, "conveyor::diff", "before").get();
  const auto* sa = detail::nonempty_state(after, "conveyor::diff", "after").get();
  const auto c = detail::compare_graphs(before.get(), after.get(), {sb, sa});
  graph_diff out;
  out.same_topology = c.same_topology;
  out.topology_reason = c.topology_reason;
  out.nodes = c.after.size();
  for (const auto& d : c.changed)
    out.changed.push_back({d.position, d.kind, detail::node_name(sa, c.after[d.position]), d.diff.what,
                           d.diff.comparable, d.diff.settable, d.diff.updatable});
  return out;
}

} // namespace conveyor
