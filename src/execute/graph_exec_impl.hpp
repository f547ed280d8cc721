#pragma once
// Internal (execute layer): the state behind conveyor::graph_exec.

#include "conveyor/execute/graph_exec.hpp"

#include "cuda/lifetime.hpp"
#include "execute/update_state.hpp"

#include <cuda.h>
#include "kinds/kinds.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace conveyor::detail {

//! The allocation nodes of an executable graph's source: their positions, what they reserve, and those no mem_free
//! node frees ("node 3 (name) allocates N B at P and the graph never frees it").
struct allocation_nodes {
  std::vector<std::size_t> positions;
  std::vector<allocation_params> params;
  std::vector<std::string> unfreed;
};

//! What an executable graph carries node by node beside the graph whose parameters it holds (`current`): what
//! update_state's `overlay` enum says is there (clean: all empty but `last_launch`, the fence of the last
//! tracked launch). Records of `current`'s nodes are dropped when
//! another graph is applied (adopt_current); what is owned or disabled stays until a whole-graph update releases it.
struct node_overlay {
  // The fields every whole-graph update reads (adopt_current: patched, shadow, owned, zero_disabled) come first, in
  // two cache lines.

  // Nodes set by position through the patch functions below (graphed's rebinding) since the graph in `current` was
  // applied: they run other parameters than `current`'s, so update_incremental sets them too (flag by position).
  std::vector<std::size_t> patched;

  // Step-through launches of an executable graph changed by per-node setters (graph_exec::step_through_launches on
  // when they ran): a clone of `current` that takes the same changes, which a step-through run steps through, and
  // its nodes disabled (a zero size, set_enabled(false)). Dropped when a whole graph is applied.
  std::shared_ptr<graph_state> shadow;

  // What the executable graph owns itself, by origin node: callables set with set_host, and the resources of graphs
  // whose host nodes were applied node by node. At most one entry per node; a replaced entry is released behind
  // the fence of the last launch.
  std::unordered_map<cudaGraphNode_t, std::shared_ptr<void>> owned;
  std::unordered_set<cudaGraphNode_t> zero_disabled; //!< memcpy/memset nodes disabled by a zero-size setter

  std::vector<std::uint8_t> patched_flag;              //!< `patched` by position
  std::unordered_set<cudaGraphNode_t> shadow_disabled; //!< the shadow's nodes disabled

  // Kernel settings for set_kernel_args: set_kernel's (by origin node), and those read from nodes without their own.
  std::unordered_map<cudaGraphNode_t, kernel_setting> configs;
  std::unordered_map<cudaGraphNode_t, kernel_setting> read;
  std::unordered_map<cudaGraphNode_t, cudaGraphNode_t> to_origin; //!< current's nodes -> origin (lazy)

  std::shared_ptr<fence> last_launch; //!< recorded after the last launch, while `owned` is in use
};

//! Aligned to a cache line, so that the fields every whole-graph update reads or writes (the first ones, up to and
//! including `over`'s first) lie in six lines: an update of a small graph costs a few hundred nanoseconds, and
//! each line missed after a launch costs a few.
struct alignas(64) exec_state {
  std::shared_ptr<graph_state> source;  //!< instantiated from: its nodes address the executable graph
  std::shared_ptr<graph_state> current; //!< the graph whose parameters are loaded now
  //! Graphs an update replaced as `current`: destroyed behind the next launch (graph_exec::after_launch), while the
  //! GPU runs it, instead of inside the update (destroying a graph of N nodes costs about as much as updating to it).
  std::vector<std::shared_ptr<graph_state>> retired;
  //! How `current` pairs with `source`, and what the executable graph carries node by node beside it: the two
  //! enums of update_state.hpp, changed only through its transitions (next()).
  update_state st;

  // The thread-block cluster attributes of the kernel nodes the executable graph runs (those of the source at
  // instantiation when known without a read, else read at the first update; then kept from each graph applied as
  // a whole): a whole-graph update reports new ones applied and launches keep
  // the old ones, so an update that would change them is refused (update_incremental re-instantiates instead).
  std::optional<std::vector<kernel_attribute>> attributes;

  // Allocation nodes of the source graph: positions and what they reserve (update refuses other addresses), and
  // those never freed (for the relaunch diagnosis). Read at the first need (an update, a failed launch, the
  // unfreed_allocations query), not at instantiation, which then costs nothing more than CUDA's.
  std::optional<allocation_nodes> allocations;

  // The user objects the executable graph holds a CUDA reference of: those of the graph it was instantiated from,
  // then of the graph last applied as a whole (cudaGraphExecUpdate swaps them). Let go when it is destroyed.
  std::vector<std::shared_ptr<release_token>> held;

  // `current` read once (kernel parameters, attributes, edges), kept from the comparison that applied it, so that
  // update_incremental reads only the new graph; null when not read. A pointer: every update tests it.
  std::unique_ptr<graph_snapshot> snapshot;

  node_overlay over; //!< patched, owned, disabled or shadowed node by node (update_state::nodes says whether any)

  std::optional<graph_structure> source_structure; //!< `source`'s, read at the first need (pairs_by_position)
  std::vector<cudaGraphNode_t> origin_nodes;       //!< source's nodes in creation order (lazy)

  // The handle is held by kernels (a device_graph's device_graph_ref): an update that would re-instantiate is
  // refused, since the handle would then name a destroyed executable graph.
  bool pinned = false;

