#include "conveyor/define/description.hpp"

namespace conveyor {

std::string node_description::display_name() const {
  if (!label.empty()) return label;
  if (!kernel_name.empty()) return kernel_name;
  return std::string(to_string(kind));
}

} // namespace conveyor
