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
#include <array>
#include <cstdlib>
#include <memory>
#include <utility>
#include <string_view>
#include <stdexcept>
#include <unordered_set>

namespace conveyor {

namespace {

using detail::access;

// CUDA's instantiate results and what each means.
constexpr std::array<std::pair<cudaGraphInstantiateResult, std::string_view>, 6> instantiate_results{{
    {cudaGraphInstantiateSuccess, "success"},
    {cudaGraphInstantiateError, "error (see the CUDA error)"},
    {cudaGraphInstantiateInvalidStructure, "invalid structure (a cycle, or a node kind not allowed here)"},
    {cudaGraphInstantiateNodeOperationNotSupported, "a node's operation is not supported"},
    {cudaGraphInstantiateMultipleDevicesNotSupported, "nodes on several devices are not supported"},
    {cudaGraphInstantiateConditionalHandleUnused, "a conditional handle is never set by any node"},
}};

std::string_view to_string(cudaGraphInstantiateResult r) noexcept {
  const auto* row =
      std::find_if(instantiate_results.begin(), instantiate_results.end(), [r](const auto& e) { return e.first == r; });
  return row != instantiate_results.end() ? row->second : "unknown result";
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

// The rule a memory node broke when CUDA refused the operation of node `offending` (memory nodes inside a
// conditional node's body), and the fix; empty when it was no memory node.
std::string memory_node_in_body(cudaGraphInstantiateResult result, cudaGraphNode_t offending) {
  if (result != cudaGraphInstantiateNodeOperationNotSupported || offending == nullptr) return {};
  node_kind kind = node_kind::other;
  try {
    kind = detail::kind_of(offending);
  } catch (...) {}
  if (kind != node_kind::mem_alloc && kind != node_kind::mem_free) return {};
  return "; CUDA does not allow memory allocation or free nodes inside a conditional node's body (nor in a "
         "graph for device launch): a library call captured into the body allocated its workspace there "
         "(cuBLAS, cuBLASLt, cuSPARSE, CUB) or the body called cudaMallocAsync. Fix: give the library a "
         "preallocated workspace before capturing the body (cublasSetWorkspace; cusparse*_bufferSize, then a "
         "buffer allocated ahead), and allocate outside the conditional node";
}

// The one-executable-graph-at-a-time rule `g` broke when CUDA refused with `rc` (a graph with conditional nodes:
// cudaErrorNotSupported or cudaErrorInvalidValue; with allocation nodes: cudaErrorNotSupported), and the fix;
// empty when neither applies.
std::string second_executable_graph(const detail::graph_state& g, cudaError_t rc) {
  if (rc != cudaErrorNotSupported && rc != cudaErrorInvalidValue) return {};
  if (const std::string cond = first_of_kind(g, node_kind::conditional); !cond.empty())
    return one_executable_graph_at_a_time(
        fmt::format("conditional nodes ({} is one: its condition handle belongs to one executable graph)", cond),
        "build a second graph");
  if (rc != cudaErrorNotSupported) return {};
  if (const std::string alloc = first_of_kind(g, node_kind::mem_alloc); !alloc.empty())
    return one_executable_graph_at_a_time(fmt::format("memory allocation nodes ({} allocates)", alloc),
                                          "build or capture a second graph");
  return {};
}

// Which CUDA rule an instantiation that failed broke, and the fix, when Conveyor can tell ("; ..."), else empty.
std::string instantiate_rule(const detail::graph_state& g, cudaError_t rc, cudaGraphInstantiateResult result,
                             cudaGraphNode_t offending) {
  if (std::string rule = memory_node_in_body(result, offending); !rule.empty()) return rule;
  return second_executable_graph(g, rc);
}

// The graph `g` holds, checked: not empty, not lost, and an upload stream where the flags ask for an upload.
// \throws std::invalid_argument, cuda_error (check_not_lost).
const std::shared_ptr<detail::graph_state>& source_of(const graph& g, instantiate_flags flags,
                                                      const stream* upload_stream) {
  if (has_flag(flags, instantiate_flags::upload) && upload_stream == nullptr)
    throw std::invalid_argument("conveyor::instantiate: instantiate_flags::upload needs an upload stream");
  const auto& state = detail::nonempty_state(g, "conveyor::instantiate");
  if (state->handle == nullptr) detail::throw_empty_graph("conveyor::instantiate");
  (void)detail::collect();
  detail::check_not_lost(*state, "conveyor::instantiate");
  return state;
}

// The state of an executable graph instantiated from `source` with `flags`.
std::unique_ptr<detail::exec_state> state_for(const std::shared_ptr<detail::graph_state>& source,
                                              instantiate_flags flags) {
  auto made = std::make_unique<detail::exec_state>();
  made->source = source;
  made->current = source;
  // What is instantiated, when known without a read (a later raw change to the source, or to a conditional body it
  // holds, is not what this executable graph runs); else read at the first whole-graph update.
  if (source->clusters) made->attributes = *source->clusters;
  made->flags = flags;
  made->uploads = has_flag(flags, instantiate_flags::upload) ? 1U : 0U;
  return made;
}

// The cuda_error of a failed instantiation of `source`: CUDA's error and result, the offending node, and the rule
// broken with its fix where Conveyor can tell.
[[noreturn]] void throw_instantiate_failure(const detail::graph_state& source, instantiate_flags flags, cudaError_t rc,
                                            const cudaGraphInstantiateParams& params) {
  throw cuda_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue,
                   fmt::format("cudaGraphInstantiateWithParams(flags={})", to_string(flags)),
                   std::source_location::current(),
                   fmt::format("instantiate result: {}; offending node: {}{}", to_string(params.result_out),
                               detail::node_name(&source, params.errNode_out),
                               instantiate_rule(source, rc, params.result_out, params.errNode_out)));
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
  const auto& state = source_of(g, flags, upload_stream);
  detail::attach_resources(*state); // the executable graph holds them until its last launch has finished
  auto made = state_for(state, flags);
  cudaGraphInstantiateParams params{};
  params.flags = static_cast<unsigned long long>(flags);
  params.uploadStream = upload_stream != nullptr ? upload_stream->get() : nullptr;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t rc = cudaGraphInstantiateWithParams(&exec, g.get(), &params);
  if (rc != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
    (void)cudaGetLastError();
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    throw_instantiate_failure(*state, flags, rc, params);
  }
  detail::hold_tokens_of(*made, *state);
  return graph_exec(exec, std::move(made));
}

} // namespace conveyor
