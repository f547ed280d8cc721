#pragma once
// Internal (CUDA layer): CUDA 12.4+ and 13.x spell the edge-data variants of a few graph calls differently; these
// wrappers give one spelling. Edge data (cudaGraphEdgeData: ports and dependency type, e.g. programmatic edges) is
// read where a caller asks for it, and written where Conveyor adds typed edges (null data: full dependencies).

#include "cuda/driver.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace conveyor::detail {

//! cudaGraphGetEdges with edge data (`data` may be null).
inline cudaError_t get_edges(cudaGraph_t g, cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data,
                             std::size_t* count) {
#if CUDART_VERSION >= 13000
  return cudaGraphGetEdges(g, from, to, data, count);
#else
  return cudaGraphGetEdges_v2(g, from, to, data, count);
#endif
}

//! cudaGraphGetEdges without the caller wanting edge data (read and dropped: CUDA refuses a query that would lose
//! it, cudaErrorLossyQuery, on graphs with programmatic edges).
inline cudaError_t get_edges(cudaGraph_t g, cudaGraphNode_t* from, cudaGraphNode_t* to, std::size_t* count) {
  if (from == nullptr && to == nullptr) return get_edges(g, nullptr, nullptr, nullptr, count);
  std::vector<cudaGraphEdgeData> data(*count);
  return get_edges(g, from, to, data.data(), count);
}

inline cudaError_t add_dependencies(cudaGraph_t g, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                    std::size_t count) {
#if CUDART_VERSION >= 13000
  return cudaGraphAddDependencies(g, from, to, nullptr, count);
#else
  return cudaGraphAddDependencies(g, from, to, count);
#endif
}

//! cudaGraphAddDependencies with edge data (`data`: one entry per edge; null for full dependencies).
inline cudaError_t add_dependencies(cudaGraph_t g, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                    const cudaGraphEdgeData* data, std::size_t count) {
#if CUDART_VERSION >= 13000
  return cudaGraphAddDependencies(g, from, to, data, count);
#else
  return cudaGraphAddDependencies_v2(g, from, to, data, count);
#endif
}

//! cudaGraphRemoveDependencies with edge data (an edge is removed only when its data matches).
inline cudaError_t remove_dependencies(cudaGraph_t g, const cudaGraphNode_t* from, const cudaGraphNode_t* to,
                                       const cudaGraphEdgeData* data, std::size_t count) {
#if CUDART_VERSION >= 13000
  return cudaGraphRemoveDependencies(g, from, to, data, count);
#else
  return cudaGraphRemoveDependencies_v2(g, from, to, data, count);
#endif
}

//! cudaGraphAddNode with edge data (`data`: one entry per dependency; null for full dependencies).
inline cudaError_t add_node(cudaGraphNode_t* n, cudaGraph_t g, const cudaGraphNode_t* deps,
                            const cudaGraphEdgeData* data, std::size_t count, cudaGraphNodeParams* params) {
#if CUDART_VERSION >= 13000
  return cudaGraphAddNode(n, g, deps, data, count, params);
#else
  return cudaGraphAddNode_v2(n, g, deps, data, count, params);
#endif
}

// A node's dependencies or dependents (`query`: the edge-data form of cudaGraphNodeGetDependencies or
// cudaGraphNodeGetDependentNodes), with the edge data read and dropped.
template <class Query>
cudaError_t neighbours(Query query, cudaGraphNode_t n, cudaGraphNode_t* out, std::size_t* count) {
  std::vector<cudaGraphEdgeData> data(out != nullptr ? *count : 0);
  return query(n, out, out != nullptr ? data.data() : nullptr, count);
}

inline cudaError_t get_dependencies(cudaGraphNode_t n, cudaGraphNode_t* deps, std::size_t* count) {
#if CUDART_VERSION >= 13000
  return neighbours(&cudaGraphNodeGetDependencies, n, deps, count);
#else
  return neighbours(&cudaGraphNodeGetDependencies_v2, n, deps, count);
#endif
}

