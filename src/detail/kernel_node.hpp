#pragma once
// Internal: reading a kernel node whatever launched it (runtime or driver), its name, and its argument bytes.

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <optional>
#include <string>
#include <vector>

namespace conveyor::detail {

// A kernel node's parameters through the driver (valid for runtime and library kernels alike).
// Returns nullopt when the node cannot be read.
std::optional<CUDA_KERNEL_NODE_PARAMS> read_kernel_node(cudaGraphNode_t node);

// The kernel's demangled name without its parameter list (cuFuncGetName / cuKernelGetName), or empty.
std::string kernel_name(const CUDA_KERNEL_NODE_PARAMS& params);

// (offset, size) of each parameter in bytes (cuFuncGetParamInfo / cuKernelGetParamInfo); nullopt when the driver
// cannot tell. Cached per function.
std::optional<std::vector<std::pair<size_t, size_t>>> parameter_layout(const CUDA_KERNEL_NODE_PARAMS& params);

// True when the two nodes launch the same function with the same shape and the same argument bytes. nullopt when
// the arguments cannot be compared (unknown layout, or `extra` used instead of kernelParams).
std::optional<bool> same_launch(const CUDA_KERNEL_NODE_PARAMS& a, const CUDA_KERNEL_NODE_PARAMS& b);

} // namespace conveyor::detail
