// Device-side graph launch, host side: the device-launch rules over a description (pure) and over a CUDA graph (what
// a description does not show), device_graph, device-updatable kernel nodes. The rules are CUDA's: CUDA Programming
// Guide, "Device Graph Launch" > "Device Graph Requirements", and the CUDA Runtime API's cudaGraphInstantiateWithParams
// ("Graphs instantiated for launch on the device have additional restrictions").
#include "conveyor/execute/device_graph.hpp"

#include "conveyor/define/graph.hpp"
#include "conveyor/define/node.hpp"
#include "conveyor/error.hpp"
#include "cuda/check.hpp"
#include "cuda/driver.hpp"
#include "execute/graph_exec_impl.hpp"
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"
#include "model/graph_state.hpp"

#include <cuda.h>
#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace conveyor {

namespace {

using detail::access;
using detail::traits_of;

// ---- rules over a description ----------------------------------------------------------------------------------

//! "node 3 'label' (kind)", "node 3 'kernel name' (kernel)" or "node 3 (kind)".
std::string node_path(const std::string& parent, const node_description& n) {
  std::string name;
  if (!n.label.empty()) name = fmt::format("node {} '{}' ({})", n.id, n.label, to_string(n.kind));
  else if (!n.kernel_name.empty()) name = fmt::format("node {} '{}' ({})", n.id, n.kernel_name, to_string(n.kind));
  else name = fmt::format("node {} ({})", n.id, to_string(n.kind));
  return parent.empty() ? name : fmt::format("{} > {}", parent, name);
}

//! Work nodes (kernel, memcpy, memset: kind_traits::work) in `d`, child graphs included.
std::size_t work_nodes(const graph_description& d) {
  std::size_t count = 0;
  for (const auto& n : d.nodes) {
    if (traits_of(n.kind).work) ++count;
    if (n.kind == node_kind::child_graph)
      for (const auto& body : n.bodies) count += work_nodes(body);
  }
  return count;
}

//! Adds the node at `where`'s violation of `rule`; nothing for an empty rule (the node keeps it).
void add_violation(std::vector<device_launch_violation>& out, const std::string& where, node_kind kind,
                   const detail::device_launch_rule& rule) {
  if (!rule.refusal.empty()) out.push_back({where, kind, std::string(rule.refusal), std::string(rule.fix)});
}

void check_nodes(const graph_description& d, const std::string& parent, std::vector<device_launch_violation>& out) {
  for (const auto& n : d.nodes) {
    const std::string where = node_path(parent, n);
    add_violation(out, where, n.kind, traits_of(n.kind).device_launch);
    if (n.kind == node_kind::memcpy && n.pageable_host)
      out.push_back({where, n.kind,
                     fmt::format("a copy in a device graph may involve only device memory and pinned, device-mapped "
                                 "host memory; this one ({}, {} bytes) copies pageable host memory",
                                 n.copy_kind.empty() ? "default" : n.copy_kind, n.bytes),
                     "allocate the host buffer with cudaMallocHost / cudaHostAlloc, or pin it with cudaHostRegister"});
    // Child graphs are checked inside; the bodies of other kinds (conditional nodes) are already refused.
    if (n.kind == node_kind::child_graph)
      for (const auto& body : n.bodies) check_nodes(body, where, out);
  }
}

// ---- rules only a CUDA graph shows ------------------------------------------------------------------------------

//! The calling thread's current context (cuCtxGetCurrent), or null when the driver cannot tell.
CUcontext current_context() {
  CUcontext ctx = nullptr;
  return detail::driver::ctx_get_current(&ctx) == CUDA_SUCCESS ? ctx : nullptr;
}

//! Walks the CUDA graph `g` beside its description `d` (both in creation order, cudaGraphGetNodes) for the rules
//! only a CUDA graph shows (kind_traits::device_launch_check: CUDA arrays in copies, kernel nodes of another context
//! than `ctx`), in child graphs too.
void check_cuda_graph(cudaGraph_t g, const graph_description& d, const std::string& parent, CUcontext ctx,
                      std::vector<device_launch_violation>& out) {
  const auto nodes = detail::graph_nodes(g);
  if (nodes.size() != d.nodes.size()) return; // changed meanwhile: the description's checks stand alone
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const node_description& n = d.nodes[i];
    const std::string where = node_path(parent, n);
    if (const auto check = traits_of(n.kind).device_launch_check)
      add_violation(out, where, n.kind, check(nodes[i], ctx, where));
    if (n.bodies.empty()) continue;
    // Child graphs, beside their descriptions; without a state, no conditional node's bodies (their kind is refused).
    (void)detail::for_each_embedded(
        nodes[i], n.kind, nullptr,
        [&](const detail::embedded_graph& e) {
          if (e.body < n.bodies.size()) check_cuda_graph(e.handle, n.bodies[e.body], where, ctx, out);
        },
        where);
  }
}

