#include "detail/node_name.hpp"

#include "detail/kernel_node.hpp"

#include "conveyor/define/node.hpp"

#include <fmt/format.h>

namespace conveyor::detail {

std::string node_name(const graph_state* owner, cudaGraphNode_t n) {
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
  std::string kind(to_string(to_node_kind(type)));
  if (type == cudaGraphNodeTypeKernel) {
    if (auto p = read_kernel_node(n))
      if (auto name = kernel_name(*p); !name.empty()) return fmt::format("{} '{}'", kind, name);
  }
  return kind;
}

} // namespace conveyor::detail
