// The `faster/` group: plain graph vs programmatic edges vs device relaunch (pdl.hpp).
#include "bench/pdl.hpp"

#include "bench/pdl_kernels.hpp"
#include "bench/kernels.hpp"
#include "bench/statistics.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/define/programmatic.hpp>
#include <conveyor/error.hpp>
#include <conveyor/execute/device_graph.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;
constexpr std::size_t chunk_count = 5; // chunk 0: the chain, fork/join heads and joins; 1-4: the branches

template <class T>
struct device_memory {
  T* p = nullptr;
  explicit device_memory(std::size_t count) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), count * sizeof(T)));
    CONVEYOR_CHECK(cudaMemset(p, 0, count * sizeof(T)));
  }
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory() { (void)cudaFree(p); }
};

float* chunk(float* y, std::size_t k) { return y + k * kernel_threads; }

// The shape's graph and how many times one step adds 1 to each chunk.
struct shape_graph {
  conveyor::graph g;
  std::array<std::size_t, chunk_count> adds{};
};

shape_graph build(bool fork_join, std::size_t n, float* y) {
  shape_graph out;
  const conveyor::launch_config cfg{dim3(1), dim3(kernel_threads)};
  const auto kernel = add_one_waiting_kernel();
  if (!fork_join) {
    conveyor::node last;
    for (std::size_t i = 0; i < n; ++i)
      last = last ? out.g.kernel({last}, cfg, kernel, chunk(y, 0)) : out.g.kernel(cfg, kernel, chunk(y, 0));
    out.adds[0] = n;
    return out;
  }
  conveyor::node last;
  for (std::size_t s = 0; s < n / 6; ++s) {
    auto head = last ? out.g.kernel({last}, cfg, kernel, chunk(y, 0)) : out.g.kernel(cfg, kernel, chunk(y, 0));
    std::vector<conveyor::node> branches;
    for (std::size_t b = 1; b <= 4; ++b) branches.push_back(out.g.kernel({head}, cfg, kernel, chunk(y, b)));
    last = out.g.kernel(conveyor::node_list(branches), cfg, kernel, chunk(y, 0));
    out.adds[0] += 2;
    for (std::size_t b = 1; b <= 4; ++b) out.adds[b] += 1;
  }
  return out;
}

struct variant {
  const char* name;
  std::optional<conveyor::graph_exec> host;     // launched `steps` times per block
  std::optional<conveyor::device_graph> device; // launched once per block: relaunches itself `steps` times
};

} // namespace

std::vector<faster_row> measure_faster(const std::vector<std::size_t>& sizes, int blocks) {
  if (sizes.empty()) throw std::invalid_argument("measure_faster: no sizes");
  if (blocks < 1) throw std::invalid_argument("measure_faster: blocks must be >= 1");
  std::vector<faster_row> rows;
  conveyor::stream s;
  device_memory<float> y(chunk_count * kernel_threads);
  device_memory<unsigned> count(4);
  device_memory<int> status(1);
  for (const bool fork_join : {false, true}) {
    for (const std::size_t n : sizes) {
      if (n < (fork_join ? 6U : 1U))
        throw std::invalid_argument(fmt::format("measure_faster: N = {} is too small for {}", n,
                                                fork_join ? "fork/join (6 nodes a stage)" : "a chain"));
      const std::size_t steps = std::clamp<std::size_t>(50'000 / n, 5, 2'000);
      const conveyor::waiting_kernels waiting = conveyor::waiting_kernels{}.add(add_one_waiting_kernel());
      faster_row row;
      row.shape = fork_join ? "fork/join" : "chain";
      std::array<variant, 4> variants{variant{"plain graph", {}, {}}, variant{"programmatic", {}, {}},
                                      variant{"device relaunch", {}, {}}, variant{"programmatic + relaunch", {}, {}}};
      std::array<std::size_t, chunk_count> adds{};
      for (std::size_t v = 0; v < variants.size(); ++v) {
        auto sg = build(fork_join, n, y.p);
        adds = sg.adds;
        row.nodes = sg.g.node_count();
        row.edges = sg.g.edge_count();
        if (v == 1 || v == 3) {
          const auto report = conveyor::make_programmatic(sg.g, waiting);
          row.programmatic_edges = report.changed.size();
        }
        if (v < 2) {
          variants[v].host.emplace(conveyor::instantiate(sg.g, conveyor::instantiate_flags::none, s));
        } else {
          add_counted_relaunch(sg.g, count.p + v, static_cast<unsigned>(steps), status.p);
          variants[v].device.emplace(conveyor::instantiate_for_device(sg.g, s));
        }
      }
      row.steps = steps;
      const auto run_block = [&](variant& v) {
        if (v.host)
          for (std::size_t k = 0; k < steps; ++k) v.host->launch(s);
        else v.device->launch(s);
      };
      // Correctness first: one block of each variant from zero, every chunk checked (exact in float).
      for (auto& v : variants) {
        CONVEYOR_CHECK(cudaMemsetAsync(y.p, 0, chunk_count * chunk_bytes, s.get()));
        run_block(v);
        s.synchronize();
        std::vector<float> got(chunk_count * kernel_threads);
        int rc = 0;
        CONVEYOR_CHECK(cudaMemcpy(got.data(), y.p, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
        CONVEYOR_CHECK(cudaMemcpy(&rc, status.p, sizeof(int), cudaMemcpyDeviceToHost));
        if (rc != 0)
          throw std::runtime_error(fmt::format("faster/ benchmark: {} {} N={}: a device relaunch failed: {}", row.shape,
                                               v.name, n, cudaGetErrorString(static_cast<cudaError_t>(rc))));
        for (std::size_t c = 0; c < chunk_count; ++c)
          for (unsigned i = 0; i < kernel_threads; ++i) {
            const auto want = static_cast<float>(adds[c] * steps);
            if (got[c * kernel_threads + i] != want)
              throw std::runtime_error(fmt::format("faster/ benchmark: {} {} N={}: chunk {} element {} is {}, not {}",
                                                   row.shape, v.name, n, c, i, got[c * kernel_threads + i], want));
          }
      }
      std::array<std::vector<double>, 4> us;
      for (int b = 0; b < blocks; ++b)
        for (std::size_t k = 0; k < variants.size(); ++k) {
          const std::size_t v = (k + static_cast<std::size_t>(b)) % variants.size(); // rotate the order
          CONVEYOR_CHECK(cudaMemsetAsync(y.p, 0, chunk_count * chunk_bytes, s.get()));
          s.synchronize();
          const auto t0 = clock_type::now();
          run_block(variants[v]);
          s.synchronize();
          const double wall = std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
          us[v].push_back(wall / static_cast<double>(steps * row.nodes));
        }
      row.plain_us = median(us[0]);
      row.programmatic_us = median(us[1]);
      row.relaunch_us = median(us[2]);
      row.both_us = median(us[3]);
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<faster_row> measure_faster_study(const study_args& args) {
  const std::vector<std::size_t> sizes =
      args.quick ? std::vector<std::size_t>{120, 10002} : std::vector<std::size_t>{12, 120, 1002, 10002};
  return measure_faster(sizes, args.quick ? 5 : 9);
}

} // namespace conveyor::bench
