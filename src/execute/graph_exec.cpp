#include "conveyor/execute/graph_exec.hpp"

#include "conveyor/error.hpp"
#include "detail/diff.hpp"
#include "detail/node_name.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace conveyor {

namespace {

std::string_view to_string(cudaGraphInstantiateResult r) noexcept {
  switch (r) {
  case cudaGraphInstantiateSuccess: return "success";
  case cudaGraphInstantiateError: return "error (see the CUDA error)";
  case cudaGraphInstantiateInvalidStructure: return "invalid structure (a cycle, or a node kind not allowed here)";
  case cudaGraphInstantiateNodeOperationNotSupported: return "a node's operation is not supported";
  case cudaGraphInstantiateMultipleDevicesNotSupported: return "nodes on several devices are not supported";
  case cudaGraphInstantiateConditionalHandleUnused: return "a conditional handle is never set by any node";
  default: return "unknown result";
  }
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

graph_exec instantiate(const graph& g, instantiate_flags flags, const stream* upload_stream) {
  if (has_flag(flags, instantiate_flags::upload) && upload_stream == nullptr)
    throw std::invalid_argument("conveyor::instantiate: instantiate_flags::upload needs an upload stream");
  cudaGraphInstantiateParams params{};
  params.flags = static_cast<unsigned long long>(flags);
  params.uploadStream = upload_stream != nullptr ? upload_stream->get() : nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t rc = cudaGraphInstantiateWithParams(&exec, g.get(), &params);
  if (rc != cudaSuccess || params.result_out != cudaGraphInstantiateSuccess) {
    (void)cudaGetLastError();
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    throw cuda_error(rc != cudaSuccess ? rc : cudaErrorInvalidValue,
                     fmt::format("cudaGraphInstantiateWithParams(flags={})", to_string(flags)),
                     std::source_location::current(),
                     fmt::format("instantiate result: {}; offending node: {}", to_string(params.result_out),
                                 detail::node_name(g.state().get(), params.errNode_out)));
  }
  return {exec, g.state(), flags};
}

graph_exec::graph_exec(cudaGraphExec_t handle, std::shared_ptr<detail::graph_state> source, instantiate_flags flags)
    : handle_(handle), source_(std::move(source)), current_(source_), flags_(flags) {
  retain(source_->keep);
}

graph_exec::graph_exec(graph_exec&& other) noexcept { *this = std::move(other); }

graph_exec& graph_exec::operator=(graph_exec&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) (void)cudaGraphExecDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    source_ = std::move(other.source_);
    current_ = std::move(other.current_);
    current_exact_ = other.current_exact_;
    flags_ = other.flags_;
    retained_ = std::move(other.retained_);
    configs_ = std::move(other.configs_);
    read_ = std::move(other.read_);
    origin_nodes_ = std::move(other.origin_nodes_);
    to_origin_ = std::move(other.to_origin_);
  }
  return *this;
}

graph_exec::~graph_exec() {
  if (handle_ != nullptr) (void)cudaGraphExecDestroy(handle_);
}

void graph_exec::upload(const stream& s) const { CONVEYOR_CHECK(cudaGraphUpload(handle_, s.get())); }

void graph_exec::launch(const stream& s) const { CONVEYOR_CHECK(cudaGraphLaunch(handle_, s.get())); }

void graph_exec::retain(std::shared_ptr<void> item) {
  if (std::find(retained_.begin(), retained_.end(), item) == retained_.end()) retained_.push_back(std::move(item));
}

cudaGraphNode_t graph_exec::origin_of(const node& n) {
  if (n.owner() == source_.get() || n.owner() != current_.get()) return n.get();
  if (to_origin_.empty()) {
    if (origin_nodes_.empty()) origin_nodes_ = detail::graph_nodes(source_->handle);
    auto nodes = detail::graph_nodes(current_->handle);
    for (std::size_t i = 0; i < nodes.size() && i < origin_nodes_.size(); ++i) to_origin_.emplace(nodes[i], origin_nodes_[i]);
  }
  auto it = to_origin_.find(n.get());
  return it != to_origin_.end() ? it->second : n.get();
}

void graph_exec::adopt_current(const graph& g) {
  current_ = g.state();
  current_exact_ = true;
  if (!current_->keep->items.empty()) retain(current_->keep);
  to_origin_.clear();
  configs_.clear();
  read_.clear();
}

