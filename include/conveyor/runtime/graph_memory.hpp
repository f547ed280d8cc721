#pragma once
//! \file graph_memory.hpp
//! The device memory CUDA's graph allocator holds: graph allocations (mem_alloc nodes,
//! cudaMallocAsync captured into a graph) come from one pool per device that every executable graph
//! of the device shares, and stay reserved after the graphs that used them are gone until trimmed
//! (CUDA Programming Guide, "Graph Memory Nodes").

#include "conveyor/cxx20.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace conveyor {

//! What the graph allocator of one device holds, in bytes (`cudaDeviceGetGraphMemAttribute`). A
//! plain value.
struct graph_memory_usage {
  //! cudaGraphMemAttrUsedMemCurrent: memory mapped for graph allocations now — the allocations of
  //! executable graphs launched and not yet freed (an allocation freed by its graph returns to the
  //! pool, still reserved).
  std::size_t used = 0;
  //! cudaGraphMemAttrUsedMemHigh: the most `used` has been since the last
  //! reset_graph_memory_high_water.
  std::size_t used_high = 0;
  //! cudaGraphMemAttrReservedMemCurrent: device memory the graph allocator holds for graph
  //! allocations (used or free in its pool); trim_graph_memory gives back what no launch uses.
  std::size_t reserved = 0;
  //! cudaGraphMemAttrReservedMemHigh: the most `reserved` has been since the last
  //! reset_graph_memory_high_water.
  std::size_t reserved_high = 0;
};

//! What the graph allocator of device `device` holds now (`cudaDeviceGetGraphMemAttribute`, four
//! attributes). Thread safety: any thread.
//! \throws cuda_error when `device` is not a valid device or the query fails.
[[nodiscard]] graph_memory_usage graph_memory(int device);

//! Resets the high-water marks of device `device` to zero (`cudaDeviceSetGraphMemAttribute` of
//! cudaGraphMemAttrUsedMemHigh and cudaGraphMemAttrReservedMemHigh), so that a later graph_memory()
//! gives the peak of what runs from now on. Thread safety: any thread (the marks are the device's:
//! one reset serves all).
//! \throws cuda_error when `device` is not a valid device or CUDA refuses.
void reset_graph_memory_high_water(int device);

//! Gives the device memory the graph allocator of `device` holds and no executable graph's launch
//! uses — running or queued — back to the system (`cudaDeviceGraphMemTrim`): what graphs evicted or
//! destroyed left reserved. Later graph allocations reserve memory again (a first launch after a
//! trim pays for mapping it). Does not wait for launches. Thread safety: any thread.
//! \throws cuda_error when `device` is not a valid device or the call fails.
void trim_graph_memory(int device);

} // namespace conveyor
