#pragma once
// Internal (execute layer): the guards of a whole-graph update and the steps update() and update_incremental share.
// The decisions are update_state.hpp's, over facts read here.

#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/update_result.hpp"

#include "execute/graph_exec_impl.hpp"

#include <optional>
#include <utility>
#include <string>
#include <vector>

namespace conveyor::detail {

//! True when the guards have nothing to compare, known without a read: the executable graph's allocation nodes were
//! read and there are none, and neither side has thread-block cluster attributes (the executable graph's list and
//! `g`'s known, and empty). whole_update then skips them (the update of a small graph costs a few hundred
//! nanoseconds; the guards' calls after a launch cost tens more). Never throws.
[[nodiscard]] inline bool nothing_to_guard(const exec_state& state, const graph_state& g) noexcept {
  return state.allocations && state.allocations->positions.empty() && state.attributes && state.attributes->empty() &&
         g.clusters && g.clusters->empty();
}

//! Applies `g` to `exec` as a whole: `g`'s resources attached first (CUDA swaps the executable graph's user-object
//! references for `g`'s), then cudaGraphExecUpdate, filling `info`. Returns CUDA's error; the update took when
//! update_took says so. Inline: the whole-graph update's fast path and its guarded path share it.
//! \throws cuda_error when the resources' user object cannot be made (attach_resources).
inline cudaError_t update_as_whole(cudaGraphExec_t exec, graph_state& g, cudaGraphExecUpdateResultInfo& info) {
  attach_resources(g);
  return cudaGraphExecUpdate(exec, g.handle, &info);
}

//! Whether cudaGraphExecUpdate applied the graph (`rc` and `info` of update_as_whole). Never throws.
[[nodiscard]] inline bool update_took(cudaError_t rc, const cudaGraphExecUpdateResultInfo& info) noexcept {
  return rc == cudaSuccess && info.result == cudaGraphExecUpdateSuccess;
}

//! The guards of a whole-graph update of `state`'s executable graph to `g`: their facts read (the executable
//! graph's allocation nodes at the first need; the cluster attributes of both graphs, `after` being `g` read already
//! or null; whether `g` pairs by position, only when allocations or clusters exist), judged by judge_whole_update.
//! Sets `attributes` to `g`'s cluster attributes and `paired` when `g` was found to pair by position. Returns the
//! refusal (method refused, the status, the node and the reason with the fix), or nullopt to apply.
//! \throws cuda_error when a graph cannot be read.
[[nodiscard]] std::optional<update_result> guard_whole_update(exec_state& state, const graph& g,
                                                              const graph_snapshot* after,
                                                              std::vector<kernel_attribute>& attributes, bool& paired);

//! What CUDA's refusal of a whole-graph update of `state`'s executable graph to `g` says (`rc`, `info`), with the
//! offending node's name. \throws cuda_error when `rc` is an error other than the refusal itself.
[[nodiscard]] update_result refused_result(const exec_state& state, const graph& g, cudaError_t rc,
                                           const cudaGraphExecUpdateResultInfo& info);

//! The comparison's facts for update_state.hpp's decisions (`patched`: nodes patched since `current` was applied).
[[nodiscard]] comparison_facts facts_of(const graph_comparison& c, bool patched) noexcept;

//! `after` (a graph `names` holds) compared with the executable graph's current graph, read at the first need and
//! kept in `state.snapshot`, and the comparison's facts (patched: whether nodes were patched by position).
//! \throws cuda_error when the current graph cannot be read.
[[nodiscard]] std::pair<graph_comparison, comparison_facts>
compare_with_current(exec_state& state, const graph_snapshot& after, const graph_state* names);

//! "node 3 (axpy): arguments 1", for update results.
[[nodiscard]] std::string change_line(const graph_comparison& c, const node_delta& d, const graph_state* names);

//! The first few changes by name (naming reads each node again: thousands would cost milliseconds).
[[nodiscard]] std::string change_lines(const graph_comparison& c, const graph_state* names);

//! The first change only a whole-graph update (settable false, or no per-node setter) or only a new instantiation
//! (`instantiation_only`: updatable false) can apply; null when every change can be set node by node.
[[nodiscard]] const node_delta* first_unsettable(const graph_comparison& c, bool instantiation_only) noexcept;

//! Marks every node of `c.after` that a per-node setter could have changed (the kinds with a copy_to_exec) as
//! patched, so that set_changed_nodes sets it to the new graph's parameters whether or not it differs from
//! `current`'s (after per-node setters the executable graph runs neither). \throws std::bad_alloc.
void mark_every_settable_node_patched(exec_state& state, const graph_comparison& c);

//! Records that `g`'s parameters are now loaded: transition `t` (whole_graph_update or per_node_update) with
//! `structural` (`g` known to have the source's structure). The graph it replaces waits in `retired` for the next
//! launch to destroy (a few at most). Returns whether any graph waits there (graph_exec::retired_). Records of the
//! replaced graph's nodes are dropped; what is owned or disabled node by node stays (after_whole_update releases it).
[[nodiscard]] bool adopt_current(exec_state& state, const graph& g, transition t, bool structural);

//! After a whole-graph update every node runs the new graph's parameters: what the executable graph owned node by
//! node is released behind its last launch, and copies a zero-size setter disabled are enabled again. Called when
//! the overlay was not clean before the update. Never throws.
void after_whole_update(cudaGraphExec_t exec, exec_state& state) noexcept;

//! Gives `e` the graph `g`, applied node by node, to own (the slot of no node) until a later graph replaces it, when
//! `g` holds something its nodes point into (keep_alive items, callables, child-graph copies) or replaces a graph
//! that did: the executable graph's CUDA user objects hold only graphs applied as a whole. \throws std::bad_alloc.
void own_applied(graph_exec& e, const graph& g);

} // namespace conveyor::detail