std::string list(const std::vector<device_launch_violation>& violations) {
  std::string text =
      fmt::format("conveyor: this graph cannot be launched from the device ({} rule{} broken):", violations.size(),
                  violations.size() == 1 ? "" : "s");
  for (const auto& v : violations) text += fmt::format("\n  - {}", v.message());
  return text;
}

//! What CUDA's instantiate error says after "instantiate result:" (the result and the offending node), else all.
std::string instantiate_details(const cuda_error& e) {
  const std::string_view what = e.what();
  const auto at = what.find("instantiate result:");
  return std::string(at == std::string_view::npos ? what : what.substr(at));
}

graph_exec instantiate_checked(const graph& g, const stream& upload, instantiate_flags extra,
                               std::source_location where) {
  const detail::api_scope scope("conveyor::instantiate_for_device", where);
  (void)detail::nonempty_state(g, "conveyor::instantiate_for_device");
  if (has_flag(extra, instantiate_flags::auto_free_on_launch))
    throw std::invalid_argument("conveyor::instantiate_for_device: instantiate_flags::auto_free_on_launch cannot be "
                                "combined with device launch (CUDA refuses the pair); free graph allocations in the "
                                "graph, or keep allocations out of a device graph");
  check_device_launchable(g);
  try {
    return instantiate(g, extra | instantiate_flags::device_launch, upload, where);
  } catch (const cuda_error& e) {
    throw cuda_error(
        e.code(),
        fmt::format("cudaGraphInstantiateWithParams(flags={})",
                    to_string(extra | instantiate_flags::device_launch | instantiate_flags::upload)),
        std::source_location::current(),
        fmt::format("{}. CUDA refused the graph for device launch although it keeps the rules Conveyor checks "
                    "beforehand; the others concern kernels: a kernel of a device graph may not use CUDA dynamic "
                    "parallelism (no kernel launches, and no cudaGraphLaunch other than into "
                    "cudaStreamGraphFireAndForget, cudaStreamGraphTailLaunch or "
                    "cudaStreamGraphFireAndForgetAsSibling, from device code), cooperative kernels are refused under "
                    "MPS, and copies need both operands accessible from the current device",
                    instantiate_details(e)));
  }
}

} // namespace

std::string device_launch_violation::message() const {
  return fmt::format("{}: {}; fix: {}", where.empty() ? "graph" : where, rule, fix);
}

std::vector<device_launch_violation> device_launch_violations(const graph_description& d) {
  std::vector<device_launch_violation> out;
  if (work_nodes(d) == 0)
    out.push_back({"", node_kind::other,
                   "a device graph must hold at least one kernel, memcpy or memset node (CUDA refuses an empty one)",
                   "add the graph's work before instantiating it for device launch"});
  check_nodes(d, "", out);
  return out;
}

std::vector<device_launch_violation> device_launch_violations(const graph& g) {
  const auto& state = detail::nonempty_state(g, "conveyor::device_launch_violations");
  if (state->handle == nullptr) detail::throw_empty_graph("conveyor::device_launch_violations");
  const graph_description d = detail::describe_graph(state->handle, state.get());
  auto out = device_launch_violations(d);
  check_cuda_graph(state->handle, d, "", current_context(), out);
  return out;
}

device_launch_error::device_launch_error(std::vector<device_launch_violation> violations) :
    std::invalid_argument(list(violations)),
    violations_(std::move(violations)) {}

void check_device_launchable(const graph_description& d) {
  if (auto v = device_launch_violations(d); !v.empty()) throw device_launch_error(std::move(v));
}

void check_device_launchable(const graph& g) {
  (void)detail::nonempty_state(g, "conveyor::check_device_launchable");
  if (auto v = device_launch_violations(g); !v.empty()) throw device_launch_error(std::move(v));
}

