#include "conveyor/define/description.hpp"

#include <algorithm>

namespace conveyor {

std::string node_description::display_name() const {
  if (!label.empty()) return label;
  if (!kernel_name.empty()) return kernel_name;
  return std::string(to_string(kind));
}

namespace {
// Appends device `d` to `out` unless it is none (negative) or there already.
void add_device(int d, std::vector<int>& out) {
  if (d >= 0 && std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
}

void collect_devices(const graph_description& g, std::vector<int>& out) {
  for (const node_description& n : g.nodes) {
    for (const int d : {n.device, n.source_device}) add_device(d, out);
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
