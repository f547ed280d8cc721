#include "detail/kernel_node.hpp"

#include "detail/driver.hpp"

#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace conveyor::detail {

std::optional<CUDA_KERNEL_NODE_PARAMS> read_kernel_node(cudaGraphNode_t node) {
  CUDA_KERNEL_NODE_PARAMS p{};
  if (driver::kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS) return std::nullopt;
  return p;
}

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
} // namespace

std::string kernel_name(const CUDA_KERNEL_NODE_PARAMS& params) {
  const char* name = nullptr;
  if (params.func != nullptr && driver::func_get_name(&name, params.func) == CUDA_SUCCESS && name != nullptr)
    return demangled(name);
  if (params.kern != nullptr && driver::kernel_get_name(&name, params.kern) == CUDA_SUCCESS && name != nullptr)
    return demangled(name);
  return {};
}

std::optional<std::vector<std::pair<size_t, size_t>>> parameter_layout(const CUDA_KERNEL_NODE_PARAMS& params) {
  using layout = std::vector<std::pair<size_t, size_t>>;
  static std::mutex mutex;
  static std::unordered_map<const void*, std::optional<layout>> cache;
  const void* key = params.func != nullptr ? static_cast<const void*>(params.func) : params.kern;
  if (key == nullptr) return std::nullopt;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  layout out;
  for (size_t i = 0;; ++i) {
    size_t offset = 0;
    size_t size = 0;
    CUresult rc = params.func != nullptr ? driver::func_get_param_info(params.func, i, &offset, &size)
                                         : driver::kernel_get_param_info(params.kern, i, &offset, &size);
    if (rc == CUDA_ERROR_INVALID_VALUE) break; // past the last parameter
    if (rc != CUDA_SUCCESS) return cache[key] = std::nullopt;
    out.emplace_back(offset, size);
  }
  return cache[key] = out;
}

std::optional<bool> same_launch(const CUDA_KERNEL_NODE_PARAMS& a, const CUDA_KERNEL_NODE_PARAMS& b) {
  if (a.func != b.func || a.kern != b.kern || a.gridDimX != b.gridDimX || a.gridDimY != b.gridDimY ||
      a.gridDimZ != b.gridDimZ || a.blockDimX != b.blockDimX || a.blockDimY != b.blockDimY ||
      a.blockDimZ != b.blockDimZ || a.sharedMemBytes != b.sharedMemBytes)
    return false;
  if (a.kernelParams == nullptr || b.kernelParams == nullptr) return std::nullopt;
  auto layout = parameter_layout(a);
  if (!layout) return std::nullopt;
  for (size_t i = 0; i < layout->size(); ++i)
    if (std::memcmp(a.kernelParams[i], b.kernelParams[i], (*layout)[i].second) != 0) return false;
  return true;
}

} // namespace conveyor::detail
