#include "kinds/node_name.hpp"

#include "kinds/kinds.hpp"

#include <fmt/format.h>

namespace conveyor::detail {

std::string node_name(const graph_state* owner, cudaGraphNode_t n) noexcept {
  try {
    if (n == nullptr) return "unknown node";
    if (owner != nullptr) {
      auto it = owner->labels.find(n);
      if (it != owner->labels.end()) return it->second;
    }
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(n, &type) != cudaSuccess) {
      (void)cudaGetLastError();
      return "unknown node";
    }
    const node_kind kind = to_node_kind(type);
    if (kind == node_kind::kernel)
      if (auto name = kernel_name(n); !name.empty()) return fmt::format("{} '{}'", to_string(kind), name);
    return std::string(to_string(kind));
  } catch (...) {
    return "unknown node";
  }
}

} // namespace conveyor::detail
