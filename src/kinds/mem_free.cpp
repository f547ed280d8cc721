// The memory-free node kind: compared by the freed address; no per-node setter (a whole-graph update applies it).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  void* pa = read_mem_free(a);
  void* pb = read_mem_free(b);
  return pa == pb ? param_diff::same() : param_diff::change(fmt::format("freed address {} -> {}", pa, pb), false);
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

extern const kind_traits mem_free_kind{node_kind::mem_free, "mem_free", false, true, true, &compare, nullptr, &describe};

cudaGraphNode_t add_mem_free(cudaGraph_t g, node_handles deps, void* pointer) {
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddMemFreeNode(&n, g, deps.data(), deps.size(), pointer));
  return n;
}

void* read_mem_free(cudaGraphNode_t node) {
  void* p = nullptr;
  CONVEYOR_CHECK(cudaGraphMemFreeNodeGetParams(node, &p));
  return p;
}

} // namespace conveyor::detail
