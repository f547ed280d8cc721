// The kernel node kind: add, read (through the driver, so library kernels are read too), compare every parameter
// CUDA launches it with (function, context, shape, dynamic shared memory, argument bytes, launch attributes), set on
// an executable graph, describe.
#include "kinds/kind.hpp"
#include "kinds/kinds.hpp"

#include "cuda/check.hpp"
#include "cuda/driver.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace conveyor::detail {

namespace {

// "ns::kernel<T>(int, float*)" -> "ns::kernel<T>": the readable name without the parameter list.
std::string demangled(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  if (status != 0 || !text) return mangled;
  std::string out = text.get();
  if (!out.empty() && out.back() == ')') {
    int depth = 0;
    for (std::size_t i = out.size(); i-- > 0;) {
      if (out[i] == ')') ++depth;
      if (out[i] == '(' && --depth == 0) {
        out.erase(i);
        break;
      }
    }
  }
  return out;
}

// ---- launch attributes ----------------------------------------------------------------------------------------
// Every attribute CUDA may hold on a kernel node (cudaLaunchAttributeID values valid for graph nodes, plus those a
// newer driver might accept): read each from both nodes; a read that fails on both with the same error is "absent".
constexpr cudaLaunchAttributeID node_attributes[] = {
    cudaLaunchAttributeAccessPolicyWindow,         cudaLaunchAttributeCooperative,
    cudaLaunchAttributeClusterDimension,           cudaLaunchAttributeClusterSchedulingPolicyPreference,
    cudaLaunchAttributePriority,                   cudaLaunchAttributeMemSyncDomainMap,
    cudaLaunchAttributeMemSyncDomain,              cudaLaunchAttributePreferredClusterDimension,
    cudaLaunchAttributeDeviceUpdatableKernelNode,  cudaLaunchAttributePreferredSharedMemoryCarveout,
#if CUDART_VERSION >= 13000
    cudaLaunchAttributeNvlinkUtilCentricScheduling,
#endif
};

struct attribute_read {
  cudaError_t rc = cudaSuccess;
  cudaLaunchAttributeValue value{};
};

attribute_read read_attribute(cudaGraphNode_t n, cudaLaunchAttributeID id) {
  attribute_read r;
  std::memset(&r.value, 0, sizeof r.value);
  r.rc = cleared(cudaGraphKernelNodeGetAttribute(n, id, &r.value));
  return r;
}

// Field by field (the union's other bytes are not CUDA's to define).
bool same_value(cudaLaunchAttributeID id, const cudaLaunchAttributeValue& a, const cudaLaunchAttributeValue& b) {
  switch (id) {
  case cudaLaunchAttributeAccessPolicyWindow: {
    const auto& x = a.accessPolicyWindow;
    const auto& y = b.accessPolicyWindow;
    return x.base_ptr == y.base_ptr && x.num_bytes == y.num_bytes && x.hitRatio == y.hitRatio &&
           x.hitProp == y.hitProp && x.missProp == y.missProp;
  }
  case cudaLaunchAttributeCooperative: return a.cooperative == b.cooperative;
  case cudaLaunchAttributeClusterDimension:
    return a.clusterDim.x == b.clusterDim.x && a.clusterDim.y == b.clusterDim.y && a.clusterDim.z == b.clusterDim.z;
  case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    return a.clusterSchedulingPolicyPreference == b.clusterSchedulingPolicyPreference;
  case cudaLaunchAttributePriority: return a.priority == b.priority;
  case cudaLaunchAttributeMemSyncDomainMap:
    return a.memSyncDomainMap.default_ == b.memSyncDomainMap.default_ &&
           a.memSyncDomainMap.remote == b.memSyncDomainMap.remote;
  case cudaLaunchAttributeMemSyncDomain: return a.memSyncDomain == b.memSyncDomain;
  case cudaLaunchAttributePreferredClusterDimension:
    return a.preferredClusterDim.x == b.preferredClusterDim.x && a.preferredClusterDim.y == b.preferredClusterDim.y &&
           a.preferredClusterDim.z == b.preferredClusterDim.z;
  case cudaLaunchAttributeDeviceUpdatableKernelNode:
    return a.deviceUpdatableKernelNode.deviceUpdatable == b.deviceUpdatableKernelNode.deviceUpdatable;
  case cudaLaunchAttributePreferredSharedMemoryCarveout: return a.sharedMemCarveout == b.sharedMemCarveout;
  default: return std::memcmp(&a, &b, sizeof a) == 0; // an ID this version does not know field by field
  }
}

std::string value_text(cudaLaunchAttributeID id, const attribute_read& r) {
  if (r.rc != cudaSuccess) return "unset";
  const auto& v = r.value;
  switch (id) {
  case cudaLaunchAttributeAccessPolicyWindow:
    return fmt::format("access policy window {}+{} B hit ratio {}", v.accessPolicyWindow.base_ptr,
                       v.accessPolicyWindow.num_bytes, v.accessPolicyWindow.hitRatio);
  case cudaLaunchAttributeCooperative: return v.cooperative != 0 ? "cooperative" : "not cooperative";
  case cudaLaunchAttributeClusterDimension:
    return fmt::format("cluster {}x{}x{}", v.clusterDim.x, v.clusterDim.y, v.clusterDim.z);
  case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    return fmt::format("cluster scheduling policy {}", static_cast<int>(v.clusterSchedulingPolicyPreference));
  case cudaLaunchAttributePriority: return fmt::format("priority {}", v.priority);
  case cudaLaunchAttributeMemSyncDomainMap:
    return fmt::format("memory sync domain map {}/{}", v.memSyncDomainMap.default_, v.memSyncDomainMap.remote);
  case cudaLaunchAttributeMemSyncDomain:
    return fmt::format("memory sync domain {}", static_cast<int>(v.memSyncDomain));
  case cudaLaunchAttributePreferredClusterDimension:
    return fmt::format("preferred cluster {}x{}x{}", v.preferredClusterDim.x, v.preferredClusterDim.y,
                       v.preferredClusterDim.z);
  case cudaLaunchAttributeDeviceUpdatableKernelNode:
    return v.deviceUpdatableKernelNode.deviceUpdatable != 0 ? "device updatable" : "not device updatable";
  case cudaLaunchAttributePreferredSharedMemoryCarveout:
    return fmt::format("shared memory carveout {}%", v.sharedMemCarveout);
  default: return fmt::format("attribute {}", static_cast<int>(id));
  }
}

// True when the value differs from what a node made without attributes holds (read on the H200, driver 580).
bool is_default(cudaLaunchAttributeID id, const attribute_read& r) {
  if (r.rc != cudaSuccess) return true;
  const auto& v = r.value;
  switch (id) {
  case cudaLaunchAttributeAccessPolicyWindow: return v.accessPolicyWindow.num_bytes == 0;
  case cudaLaunchAttributeCooperative: return v.cooperative == 0;
  case cudaLaunchAttributeClusterDimension: return v.clusterDim.x * v.clusterDim.y * v.clusterDim.z == 0;
  case cudaLaunchAttributeClusterSchedulingPolicyPreference:
    return v.clusterSchedulingPolicyPreference == cudaClusterSchedulingPolicyDefault;
  case cudaLaunchAttributePriority: return v.priority == 0;
  case cudaLaunchAttributeMemSyncDomainMap: return v.memSyncDomainMap.default_ == 0 && v.memSyncDomainMap.remote == 1;
  case cudaLaunchAttributeMemSyncDomain: return v.memSyncDomain == cudaLaunchMemSyncDomainDefault;
  case cudaLaunchAttributePreferredClusterDimension:
    return v.preferredClusterDim.x * v.preferredClusterDim.y * v.preferredClusterDim.z == 0;
  case cudaLaunchAttributeDeviceUpdatableKernelNode: return v.deviceUpdatableKernelNode.deviceUpdatable == 0;
  case cudaLaunchAttributePreferredSharedMemoryCarveout: return v.sharedMemCarveout == 0;
  default: {
    cudaLaunchAttributeValue zero;
    std::memset(&zero, 0, sizeof zero);
    return std::memcmp(&v, &zero, sizeof zero) == 0;
  }
  }
}

// "attributes: cluster 1x1x1 -> 2x1x1; priority 0 -> -5", or empty when every attribute is the same.
std::string attribute_changes(cudaGraphNode_t a, cudaGraphNode_t b) {
  std::string out;
  for (cudaLaunchAttributeID id : node_attributes) {
    const attribute_read ra = read_attribute(a, id);
    const attribute_read rb = read_attribute(b, id);
    const bool same = ra.rc == rb.rc && (ra.rc != cudaSuccess || same_value(id, ra.value, rb.value));
    if (same) continue;
    out += fmt::format("{}{} -> {}", out.empty() ? "attributes: " : "; ", value_text(id, ra), value_text(id, rb));
  }
  return out;
}

std::string shape_text(const CUDA_KERNEL_NODE_PARAMS& p) {
  return fmt::format("grid {}x{}x{} block {}x{}x{}", p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY,
                     p.blockDimZ);
}

param_diff compare(cudaGraphNode_t a, cudaGraphNode_t b, const compare_context&) {
  const auto pa = read_kernel_node(a);
  const auto pb = read_kernel_node(b);
  if (!pa || !pb) return param_diff::unknown("kernel parameters unreadable (not comparable)");
  std::vector<std::string> what;
  bool settable = true;
  bool comparable = true;
  if (pa->ctx != pb->ctx) {
    what.emplace_back("context (device)");
    settable = false; // CUDA: the owning context of a kernel node cannot change
  }
  if (pa->func != pb->func || pa->kern != pb->kern)
    what.push_back(fmt::format("function {} -> {}", kernel_name(*pa), kernel_name(*pb)));
  if (pa->gridDimX != pb->gridDimX || pa->gridDimY != pb->gridDimY || pa->gridDimZ != pb->gridDimZ ||
      pa->blockDimX != pb->blockDimX || pa->blockDimY != pb->blockDimY || pa->blockDimZ != pb->blockDimZ)
    what.push_back(fmt::format("launch shape {} -> {}", shape_text(*pa), shape_text(*pb)));
  if (pa->sharedMemBytes != pb->sharedMemBytes)
    what.push_back(fmt::format("dynamic shared memory {} -> {} B", pa->sharedMemBytes, pb->sharedMemBytes));
  if (pa->extra != nullptr || pb->extra != nullptr || pa->kernelParams == nullptr || pb->kernelParams == nullptr) {
    what.emplace_back("arguments passed through 'extra' (not comparable)");
    comparable = false;
  } else if (pa->func == pb->func && pa->kern == pb->kern) {
    const auto layout = parameter_layout(*pa);
    if (!layout) {
      what.emplace_back("arguments (layout unknown: not comparable)");
      comparable = false;
    } else {
      std::string args;
      for (std::size_t i = 0; i < layout->size(); ++i)
        if (std::memcmp(pa->kernelParams[i], pb->kernelParams[i], (*layout)[i].second) != 0)
          args += fmt::format("{}{}", args.empty() ? "" : ", ", i);
      if (!args.empty()) what.push_back("arguments " + args);
    }
  } else {
    what.emplace_back("arguments"); // another function: its arguments are set with it
  }
  if (auto attributes = attribute_changes(a, b); !attributes.empty()) {
    what.push_back(std::move(attributes));
    settable = false; // per-node kernel setters keep the executable node's attributes; a whole-graph update applies them
  }
  if (what.empty()) return param_diff::same();
  std::string text;
  for (const auto& w : what) text += (text.empty() ? "" : "; ") + w;
  return {true, comparable, settable && comparable, std::move(text)};
}

cudaError_t copy_to_exec(cudaGraphExec_t exec, cudaGraphNode_t target, cudaGraphNode_t source) {
  const auto p = read_kernel_node(source);
  if (!p) return cudaErrorInvalidValue;
  const CUresult rc = driver::exec_kernel_node_set_params(reinterpret_cast<CUgraphExec>(exec),
                                                          reinterpret_cast<CUgraphNode>(target), &*p);
  return rc == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

void describe(cudaGraphNode_t n, node_description& d, const graph_state*) {
  const auto p = read_kernel_node(n);
  if (!p) return; // the driver cannot read it: the kind only
  d.kernel_name = kernel_name(*p);
  d.grid = {p->gridDimX, p->gridDimY, p->gridDimZ};
  d.block = {p->blockDimX, p->blockDimY, p->blockDimZ};
  d.shared_bytes = p->sharedMemBytes;
  for (cudaLaunchAttributeID id : node_attributes) {
    const attribute_read r = read_attribute(n, id);
    if (!is_default(id, r)) d.attributes.push_back(value_text(id, r));
  }
}

} // namespace

const kind_traits kernel_kind{node_kind::kernel, "kernel", true, true, true, &compare, &copy_to_exec, &describe};

std::optional<CUDA_KERNEL_NODE_PARAMS> read_kernel_node(cudaGraphNode_t node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (driver::kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return std::nullopt;
  return p;
}

std::string kernel_name(const CUDA_KERNEL_NODE_PARAMS& params) {
  const char* name = nullptr;
  if (params.func != nullptr && driver::func_get_name(&name, params.func) == CUDA_SUCCESS && name != nullptr)
    return demangled(name);
  if (params.kern != nullptr && driver::kernel_get_name(&name, params.kern) == CUDA_SUCCESS && name != nullptr)
    return demangled(name);
  return {};
}

std::string kernel_name(cudaGraphNode_t node) {
  const auto p = read_kernel_node(node);
  return p ? kernel_name(*p) : std::string{};
}

std::optional<std::vector<std::pair<std::size_t, std::size_t>>> parameter_layout(const CUDA_KERNEL_NODE_PARAMS& p) {
  using layout = std::vector<std::pair<std::size_t, std::size_t>>;
  static std::mutex mutex;
  static std::unordered_map<const void*, std::optional<layout>> cache;
  const void* key = p.func != nullptr ? static_cast<const void*>(p.func) : static_cast<const void*>(p.kern);
  if (key == nullptr) return std::nullopt;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  layout out;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    const CUresult rc = p.func != nullptr ? driver::func_get_param_info(p.func, i, &offset, &size)
                                          : driver::kernel_get_param_info(p.kern, i, &offset, &size);
    if (rc == CUDA_ERROR_INVALID_VALUE) break; // past the last parameter
    if (rc != CUDA_SUCCESS) return cache[key] = std::nullopt;
    out.emplace_back(offset, size);
  }
  return cache[key] = out;
}

cudaGraphNode_t add_kernel(cudaGraph_t g, node_handles deps, const launch_config& cfg, const void* function,
                           void** arguments) {
  cudaKernelNodeParams params{};
  params.func = const_cast<void*>(function);
  params.gridDim = cfg.grid;
  params.blockDim = cfg.block;
  params.sharedMemBytes = static_cast<unsigned>(cfg.shared_bytes);
  params.kernelParams = arguments;
  params.extra = nullptr;
  cudaGraphNode_t n = nullptr;
  CONVEYOR_CHECK(cudaGraphAddKernelNode(&n, g, deps.data(), deps.size(), &params));
  return n;
}

kernel_setting read_kernel_setting(cudaGraphNode_t node) {
  cudaKernelNodeParams p{};
  CONVEYOR_CHECK(cudaGraphKernelNodeGetParams(node, &p));
  return {p.func, {p.gridDim, p.blockDim, p.sharedMemBytes}};
}

cudaError_t set_exec_kernel(cudaGraphExec_t exec, cudaGraphNode_t node, const launch_config& cfg,
                            const void* function, void** arguments) noexcept {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(function);
  p.gridDim = cfg.grid;
  p.blockDim = cfg.block;
  p.sharedMemBytes = static_cast<unsigned>(cfg.shared_bytes);
  p.kernelParams = arguments;
  return cudaGraphExecKernelNodeSetParams(exec, node, &p);
}

} // namespace conveyor::detail
