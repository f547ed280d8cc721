#pragma once
// The executable graph's update state, explicit: two small enums (how the graph whose parameters it holds pairs with
// the graph it was instantiated from; what it carries node by node beside that graph), the named transitions between
// them, and the decisions every update, setter and patch makes over them and over plain facts: the guards of a
// whole-graph update (allocation nodes, thread-block clusters, pairing), the route of update_incremental, what
// follows CUDA's topology refusal, where a setter's node leads, and whether a pinned executable graph may be
// re-instantiated. Nothing here calls CUDA: tests/host/test_update_state.cpp checks every row on the host.
// docs/architecture.md ("The executable graph's update state") shows the same tables.

#include <cstdint>

namespace conveyor::detail {

//! How node i of `current` (the graph whose parameters the executable graph holds) pairs with node i of `source`
//! (the graph it was instantiated from, whose nodes address the executable graph's). cudaGraphExecUpdate pairs nodes
//! through their dependencies, in the order these were added, not by creation order.
enum class pairing : std::uint8_t {
  //! `current` is the source, or has its structure (dependencies read and equal): node i runs node i, and a
  //! whole-graph update to `current` again pairs by position too. The state at instantiation.
  structural,
  //! `current` was set node by node (a per-node update): node i runs node i, though its dependencies may have been
  //! added in another order (a whole-graph update to it would not pair by position).
  positional,
  //! `current` was applied as a whole and its structure is not known: CUDA paired it through its dependencies. Read
  //! (pairing_read) before anything goes by position.
  unchecked,
  //! Read: `current` has its nodes in another creation order than the source; nothing can go by position.
  unpaired,
};

//! What the executable graph carries node by node beside `current`.
enum class overlay : std::uint8_t {
  //! Nothing: a whole-graph update has nothing to clear or release (its fast path).
  clean,
  //! Records, parameters still `current`'s: nodes mapped to the source's, kernel settings read or set, callables
  //! and applied graphs owned node by node, copies disabled by a zero size, a step-through shadow.
  recorded,
  //! Per-node setters changed parameters since `current` was applied: the executable graph runs neither `current`'s
  //! parameters nor the source's (update_incremental then cannot compare with `current`).
  changed,
};

//! The update state: both enums (graph_exec's exec_state holds it; patched positions and owned items are its data).
struct update_state {
  pairing pair = pairing::structural;
  overlay nodes = overlay::clean;
  friend constexpr bool operator==(update_state, update_state) noexcept = default;
};

//! The named transitions.
enum class transition : std::uint8_t {
  whole_graph_update, //!< cudaGraphExecUpdate applied a graph; what was owned or disabled node by node is released
  per_node_update,    //!< update_incremental (or update() after CUDA's topology refusal) set the changed nodes
  setter,             //!< a per-node setter (set_kernel, set_kernel_args, set_memcpy, set_memset, set_host) ran
  record,             //!< something was recorded node by node (a map, a setting read, an item owned, a node disabled)
  pairing_read,       //!< `current`'s structure was read and compared with the source's
  reinstantiation,    //!< a new executable graph replaced this one: the state at instantiation
};

//! What a transition reads besides the state.
struct transition_facts {
  //! whole_graph_update, per_node_update: the graph applied is known, without a read, to have the source's
  //! structure (it is the source, or `current` found to have it).
  bool known_structure = false;
  //! per_node_update: the executable graph still owns something node by node afterwards (the graph applied, a
  //! callable) or keeps a copy disabled by a zero size.
  bool keeps_records = false;
  //! pairing_read: the read found `current` to have the source's structure.
  bool same_structure = false;
};

//! The transition table: the state after `t` from `s`. Never throws.
[[nodiscard]] constexpr update_state next(update_state s, transition t, transition_facts f = {}) noexcept {
  switch (t) {
  case transition::whole_graph_update:
    return {f.known_structure ? pairing::structural : pairing::unchecked, overlay::clean};
  case transition::per_node_update:
    return {f.known_structure ? pairing::structural : pairing::positional,
            f.keeps_records ? overlay::recorded : overlay::clean};
  case transition::setter: return {s.pair, overlay::changed};
  case transition::record: return {s.pair, s.nodes == overlay::clean ? overlay::recorded : s.nodes};
  case transition::pairing_read:
    if (s.pair != pairing::unchecked) return s;
    return {f.same_structure ? pairing::structural : pairing::unpaired, s.nodes};
  case transition::reinstantiation: return {};
  }
  return s;
}

//! Whether what goes by position (a setter given a node of `current`, graphed's patches, update_incremental's
//! comparison) may: `read_first` when only a read of `current` can tell (then pairing_read).
enum class by_position : std::uint8_t { yes, no, read_first };

[[nodiscard]] constexpr by_position goes_by_position(pairing p) noexcept {
  switch (p) {
  case pairing::structural:
  case pairing::positional: return by_position::yes;
  case pairing::unchecked: return by_position::read_first;
  case pairing::unpaired: return by_position::no;
  }
  return by_position::no;
}

//! Whether a whole-graph update to the graph `current` pairs by position (CUDA's pairing), known without a read.
[[nodiscard]] constexpr bool current_known_structural(pairing p) noexcept { return p == pairing::structural; }

// ---- the launch history ------------------------------------------------------------------------------------------

//! When the first launch came, against uploads (exec_facts, the doctor's missing-upload rule).
enum class first_launch : std::uint8_t {
  not_yet,
  after_upload,
  before_upload,
  at_instantiation, //!< graphed instantiated and launched it in one call: no upload could come first
};

//! The history after a launch that succeeded, `uploads` uploads having come before it: the first launch is
//! recorded once; a later one (or graphed's mark, at_instantiation) is kept. Never throws.
[[nodiscard]] constexpr first_launch after_launch(first_launch f, std::uint32_t uploads) noexcept {
  if (f != first_launch::not_yet) return f;
  return uploads > 0 ? first_launch::after_upload : first_launch::before_upload;
}

// ---- the guards of a whole-graph update ---------------------------------------------------------------------------

//! How the allocation nodes of the graph to apply compare with the executable graph's (by position).
enum class allocations : std::uint8_t { none, same, other };
//! How the thread-block cluster attributes of the kernels of both graphs compare (child graphs and bodies included).
enum class clusters : std::uint8_t { none, same, other, unreadable };

//! The facts the guards of a whole-graph update decide over.
struct guard_facts {
  allocations allocs = allocations::none;
  clusters cluster = clusters::none;
  //! The new graph pairs with the source by position (read only when allocations or clusters exist).
  bool pairs_by_position = true;
};

//! What the guards decide: apply, or refuse and why (each refusal needs a new instantiation).
enum class guard_verdict : std::uint8_t {
  apply,
  other_allocations,    //!< an allocation node reserves another address or size: kernels of the new graph use it
  unreadable_bodies,    //!< a conditional node Conveyor did not build: its kernels' clusters cannot be compared
  cluster_change,       //!< other cluster attributes: an update reports them applied, launches keep the old ones
  unpaired_allocations, //!< CUDA would pair through dependencies: the allocations compared by position prove nothing
  unpaired_clusters,    //!< the same for the cluster attributes
};

//! The guards in order: allocation addresses, unreadable bodies, cluster attributes, pairing. Never throws.
[[nodiscard]] constexpr guard_verdict judge_whole_update(const guard_facts& f) noexcept {
  if (f.allocs == allocations::other) return guard_verdict::other_allocations;
  if (f.cluster == clusters::unreadable) return guard_verdict::unreadable_bodies;
  if (f.cluster == clusters::other) return guard_verdict::cluster_change;
  if (f.pairs_by_position) return guard_verdict::apply;
  if (f.cluster != clusters::none) return guard_verdict::unpaired_clusters;
  if (f.allocs != allocations::none) return guard_verdict::unpaired_allocations;
  return guard_verdict::apply;
}

// ---- update_incremental ------------------------------------------------------------------------------------------

//! update_incremental's routes, in the order it tries them.
enum class incremental_route : std::uint8_t { nothing, per_node, whole_graph, reinstantiate };

//! Why update_incremental took its route.
enum class incremental_why : std::uint8_t {
  unchanged,          //!< the comparison found nothing to set
  settable,           //!< every change can be set node by node
  setters_changed,    //!< overlay::changed: the executable graph runs parameters no graph holds
  unpaired,           //!< `current` does not pair by position: the comparison would mean nothing
  not_settable,       //!< a change only a whole-graph update applies
  topology_changed,   //!< CUDA refuses another topology
  instantiation_only, //!< a change only a new instantiation applies
};

//! What the comparison of `current` with the new graph found (when made).
struct comparison_facts {
  bool same_topology = true;
  bool any_change = false;         //!< a node's parameters differ
  bool any_patched = false;        //!< nodes patched by position since `current` was applied (set again)
  bool instantiation_only = false; //!< a change only a new instantiation applies (updatable false)
  bool whole_graph_only = false;   //!< a change no per-node setter applies (settable false, or no setter)
};

//! Whether update_incremental compares at all (else: whole_graph, with the reason). Never throws.
[[nodiscard]] constexpr bool compares(update_state s, bool paired) noexcept {
  return s.nodes != overlay::changed && paired;
}

struct incremental_plan {
  incremental_route route;
  incremental_why why;
};

//! update_incremental's route: before a comparison (`c` null: compares() was false) or after it. Never throws.
[[nodiscard]] constexpr incremental_plan route_incremental(update_state s, const comparison_facts* c) noexcept {
  if (s.nodes == overlay::changed) return {incremental_route::whole_graph, incremental_why::setters_changed};
  if (c == nullptr) return {incremental_route::whole_graph, incremental_why::unpaired};
  if (!c->same_topology) return {incremental_route::reinstantiate, incremental_why::topology_changed};
  if (!c->any_change && !c->any_patched) return {incremental_route::nothing, incremental_why::unchanged};
  if (c->instantiation_only) return {incremental_route::reinstantiate, incremental_why::instantiation_only};
  if (c->whole_graph_only) return {incremental_route::whole_graph, incremental_why::not_settable};
  return {incremental_route::per_node, incremental_why::settable};
}

//! After a failed whole-graph update: a new instantiation is the last resort, unless the caller asked for none or
//! kernels hold the executable graph's handle (a device_graph: `pinned`), which would then name a destroyed one.
enum class last_resort : std::uint8_t { refuse, reinstantiate, refuse_pinned };

[[nodiscard]] constexpr last_resort after_failed_update(bool reinstantiate_allowed, bool pinned) noexcept {
  if (!reinstantiate_allowed) return last_resort::refuse;
  return pinned ? last_resort::refuse_pinned : last_resort::reinstantiate;
}

// ---- update() after CUDA's topology refusal --------------------------------------------------------------------------

//! What update() does when cudaGraphExecUpdate answered topology_changed (CUDA pairs each node's dependencies in
//! the order they were added: the same DAG built in another order is refused).
enum class topology_refusal : std::uint8_t {
  keep_unpaired,       //!< `current` does not pair by position: CUDA's reason stands
  keep_other_topology, //!< Conveyor's comparison found another DAG too
  keep_not_settable,   //!< the same DAG, but a change cannot be set node by node
  set_changed,         //!< the same DAG: set the changed nodes
  set_every_settable,  //!< the same DAG after per-node setters: set every node a setter can reach
};

//! The facts: `paired` (goes_by_position of `current`, read if needed) and the comparison's (null when not paired).
[[nodiscard]] constexpr topology_refusal after_topology_refusal(update_state s, bool paired,
                                                                const comparison_facts* c) noexcept {
  if (!paired || c == nullptr) return topology_refusal::keep_unpaired;
  if (!c->same_topology) return topology_refusal::keep_other_topology;
  if (c->whole_graph_only) return topology_refusal::keep_not_settable;
  return s.nodes == overlay::changed ? topology_refusal::set_every_settable : topology_refusal::set_changed;
}

// ---- per-node setters --------------------------------------------------------------------------------------------

//! Which graph a node given to a per-node setter belongs to.
enum class node_owner : std::uint8_t {
  source,          //!< the graph instantiated from, still `current`
  replaced_source, //!< the graph instantiated from, after an update applied another graph
  current,         //!< the graph applied last by an update
  other,           //!< neither (an older graph: its node is taken as it is)
};

//! Where a setter's node leads.
enum class setter_target : std::uint8_t {
  itself,      //!< the node is the executable graph's own (a node of the source)
  by_position, //!< the source's node at the node's position in `current`
  read_first,  //!< pairing unknown: read it (pairing_read), then ask again
  refuse,      //!< `current` does not pair by position: a setter would reach a node that now does other work
};

//! `stepping`: step-through launches follow the change on a copy of `current`, by position. Never throws.
[[nodiscard]] constexpr setter_target target_of(node_owner owner, pairing p, bool stepping) noexcept {
  const bool needs_position = owner == node_owner::current || owner == node_owner::replaced_source || stepping;
  if (needs_position) {
    if (goes_by_position(p) == by_position::read_first) return setter_target::read_first;
    if (goes_by_position(p) == by_position::no) return setter_target::refuse;
  }
  return owner == node_owner::current ? setter_target::by_position : setter_target::itself;
}

} // namespace conveyor::detail
