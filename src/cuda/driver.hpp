#pragma once
// Internal: the few CUDA Driver API calls Conveyor needs, reached through cudaGetDriverEntryPointByVersion so that
// nothing links libcuda directly. They read and set kernel nodes made by any launcher, runtime or driver (library
// kernels captured from cuBLAS are driver functions, which the runtime's cudaGraphKernelNodeGetParams refuses).

#include <cuda.h>
#include <cuda_runtime_api.h>

namespace conveyor::detail::driver {

// Each returns CUDA_ERROR_NOT_SUPPORTED when the driver lacks the entry point.
CUresult kernel_node_get_params(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS* params);
CUresult exec_kernel_node_set_params(CUgraphExec exec, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS* params);
CUresult func_get_name(const char** name, CUfunction function);
CUresult kernel_get_name(const char** name, CUkernel kernel);
CUresult func_get_param_info(CUfunction function, size_t index, size_t* offset, size_t* size);
CUresult kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset, size_t* size);
CUresult kernel_node_get_attribute(CUgraphNode node, CUlaunchAttributeID id, CUlaunchAttributeValue* value);
CUresult add_kernel_node(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t count,
                         const CUDA_KERNEL_NODE_PARAMS* params);
CUresult kernel_node_copy_attributes(CUgraphNode dst, CUgraphNode src);
CUresult graph_node_get_type(CUgraphNode node, CUgraphNodeType* type);
CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr pointer);
// The device of context `ctx` (cuCtxGetDevice_v2, CUDA 13; older drivers: cuCtxPushCurrent, cuCtxGetDevice,
// cuCtxPopCurrent). A null context is an error (CUDA_ERROR_INVALID_CONTEXT).
CUresult ctx_get_device(CUdevice* device, CUcontext ctx);
// The context of stream `s` (cuStreamGetCtx). Unlike cudaStreamGetDevice, cuStreamGetDevice, cudaStreamGetFlags and
// cudaStreamGetId, which fail on a capturing stream with cudaErrorStreamCaptureUnsupported and invalidate its
// capture (CUDA 13.0, driver 580, H200, 2026-12-02, in every capture mode), it answers during a capture.
CUresult stream_get_ctx(CUstream s, CUcontext* ctx);
// The nodes of `g` (cuGraphGetNodes): the runtime's cudaGraphGetNodes costs about 1.8 times as much on a graph of
// thousands of nodes (H200, a fresh capture of 10,000 nodes, count then list: 1.44 against 0.82 ms), and every walk
// of a graph starts with it.
CUresult graph_get_nodes(CUgraph g, CUgraphNode* nodes, size_t* count);
// A node's dependencies with their edge data (cuGraphNodeGetDependencies_v2, CUDA 12.3); `deps` and `data` may be
// null to count them.
CUresult node_get_dependencies(CUgraphNode n, CUgraphNode* deps, CUgraphEdgeData* data, size_t* count);
// The kernel `name` of library `library` (cuLibraryGetKernel, CUDA 12.0), its function in the current context
// (cuKernelGetFunction), and the current context (cuCtxGetCurrent): for graph files (modules loaded through Conveyor).
CUresult library_get_kernel(CUkernel* kernel, CUlibrary library, const char* name);
CUresult kernel_get_function(CUfunction* function, CUkernel kernel);
CUresult ctx_get_current(CUcontext* ctx);
// Makes `ctx` the calling thread's current context (cuCtxSetCurrent): a worker thread working for another thread's
// context (graph_cache's background instantiations).
CUresult ctx_set_current(CUcontext ctx);
// cuStreamIsCapturing, looked up once (the first call resolves it: make it outside a CUPTI callback). A driver call
// alone, for the stream watch's callback (src/define/stream_watch.cpp), which must not re-enter the runtime.
CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus* status) noexcept;
// The capture on stream `s` (cuStreamGetCaptureInfo in its CUDA 12.3 form, with edge data): the driver's call costs
// about half the runtime's (H100, 2026-12-06: 95 against 222 ns for it and cuStreamGetFlags together). Every output
// but `status` may be null; `data` needs `deps`. Needs a current context (the runtime's call makes one current).
CUresult stream_get_capture_info(CUstream s, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                                 const CUgraphNode** deps, const CUgraphEdgeData** data, size_t* count) noexcept;
// cuEventRecord and cuStreamWaitEvent (flags 0): a fork or join of a capture through the driver, 0.4 µs a capture
// less than the runtime's calls (H100, 2026-12-06). Need a current context.
CUresult event_record(CUevent e, CUstream s) noexcept;
CUresult stream_wait_event(CUstream s, CUevent e) noexcept;
// cuStreamGetFlags. Needs a current context.
CUresult stream_get_flags(CUstream s, unsigned* flags) noexcept;
// The device of stream `s` through its context (stream_get_ctx, ctx_get_device): safe on a capturing stream. -1
// when the driver cannot tell.
int stream_device(cudaStream_t s) noexcept;

// The process-wide unique id of the allocation holding `p` (cuPointerGetAttribute, CU_POINTER_ATTRIBUTE_BUFFER_ID:
// device, page-locked host, registered host and managed memory); 0 where CUDA gives none (pageable memory, no
// driver). A new allocation at a freed one's address has another id.
unsigned long long pointer_buffer_id(const void* p) noexcept;

} // namespace conveyor::detail::driver
