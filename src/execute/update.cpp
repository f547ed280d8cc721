#include "conveyor/execute/graph_exec.hpp"
#include "conveyor/execute/update_result.hpp"

#include "execute/graph_exec_impl.hpp"

#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <optional>

namespace conveyor {

std::string_view to_string(update_status status) noexcept {
  switch (status) {
  case update_status::success: return "success";
  case update_status::error: return "error";
  case update_status::topology_changed: return "topology_changed";
  case update_status::node_type_changed: return "node_type_changed";
  case update_status::function_changed: return "function_changed";
  case update_status::parameters_changed: return "parameters_changed";
  case update_status::not_supported: return "not_supported";
  case update_status::unsupported_function_change: return "unsupported_function_change";
  case update_status::attributes_changed: return "attributes_changed";
  }
  return "error";
}

update_status to_update_status(cudaGraphExecUpdateResult result) noexcept {
  switch (result) {
  case cudaGraphExecUpdateSuccess: return update_status::success;
  case cudaGraphExecUpdateError: return update_status::error;
  case cudaGraphExecUpdateErrorTopologyChanged: return update_status::topology_changed;
  case cudaGraphExecUpdateErrorNodeTypeChanged: return update_status::node_type_changed;
  case cudaGraphExecUpdateErrorFunctionChanged: return update_status::function_changed;
  case cudaGraphExecUpdateErrorParametersChanged: return update_status::parameters_changed;
  case cudaGraphExecUpdateErrorNotSupported: return update_status::not_supported;
  case cudaGraphExecUpdateErrorUnsupportedFunctionChange: return update_status::unsupported_function_change;
  case cudaGraphExecUpdateErrorAttributesChanged: return update_status::attributes_changed;
  }
  return update_status::error;
}

std::string_view to_string(update_method method) noexcept {
  switch (method) {
  case update_method::none: return "none";
  case update_method::per_node: return "per_node";
  case update_method::whole_graph: return "whole_graph";
  case update_method::reinstantiated: return "reinstantiated";
  case update_method::refused: return "refused";
  }
  return "none";
}

namespace {

std::string_view explain(update_status status) noexcept {
  switch (status) {
  case update_status::success: return "updated in place";
  case update_status::error: return "invalid update (e.g. a graph on another device)";
  case update_status::topology_changed: return "nodes or dependencies were added or removed";
  case update_status::node_type_changed: return "a node changed kind";
  case update_status::function_changed: return "a kernel node runs another function";
  case update_status::parameters_changed: return "a parameter changed in a way that cannot be updated";
  case update_status::not_supported: return "the node cannot be updated";
  case update_status::unsupported_function_change: return "the kernel changed in an unsupported way";
  case update_status::attributes_changed: return "node attributes changed in an unsupported way";
  }
  return "unknown";
}

using detail::access;

} // namespace

std::string update_result::reason() const {
  std::string refusal;
  if (status != update_status::success) {
    refusal = fmt::format("update refused: {} ({})", to_string(status), explain(status));
    if (!node_label.empty()) refusal += fmt::format(" at node {}", node_label);
  }
  switch (method) {
  case update_method::refused: return explanation.empty() ? refusal : fmt::format("{}; {}", refusal, explanation);
  case update_method::reinstantiated:
    return fmt::format("reinstantiated: {}{}{}", explanation, explanation.empty() || refusal.empty() ? "" : "; ",
                       refusal);
  case update_method::none: return explanation.empty() ? "none: parameters already equal" : "none: " + explanation;
  case update_method::per_node:
  case update_method::whole_graph:
    return explanation.empty() ? std::string(to_string(method)) : fmt::format("{}: {}", to_string(method), explanation);
  }
  return explanation;
}

namespace {

// Records that `g`'s parameters are now loaded (after a whole-graph or per-node update).
void adopt_current(detail::exec_state& state, const graph& g) {
  state.current = access::state(g);
  state.current_exact = true;
  state.to_origin.clear();
  state.configs.clear();
  state.read.clear();
  state.patched.clear();
  state.patched_flag.clear();
  state.snapshot.reset();
}

// After a whole-graph update every node runs `g`'s parameters: what the executable graph owned node by node is
// released behind the last launch, and memcpy/memset nodes a zero-size setter disabled are enabled again.
void after_whole_update(cudaGraphExec_t exec, detail::exec_state& state) {
  detail::release_owned(state);
  for (cudaGraphNode_t origin : state.zero_disabled) (void)detail::cleared(cudaGraphNodeSetEnabled(exec, origin, 1U));
  state.zero_disabled.clear();
}

// The allocation nodes of `g` must reserve what the executable graph's do (same positions, addresses and sizes):
// CUDA keeps the executable graph's allocations, and kernels of `g` that use another address would fault.
std::optional<update_result> refuse_other_allocations(detail::exec_state& state, const graph& g,
                                                      const std::vector<cudaGraphNode_t>& nodes) {
  detail::read_allocations(state);
  for (std::size_t k = 0; k < state.alloc_positions.size(); ++k) {
    const std::size_t i = state.alloc_positions[k];
    if (i >= nodes.size() || detail::kind_of(nodes[i]) != node_kind::mem_alloc) return std::nullopt; // CUDA says
    const auto a = detail::read_mem_alloc(nodes[i]);
    if (a.pointer == state.allocs[k].pointer && a.bytes == state.allocs[k].bytes) continue;
    update_result r;
    r.method = update_method::refused;
    r.status = update_status::parameters_changed;
    r.node = nodes[i];
    r.node_label = detail::node_name(access::state(g).get(), nodes[i]);
    r.explanation = fmt::format("allocation node {} reserves {} B at {} where the executable graph has {} B at {}; "
                                "kernels of the new graph use that address, so it needs a new instantiation",
                                i, a.bytes, a.pointer, state.allocs[k].bytes, state.allocs[k].pointer);
    return r;
  }
  return std::nullopt;
}

} // namespace

update_result graph_exec::update(const graph& g, std::source_location where) {
  const detail::api_scope scope("conveyor::graph_exec::update", where);
  (void)detail::collect();
  auto& state = *impl_;
  const auto nodes = detail::graph_nodes(g.get());
  if (auto refused = refuse_other_allocations(state, g, nodes)) return *refused;
  // Cluster attributes: refused when they would change (CUDA would report success and keep running the old ones).
  if (!state.attributes) state.attributes = detail::cluster_attributes(detail::graph_nodes(state.current->handle));
  auto attributes = detail::cluster_attributes(nodes);
  if (const auto at = detail::first_attribute_difference(*state.attributes, attributes)) {
    update_result r;
    r.method = update_method::refused;
    r.status = update_status::attributes_changed;
    r.node = *at < nodes.size() ? nodes[*at] : nullptr;
    r.node_label = detail::node_name(access::state(g).get(), r.node);
    r.explanation = fmt::format("node {} has other thread-block cluster attributes; a whole-graph update reports them "
                                "applied but launches keep the old ones, so it needs a new instantiation",
                                *at);
    return r;
  }
  detail::attach_resources(*access::state(g)); // CUDA swaps the executable graph's references for g's
  cudaGraphExecUpdateResultInfo info{};
  const cudaError_t rc = cudaGraphExecUpdate(handle_, g.get(), &info);
  update_result result;
  result.status = to_update_status(info.result);
  result.node = info.errorNode;
  result.from_node = info.errorFromNode;
  if (rc == cudaSuccess && result.status == update_status::success) {
    result.method = update_method::whole_graph;
    adopt_current(state, g);
    after_whole_update(handle_, state);
    state.attributes = std::move(attributes);
    tracks_launches_ = false;
    return result;
  }
  (void)cudaGetLastError();
  if (rc != cudaErrorGraphExecUpdateFailure && rc != cudaSuccess && result.status == update_status::success)
    throw cuda_error(rc, "cudaGraphExecUpdate", std::source_location::current());
  result.method = update_method::refused;
  if (result.status == update_status::success) result.status = update_status::error;
  if (info.errorNode != nullptr)
    result.node_label = detail::node_name(access::state(g).get(), info.errorNode);
  else if (info.errorFromNode != nullptr)
    result.node_label = detail::node_name(state.source.get(), info.errorFromNode);
  return result;
}

update_result graph_exec::update_or_reinstantiate(const graph& g, std::source_location where) {
  const detail::api_scope scope("conveyor::graph_exec::update_or_reinstantiate", where);
  update_result result = update(g);
  if (result) return result;
  // Instantiate first: if it throws, this executable graph is unchanged. The old one is then destroyed without
  // waiting; its queued launches keep what they use (CUDA user objects, fences).
  graph_exec fresh = instantiate(g, without(impl_->flags, instantiate_flags::upload));
  *this = std::move(fresh);
  result.method = update_method::reinstantiated;
  return result;
}

update_result graph_exec::update_incremental(const graph& g, bool reinstantiate, std::source_location where) {
  const detail::api_scope scope("conveyor::graph_exec::update_incremental", where);
  (void)detail::collect();
  auto& state = *impl_;
  update_result out;
  bool try_whole_graph = true;
  bool partly_applied = false; // some nodes were set to g's parameters before a per-node setter failed
  if (!state.current_exact) {
    out.explanation = "parameters were changed by per-node setters since the last update";
  } else {
    detail::graph_snapshot after = detail::snapshot_graph(g.get());
    if (!state.snapshot) state.snapshot = detail::snapshot_graph(state.current->handle);
    const auto c = detail::compare_snapshots(*state.snapshot, after, {state.current.get(), access::state(g).get()});
    out.nodes_changed = c.changed.size();
    const auto* names = access::state(g).get();
    auto line = [&](const detail::node_delta& d) {
      return fmt::format("node {} ({}): {}", d.position, detail::node_name(names, c.after[d.position]), d.diff.what);
    };
    if (!c.same_topology) {
      out.explanation = fmt::format("topology changed: {}", c.topology_reason);
      out.status = update_status::topology_changed;
      try_whole_graph = false; // CUDA refuses a topology change: go straight to a new instantiation
    } else if (c.changed.empty() && state.patched.empty()) {
      adopt_current(state, g);
      state.snapshot = std::move(after);
      out.method = update_method::none;
      return out;
    } else {
      const detail::node_delta* blocker = nullptr;
      const detail::node_delta* needs_instantiation = nullptr;
      for (const auto& d : c.changed) {
        if (blocker == nullptr && (!d.diff.settable || detail::traits_of(d.kind).copy_to_exec == nullptr)) blocker = &d;
        if (needs_instantiation == nullptr && !d.diff.updatable) needs_instantiation = &d;
      }
      if (needs_instantiation != nullptr) {
        out.explanation = fmt::format("only a new instantiation applies {}", line(*needs_instantiation));
        out.status = needs_instantiation->kind == node_kind::kernel ? update_status::attributes_changed
                                                                     : update_status::parameters_changed;
        out.node = c.after[needs_instantiation->position];
        out.node_label = detail::node_name(names, out.node);
        try_whole_graph = false;
      } else if (blocker != nullptr) {
        out.explanation = fmt::format("not settable node by node: {}", line(*blocker));
      } else {
        if (state.origin_nodes.empty()) state.origin_nodes = detail::graph_nodes(state.source->handle);
        std::size_t set = 0;
        cudaError_t failure = cudaSuccess;
        for (const auto& d : c.changed) {
          const cudaGraphNode_t origin = state.origin_nodes.at(d.position);
          failure = detail::cleared(detail::traits_of(d.kind).copy_to_exec(handle_, origin, c.after[d.position]));
          if (failure != cudaSuccess) {
            out.explanation = fmt::format("per-node update refused ({}) for {}", cudaGetErrorName(failure), line(d));
            break;
          }
          ++set;
          if (d.kind == node_kind::host) // the node now runs a callable of g's resources: own them for it
            own_for_node(origin, access::state(g)->keep);
          if (d.kind == node_kind::memcpy || d.kind == node_kind::memset)
            (void)detail::enable_if_zero_disabled(handle_, state, origin);
        }
        // Nodes patched by position (graphed's rebinding) run other parameters than the graph compared against:
        // they are set to g's as well, changed or not.
        std::size_t restored = 0;
        if (failure == cudaSuccess && !state.patched.empty()) {
          std::vector<std::uint8_t> done(c.after.size(), 0);
          for (const auto& d : c.changed) done[d.position] = 1;
          for (std::size_t position : state.patched) {
            if (position >= c.after.size() || done[position] != 0) continue;
            const auto& traits = detail::traits_of(detail::kind_of(c.after[position]));
            failure = traits.copy_to_exec == nullptr
                          ? cudaErrorNotSupported
                          : detail::cleared(traits.copy_to_exec(handle_, state.origin_nodes.at(position),
                                                                c.after[position]));
            if (failure != cudaSuccess) {
              out.explanation = fmt::format("per-node update refused ({}) for patched node {}",
                                            cudaGetErrorName(failure), position);
              break;
            }
            ++restored;
          }
        }
        if (failure == cudaSuccess) {
          adopt_current(state, g);
          state.snapshot = std::move(after);
          out.method = update_method::per_node;
          out.nodes_set = set + restored;
          // The first few changes by name (naming reads each node again: thousands would cost milliseconds).
          constexpr std::size_t named = 8;
          for (std::size_t k = 0; k < c.changed.size() && k < named; ++k)
            out.explanation += (out.explanation.empty() ? "" : "; ") + line(c.changed[k]);
          if (c.changed.size() > named) out.explanation += fmt::format("; and {} more", c.changed.size() - named);
          if (restored > 0)
            out.explanation += fmt::format("{}{} patched node(s) set to the new graph's parameters",
                                           out.explanation.empty() ? "" : "; ", restored);
          return out;
        }
        // Some nodes run g's parameters, the others the old ones: the whole-graph update below brings every node
        // to g; should CUDA refuse it, the old parameters are restored before anything is reported.
        partly_applied = true;
      }
    }
  }
  if (try_whole_graph) {
    update_result whole = update(g);
    if (whole) {
      whole.nodes_changed = out.nodes_changed;
      whole.explanation = out.explanation;
      return whole;
    }
    out.status = whole.status;
    out.node = whole.node;
    out.from_node = whole.from_node;
    out.node_label = whole.node_label;
    if (!whole.explanation.empty()) out.explanation += "; " + whole.explanation;
    if (partly_applied) { // restore the parameters the executable graph held before
      cudaGraphExecUpdateResultInfo info{};
      if (detail::cleared(cudaGraphExecUpdate(handle_, state.current->handle, &info)) != cudaSuccess)
        state.current_exact = false; // what it runs is now known only node by node: the next update is whole-graph
    }
  }
  if (!reinstantiate) {
    out.method = update_method::refused;
    if (out.status == update_status::success) out.status = update_status::error;
    return out;
  }
  graph_exec fresh = instantiate(g, without(state.flags, instantiate_flags::upload)); // first: exception-safe
  *this = std::move(fresh);
  out.method = update_method::reinstantiated;
  return out;
}

void graph_exec::own_for_node(cudaGraphNode_t origin, std::shared_ptr<void> item) {
  auto& slot = impl_->owned[origin];
  detail::defer_release(std::exchange(slot, std::move(item)), impl_->last_launch);
  tracks_launches_ = true;
}

} // namespace conveyor
