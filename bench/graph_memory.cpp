// The measuring half of graph_memory.hpp (in conveyor_bench: needs a GPU to run).
#include "bench/graph_memory.hpp"

#include "bench/kernels.hpp"

#include <conveyor/define/capture.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/runtime/device.hpp>
#include <conveyor/runtime/graph_memory.hpp>
#include <conveyor/runtime/stream.hpp>

#include <memory>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

// Free device memory after every launch has finished, the graph pool trimmed and released resources reclaimed.
double free_bytes(int device) {
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  (void)reclaim_resources();
  trim_graph_memory(device);
  std::size_t free = 0;
  std::size_t total = 0;
  CONVEYOR_CHECK(cudaMemGetInfo(&free, &total));
  return static_cast<double>(free);
}

// A device buffer of `bytes` (cudaMalloc), freed when it goes.
struct device_buffer {
  void* p = nullptr;
  explicit device_buffer(std::size_t bytes) { CONVEYOR_CHECK(cudaMalloc(&p, bytes)); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { (void)cudaFree(p); }
};

exec_memory_row measure_executables(std::size_t graphs, std::size_t nodes, int device) {
  const conveyor::stream s;
  const device_buffer y(chunk_bytes);
  const conveyor::graph g = conveyor::capture(s, [&](const conveyor::stream& cs) {
    for (std::size_t i = 0; i < nodes; ++i) launch_axpb(cs.get(), static_cast<float*>(y.p), 1.0F, 0.0F);
  });
  const double before = free_bytes(device);
  std::vector<conveyor::graph_exec> execs;
  for (std::size_t i = 0; i < graphs; ++i) {
    execs.push_back(conveyor::instantiate(g));
    execs.back().upload(s);
  }
  const double after = free_bytes(device);
  return {graphs, nodes, before - after};
}

// One graph allocating `bytes`: allocation, a kernel on its first chunk, free.
conveyor::graph allocating_graph(const conveyor::stream& s, std::size_t bytes) {
  return conveyor::capture(s, [&](const conveyor::stream& cs) {
    void* p = nullptr;
    CONVEYOR_CHECK(cudaMallocAsync(&p, bytes, cs.get()));
    launch_axpb(cs.get(), static_cast<float*>(p), 0.0F, 1.0F);
    CONVEYOR_CHECK(cudaFreeAsync(p, cs.get()));
  });
}

double private_bytes(std::size_t graphs, std::size_t bytes, int device) {
  const double before = free_bytes(device);
  std::vector<std::unique_ptr<device_buffer>> buffers;
  for (std::size_t i = 0; i < graphs; ++i) buffers.push_back(std::make_unique<device_buffer>(bytes));
  return before - free_bytes(device);
}

pool_row measure_pool(std::size_t graphs, std::size_t bytes, int device) {
  pool_row row{graphs, bytes, private_bytes(graphs, bytes, device), 0, 0, 0, 0};
  const conveyor::stream s;
  std::vector<conveyor::graph_exec> execs;
  for (std::size_t i = 0; i < graphs; ++i) execs.push_back(conveyor::instantiate(allocating_graph(s, bytes)));
  (void)free_bytes(device);
  reset_graph_memory_high_water(device);
  for (auto& e : execs) e.launch(s); // one after another: each launch may reuse the pages of the one before
  s.synchronize();
  const graph_memory_usage shared = graph_memory(device);
  row.shared_reserved = static_cast<double>(shared.reserved);
  row.shared_used_high = static_cast<double>(shared.used_high);
  (void)free_bytes(device); // trims: the graphs are idle
  row.after_trim = static_cast<double>(graph_memory(device).reserved);
  reset_graph_memory_high_water(device);
  std::vector<conveyor::stream> streams(graphs);
  for (std::size_t i = 0; i < graphs; ++i) execs[i].launch(streams[i]); // nothing orders them: no reuse
  CONVEYOR_CHECK(cudaDeviceSynchronize());
  row.concurrent_reserved = static_cast<double>(graph_memory(device).reserved_high);
  return row;
}

} // namespace

graph_memory_result measure_graph_memory(const std::vector<std::size_t>& graphs, const std::vector<std::size_t>& nodes,
                                         const std::vector<std::size_t>& pool_graphs, std::size_t bytes_each) {
  const auto zero = [](const std::vector<std::size_t>& v) {
    for (std::size_t x : v)
      if (x == 0) return true;
    return v.empty();
  };
  if (zero(graphs) || zero(nodes) || zero(pool_graphs) || bytes_each == 0)
    throw std::invalid_argument("measure_graph_memory: every count and the bytes per graph must be at least 1");
  const int device = current_device();
  graph_memory_result out;
  for (std::size_t n : graphs)
    for (std::size_t m : nodes) out.executables.push_back(measure_executables(n, m, device));
  for (std::size_t n : pool_graphs) out.pools.push_back(measure_pool(n, bytes_each, device));
  (void)free_bytes(device);
  return out;
}

graph_memory_result measure_graph_memory_study(const study_args& args) {
  constexpr std::size_t mib = std::size_t{1} << 20;
  if (args.quick) return measure_graph_memory({1, 10}, {10, 100}, {1, 10}, 64 * mib);
  return measure_graph_memory({1, 10, 100}, {10, 100, 1000}, {1, 10, 100}, 64 * mib);
}

} // namespace conveyor::bench