//! A node's dependencies with their edge data (`deps` and `data` may be null to count them).
inline cudaError_t get_dependencies(cudaGraphNode_t n, cudaGraphNode_t* deps, cudaGraphEdgeData* data,
                                    std::size_t* count) {
#if CUDART_VERSION >= 13000
  return cudaGraphNodeGetDependencies(n, deps, data, count);
#else
  return cudaGraphNodeGetDependencies_v2(n, deps, data, count);
#endif
}

inline cudaError_t get_dependents(cudaGraphNode_t n, cudaGraphNode_t* deps, std::size_t* count) {
#if CUDART_VERSION >= 13000
  return neighbours(&cudaGraphNodeGetDependentNodes, n, deps, count);
#else
  return neighbours(&cudaGraphNodeGetDependentNodes_v2, n, deps, count);
#endif
}

//! Replaces the set of nodes the next work captured on `s` depends on (cudaStreamSetCaptureDependencies).
inline cudaError_t set_capture_dependencies(cudaStream_t s, cudaGraphNode_t* deps, std::size_t count) {
#if CUDART_VERSION >= 13000
  return cudaStreamUpdateCaptureDependencies(s, deps, nullptr, count, cudaStreamSetCaptureDependencies);
#else
  return cudaStreamUpdateCaptureDependencies(s, deps, count, cudaStreamSetCaptureDependencies);
#endif
}

//! cudaStreamGetCaptureInfo with everything it tells: the status, the capture's id, the graph being captured into and
//! the dependencies the next captured node gets, each with its edge data (the arrays are CUDA's, valid until the next
//! call on the stream: copy them). Every output but `status` may be null; `data` needs `deps`.
//! The driver's call first (cuStreamGetCaptureInfo: half the runtime's cost, and a capture asks it several times);
//! the runtime's where the driver's fails, for the runtime's error and its context handling.
inline cudaError_t capture_point(cudaStream_t s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                 cudaGraph_t* graph, const cudaGraphNode_t** deps, const cudaGraphEdgeData** data,
                                 std::size_t* count) {
  static_assert(sizeof(CUgraphEdgeData) == sizeof(cudaGraphEdgeData) && sizeof(cuuint64_t) == sizeof(*id));
  static_assert(static_cast<int>(CU_STREAM_CAPTURE_STATUS_ACTIVE) == static_cast<int>(cudaStreamCaptureStatusActive) &&
                static_cast<int>(CU_STREAM_CAPTURE_STATUS_INVALIDATED) ==
                    static_cast<int>(cudaStreamCaptureStatusInvalidated));
  CUstreamCaptureStatus driver_status{};
  cuuint64_t driver_id = 0;
  auto* driver_data = reinterpret_cast<const CUgraphEdgeData**>(data); // the same layout, the driver's array
  if (driver::stream_get_capture_info(s, &driver_status, id != nullptr ? &driver_id : nullptr, graph, deps, driver_data,
                                      count) == CUDA_SUCCESS) {
    *status = static_cast<cudaStreamCaptureStatus>(driver_status);
    if (id != nullptr) *id = driver_id;
    return cudaSuccess;
  }
#if CUDART_VERSION >= 13000
  return cudaStreamGetCaptureInfo(s, status, id, graph, deps, data, count);
#else
  return cudaStreamGetCaptureInfo_v3(s, status, id, graph, deps, data, count);
#endif
}

//! cudaStreamGetCaptureInfo of the status, the capture's id and the dependencies the next captured node gets (each
//! output but `status` may be null), through capture_point.
inline cudaError_t capture_info(cudaStream_t s, cudaStreamCaptureStatus* status, unsigned long long* id,
                                const cudaGraphNode_t** deps, std::size_t* count) {
  const cudaGraphEdgeData* data = nullptr; // read so that CUDA does not refuse a lossy query
  return capture_point(s, status, id, nullptr, deps, deps != nullptr ? &data : nullptr, count);
}

} // namespace conveyor::detail
