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

extern const kind_traits mem_free_kind{
    .kind = node_kind::mem_free,
    .name = "mem_free",
    .allowed_in_body = false,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#fce5cd",
    .device_launch = {.refusal = "a memory free node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and "
                    "child-graph nodes)",
                      .fix = "free after the last launch, outside the graph (cudaFree, or cudaFreeAsync on the stream)"},
    .compare = &compare,
    .describe = &describe,
};

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
