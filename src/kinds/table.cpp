#include "kinds/kind.hpp"

#include "cuda/driver.hpp"

#include "conveyor/error.hpp"

namespace conveyor {

std::string_view to_string(node_kind kind) noexcept { return detail::traits_of(kind).name; }

node_kind to_node_kind(cudaGraphNodeType type) noexcept {
  const auto kind = static_cast<node_kind>(type);
  switch (kind) { // no default: a kind added to node_kind must be listed here (and in traits_of)
  case node_kind::kernel:
  case node_kind::memcpy:
  case node_kind::memset:
  case node_kind::host:
  case node_kind::child_graph:
  case node_kind::empty:
  case node_kind::event_wait:
  case node_kind::event_record:
  case node_kind::ext_semaphore_signal:
  case node_kind::ext_semaphore_wait:
  case node_kind::mem_alloc:
  case node_kind::mem_free:
  case node_kind::batch_mem_op:
  case node_kind::conditional: return kind;
  case node_kind::other: break;
  }
  return node_kind::other;
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

const kind_traits& traits_of(node_kind kind) noexcept {
  switch (kind) { // no default: the compiler names a kind without an entry (-Werror=switch)
  case node_kind::kernel: return kernel_kind;
  case node_kind::memcpy: return memcpy_kind;
  case node_kind::memset: return memset_kind;
  case node_kind::host: return host_kind;
  case node_kind::child_graph: return child_graph_kind;
  case node_kind::empty: return empty_kind;
  case node_kind::event_wait: return event_wait_kind;
  case node_kind::event_record: return event_record_kind;
  case node_kind::ext_semaphore_signal: return ext_semaphore_signal_kind;
  case node_kind::ext_semaphore_wait: return ext_semaphore_wait_kind;
  case node_kind::mem_alloc: return mem_alloc_kind;
  case node_kind::mem_free: return mem_free_kind;
  case node_kind::batch_mem_op: return batch_mem_op_kind;
  case node_kind::conditional: return conditional_kind_traits;
  case node_kind::other: return other_kind;
  }
  return other_kind; // an out-of-range value cast to node_kind
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
