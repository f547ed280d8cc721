#include "conveyor/define/description.hpp"

#include <algorithm>

namespace conveyor {

std::string node_description::display_name() const {
  if (!label.empty()) return label;
  if (!kernel_name.empty()) return kernel_name;
  return std::string(to_string(kind));
}

namespace {
void collect_devices(const graph_description& g, std::vector<int>& out) {
  for (const node_description& n : g.nodes) {
    for (const int d : {n.device, n.source_device})
      if (d >= 0 && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    for (const graph_description& body : n.bodies) collect_devices(body, out);
  }
}
} // namespace

std::vector<int> graph_description::devices() const {
  std::vector<int> out;
  collect_devices(*this, out);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace conveyor