  instantiate_flags flags = instantiate_flags::none;
  // Launch history (exec_facts): uploads, the first launch and what came before it, launches on the legacy stream.
  std::uint32_t uploads = 0;
  first_launch first = first_launch::not_yet;
  bool legacy_launch = false;
  cudaError_t launch_error = cudaSuccess; // the last launch call that failed
};

//! True when the environment variable CONVEYOR_STEP_THROUGH asks for step-through launches (set, and not "0"): read
//! once per process. New executable graphs then launch step by step (graph_exec::step_through_launches).
[[nodiscard]] bool step_through_requested() noexcept;

//! True when node i of `state.current` is run by node i of the executable graph (goes_by_position of its pairing):
//! pairing::unchecked is read once (pairs_by_position of `current`, transition::pairing_read), only when something
//! goes by position. \throws cuda_error when a graph cannot be read.
[[nodiscard]] bool paired_by_position(exec_state& state);

//! True when `g` is known, without a read, to have the structure of `state`'s source (structure_of): it is the
//! source, or `current` found to have it (pairing::structural). Never throws.
[[nodiscard]] inline bool known_structure(const exec_state& state, const graph_state& g) noexcept {
  return &g == state.source.get() || (&g == state.current.get() && current_known_structural(state.st.pair));
}

//! Applies transition `t` to `state`'s update state (update_state.hpp's table). Never throws.
inline void apply(exec_state& state, transition t, transition_facts f = {}) noexcept {
  state.st = next(state.st, t, f);
}

//! True when a whole-graph update of `state`'s executable graph to `g` would pair their nodes by position: `g` is
//! known to have the source's structure, or has it (structure_of: `g`'s dependencies read; the source's once per
//! executable graph). \throws cuda_error when a graph cannot be read.
[[nodiscard]] bool pairs_by_position(exec_state& state, const graph_state& g);

//! The sentence update results and errors give when paired_by_position is false.
[[nodiscard]] std::string_view not_paired_by_position() noexcept;

//! Throws std::logic_error when `state` is pinned (a device_graph): re-instantiating it would leave the handle that
//! kernels hold naming a destroyed executable graph. `why` says why the update could not be made in place.
void refuse_reinstantiation_if_pinned(const exec_state& state, std::string_view call, const std::string& why);

void swap_held_tokens(exec_state& state, const graph_state& g); // hold_tokens_of past its first check

//! `state` now holds the user objects of `g` (instantiation, whole-graph update), no longer those it held. Inline:
//! nothing to swap is the common case of every whole-graph update.
inline void hold_tokens_of(exec_state& state, const graph_state& g) {
  if (state.held.empty() && g.keep_object.load(std::memory_order_acquire) == nullptr && g.copied_tokens.empty()) return;
  swap_held_tokens(state, g);
}

//! The attorney: the library's one way to a graph_exec's handle and state.
struct exec_access {
  static cudaGraphExec_t handle(const graph_exec& e) noexcept { return e.handle_; }
  //! graph_exec::update_incremental with `g` read already into `after` (consumed: one read of a re-capture shared by
  //! rebinding and the update). \throws as update_incremental.
  static update_result update_incremental(graph_exec& e, const graph& g, graph_snapshot&& after) {
    return e.incremental_update(g, &after, true);
  }
  static exec_state& state(graph_exec& e) noexcept { return *e.impl_; }
  //! graph_exec::own_for_node: `e` owns `item` for node `origin` from now on (null origin: the graph applied node by
  //! node). \throws std::bad_alloc.
  static void own_for_node(graph_exec& e, cudaGraphNode_t origin, std::shared_ptr<void> item) {
    e.own_for_node(origin, std::move(item));
  }
  static const exec_state& state(const graph_exec& e) noexcept { return *e.impl_; }
};

//! Sets node `position` (creation order of the graph `e` was instantiated from) of `e` to `fields` (read from a node
//! of the same kind by its kind's read_fields, `bytes` patched) through its kind's set_fields
//! (cuGraphExecKernelNodeSetParams, cudaGraphExecMemcpyNodeSetParams, cudaGraphExecMemsetNodeSetParams), and
//! remembers that the node no longer runs the current graph's parameters (update_incremental sets it again). Reads
//! nothing else: a replay loop pays the setter alone. Returns CUDA's error (the node is then left as it was, and not
//! marked); cudaErrorInvalidValue for fields that are not patchable. Never throws, but for std::bad_alloc at the
//! first use.
cudaError_t patch_fields(graph_exec& e, std::size_t position, node_fields& fields);

//! The CUDA graph whose parameters `e` holds (but for patched nodes) and its state.
[[nodiscard]] const std::shared_ptr<graph_state>& current_graph(const graph_exec& e) noexcept;

//! Hands what `state` owns node by node to the release queue, behind the fence of its last launch (launches queued
//! before may still use it), and forgets it. Never throws.
void release_owned(exec_state& state) noexcept;

//! Enables again node `origin` of `exec` when a zero-size setter disabled it (it has a size again); returns CUDA's
//! error (cudaSuccess when there was nothing to do).
cudaError_t enable_if_zero_disabled(cudaGraphExec_t exec, exec_state& state, cudaGraphNode_t origin) noexcept;

//! Reads the allocation nodes of `state.source` into `state` (once). \throws cuda_error when the graph cannot be read.
void read_allocations(exec_state& state);

} // namespace conveyor::detail