graph_exec::kernel_setting graph_exec::current_setting(const node& n, cudaGraphNode_t origin) {
  // set_kernel's, else the handle's own (graph::kernel made it), else the node's, read once (from the graph it
  // belongs to: the current one unless the caller kept a node of an older graph).
  if (!configs_.empty())
    if (auto it = configs_.find(origin); it != configs_.end()) return it->second;
  if (n.kernel_function() != nullptr) return {n.kernel_function(), n.kernel_config()};
  if (auto it = read_.find(origin); it != read_.end()) return it->second;
  cudaKernelNodeParams p{};
  CONVEYOR_CHECK(cudaGraphKernelNodeGetParams(n.get(), &p));
  return read_.emplace(origin, kernel_setting{p.func, {p.gridDim, p.blockDim, p.sharedMemBytes}}).first->second;
}

void graph_exec::apply_kernel(const node& n, cudaGraphNode_t origin, const launch_config& cfg, const void* function,
                              void** arguments) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(function);
  p.gridDim = cfg.grid;
  p.blockDim = cfg.block;
  p.sharedMemBytes = static_cast<unsigned>(cfg.shared_bytes);
  p.kernelParams = arguments;
  cudaError_t rc = cudaGraphExecKernelNodeSetParams(handle_, origin, &p);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphExecKernelNodeSetParams", std::source_location::current(),
                     fmt::format("node {}", detail::node_name(n.owner(), n.get())));
  }
  current_exact_ = false;
}

void graph_exec::set_kernel_raw(const node& n, const launch_config& cfg, const void* function, void** arguments) {
  const cudaGraphNode_t origin = origin_of(n);
  apply_kernel(n, origin, cfg, function, arguments);
  configs_.insert_or_assign(origin, kernel_setting{function, cfg});
}

void graph_exec::set_kernel_args_raw(const node& n, const void* function, void** arguments) {
  const cudaGraphNode_t origin = origin_of(n);
  const kernel_setting now = current_setting(n, origin);
  if (now.function != nullptr && now.function != function) // the runtime may not report a fresh node's function
    throw std::invalid_argument(fmt::format("conveyor::graph_exec::set_kernel_args: node {} runs another kernel; "
                                            "use set_kernel to change the function",
                                            detail::node_name(n.owner(), n.get())));
  apply_kernel(n, origin, now.config, function, arguments);
}

void graph_exec::set_memcpy(const node& n, void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  cudaError_t rc = cudaGraphExecMemcpyNodeSetParams1D(handle_, origin_of(n), dst, src, bytes, kind);
  current_exact_ = false;
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphExecMemcpyNodeSetParams1D", std::source_location::current(),
                     fmt::format("node {}", detail::node_name(n.owner(), n.get())));
  }
}

void graph_exec::set_memset_raw(const node& n, void* dst, unsigned value, unsigned element_size,
                                std::size_t count) {
  cudaMemsetParams p{};
  p.dst = dst;
  p.value = value;
  p.elementSize = element_size;
  p.width = count;
  p.height = 1;
  p.pitch = count * element_size;
  cudaError_t rc = cudaGraphExecMemsetNodeSetParams(handle_, origin_of(n), &p);
  current_exact_ = false;
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphExecMemsetNodeSetParams", std::source_location::current(),
                     fmt::format("node {}", detail::node_name(n.owner(), n.get())));
  }
}

void graph_exec::set_host_raw(const node& n, std::shared_ptr<std::function<void()>> callable) {
  cudaHostNodeParams p{};
  p.fn = &detail::invoke_host_callable;
  p.userData = callable.get();
  cudaError_t rc = cudaGraphExecHostNodeSetParams(handle_, origin_of(n), &p);
  current_exact_ = false;
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphExecHostNodeSetParams", std::source_location::current(),
                     fmt::format("node {}", detail::node_name(n.owner(), n.get())));
  }
  retain(std::move(callable));
}

void graph_exec::set_enabled(const node& n, bool enabled) {
  cudaError_t rc = cudaGraphNodeSetEnabled(handle_, origin_of(n), enabled ? 1U : 0U);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    throw cuda_error(rc, "cudaGraphNodeSetEnabled", std::source_location::current(),
                     fmt::format("node {}", detail::node_name(n.owner(), n.get())));
  }
}

} // namespace conveyor
