// The `profile/` group: the profiler's cost on graph and eager steps (profile_overhead.hpp).
#include "bench/profile_overhead.hpp"

#include "bench/kernels.hpp"
#include "bench/statistics.hpp"

#include <conveyor/define/graph.hpp>
#include <conveyor/error.hpp>
#include <conveyor/execute/graph_exec.hpp>
#include <conveyor/observe/describe.hpp>
#include <conveyor/profile/profiler.hpp>
#include <conveyor/runtime/stream.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace conveyor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct chunks {
  float* p = nullptr;
  explicit chunks(std::size_t n) {
    CONVEYOR_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n * chunk_bytes));
    CONVEYOR_CHECK(cudaMemset(p, 0, n * chunk_bytes));
  }
  chunks(const chunks&) = delete;
  chunks& operator=(const chunks&) = delete;
  ~chunks() { (void)cudaFree(p); }
};

// N tiny kernels in `branches` parallel chains (kernel i updates its own chunk), joined at the end by the graph's
// end.
conveyor::graph make_graph(std::size_t n, std::size_t branches, float* y) {
  conveyor::graph g;
  std::vector<std::optional<conveyor::node>> last(branches);
  const conveyor::launch_config cfg{dim3(1), dim3(kernel_threads)};
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t b = i % branches;
    conveyor::node_list deps;
    if (last[b]) deps = {*last[b]};
    last[b] = g.kernel(deps, cfg, axpb_kernel(), y + i * kernel_threads, 1.0001F, 0.5F);
  }
  return g;
}

} // namespace

std::vector<profile_overhead_row> measure_profile_overhead(const std::vector<std::size_t>& sizes, int blocks,
                                                           int steps) {
  if (sizes.empty()) throw std::invalid_argument("measure_profile_overhead: no sizes");
  if (blocks < 1 || steps < 1) throw std::invalid_argument("measure_profile_overhead: blocks and steps must be >= 1");
  std::vector<profile_overhead_row> rows;
  conveyor::stream s;
  for (const std::size_t n : sizes) {
    if (n == 0) throw std::invalid_argument("measure_profile_overhead: N must be at least 1");
    chunks y(n);
    struct shape {
      const char* name;
      std::size_t branches; // 0: eager
    };
    for (const shape sh : {shape{"graph chain", 1}, shape{"graph 4 branches", 4}, shape{"eager stream", 0}}) {
      std::optional<conveyor::graph_exec> exec;
      if (sh.branches != 0) {
        exec.emplace(
            conveyor::instantiate(make_graph(n, std::min(sh.branches, n), y.p), conveyor::instantiate_flags::none, s));
      }
      const auto one_step = [&] {
        if (exec) {
          exec->launch(s);
        } else {
          for (std::size_t i = 0; i < n; ++i) launch_axpb(s.get(), y.p + i * kernel_threads, 1.0001F, 0.5F);
        }
      };
      const auto timed_block = [&] {
        const auto t0 = clock_type::now();
        for (int k = 0; k < steps; ++k) one_step();
        s.synchronize();
        conveyor::check_launch("profile/ benchmark kernels");
        return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / steps;
      };
      for (int k = 0; k < 3; ++k) one_step(); // warm-up
      s.synchronize();
      std::vector<double> off, on, sampled, sampled_records, records, attributed, utilisation;
      for (int b = 0; b < blocks; ++b) {
        off.push_back(timed_block());
        profile::profiler prof;
        if (exec) prof.watch(*exec, "bench", conveyor::describe(*exec));
        on.push_back(timed_block());
        const auto r = prof.report();
        records.push_back(static_cast<double>(r.records) / steps);
        attributed.push_back(r.records > 0 ? static_cast<double>(r.attributed) / static_cast<double>(r.records) : 0);
        double busy = 0, wall = 0;
        for (const auto& t : r.tracks) {
          busy += t.busy_us;
          wall += t.busy_us + t.gap_total_us;
        }
        utilisation.push_back(wall > 0 ? busy / wall : 0);
        if (exec && r.attributed != r.records)
          throw std::runtime_error(fmt::format("profile/ benchmark: {} of {} records of '{}' N={} attributed",
                                               r.attributed, r.records, sh.name, n));
        // Sampled: one step in 10 recorded, the profiler paused for the others.
        prof.pause();
        const auto t0 = clock_type::now();
        for (int k = 0; k < steps; ++k) {
          if (k % 10 == 0) prof.resume();
          one_step();
          if (k % 10 == 0) prof.pause();
        }
        s.synchronize();
        conveyor::check_launch("profile/ benchmark kernels");
        sampled.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / steps);
        const auto rs = prof.report();
        sampled_records.push_back(static_cast<double>(rs.records) / ((steps + 9) / 10));
      }
      profile_overhead_row row;
      row.shape = sh.name;
      row.nodes = n;
      row.off_us = median(off);
      row.on_us = median(on);
      row.sampled_us = median(sampled);
      row.sampled_records_per_step = median(sampled_records);
      row.records_per_step = median(records);
      row.attributed = median(attributed);
      row.utilisation = median(utilisation);
      rows.push_back(row);
    }
  }
  return rows;
}

std::vector<profile_overhead_row> measure_profile_overhead_study(const study_args& args) {
  const std::vector<std::size_t> sizes =
      args.quick ? std::vector<std::size_t>{100, 10000} : std::vector<std::size_t>{10, 100, 1000, 10000};
  return measure_profile_overhead(sizes, args.quick ? 4 : 8, 50);
}

} // namespace conveyor::bench
