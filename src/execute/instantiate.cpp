// conveyor::instantiate: cudaGraphInstantiateWithParams, with the rule an instantiation broke named (memory nodes in
// a conditional body, a second executable graph of a graph with conditional or allocation nodes) and the fix.
#include "conveyor/execute/graph_exec.hpp"

#include "execute/graph_exec_impl.hpp"

#include "cuda/driver.hpp"
#include "cuda/check.hpp"
#include "cuda/lifetime.hpp"
#include "kinds/kind.hpp"
#include "kinds/node_name.hpp"
#include "kinds/walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <stdexcept>
#include <unordered_set>

namespace conveyor {

namespace {

using detail::access;

std::string_view to_string(cudaGraphInstantiateResult r) noexcept {
  switch (r) {
  case cudaGraphInstantiateSuccess: return "success";
  case cudaGraphInstantiateError: return "error (see the CUDA error)";
  case cudaGraphInstantiateInvalidStructure: return "invalid structure (a cycle, or a node kind not allowed here)";
  case cudaGraphInstantiateNodeOperationNotSupported: return "a node's operation is not supported";
  case cudaGraphInstantiateMultipleDevicesNotSupported: return "nodes on several devices are not supported";
  case cudaGraphInstantiateConditionalHandleUnused: return "a conditional handle is never set by any node";
  }
  return "unknown result";
}

// The first top-level node of `kind` in `g`, as "node 3 (name)", or empty when it has none (or cannot be read).
std::string first_of_kind(const detail::graph_state& g, node_kind kind) {
  try {
    const auto nodes = detail::graph_nodes(g.handle);
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (detail::kind_of(nodes[i]) == kind) return fmt::format("node {} ({})", i, detail::node_name(&g, nodes[i]));
  } catch (...) {}
  return {};
}

// The refusal of a second executable graph of a graph holding `what`, and the fixes (`last`: the third one).
std::string one_executable_graph_at_a_time(const std::string& what, const char* last) {
  return fmt::format("; CUDA allows only one executable graph at a time of a graph that holds {}, and one exists. Fix: "
                     "destroy (or reset) the other executable graph first, update it in place (graph_exec::update) "
                     "instead of instantiating again, or {}",
                     what, last);
}

// Which CUDA rule an instantiation that failed broke, and the fix, when Conveyor can tell ("; ..."), else empty.
std::string instantiate_rule(const detail::graph_state& g, cudaError_t rc, cudaGraphInstantiateResult result,
                             cudaGraphNode_t offending) {
  if (result == cudaGraphInstantiateNodeOperationNotSupported && offending != nullptr) {
    node_kind kind = node_kind::other;
    try {
      kind = detail::kind_of(offending);
    } catch (...) {}
    if (kind == node_kind::mem_alloc || kind == node_kind::mem_free)
      return "; CUDA does not allow memory allocation or free nodes inside a conditional node's body (nor in a "
             "graph for device launch): a library call captured into the body allocated its workspace there "
             "(cuBLAS, cuBLASLt, cuSPARSE, CUB) or the body called cudaMallocAsync. Fix: give the library a "
             "preallocated workspace before capturing the body (cublasSetWorkspace; cusparse*_bufferSize, then a "
             "buffer allocated ahead), and allocate outside the conditional node";
  }
  if (rc == cudaErrorNotSupported || rc == cudaErrorInvalidValue)
    if (const std::string cond = first_of_kind(g, node_kind::conditional); !cond.empty())
      return one_executable_graph_at_a_time(
          fmt::format("conditional nodes ({} is one: its condition handle belongs to one executable graph)", cond),
          "build a second graph");
  if (rc == cudaErrorNotSupported)
    if (const std::string alloc = first_of_kind(g, node_kind::mem_alloc); !alloc.empty())
      return one_executable_graph_at_a_time(fmt::format("memory allocation nodes ({} allocates)", alloc),
                                            "build or capture a second graph");
  return {};
}

} // namespace

std::string to_string(instantiate_flags flags) {
  std::string out;
  auto add = [&](instantiate_flags f, const char* name) {
    if (has_flag(flags, f)) out += out.empty() ? name : fmt::format("|{}", name);
  };
  add(instantiate_flags::auto_free_on_launch, "auto_free_on_launch");
  add(instantiate_flags::upload, "upload");
  add(instantiate_flags::device_launch, "device_launch");
  add(instantiate_flags::use_node_priority, "use_node_priority");
  return out.empty() ? "none" : out;
}

std::size_t reclaim_resources(std::chrono::milliseconds timeout) noexcept {
  const std::size_t not_handed_over = detail::wait_for_releases(timeout);
  return detail::collect() + not_handed_over;
}

graph_exec instantiate(const graph& g, instantiate_flags flags, const stream* upload_stream,
                       std::source_location where) {
  const detail::api_scope scope("conveyor::instantiate", where);
  if (has_flag(flags, instantiate_flags::upload) && upload_stream == nullptr)
    throw std::invalid_argument("conveyor::instantiate: instantiate_flags::upload needs an upload stream");
  (void)detail::collect();
  const auto& state = access::state(g);
  if (!state || state->handle == nullptr)
    throw std::invalid_argument("conveyor::instantiate: an empty (moved-from) graph");
  detail::check_not_lost(*state, "conveyor::instantiate");
  detail::attach_resources(*state); // the executable graph holds them until its last launch has finished
  auto made = std::make_unique<detail::exec_state>();
  made->source = state;
  made->current = state;
  // What is instantiated, when known without a read (a later raw change to the source, or to a conditional body it
  // holds, is not what this executable graph runs); else read at the first whole-graph update.
  if (state->clusters) made->attributes = *state->clusters;
  made->flags = flags;
  made->uploads = has_flag(flags, instantiate_flags::upload) ? 1U : 0U;
  cudaGraphInstantiateParams params{};
  params.flags = static_cast<unsigned long long>(flags);
  params.uploadStream = upload_stream != nullptr ? upload_stream->get() : nullptr;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiateWithParams(&exec, g.get(), &params);
  if (rc != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
    (void)cudaGetLastError();
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    throw cuda_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue,
                     fmt::format("cudaGraphInstantiateWithParams(flags={})", to_string(flags)),
                     std::source_location::current(),
                     fmt::format("instantiate result: {}; offending node: {}{}", to_string(params.result_out),
                                 detail::node_name(state.get(), params.errNode_out),
                                 instantiate_rule(*state, rc, params.result_out, params.errNode_out)));
  }
  detail::hold_tokens_of(*made, *state);
  return graph_exec(exec, std::move(made));
}

} // namespace conveyor
