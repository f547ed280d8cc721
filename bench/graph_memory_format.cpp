// Host-only half of graph_memory.hpp: the two Markdown tables (in conveyor_bench_report, tested without a GPU).
#include "bench/graph_memory.hpp"

#include "bench/markdown.hpp"

#include <fmt/format.h>

#include <vector>

namespace conveyor::bench {

namespace {

std::string per(double bytes, std::size_t count) {
  return count == 0 ? std::string("—") : format_bytes(bytes / static_cast<double>(count));
}

} // namespace

std::string format_graph_memory(const graph_memory_result& r) {
  std::vector<std::vector<std::string>> exec_rows;
  for (const auto& e : r.executables)
    exec_rows.push_back({fmt::format("{}", e.graphs), fmt::format("{}", e.nodes), format_bytes(e.device_bytes),
                         per(e.device_bytes, e.graphs), per(e.device_bytes, e.graphs * e.nodes)});
  std::vector<std::vector<std::string>> pool_rows;
  for (const auto& p : r.pools)
    pool_rows.push_back(
        {fmt::format("{}", p.graphs), format_bytes(static_cast<double>(p.bytes_each)), format_bytes(p.private_bytes),
         format_bytes(p.shared_reserved), format_bytes(p.shared_used_high), format_bytes(p.concurrent_reserved),
         format_bytes(p.after_trim), p.shared_reserved > 0 ? format_number(p.private_bytes / p.shared_reserved) : "—"});
  return fmt::format(
      "### Executable graphs: device memory\n\n"
      "N executable graphs of M kernel nodes (a chain of 1-block kernels), instantiated from one graph and uploaded; "
      "device memory taken, from cudaMemGetInfo (whose granularity is 2 MiB pages: small cases read 0 or one page).\n\n"
      "{}\n"
      "### Graph allocations: one shared pool against private buffers\n\n"
      "N graphs that each allocate S bytes inside the graph (cudaMallocAsync captured: allocation, a kernel, free). "
      "*Private*: N cudaMalloc buffers of S bytes, what the same work holds without graph allocations. *Shared*: the "
      "graph memory pool (cudaDeviceGetGraphMemAttribute) after the N graphs ran one after another on one stream — "
      "graphs whose launches do not overlap reuse the same pages. *Concurrent*: the pool's high-water mark when the "
      "N graphs run on N streams at once (nothing orders them, so none can reuse another's pages). *After trim*: "
      "reserved after cudaDeviceGraphMemTrim with the graphs alive but idle.\n\n"
      "{}\n",
      markdown_table({"graphs N", "nodes M", "device memory", "per graph", "per node"}, exec_rows, "rrrrr"),
      markdown_table({"graphs N", "S each", "private buffers", "shared pool reserved", "shared pool used (peak)",
                      "concurrent reserved", "after trim", "private ÷ shared"},
                     pool_rows, "rrrrrrrr"));
}

} // namespace conveyor::bench
