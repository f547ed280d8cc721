// The memory-free node kind: compared by the freed address; no per-node setter (a whole-graph update applies it).
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "conveyor/error.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace conveyor::detail {

namespace {
param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  void* pa = read_mem_free(a);
  void* pb = read_mem_free(b);
  return pa == pb ? param_diff::same() : param_diff::change(fmt::format("freed address {} -> {}", pa, pb), false);
}
void describe(cudaGraphNode_t, node_description&, const graph_state*) {}
} // namespace

// ---- graph files (kinds/keep.hpp) -------------------------------------------------------------------------
namespace {

void save_mem_free(cudaGraphNode_t n, const graph_state*, keep_saver& s, saved_node& out) {
  out.parameters = saved_mem_free_node{s.address(read_mem_free(n), 0, "freed address")};
}

cudaGraphNode_t load_mem_free(const saved_node& n, cudaGraph_t g, node_handles deps, keep_loader& l) {
  return add_mem_free(g, deps, l.address(std::get<saved_mem_free_node>(n.parameters).address));
}

void describe_saved(const saved_node&, const graph_file&, node_description&) {}

param_diff compare_saved(const saved_node& na, const saved_node& nb, const saved_context& ctx) {
  const std::string a = saved_address_text(std::get<saved_mem_free_node>(na.parameters).address, *ctx.before);
  const std::string b = saved_address_text(std::get<saved_mem_free_node>(nb.parameters).address, *ctx.after);
  return a == b ? param_diff::same() : param_diff::change(fmt::format("freed {} -> {}", a, b), false);
}

} // namespace

extern const keep_facets mem_free_keep{
    .save = &save_mem_free,
    .load = &load_mem_free,
    .describe = &describe_saved,
    .compare = &compare_saved,
    .payload = payload_index<saved_mem_free_node>,
};

extern const kind_traits mem_free_kind{
    .kind = node_kind::mem_free,
    .name = "mem_free",
    .allowed_in_body = false,
    .allowed_in_child = false,
    .has_builder = true,
    .comparable = true,
    .dot_colour = "#fce5cd",
    .device_launch = {.refusal =
                          "a memory free node cannot be in a device graph (CUDA allows only kernel, memcpy, memset and "
                          "child-graph nodes)",
                      .fix =
                          "free after the last launch, outside the graph (cudaFree, or cudaFreeAsync on the stream)"},
    .compare = &compare,
    .describe = &describe,
    .keep = &mem_free_keep,
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
