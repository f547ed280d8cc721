#pragma once
//! \file graph_memory.hpp
//! The `graph-memory` study of `conveyor bench`: what graphs cost in device memory. (1) N executable graphs of M
//! kernel nodes, instantiated and uploaded: the device memory they take (cudaMemGetInfo), per graph and per node.
//! (2) N graphs that each allocate S bytes (cudaMallocAsync captured: allocation, kernel, free), launched one after
//! another on one stream, against N private buffers of S bytes (cudaMalloc): what the graph memory pool reserves when
//! graphs share it (cudaDeviceGetGraphMemAttribute), what the same graphs reserve when launched on N streams at once,
//! and what is left after cudaDeviceGraphMemTrim.

#include "bench/study.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace conveyor::bench {

//! N executable graphs of M kernel nodes.
struct exec_memory_row {
  std::size_t graphs = 0;  //!< N: executable graphs instantiated from one graph and uploaded
  std::size_t nodes = 0;   //!< M: kernel nodes of the graph (a chain of 1-block kernels)
  double device_bytes = 0; //!< device memory they took: free memory before minus after (cudaMemGetInfo)
};

//! N graphs each allocating `bytes_each` bytes inside the graph.
struct pool_row {
  std::size_t graphs = 0;         //!< N
  std::size_t bytes_each = 0;     //!< S, bytes each graph allocates
  double private_bytes = 0;       //!< device memory of N cudaMalloc buffers of S bytes (the same work without a pool)
  double shared_reserved = 0;     //!< graph pool reserved after the N graphs ran one after another on one stream
  double shared_used_high = 0;    //!< the most graph memory mapped at once during those launches
  double concurrent_reserved = 0; //!< graph pool reserved (high-water) when the N graphs run on N streams at once
  double after_trim = 0;          //!< graph pool reserved after cudaDeviceGraphMemTrim, the graphs alive but idle
};

//! What the study measured.
struct graph_memory_result {
  std::vector<exec_memory_row> executables; //!< one row per (N, M)
  std::vector<pool_row> pools;              //!< one row per N
};

//! Measures on the current device: executable graphs for every N of `graphs` and M of `nodes`; pools for every N of
//! `pool_graphs` with `bytes_each` bytes per graph. The device memory is read after synchronising and trimming the
//! graph pool, before and after each case; each case frees what it made before the next.
//! \throws conveyor::cuda_error when a CUDA call fails (too little device memory included); std::invalid_argument for
//!         an empty list, a count of 0 or bytes_each of 0.
[[nodiscard]] graph_memory_result measure_graph_memory(const std::vector<std::size_t>& graphs,
                                                       const std::vector<std::size_t>& nodes,
                                                       const std::vector<std::size_t>& pool_graphs,
                                                       std::size_t bytes_each);

//! `conveyor bench graph-memory [--quick]`: N = 1, 10, 100 graphs × M = 10, 100, 1000 nodes and pools of 1, 10, 100
//! graphs of 64 MiB (quick: N = 1, 10 × M = 10, 100, pools of 1 and 10).
[[nodiscard]] graph_memory_result measure_graph_memory_study(const study_args& args);

//! The two Markdown tables (host-only, tested without a GPU).
[[nodiscard]] std::string format_graph_memory(const graph_memory_result& r);

} // namespace conveyor::bench
