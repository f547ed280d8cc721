#include "cuda/driver.hpp"

#include <cuda_runtime_api.h>

namespace conveyor::detail::driver {

namespace {
// Looks up `symbol` once, in the newest ABI of the toolkit Conveyor was built with (the one whose structs cuda.h
// declares: CUDA_KERNEL_NODE_PARAMS is the _v2 layout).
template <class Fn>
Fn entry(const char* symbol, int version = CUDART_VERSION) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, version, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}
} // namespace

CUresult kernel_node_get_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params) {
  static auto fn = entry<CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*)>("cuGraphKernelNodeGetParams");
  return fn != nullptr ? fn(node, params) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult exec_kernel_node_set_params(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params) {
  static auto fn =
      entry<CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*)>("cuGraphExecKernelNodeSetParams");
  return fn != nullptr ? fn(exec, node, params) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult func_get_name(const char** name, CUfunction function) {
  static auto fn = entry<CUresult (*)(const char**, CUfunction)>("cuFuncGetName");
  return fn != nullptr ? fn(name, function) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult kernel_get_name(const char** name, CUkernel kernel) {
  static auto fn = entry<CUresult (*)(const char**, CUkernel)>("cuKernelGetName");
  return fn != nullptr ? fn(name, kernel) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult func_get_param_info(CUfunction function, size_t index, size_t* offset, size_t* size) {
  static auto fn = entry<CUresult (*)(CUfunction, size_t, size_t*, size_t*)>("cuFuncGetParamInfo");
  return fn != nullptr ? fn(function, index, offset, size) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset, size_t* size) {
  static auto fn = entry<CUresult (*)(CUkernel, size_t, size_t*, size_t*)>("cuKernelGetParamInfo");
  return fn != nullptr ? fn(kernel, index, offset, size) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult kernel_node_get_attribute(CUgraphNode node, CUlaunchAttributeID id, CUlaunchAttributeValue* value) {
  static auto fn =
      entry<CUresult (*)(CUgraphNode, CUlaunchAttributeID, CUlaunchAttributeValue*)>("cuGraphKernelNodeGetAttribute");
  return fn != nullptr ? fn(node, id, value) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult add_kernel_node(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count,
                         const CUDA_KERNEL_NODE_PARAMS* params) {
  static auto fn =
      entry<CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*)>(
          "cuGraphAddKernelNode");
  return fn != nullptr ? fn(node, graph, deps, count, params) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult kernel_node_copy_attributes(CUgraphNode dst, CUgraphNode src) {
  static auto fn = entry<CUresult (*)(CUgraphNode, CUgraphNode)>("cuGraphKernelNodeCopyAttributes");
  return fn != nullptr ? fn(dst, src) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult graph_node_get_type(CUgraphNode node, CUgraphNodeType* type) {
  static auto fn = entry<CUresult (*)(CUgraphNode, CUgraphNodeType*)>("cuGraphNodeGetType");
  return fn != nullptr ? fn(node, type) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr pointer) {
  static auto fn = entry<CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr)>("cuMemGetAddressRange");
  return fn != nullptr ? fn(base, size, pointer) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult ctx_get_device(CUdevice* device, CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  static auto get_v2 = entry<CUresult (*)(CUdevice*, CUcontext)>("cuCtxGetDevice", 13000);
  if (CUDART_VERSION >= 13000 && get_v2 != nullptr) return get_v2(device, ctx);
  static auto push = entry<CUresult (*)(CUcontext)>("cuCtxPushCurrent");
  static auto pop = entry<CUresult (*)(CUcontext*)>("cuCtxPopCurrent");
  static auto get = entry<CUresult (*)(CUdevice*)>("cuCtxGetDevice", 2000);
  if (push == nullptr || pop == nullptr || get == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult rc = push(ctx);
  if (rc != CUDA_SUCCESS) return rc;
  rc = get(device);
  CUcontext popped = nullptr;
  (void)pop(&popped);
  return rc;
}

CUresult stream_get_ctx(CUstream s, CUcontext* ctx) {
  // By version: "cuStreamGetCtx" at CUDA 13 is cuStreamGetCtx_v2 (12.5), which takes a third argument, the green
  // context; before 12.5, the two-argument call.
  static auto v2 = entry<CUresult (*)(CUstream, CUcontext*, CUgreenCtx*)>("cuStreamGetCtx", 12050);
  if (v2 != nullptr) {
    CUgreenCtx green = nullptr;
    return v2(s, ctx, &green);
  }
  static auto v1 = entry<CUresult (*)(CUstream, CUcontext*)>("cuStreamGetCtx", 9020);
  return v1 != nullptr ? v1(s, ctx) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult graph_get_nodes(CUgraph g, CUgraphNode* nodes, size_t* count) {
  static auto fn = entry<CUresult (*)(CUgraph, CUgraphNode*, size_t*)>("cuGraphGetNodes");
  return fn != nullptr ? fn(g, nodes, count) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult node_get_dependencies(CUgraphNode n, CUgraphNode* deps, CUgraphEdgeData* data, size_t* count) {
  static auto fn =
      entry<CUresult (*)(CUgraphNode, CUgraphNode*, CUgraphEdgeData*, size_t*)>("cuGraphNodeGetDependencies", 12030);
  return fn != nullptr ? fn(n, deps, data, count) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult library_get_kernel(CUkernel* kernel, CUlibrary library, const char* name) {
  static auto fn = entry<CUresult (*)(CUkernel*, CUlibrary, const char*)>("cuLibraryGetKernel", 12000);
  return fn != nullptr ? fn(kernel, library, name) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult kernel_get_function(CUfunction* function, CUkernel kernel) {
  static auto fn = entry<CUresult (*)(CUfunction*, CUkernel)>("cuKernelGetFunction", 12000);
  return fn != nullptr ? fn(function, kernel) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult ctx_get_current(CUcontext* ctx) {
  static auto fn = entry<CUresult (*)(CUcontext*)>("cuCtxGetCurrent", 4000);
  return fn != nullptr ? fn(ctx) : CUDA_ERROR_NOT_SUPPORTED;
}

CUresult ctx_set_current(CUcontext ctx) {
  static auto fn = entry<CUresult (*)(CUcontext)>("cuCtxSetCurrent", 4000);
  return fn != nullptr ? fn(ctx) : CUDA_ERROR_NOT_SUPPORTED;
}

unsigned long long pointer_buffer_id(const void* p) noexcept {
  static auto fn = entry<CUresult (*)(void*, CUpointer_attribute, CUdeviceptr)>("cuPointerGetAttribute", 4000);
  unsigned long long id = 0;
  if (fn == nullptr || fn(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
    return 0;
  return id;
}

CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus* status) noexcept {
  static auto fn = entry<CUresult (*)(CUstream, CUstreamCaptureStatus*)>("cuStreamIsCapturing", 10000);
  return fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : fn(s, status);
}

CUresult stream_get_capture_info(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                 const CUgraphNode** deps, const CUgraphEdgeData** data, size_t* count) noexcept {
  using fn_t = CUresult (*)(CUstream, CUstreamCaptureStatus*, cuuint64_t*, CUgraph*, const CUgraphNode**,
                            const CUgraphEdgeData**, size_t*);
  static auto fn = entry<fn_t>("cuStreamGetCaptureInfo");
  return fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : fn(s, status, id, graph, deps, data, count);
}

CUresult event_record(CUevent e, CUstream s) noexcept {
  static auto fn = entry<CUresult (*)(CUevent, CUstream)>("cuEventRecord");
  return fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : fn(e, s);
}

CUresult stream_wait_event(CUstream s, CUevent e) noexcept {
  static auto fn = entry<CUresult (*)(CUstream, CUevent, unsigned)>("cuStreamWaitEvent");
  return fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : fn(s, e, 0U);
}

CUresult stream_get_flags(CUstream s, unsigned* flags) noexcept {
  static auto fn = entry<CUresult (*)(CUstream, unsigned*)>("cuStreamGetFlags");
  return fn == nullptr ? CUDA_ERROR_NOT_SUPPORTED : fn(s, flags);
}

int stream_device(cudaStream_t s) noexcept {
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (stream_get_ctx(reinterpret_cast<CUstream>(s), &ctx) != CUDA_SUCCESS || ctx == nullptr) return -1;
  return ctx_get_device(&device, ctx) == CUDA_SUCCESS ? static_cast<int>(device) : -1;
}

} // namespace conveyor::detail::driver