device_graph::device_graph(const graph& g, const stream& upload, instantiate_flags extra, std::source_location where) :
    exec_(instantiate_checked(g, upload, extra, where)) {
  // Kernels hold this handle (device_graph_ref): no update may replace the executable graph.
  detail::exec_access::state(exec_).pinned = true;
  // Its launches from the device cannot be run node by node: host launches of it run whole too, so that both see
  // the same graph (CONVEYOR_STEP_THROUGH does not apply to device graphs).
  exec_.step_through_launches(false);
}

device_graph instantiate_for_device(const graph& g, const stream& upload, instantiate_flags extra,
                                    std::source_location where) {
  return device_graph(g, upload, extra, where);
}

device_node make_device_updatable(const node& kernel_node) {
  if (!kernel_node) throw std::invalid_argument("conveyor::make_device_updatable: an empty node handle");
  const auto name = [&] { return detail::node_name(access::owner(kernel_node), kernel_node.get()); };
  if (const node_kind kind = kernel_node.kind(); kind != node_kind::kernel)
    throw std::invalid_argument(fmt::format("conveyor::make_device_updatable: {} is a {} node; only kernel nodes can "
                                            "be updated from the device",
                                            name(), to_string(kind)));
  int driver = 0;
  CONVEYOR_CHECK(cudaDriverGetVersion(&driver));
  if (driver < 12040)
    throw std::invalid_argument(fmt::format("conveyor::make_device_updatable: {}: device-updatable kernel nodes need "
                                            "a driver for CUDA 12.4 or newer; this one supports CUDA {}.{}",
                                            name(), driver / 1000, driver % 1000 / 10));
  cudaLaunchAttributeValue value{};
  value.deviceUpdatableKernelNode.deviceUpdatable = 1;
  detail::check_with(
      cudaGraphKernelNodeSetAttribute(kernel_node.get(), cudaLaunchAttributeDeviceUpdatableKernelNode, &value),
      "cudaGraphKernelNodeSetAttribute(cudaLaunchAttributeDeviceUpdatableKernelNode)", name);
  // CUDA returns the device handle in the value (documented) and holds it on the node: read it back to be sure.
  cudaLaunchAttributeValue read{};
  detail::check_with(
      cudaGraphKernelNodeGetAttribute(kernel_node.get(), cudaLaunchAttributeDeviceUpdatableKernelNode, &read),
      "cudaGraphKernelNodeGetAttribute(cudaLaunchAttributeDeviceUpdatableKernelNode)", name);
  device_node out{read.deviceUpdatableKernelNode.devNode != nullptr ? read.deviceUpdatableKernelNode.devNode
                                                                    : value.deviceUpdatableKernelNode.devNode};
  if (out.handle == nullptr)
    detail::throw_cuda(cudaErrorInvalidValue,
                       "cudaGraphKernelNodeSetAttribute(cudaLaunchAttributeDeviceUpdatableKernelNode)",
                       fmt::format("{}: CUDA accepted the attribute but returned no device node handle", name()));
  return out;
}

std::size_t kernel_param_offset(const node& kernel_node, std::size_t index) {
  if (!kernel_node) throw std::invalid_argument("conveyor::kernel_param_offset: an empty node handle");
  const auto name = [&] { return detail::node_name(access::owner(kernel_node), kernel_node.get()); };
  if (const node_kind kind = kernel_node.kind(); kind != node_kind::kernel)
    throw std::invalid_argument(
        fmt::format("conveyor::kernel_param_offset: {} is a {} node, not a kernel node", name(), to_string(kind)));
  const auto params = detail::read_kernel_node(kernel_node.get());
  if (!params)
    detail::throw_cuda(cudaErrorInvalidValue, "cuGraphKernelNodeGetParams",
                       fmt::format("{}: the driver cannot read the kernel node", name()));
  const auto* layout = detail::parameter_layout_ref(*params);
  if (layout == nullptr)
    detail::throw_cuda(cudaErrorNotSupported, "cuFuncGetParamInfo",
                       fmt::format("{}: the driver cannot tell the kernel's parameter layout", name()));
  if (index >= layout->size())
    throw std::invalid_argument(fmt::format("conveyor::kernel_param_offset: {}: parameter {} asked, the kernel has {}",
                                            name(), index, layout->size()));
  return (*layout)[index].first;
}

} // namespace conveyor
