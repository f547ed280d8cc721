#include "kinds/kind.hpp"

#include "cuda/driver.hpp"

#include "conveyor/error.hpp"

#include <array>
#include <cstddef>

namespace conveyor {

std::string_view to_string(node_kind kind) noexcept { return detail::traits_of(kind).name; }

node_kind to_node_kind(cudaGraphNodeType type) noexcept {
  return detail::traits_of(static_cast<node_kind>(type)).kind; // an unknown type gets the entry of node_kind::other
}

} // namespace conveyor

namespace conveyor::detail {

// Each kind's entry, defined in its file.
extern const kind_traits kernel_kind;
extern const kind_traits memcpy_kind;
extern const kind_traits memset_kind;
extern const kind_traits host_kind;
extern const kind_traits child_graph_kind;
extern const kind_traits empty_kind;
extern const kind_traits event_wait_kind;
extern const kind_traits event_record_kind;
extern const kind_traits ext_semaphore_signal_kind;
extern const kind_traits ext_semaphore_wait_kind;
extern const kind_traits mem_alloc_kind;
extern const kind_traits mem_free_kind;
extern const kind_traits batch_mem_op_kind;
extern const kind_traits conditional_kind_traits;
extern const kind_traits other_kind;

namespace {

// The entries of the kinds CUDA names, at their values (node_kind's values are CUDA's node types, 0 to 13); other
// comes apart.
constexpr std::array<const kind_traits*, 14> entries{
    &kernel_kind,
    &memcpy_kind,
    &memset_kind,
    &host_kind,
    &child_graph_kind,
    &empty_kind,
    &event_wait_kind,
    &event_record_kind,
    &ext_semaphore_signal_kind,
    &ext_semaphore_wait_kind,
    &mem_alloc_kind,
    &mem_free_kind,
    &batch_mem_op_kind,
    &conditional_kind_traits,
};

// all_node_kinds lists every kind: the kinds of `entries` at their positions, then other. A kind added there without
// an entry here does not compile (and the host test NodeKinds.EveryKindHasItsOwnEntryWithAUniqueName checks that each
// entry is its own kind's).
constexpr bool entries_follow_all_node_kinds() {
  if (all_node_kinds.size() != entries.size() + 1 || all_node_kinds.back() != node_kind::other) return false;
  for (std::size_t i = 0; i < entries.size(); ++i)
    if (static_cast<std::size_t>(all_node_kinds[i]) != i) return false;
  return true;
}
static_assert(entries_follow_all_node_kinds(), "one entry per node_kind, at its value");

} // namespace

const kind_traits& traits_of(node_kind kind) noexcept {
  const auto value = static_cast<std::size_t>(kind); // an out-of-range value cast to node_kind gets other's entry
  return value < entries.size() ? *entries[value] : other_kind;
}

node_kind kind_of(cudaGraphNode_t n) {
  // Through the driver: a fifth of the runtime's cost, and every walk asks it of every node. The driver's node types
  // are the runtime's values.
  static_assert(static_cast<int>(CU_GRAPH_NODE_TYPE_CONDITIONAL) == static_cast<int>(cudaGraphNodeTypeConditional));
  CUgraphNodeType type{};
  if (driver::graph_node_get_type(reinterpret_cast<CUgraphNode>(n), &type) == CUDA_SUCCESS)
    return to_node_kind(static_cast<cudaGraphNodeType>(type));
  cudaGraphNodeType runtime_type{}; // the runtime's call, for its error
  CONVEYOR_CHECK(cudaGraphNodeGetType(n, &runtime_type));
  return to_node_kind(runtime_type);
}

} // namespace conveyor::detail

namespace conveyor {

node_kind_support support_of(node_kind kind) noexcept {
  const auto& t = detail::traits_of(kind);
  return {t.kind, t.name, t.has_builder, t.comparable, t.copy_to_exec != nullptr, t.allowed_in_body};
}

} // namespace conveyor
